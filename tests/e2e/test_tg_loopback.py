"""meshsubd's wired node running TG from its configuration, without root (loopback UDP).

A ring A - B - C - D - A over static peers (test_node_loopback.py's wiring):
the four form one group, so the node opposite the leader is at level 2. A
publication from the leader reaches its matching subscription once; then its
parent's node stops, the orphan re-attaches through the other side of the
ring (or leads a group the rest merges into) without a loop (every chain of
parents reaches the leader in ``level`` steps), and the next publication
reaches it again. test_tg_root.py does the
same on network namespaces with real brokers.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from test_node_loopback import Stream, control, free_udp_port, make_config

from meshsub.runtime.node import Node
from meshsub.runtime.sdnotify import SystemdNotifier

RING = {1: (2, 4), 2: (1, 3), 3: (2, 4), 4: (1, 3)}
TG = {"name": "tg", "params": {"preferred_levels": 4, "T_HELLO": 0.5, "T_DEAD": 2.0,
                               "T_START_JITTER": 0.5}}


def one_group(views: dict[int, list[dict[str, Any]]]) -> dict[int, dict[str, Any]] | None:
    """Each node's membership if all share one anchored group whose parent chains reach
    the leader in ``level`` steps; else None."""
    if any(len(v) != 1 for v in views.values()):
        return None
    by = {nid: v[0] for nid, v in views.items()}
    if len({g["gid"] for g in by.values()}) != 1:
        return None
    for nid, g in by.items():
        if not g["anchored"] or g["orphan"]:
            return None
        hops, cur = 0, nid
        while by[cur]["parent"] is not None:
            cur = by[cur]["parent"]
            hops += 1
            if cur not in by or hops > len(by):
                return None
        if hops != g["level"] or by[cur]["level"] != 0:
            return None
    return by


async def test_tg_group_delivers_and_heals_after_a_parent_stops(tmp_path: Path) -> None:
    ports = {n: free_udp_port() for n in RING}
    nodes = {n: Node(make_config(tmp_path, n, ports[n], [ports[p] for p in peers], protocol=TG),
                     notifier=SystemdNotifier({}))
             for n, peers in RING.items()}
    stream = Stream()
    running = dict(nodes)
    try:
        for node in nodes.values():
            await node.start()
        views: dict[int, dict[str, Any]] = {}

        async def settle(members: dict[int, Node]) -> dict[int, dict[str, Any]]:
            for _ in range(600):  # a hang guard (60 s), not a timing assertion
                status = {n: (await control(node, {"cmd": "status"}))["protocol"]["groups"]
                          for n, node in members.items()}
                view = one_group(status)
                if view is not None:
                    return view
                await asyncio.sleep(0.1)
            raise AssertionError(f"no single loop-free group: {status}")

        views = await settle(running)
        assert running[1].protocol.name == "tg"
        (deep,) = [n for n, g in views.items() if g["level"] == 2]
        leader = next(n for n, g in views.items() if g["level"] == 0)
        parent = views[deep]["parent"]
        await stream.open(nodes[deep], "tg alpha=true")
        sent = 0

        async def publish_until_delivered(first: int) -> None:
            """Publish from the leader until an event numbered >= first arrives (the
            subscription's bits reach the leader with the next report)."""
            nonlocal sent
            for _ in range(100):
                sent += 1
                await control(nodes[leader], {"cmd": "pub",
                                              "event": f"tg alpha=true beta=true n={sent}"})
                await asyncio.sleep(0.3)
                if any(d["attrs"]["n"] >= first for d in stream.deliveries):
                    return
            raise AssertionError("no event reached the subscriber")

        await publish_until_delivered(1)
        await running.pop(parent).stop()
        for _ in range(600):
            after = await settle(running)
            if after[deep]["parent"] != parent:
                break
            await asyncio.sleep(0.1)
        # one loop-free group of the three again; the orphan hangs elsewhere, or leads it
        # (promoted, then the others' group merged into its own)
        assert set(after) == set(running) and after[deep]["parent"] != parent
        await publish_until_delivered(sent + 1)
        ids = [d["event_id"] for d in stream.deliveries]
        assert len(ids) == len(set(ids))  # never twice
        assert all(d["attrs"]["alpha"] is True for d in stream.deliveries)
    finally:
        await stream.close()
        for node in running.values():
            await node.stop()
