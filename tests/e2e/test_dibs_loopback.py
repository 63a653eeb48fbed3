"""meshsubd's wired node running DIBS from its configuration, without root (loopback UDP).

A ring A - B - C - D - A over static peers (test_node_loopback.py's wiring),
A with the role ``reference``: the tree forms (VAs by the prefix rule), C's
key-range query is stored and an event with a key in it reaches C once, an
event outside it never; then C's predecessor stops, C re-attaches through
the other side of the ring with a new VA, and after the next refresh an
event reaches it again. test_dibs_root.py does the same on network
namespaces with real brokers.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from test_node_loopback import Stream, control, free_udp_port, make_config

from meshsub.runtime.node import Node
from meshsub.runtime.sdnotify import SystemdNotifier

RING = {1: (2, 4), 2: (1, 3), 3: (2, 4), 4: (1, 3)}
DIBS = {"name": "dibs", "params": {"hb_period": 0.3, "lease_s": 3.0}}


def one_tree(views: dict[int, dict[str, Any]]) -> bool:
    """Every node attached under reference 1, each VA its predecessor's plus its slot."""
    for nid, v in views.items():
        if v["va"] is None or v["detached"] or v["cl"] != 1:
            return False
        if nid == 1:
            continue
        p = views.get(v["pred"])
        if p is None or p["va"] is None or v["va"] != p["va"] + "0" * v["slot"] + "1" \
                or {int(c): s for c, s in p["successors"].items()}.get(nid) != v["slot"]:
            return False
    return True


async def test_dibs_tree_delivers_and_repairs_after_a_predecessor_stops(tmp_path: Path) -> None:
    ports = {n: free_udp_port() for n in RING}
    nodes = {n: Node(make_config(tmp_path, n, ports[n], [ports[p] for p in peers],
                                 protocol=DIBS, roles=("reference",) if n == 1 else ()),
                     notifier=SystemdNotifier({}))
             for n, peers in RING.items()}
    stream = Stream()
    running = dict(nodes)
    try:
        for node in nodes.values():
            await node.start()

        async def settle(members: dict[int, Node]) -> dict[int, dict[str, Any]]:
            for _ in range(600):  # a hang guard (60 s), not a timing assertion
                views = {n: (await control(node, {"cmd": "status"}))["protocol"]
                         for n, node in members.items()}
                if one_tree(views):
                    return views
                await asyncio.sleep(0.1)
            raise AssertionError(f"no tree: {views}")

        views = await settle(running)
        assert running[1].protocol.name == "dibs" and views[3]["va"].count("1") == 2
        parent = views[3]["pred"]
        await stream.open(nodes[3], 'dibs key>="4000000000000000" key<="7fffffffffffffff"')
        sent = 0

        async def publish_until_delivered(first: int) -> None:
            nonlocal sent
            for _ in range(100):
                sent += 1
                await control(nodes[1], {"cmd": "pub",
                                         "event": f'dibs key="5a5a5a5a5a5a5a5a" n={sent}'})
                await control(nodes[1], {"cmd": "pub", "event": 'dibs key="0000000000000001" '
                                                                 "n=-1"})
                await asyncio.sleep(0.3)
                if any(d["attrs"]["n"] >= first for d in stream.deliveries):
                    return
            raise AssertionError("no event reached the subscriber")

        await publish_until_delivered(1)
        old_va = views[3]["va"]
        await running.pop(parent).stop()
        for _ in range(600):
            after = await settle(running)
            if after[3]["pred"] != parent:
                break
            await asyncio.sleep(0.1)
        assert after[3]["pred"] != parent and after[3]["va"] != old_va
        await publish_until_delivered(sent + 1)
        ids = [d["event_id"] for d in stream.deliveries]
        assert len(ids) == len(set(ids))  # never twice
        assert all(d["attrs"]["n"] >= 1 for d in stream.deliveries)  # never outside the range
    finally:
        await stream.close()
        for node in running.values():
            await node.stop()
