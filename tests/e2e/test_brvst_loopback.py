"""BRVST in the wired daemon without root: three nodes over loopback UDP, A - B - C.

The same line as test_brvst_root.py (which runs it on namespaces with real
brokers): configured positions (``location.source = "static"``), A at x = 20 m and
B at 70 m in grid 0 of a 100 m layout with one-grid zones, C at 130 m in grid 1.
Managers are elected over the node's real link, discovery and timers (B, up first,
manages grid and zone 0 and A follows it; C manages grid and zone 1); C's
publication reaches A's subscription through the zone summaries; a stopped zone
manager is replaced by a higher epoch and deliveries resume once B is back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from test_node_loopback import Stream, control, free_udp_port, make_config, until

from meshsub.runtime.node import Node
from meshsub.runtime.sdnotify import SystemdNotifier

PARAMS: dict[str, Any] = {
    "area_width_m": 300.0, "area_height_m": 100.0, "grid_size_m": 100.0, "K": 1, "R": 80.0,
    "T_ann": 0.5, "T_ann_zone": 0.5, "T_lease": 30.0, "T_grsv_refresh": 1.0,
    "T_zrsv_refresh": 1.0, "T_batch": 0.05,
}
X = (20.0, 70.0, 130.0)


def seat(node: Node, level: str) -> tuple[int | None, int | None]:
    s = node.protocol.status()["seats"].get(level) or {}  # type: ignore[union-attr]
    return s.get("manager"), s.get("epoch")


async def test_brvst_managers_matching_delivery_and_a_replaced_manager(tmp_path: Path) -> None:
    ports = [free_udp_port() for _ in X]
    peers = [[ports[1]], [ports[0], ports[2]], [ports[1]]]

    def config(i: int, sub: str) -> Any:
        return make_config(tmp_path / sub, i + 1, ports[i], peers[i],
                           protocol={"name": "brvst", "params": PARAMS},
                           location={"source": "static", "static": {"x": X[i], "y": 50.0}})

    nodes = [Node(config(i, "first"), notifier=SystemdNotifier({})) for i in range(3)]
    stream = Stream()
    b2: Node | None = None
    try:
        a, b, c = nodes
        # B first: alone, it elects itself; A and C come later and A follows the incumbent
        # (a newcomer never pre-empts a live manager, docs/protocols/brvst.md, "Incumbency")
        await b.start()
        for level in ("grid", "zone"):
            await until(lambda level=level: seat(b, level) == (2, 1), f"B manages {level} 0")
        await a.start()
        await c.start()
        await until(lambda: [len(n.table) for n in nodes] == [1, 2, 1], "neighbours")
        for level in ("grid", "zone"):
            await until(lambda level=level: (seat(a, level), seat(b, level), seat(c, level))
                        == ((2, 1), (2, 1), (3, 1)), f"{level} managers elected")
        await stream.open(a, "brvst a1_lo>=10 a1_hi<=50")
        await until(lambda: c.protocol.status()["state"].get("zm_zone_table", [0])[0] >= 1,
                    "zone 0's summary at C's zone manager")
        await control(c, {"cmd": "pub", "event": "brvst a1_lo=60 a1_hi=70"})  # outside
        first = (await control(c, {"cmd": "pub", "event": "brvst a1_lo=20 a1_hi=30"}))
        await until(lambda: stream.deliveries, "C's publication on A")
        await control(c, {"cmd": "pub", "event": "brvst a1_lo=11 a1_hi=12"})  # sentinel
        await until(lambda: len(stream.deliveries) >= 2, "sentinel on A")
        assert [d["attrs"]["a1_lo"] for d in stream.deliveries] == [20, 11]
        assert stream.deliveries[0]["event_id"] == first["event_id"]
        assert stream.deliveries[0]["origin"] == 3

        await b.stop()  # the zone manager of zone 0 is gone
        for level in ("grid", "zone"):
            await until(lambda level=level: seat(a, level) == (1, 2),
                        f"A elected {level} manager at epoch 2")
        b2 = Node(config(1, "second"), notifier=SystemdNotifier({}))
        await b2.start()
        for level in ("grid", "zone"):  # A is the incumbent: B follows it
            await until(lambda level=level: seat(b2, level) == (1, 2),
                        f"B follows A at the {level} level")
        await until(lambda: c.protocol.status()["state"].get("zm_zone_table", [0])[0] >= 1,
                    "zone 0's new summary at C")
        sent: list[str] = []

        async def publish_until_delivered() -> None:
            for _ in range(40):
                sent.append((await control(c, {"cmd": "pub",
                                                "event": "brvst a1_lo=30 a1_hi=40"}))["event_id"])
                try:
                    await until(lambda: len(stream.deliveries) >= 3, "after the hand-over",
                                guard=1.0)
                    return
                except AssertionError:
                    continue
            raise AssertionError("no delivery through A as the new zone manager")

        await publish_until_delivered()
        assert stream.deliveries[2]["event_id"] in sent and stream.deliveries[2]["origin"] == 3
    finally:
        await stream.close()
        for n in (nodes[0], nodes[2], b2):
            if n is not None:
                await n.stop()
        await nodes[1].stop()
