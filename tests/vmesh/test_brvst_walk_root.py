"""BRVST on moving devices (issue 18): vmesh-brvst-walk, four devices, on the virtual mesh.

Managers are elected over the devices' own announcements; grid (0, 0)'s manager (node
1) walks out of its grid and hands it over to the member left there (node 2, which
walked in a moment earlier): its state goes along (STATE_XFER), node 2 manages the
grid from then on, and node 1 registers with grid (1, 0)'s manager (Li and Wang 2014,
§III; docs/protocols/brvst.md, "Managers"). Publications from both grids before and
after the walk reach exactly the matching subscriptions, once each. The daemons read
their positions from gpsd, fed with NMEA along the scenario's trajectories: a daemon
with a configured static position never leaves its grid, which is why the first
attempt at this scenario saw managers elected and no hand-over.

The virtual-mesh test runs ``meshsim run``'s code on the first four devices of the test
session's fleet (``vmesh_fleet``, tests/vmesh/fleet.py); the same check runs on the
simulator's telemetry first (no root), so a failure on the containers is the
deployment's, not the scenario's. Assertions are on telemetry and on what the
applications got over MQTT (the workload agents' reports).
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from appdeliveries import app_deliveries
from fleet import SCENARIOS

from meshsim.des.run import run_scenario
from meshsim.scenario import load_scenario
from meshsim.vmesh.devices import run_records
from meshsub.core.syntax import parse_event, parse_subscription

SCENARIO = SCENARIOS / "vmesh-brvst-walk.toml"
WALKER, SUCCESSOR = 1, 2
WALK_S, AFTER_S = 6.0, 13.5
"""Scenario times: the walker starts to move; the publications after the walk begin."""

Rec = dict[str, Any]


def roles(recs: list[Rec], t0_ns: float) -> list[tuple[float, int, str, Any]]:
    """(scenario time, node, role, peer) of every ``broker`` record, in time order."""
    return sorted(((r["ts_ns"] - t0_ns) / 1e9, r["node"], r["role"], r.get("peer"))
                  for r in recs if r["event"] == "broker")


def check_walk(recs: list[Rec], t0_ns: float) -> set[tuple[int, str, str]]:
    """The walker managed grid (0, 0) and handed it to node 2 during its walk; every
    matching subscription got every event once; returns the deliveries."""
    seen = roles(recs, t0_ns)
    handed = [(t, peer) for t, n, role, peer in seen if n == WALKER and role == "handed_over"]
    assert len(handed) == 1, seen
    t_hand, succ = handed[0]
    assert succ == SUCCESSOR and WALK_S < t_hand < AFTER_S, seen
    assert any(n == WALKER and role == "grid_manager" and t < t_hand
               for t, n, role, _ in seen), seen
    # The successor takes over on the state transfer; its record may carry an earlier
    # stamp than the walker's own record of the hand-over (two daemons, each records
    # after it acted), so the check is "during the walk", not "after that record".
    assert any(n == SUCCESSOR and role == "grid_manager" and WALK_S < t < AFTER_S
               for t, n, role, _ in seen), seen
    assert any(role == "zone_manager" for _, _, role, _ in seen), seen
    subs = {(r["node"], r["sub_id"]): parse_subscription(r["content"])
            for r in recs if r["event"] == "subscribe"}
    assert set(subs) == {(2, "west"), (4, "east"), (WALKER, "walker")}, set(subs)
    pubs = {r["event_id"]: (r["node"], (r["ts_ns"] - t0_ns) / 1e9, parse_event(r["content"]))
            for r in recs if r["event"] == "publish"}
    assert len(pubs) == 9
    before = {e for e, (_, t, _) in pubs.items() if t < WALK_S}
    assert len(before) == 4 and all(t > AFTER_S - 0.5 for e, (_, t, _) in pubs.items()
                                    if e not in before)
    expected = {(node, sid, eid) for (node, sid), sub in subs.items()
                for eid, (_, _, event) in pubs.items() if sub.matches(event)}
    assert len(expected) == 19
    got = Counter((r["node"], r["sub_id"], r["event_id"]) for r in recs
                  if r["event"] == "deliver")
    assert set(got) == expected, (expected - set(got), set(got) - expected)
    assert max(got.values()) == 1
    # The walker's subscription and the successor's followed their grids' managers:
    # both got events published after the hand-over.
    assert {(n, s) for n, s, e in expected if e not in before} >= {
        (WALKER, "walker"), (SUCCESSOR, "west")}
    return expected


def test_brvst_walk_in_the_simulator(tmp_path: Path) -> None:
    from simhelpers import read_run

    run_scenario(load_scenario(SCENARIO), tmp_path / "run")
    check_walk(read_run(tmp_path / "run")[1], 0.0)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)")
@pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman")
def test_a_moving_grid_manager_hands_over_on_the_virtual_mesh(vmesh_fleet: Any,
                                                              tmp_path: Path) -> None:
    res = vmesh_fleet.scenario(load_scenario(SCENARIO), tmp_path / "run")
    print(f"timings: {res.timings}")
    recs = run_records(res.out)
    print("roles:", roles(recs, res.t0 * 1e9))
    expected = check_walk(recs, res.t0 * 1e9)
    assert app_deliveries(res) == expected  # what the applications got over MQTT
