"""meshsubd running TG (Liu 2011) from its configuration, on four network namespaces (root).

A ring A - B - C - D - A (the medium drops A <-> C and B <-> D), each node
with its own mosquitto and meshsubd configured ``protocol.name = "tg"``. The
four form one group (depth 2 at most: the node opposite the leader hangs
under one of the leader's two children). A publication from the leader
reaches the matching members once: the subscriber at depth 2 and the
leader's other child, whose second subscription does not match and gets
nothing (the event reaches that node, so its own exact check is what keeps
it out). Then the deep node's parent's daemon is killed, and the orphan
re-attaches through the other side of the ring, without a loop (every chain
of parents reaches the leader in ``level`` steps), and the next publication
reaches it again.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from mesh import (
    ProtocolNode,
    protocol_mesh,
    wait_for,
)
from test_tg_loopback import one_group as group_of_views

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, nftables)"),
    pytest.mark.skipif(not all(shutil.which(t) for t in ("mosquitto_pub", "mosquitto_sub",
                                                          "nft")),
                       reason="needs mosquitto clients and nft"),
]
PREFIX = "msub-tge"
NAMES = ("a", "b", "c", "d")
RING = (("a", "b"), ("b", "c"), ("c", "d"), ("d", "a"))  # A <-> C and B <-> D cut
PARAMS = {"preferred_levels": 4, "T_HELLO": 0.5, "T_DEAD": 2.0}


@pytest.fixture(scope="module")
def ring(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ProtocolNode]]:
    with protocol_mesh(tmp_path_factory.mktemp("tg"), PREFIX, "10.98.0", "tg",
                       {name: ((), PARAMS) for name in NAMES}, RING) as nodes:
        yield nodes


def groups(node: ProtocolNode) -> list[dict[str, Any]]:
    status = node.try_status()
    return [] if status is None else list(status["protocol"]["groups"])


def one_group(nodes: list[ProtocolNode]) -> dict[int, dict[str, Any]] | None:
    """Each node's membership if all are in one anchored group and the parents form a tree
    whose chains reach the leader in ``level`` steps; else None."""
    return group_of_views({n.node_id: groups(n) for n in nodes})


def test_group_forms_delivers_and_heals_after_a_parent_dies(ring: dict[str, ProtocolNode]) -> None:
    nodes = list(ring.values())
    by = wait_for(lambda: one_group(nodes), "one group over the ring", guard=90.0)
    deep = [nid for nid, g in by.items() if g["level"] == 2]
    assert len(deep) == 1  # the node opposite the leader
    x = nodes[deep[0] - 1]
    leader = nodes[next(nid for nid, g in by.items() if g["level"] == 0) - 1]
    parent = nodes[by[x.node_id]["parent"] - 1]
    other = nodes[next(nid for nid, g in by.items()
                       if g["level"] == 1 and nid != parent.node_id) - 1]

    sub = x.mqtt_sub("meshsub/deliver/tge/#")
    sub.wait_ready(x, "meshsub/deliver/tge/probe")
    x.mqtt_pub("meshsub/sub/tge", "tg alpha=true", retain=True)
    wait_for(lambda: any(r["sub_id"] == "tge" for r in x.ctl("subscriptions")),
             "subscription on the deep node")
    # the leader's other child: one subscription the events match, one they do not
    theirs = other.mqtt_sub("meshsub/deliver/#")
    theirs.wait_ready(other, "meshsub/deliver/tgb/probe")
    other.mqtt_pub("meshsub/sub/tgb", "tg beta=true", retain=True)
    other.mqtt_pub("meshsub/sub/tgg", "tg gamma=true", retain=True)
    wait_for(lambda: {"tgb", "tgg"} <= {r["sub_id"] for r in other.ctl("subscriptions")},
             "subscriptions on the other child")

    sent = [0]

    def arrived_after(first: int) -> list[dict[str, Any]]:
        """Publish the next event from the leader; the events numbered >= first that came.

        The subscription's bits climb to the leader with the next report, so the
        first events may find no branch down yet: keep publishing until one arrives.
        """
        sent[0] += 1
        leader.mqtt_pub("meshsub/pub/tg", json.dumps({"alpha": True, "beta": True,
                                                      "n": sent[0]}))
        return [d for d in events(sub) if d["attrs"]["n"] >= first]

    def at_both(first: int) -> bool:
        return bool(arrived_after(first)) and any(
            d["sub_id"] == "tgb" and d["attrs"]["n"] >= first for d in events(theirs))

    wait_for(lambda: at_both(1), "an event at both matching members", guard=60.0, step=1.0)

    parent.kill_daemon(signal.SIGKILL)
    rest = [n for n in nodes if n is not parent]

    def healed() -> dict[int, dict[str, Any]] | None:
        view = one_group(rest)
        if view is None or view[x.node_id]["parent"] == parent.node_id:
            return None
        return view

    after = wait_for(healed, "the orphan re-attached", guard=90.0)
    # the orphan hangs elsewhere, or leads (promoted, then the others' group merged in)
    assert after[x.node_id]["parent"] != parent.node_id
    mark = sent[0] + 1
    wait_for(lambda: arrived_after(mark), "an event after the repair", guard=60.0, step=1.0)
    ids = [d["event_id"] for d in events(sub)]
    assert len(set(ids)) == len(ids)  # never twice
    assert all(d["attrs"]["alpha"] is True for d in events(sub))
    pairs = [(d["sub_id"], d["event_id"]) for d in events(theirs)]
    assert pairs and len(set(pairs)) == len(pairs)  # never twice
    assert {sid for sid, _ in pairs} == {"tgb"}  # the gamma subscription matched nothing


def events(sub: Any) -> list[dict[str, Any]]:
    return [d for _, d in sub.deliveries() if "event_id" in d]
