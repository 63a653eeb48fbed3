"""PULL in the default run's virtual mesh: consumers collect from the producer they meet
(vmesh-pull-meet, three devices).

PULL is B-SUB's conservative baseline (Zhao and Wu 2010, §VII-A): "a node only
collects messages that it is interested in from its directly encountered
neighbors". Producer 1 publishes four events alone; consumer 2 meets it and collects
the one flood it wants; 2 then meets consumer 3 and, although it holds a flood 3
wants, gives it nothing (nothing is relayed); 3 collects both floods only when it
meets the producer itself. Every matching subscription gets its event exactly once,
from node 1, after that contact began; only node 1 sends DATA, and only the events a
peer subscribed to (exact interests: nothing is pulled by mistake). The same check
runs on the simulator's telemetry first (no root), so a failure on the containers
is the deployment's, not the scenario's. Assertions are on telemetry and the
applications' MQTT deliveries only; contacts are delimited by the nodes' own
``neighbor_up`` records, never by wall-clock time.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from appdeliveries import app_deliveries
from fleet import SCENARIOS
from test_vmesh_bsub_scenarios import delivered_once, expected_deliveries

from meshsim.des.run import run_scenario
from meshsim.scenario import load_scenario
from meshsim.vmesh.devices import run_records
from meshsub.protocols.pull import DATA

SCENARIO = SCENARIOS / "vmesh-pull-meet.toml"
PRODUCER, RELAY, LATE = 1, 2, 3
"""The producer; the consumer that meets it first and then the other; the other."""

Rec = dict[str, Any]


def met_at(recs: list[Rec], node: int, peer: int) -> int:
    """When ``node`` last saw ``peer`` come up (ns)."""
    return max(r["ts_ns"] for r in recs
               if r["event"] == "neighbor_up" and r["node"] == node and r["peer"] == peer)


def check_pull(recs: list[Rec]) -> set[tuple[int, str, str]]:
    """Direct collection only; returns the deliveries."""
    pubs = {r["event_id"]: r for r in recs if r["event"] == "publish"}
    assert len(pubs) == 4 and {r["node"] for r in pubs.values()} == {PRODUCER}
    expected = expected_deliveries(recs)
    assert {(n, s) for n, s, _ in expected} == {(2, "floodhigh"), (3, "flood")}
    assert len(expected) == 3, expected
    assert delivered_once(recs) == expected
    # Each delivery came straight from the producer, in a contact with it.
    for node, _, eid in expected:
        got = [r for r in recs if r["event"] == "rx" and r["node"] == node
               and r.get("msg_type") == DATA and r["event_id"] == eid]
        assert got and {r["peer"] for r in got} == {PRODUCER}, got
        assert min(r["ts_ns"] for r in got) >= met_at(recs, node, PRODUCER), got
    # 3 met 2 while 2 held a flood 3 wants, before 3 met the producer: PULL gave it nothing.
    relay_got = min(r["ts_ns"] for r in recs if r["event"] == "deliver" and r["node"] == RELAY)
    assert relay_got < met_at(recs, LATE, RELAY) < met_at(recs, LATE, PRODUCER)
    sent = {(r["node"], r["peer"], r["event_id"]) for r in recs
            if r["event"] == "tx" and r.get("msg_type") == DATA}
    assert sent == {(PRODUCER, node, eid) for node, _, eid in expected}, sent
    return expected


def test_pull_meet_in_the_simulator(tmp_path: Path) -> None:
    from simhelpers import read_run

    run_scenario(load_scenario(SCENARIO), tmp_path / "run")
    check_pull(read_run(tmp_path / "run")[1])


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)")
@pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman")
def test_consumers_collect_only_from_the_producer_on_the_virtual_mesh(
        vmesh_fleet: Any, tmp_path: Path) -> None:
    res = vmesh_fleet.scenario(load_scenario(SCENARIO), tmp_path / "run")
    print(f"timings: {res.timings}")
    expected = check_pull(run_records(res.out))
    assert app_deliveries(res) == expected  # what the applications got over MQTT
