"""meshsubd's wired node running ST, TG's single-tree baseline, from its configuration,
without root (loopback UDP).

A line A - B - C - D over static peers (test_node_loopback.py's wiring): the four
build one tree (docs/protocols/st.md, rule 1). Subscriptions travel along it as
tables; a publication from A follows the tree links whose tables hold a matching
subscription (rule 4) and reaches exactly the matching subscriptions: D's and B's
once each, not D's second subscription, which it does not match although the
event reaches D. test_tg_loopback.py does the same for TG itself.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from test_node_loopback import Stream, control, free_udp_port, make_config
from test_tg_loopback import one_group

from meshsub.runtime.node import Node
from meshsub.runtime.sdnotify import SystemdNotifier

LINE = {1: (2,), 2: (1, 3), 3: (2, 4), 4: (3,)}
ST = {"name": "st", "params": {"T_HELLO": 0.5, "T_DEAD": 2.0, "T_START_JITTER": 0.5}}


async def test_st_tree_delivers_to_exactly_the_matching_subscriptions(tmp_path: Path) -> None:
    ports = {n: free_udp_port() for n in LINE}
    nodes = {n: Node(make_config(tmp_path, n, ports[n], [ports[p] for p in peers], protocol=ST),
                     notifier=SystemdNotifier({}))
             for n, peers in LINE.items()}
    streams = {"d": Stream(), "d_not": Stream(), "b": Stream()}
    try:
        for node in nodes.values():
            await node.start()
        assert nodes[1].protocol.name == "st"
        for _ in range(600):  # a hang guard (60 s), not a timing assertion
            status = {n: (await control(node, {"cmd": "status"}))["protocol"]["groups"]
                      for n, node in nodes.items()}
            if one_group(status) is not None:
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError(f"no single tree over the line: {status}")
        await streams["d"].open(nodes[4], "news alpha=true")
        await streams["d_not"].open(nodes[4], "news gamma=true")
        await streams["b"].open(nodes[2], "news beta=true")
        # the tables reach A with the next updates: publish until both have an event
        for n in range(1, 101):
            await control(nodes[1], {"cmd": "pub", "event": f"news alpha=true beta=true n={n}"})
            await asyncio.sleep(0.3)
            if streams["d"].deliveries and streams["b"].deliveries:
                break
        else:
            raise AssertionError("no event reached both matching subscriptions")
        await asyncio.sleep(1.0)  # copies still on their way would show up as duplicates
        for name in ("d", "b"):
            ids = [d["event_id"] for d in streams[name].deliveries]
            assert ids and len(ids) == len(set(ids)), (name, ids)  # each event once
        assert streams["d_not"].deliveries == []  # gamma matched nothing
    finally:
        for stream in streams.values():
            await stream.close()
        for node in nodes.values():
            await node.stop()
