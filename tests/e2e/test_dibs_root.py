"""meshsubd running DIBS (Pham and Tran 2012) from its configuration, on four namespaces (root).

A ring A - B - C - D - A (the medium drops A <-> C and B <-> D), each node
with its own mosquitto and meshsubd configured ``protocol.name = "dibs"``,
A with the role ``reference`` (m = 1). The tree forms (B and D below A, C
below one of them, VAs by the prefix rule), C subscribes to a key range, and
an event from A with a key in it reaches C once (one routed copy to the
designated node, then a notification). Then C's predecessor's daemon is
killed: C re-attaches through the other side of the ring (a new VA: the
repair), re-places its query with the next refresh, and the next event
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

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, nftables)"),
    pytest.mark.skipif(not all(shutil.which(t) for t in ("mosquitto_pub", "mosquitto_sub",
                                                          "nft")),
                       reason="needs mosquitto clients and nft"),
]
PREFIX = "msub-dbe"
NAMES = ("a", "b", "c", "d")
RING = (("a", "b"), ("b", "c"), ("c", "d"), ("d", "a"))  # A <-> C and B <-> D cut
LEASE_S = 6.0
PARAMS = {"hb_period": 0.5, "lease_s": LEASE_S, "k": 64}


@pytest.fixture(scope="module")
def ring(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ProtocolNode]]:
    """Node A is the reference."""
    setup = {name: (("reference",) if name == "a" else (), PARAMS) for name in NAMES}
    with protocol_mesh(tmp_path_factory.mktemp("dibs"), PREFIX, "10.97.0", "dibs",
                       setup, RING) as nodes:
        yield nodes


def tree(nodes: list[ProtocolNode]) -> dict[int, dict[str, Any]] | None:
    """Each node's CRES state if every one is attached in one consistent tree, else None."""
    views: dict[int, dict[str, Any]] = {}
    for n in nodes:
        status = n.try_status()
        if status is None:
            return None
        views[n.node_id] = status["protocol"]
    for nid, v in views.items():
        if v["va"] is None or v["detached"] or v["cl"] != 1:
            return None
        pred = v["pred"]
        if nid == 1:
            if v["va"] != "":
                return None
            continue
        if pred not in views:
            return None
        p = views[pred]
        slots = {int(c): s for c, s in p["successors"].items()}
        if slots.get(nid) != v["slot"] or v["va"] != p["va"] + "0" * v["slot"] + "1":
            return None
    return views


def events(sub: Any) -> list[dict[str, Any]]:
    return [d for _, d in sub.deliveries() if "event_id" in d]


def test_tree_forms_delivers_and_repairs_after_a_predecessor_dies(
        ring: dict[str, ProtocolNode]) -> None:
    nodes = list(ring.values())
    a, c = ring["a"], ring["c"]
    views = wait_for(lambda: tree(nodes), "one tree under the reference", guard=60.0)
    assert views[c.node_id]["va"].count("1") == 2  # depth 2: opposite the reference
    parent = next(n for n in nodes if n.node_id == views[c.node_id]["pred"])

    sub = c.mqtt_sub("meshsub/deliver/dbe/#")
    sub.wait_ready(c, "meshsub/deliver/dbe/probe")
    c.mqtt_pub("meshsub/sub/dbe", 'dibs key>="4000000000000000" key<="7fffffffffffffff"',
               retain=True)
    wait_for(lambda: any(r["sub_id"] == "dbe" for r in c.ctl("subscriptions")),
             "subscription at C")
    sent = [0]

    def arrived_after(first: int) -> list[dict[str, Any]]:
        """Publish the next event from A; the events numbered >= first that came."""
        sent[0] += 1
        a.mqtt_pub("meshsub/pub/dibs", json.dumps({"key": "5a5a5a5a5a5a5a5a", "n": sent[0]}))
        a.mqtt_pub("meshsub/pub/dibs", json.dumps({"key": "0000000000000001", "n": -1}))
        return [d for d in events(sub) if d["attrs"]["n"] >= first]

    wait_for(lambda: arrived_after(1), "an event at C", guard=30.0, step=1.0)
    old_va = views[c.node_id]["va"]

    parent.kill_daemon(signal.SIGKILL)
    rest = [n for n in nodes if n is not parent]

    def repaired() -> dict[int, dict[str, Any]] | None:
        view = tree(rest)
        if view is None or view[c.node_id]["pred"] == parent.node_id:
            return None
        return view

    after = wait_for(repaired, "C re-attached through the other side", guard=60.0)
    assert after[c.node_id]["va"] != old_va
    mark = sent[0] + 1
    wait_for(lambda: arrived_after(mark), "an event after the repair",
             guard=30.0 + LEASE_S, step=1.0)
    got = events(sub)
    assert len({d["event_id"] for d in got}) == len(got)  # never twice
    assert all(d["attrs"]["n"] >= 1 for d in got)  # never the key outside the range
