"""BRVST under meshsubd on three network namespaces: A - B - C in a line, A and C apart.

Positions are configured (``location.source = "static"``): A at x = 20 m and B at
70 m share grid 0 of a 100 m layout with zones of one grid (K = 1), C at 130 m is
grid 1; the radio range is 80 m, so A and C hear only B, as the bridge's filter
makes it. The tests run in file order on one mesh: managers elected over real UDP
(B, up first, manages grid and zone 0 and A follows it; C grid and zone 1), a
publication of C matched by zone summaries and delivered to A's subscription
through B (and a non-matching one not), then B's daemon killed: A elects itself
with a higher epoch, and once B is back (following A, the incumbent) C's next
publication reaches A again.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Iterator
from typing import Any

import pytest
from mesh import Mesh, NodeProc, wait_for

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, nftables)"),
    pytest.mark.skipif(not all(shutil.which(t) for t in ("mosquitto_pub", "mosquitto_sub",
                                                          "nft")),
                       reason="needs mosquitto clients and nft"),
]
PARAMS: dict[str, Any] = {
    "area_width_m": 300.0, "area_height_m": 100.0, "grid_size_m": 100.0, "K": 1, "R": 80.0,
    "T_ann": 1.0, "T_ann_zone": 1.0, "T_lease": 30.0, "T_grsv_refresh": 3.0,
    "T_zrsv_refresh": 3.0, "T_batch": 0.1,
}
X = {"a": 20.0, "b": 70.0, "c": 130.0}
SUB = "brvst a1_lo>=10 a1_hi<=50"


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    m = Mesh(tmp_path_factory.mktemp("brvst"), protocol="brvst", params=PARAMS)
    try:
        m.up({n: {"source": "static", "x": x, "y": 50.0} for n, x in X.items()})
        for node in m.nodes.values():
            node.start_broker()
        # B first: alone, it elects itself; A then follows the incumbent (a newcomer never
        # pre-empts a live manager, docs/protocols/brvst.md, "Incumbency")
        b = m.nodes["b"]
        b.start_daemon()
        wait_for(lambda: manager_of(b, "grid") == (b.node_id, 1)
                 and manager_of(b, "zone") == (b.node_id, 1), "B manages grid and zone 0",
                 guard=120.0)
        m.nodes["a"].start_daemon()
        m.nodes["c"].start_daemon()
        m.wait_neighbors()
        yield m
    finally:
        for node in m.nodes.values():
            if node.daemon is not None and node.daemon.poll() is not None:
                print(f"--- meshsubd {node.name} exited {node.daemon.returncode}:\n"
                      f"{node.log_tail()}")
        m.down()


def proto(node: NodeProc) -> dict[str, Any]:
    status = node.try_status()
    return {} if status is None else status["protocol"]


def manager_of(node: NodeProc, level: str) -> tuple[int | None, int | None]:
    seat = proto(node).get("seats", {}).get(level) or {}
    return seat.get("manager"), seat.get("epoch")


def test_managers_are_elected_over_udp(mesh: Mesh) -> None:
    a, b, c = mesh.nodes["a"], mesh.nodes["b"], mesh.nodes["c"]
    for level in ("grid", "zone"):
        wait_for(lambda level=level: manager_of(a, level) == (b.node_id, 1)
                 and manager_of(b, level) == (b.node_id, 1)
                 and manager_of(c, level) == (c.node_id, 1), f"{level} managers")
    assert proto(b)["grid_manager"] and proto(b)["zone_manager"]
    assert proto(c)["grid_manager"] and proto(c)["zone_manager"]
    assert not proto(a)["grid_manager"] and not proto(a)["zone_manager"]
    assert proto(a)["cell"] == [0, 0] and proto(c)["cell"] == [1, 0]


def test_a_publication_is_matched_across_zones_and_delivered_once(mesh: Mesh) -> None:
    a, c = mesh.nodes["a"], mesh.nodes["c"]
    sub = a.mqtt_sub("meshsub/deliver/e2e-brvst/#")
    sub.wait_ready(a, "meshsub/deliver/e2e-brvst/probe")
    a.mqtt_pub("meshsub/sub/e2e-brvst", SUB, retain=True)
    wait_for(lambda: any(r["sub_id"] == "e2e-brvst" for r in a.ctl("subscriptions")),
             "subscription on A")
    # C's zone manager learns zone 0's summary (ZRSV) before it can match there
    wait_for(lambda: proto(c)["state"].get("zm_zone_table", [0, 0])[0] >= 1,
             "zone 0's summary at C")
    c.mqtt_pub("meshsub/pub/brvst", '{"a1_lo": 60, "a1_hi": 70}')  # outside: never delivered
    c.mqtt_pub("meshsub/pub/brvst", '{"a1_lo": 20, "a1_hi": 30, "n": 1}')
    (got,) = wait_for(lambda: sub.events(n=1), "C's publication on A")
    assert got["origin"] == c.node_id and got["attrs"]["a1_lo"] == 20
    c.mqtt_pub("meshsub/pub/brvst", '{"a1_lo": 11, "a1_hi": 12, "n": 2}')  # sentinel
    wait_for(lambda: sub.events(n=2), "sentinel on A")
    assert len(sub.events(n=1)) == 1 and sub.events(a1_lo=60) == []


def test_a_killed_manager_is_replaced_and_delivery_resumes(mesh: Mesh) -> None:
    a, b, c = mesh.nodes["a"], mesh.nodes["b"], mesh.nodes["c"]
    sub = a.mqtt_sub("meshsub/deliver/e2e-brvst/#")
    sub.wait_ready(a, "meshsub/deliver/e2e-brvst/probe2")
    assert b.kill_daemon(signal.SIGKILL) == -signal.SIGKILL
    for level in ("grid", "zone"):
        wait_for(lambda level=level: manager_of(a, level) == (a.node_id, 2),
                 f"A elected {level} manager with epoch 2", guard=90.0)
    assert proto(a)["grid_manager"] and proto(a)["zone_manager"]
    b.start_daemon()
    for level in ("grid", "zone"):  # the incumbent stays: B follows A
        wait_for(lambda level=level: manager_of(b, level) == (a.node_id, 2),
                 f"B follows A at the {level} level", guard=90.0)
    assert not proto(b)["grid_manager"]
    wait_for(lambda: proto(c)["state"].get("zm_zone_table", [0, 0])[0] >= 1
             and proto(a)["state"].get("gm_subscriptions", [0, 0])[0] >= 1,
             "A's subscription and summary rebuilt")

    def delivered() -> list[dict[str, Any]]:
        c.mqtt_pub("meshsub/pub/brvst", '{"a1_lo": 30, "a1_hi": 40, "n": 3}')
        return sub.events(n=3)

    wait_for(delivered, "C's publication on A through the new zone manager", guard=90.0, step=2.0)
