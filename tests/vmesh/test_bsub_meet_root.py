"""B-SUB in the default run's virtual mesh: a producer meets two consumers (vmesh-bsub-meet).

B-SUB's other virtual-mesh scenarios (a courier elected broker, a contact cut) last
three minutes each and run in the long tier (tests/vmesh/test_bsub_root.py); this
one keeps the protocol in every run of the suite at the cost of a 35-second
scenario on three devices of the session's fleet (``vmesh_fleet``). Producer 1
publishes four events while alone; at t = 10 s the medium links it to consumers
2 and 3, and each contact's session delivers directly (Zhao and Wu 2010, §V-C, mode
0): every matching subscription gets its event exactly once, from node 1, after
the contact began; the event nobody subscribed to reaches nobody's application.
The same check runs on the simulator's telemetry first (no root), so a failure on
the containers is the deployment's, not the scenario's. Assertions are on
telemetry and the applications' MQTT deliveries only.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from appdeliveries import app_deliveries
from fleet import SCENARIOS
from test_vmesh_bsub_scenarios import data_rx, delivered_once, expected_deliveries

from meshsim.des.run import run_scenario
from meshsim.scenario import load_scenario
from meshsim.vmesh.devices import run_records

SCENARIO = SCENARIOS / "vmesh-bsub-meet.toml"
PRODUCER, CONSUMERS = 1, {2, 3}

Rec = dict[str, Any]


def check_meet(recs: list[Rec]) -> set[tuple[int, str, str]]:
    """Every matching subscription got its event once, from the producer, after the
    contact began; returns the deliveries."""
    pubs = {r["event_id"]: r for r in recs if r["event"] == "publish"}
    assert len(pubs) == 4 and {r["node"] for r in pubs.values()} == {PRODUCER}
    expected = expected_deliveries(recs)
    assert {(n, s) for n, s, _ in expected} == {(2, "floodhigh"), (3, "fire")}, expected
    assert len(expected) == 2
    assert delivered_once(recs) == expected
    met = {r["peer"]: r["ts_ns"] for r in sorted(recs, key=lambda r: -r["ts_ns"])
           if r["event"] == "neighbor_up" and r["node"] == PRODUCER}
    assert set(met) == CONSUMERS, met
    assert max(r["ts_ns"] for r in pubs.values()) < min(met.values())  # published alone
    for node, _, eid in expected:
        got = next(r for r in data_rx(recs, node) if r["event_id"] == eid)
        assert got["peer"] == PRODUCER and got["ts_ns"] >= met[node], got
    return expected


def test_bsub_meet_in_the_simulator(tmp_path: Path) -> None:
    from simhelpers import read_run

    run_scenario(load_scenario(SCENARIO), tmp_path / "run")
    check_meet(read_run(tmp_path / "run")[1])


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)")
@pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman")
def test_a_producer_meets_two_consumers_on_the_virtual_mesh(vmesh_fleet: Any,
                                                            tmp_path: Path) -> None:
    res = vmesh_fleet.scenario(load_scenario(SCENARIO), tmp_path / "run")
    print(f"timings: {res.timings}")
    expected = check_meet(run_records(res.out))
    assert app_deliveries(res) == expected  # what the applications got over MQTT
