"""DR in the default run's virtual mesh: double ruling on four static devices (vmesh-dr-grid).

The location-based baseline of Pham and Tran (2012, §4): each device knows its
place (the virtual mesh's configured coordinates), a query is stored along
the vertical line through its subscriber, an event travels along the
horizontal line through its publisher, and the node where the lines cross
notifies the subscriber. Checked from telemetry (where queries are stored,
from the ``dr_checked`` counters; deliveries) and from what the applications
got over MQTT; the same check runs on the simulator's telemetry first (no
root), so a failure on the containers is the deployment's.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from appdeliveries import app_deliveries
from fleet import SCENARIOS

from meshsim.des.run import run_scenario
from meshsim.scenario import load_scenario
from meshsim.vmesh.devices import run_records
from meshsub.core.syntax import parse_event, parse_subscription

SCENARIO = SCENARIOS / "vmesh-dr-grid.toml"
ON_LINES = {1: 1, 2: 1, 3: 1, 4: 1}
"""Stored queries per node: "west" on x = 50 (nodes 1, 3), "east" on x = 130 (2, 4)."""
CROSSING = 3
"""Where the line of node 1's query meets the line y = 130 (node 4's event)."""

Rec = dict[str, Any]


def check_grid(recs: list[Rec]) -> set[tuple[int, str, str]]:
    """Every matching subscription got its event once; queries stored on their lines."""
    pubs = {r["event_id"]: r for r in recs if r["event"] == "publish"}
    n_of = {eid: parse_event(r["content"]).attrs["n"] for eid, r in pubs.items()}
    eid_of = {n: eid for eid, n in n_of.items()}
    assert sorted(n_of.values()) == [1, 2, 3, 4], n_of
    subs = [(r["node"], r["sub_id"], parse_subscription(r["content"]))
            for r in recs if r["event"] == "subscribe"]
    expected = {(node, sid, eid) for node, sid, sub in subs for eid, r in pubs.items()
                if sub.matches(parse_event(r["content"]))}
    assert expected == {(1, "west", eid_of[1]), (2, "east", eid_of[2]),
                        (1, "west", eid_of[3])}, expected
    got = [(r["node"], r["sub_id"], r["event_id"]) for r in recs if r["event"] == "deliver"]
    assert sorted(got) == sorted(expected), sorted(got)  # each exactly once, nobody else

    checked = [r for r in recs if r["event"] == "counter" and r.get("reason") == "dr_checked"]
    stored = {r["node"]: r["entries"] for r in checked}
    assert stored == ON_LINES, stored  # one query each: its own line's, not the other's
    assert any(r["node"] == CROSSING and r["event_id"] == eid_of[1] for r in checked)
    notified = [r for r in recs if r["event"] == "deliver" and r["event_id"] == eid_of[1]]
    assert [r["hop"] for r in notified] == [2], notified  # 4 -> 3 (the crossing) -> 1
    return expected


def test_dr_grid_in_the_simulator(tmp_path: Path) -> None:
    from simhelpers import read_run

    run_scenario(load_scenario(SCENARIO), tmp_path / "run")
    check_grid(read_run(tmp_path / "run")[1])


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)")
@pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman")
def test_double_ruling_delivers_on_the_virtual_mesh(vmesh_fleet: Any, tmp_path: Path) -> None:
    res = vmesh_fleet.scenario(load_scenario(SCENARIO), tmp_path / "run")
    print(f"timings: {res.timings}")
    expected = check_grid(run_records(res.out))
    assert app_deliveries(res) == expected  # what the applications got over MQTT
