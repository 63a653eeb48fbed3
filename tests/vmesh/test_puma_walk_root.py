"""PUMA and its paging baseline in the default run's virtual mesh (vmesh-puma-walk).

Three base stations, one per cell of a 3 x 1 lattice, and a client on the lattice
walk (Zheng 2008, §5.2): it subscribes through the station of its first cell (its
previous broker) and walks away; station 3 publishes one event a time unit. Each
event must reach the client in the cell it is in at the time, handed over by that
cell's station (a LOCAL frame from it). PUMA's client answers each event with
exactly one reply (§5.3.1), routed back to the previous broker, which predicts the
next event's cells from it; paging's client never replies and reports its cell
once it is ``dist`` cells from its last report (§5.4.1), and the previous broker
pages around that cell. The same checks run on the simulator's telemetry first (no
root), so a failure on the containers is the deployment's, not the scenario's.
Assertions are on telemetry and on what the client's application got over MQTT.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fleet import SCENARIOS

from meshsim.des.run import run_scenario
from meshsim.mobility import trajectories_for
from meshsim.scenario import load_scenario
from meshsim.scenario.model import Scenario
from meshsim.scenario.plan import Plan, make_plan
from meshsim.vmesh.devices import run_records, scenario_sub_id
from meshsub.core.api import FIRST_PROTOCOL_TYPE
from meshsub.protocols.puma import messages as m

SCENARIO = SCENARIOS / "vmesh-puma-walk.toml"
STATIONS, CLIENT, PUBLISHER, HOME = (1, 2, 3), 4, 3, 1
CELL_M = 50.0

Rec = dict[str, Any]


def scenario_for(protocol: str) -> Scenario:
    return load_scenario(SCENARIO, [f"protocol.name={protocol}"])


def _sent(recs: list[Rec], node: int) -> Counter[int]:
    """PUMA messages ``node`` sent, by type, each once (retransmissions aside); the
    daemon's own discovery beacons and per-hop ACKs (core types) are not PUMA's."""
    return Counter(t for t, _id in {(r["msg_type"], r["event_id"]) for r in recs
                                    if r["event"] == "tx" and r["node"] == node
                                    and r.get("msg_type", 0) >= FIRST_PROTOCOL_TYPE})


def check_walk(recs: list[Rec], scenario: Scenario, plan: Plan, t0_ns: float) -> set[str]:
    """Every event reached the client once, in the cell it was in; returns their ids."""
    walk = trajectories_for(scenario, plan)
    cell_of = {n: int(plan.positions[n][0] // CELL_M) for n in STATIONS}
    station = {c: n for n, c in cell_of.items()}

    def client_cell(ts_ns: float) -> int:
        return int(walk.position(CLIENT, (ts_ns - t0_ns) / 1e9)[0] // CELL_M)

    subs = [r for r in recs if r["event"] == "subscribe"]
    assert [(r["node"], r["sub_id"]) for r in subs] == [(CLIENT, "alerts")]
    pubs = {r["event_id"]: r for r in recs if r["event"] == "publish"}
    assert len(pubs) == 3 and {r["node"] for r in pubs.values()} == {PUBLISHER}
    cells = [client_cell(r["ts_ns"]) for r in sorted(pubs.values(), key=lambda r: r["ts_ns"])]
    assert cells[0] == cell_of[HOME] and cell_of[HOME] not in cells[1:], cells  # it walked
    got = Counter((r["node"], r["sub_id"], r["event_id"]) for r in recs
                  if r["event"] == "deliver")
    assert got == Counter({(CLIENT, "alerts", eid): 1 for eid in pubs}), got
    for eid, pub in pubs.items():  # handed over by the station of the cell it was in
        handed = {r["peer"] for r in recs if r["event"] == "rx" and r["node"] == CLIENT
                  and r["msg_type"] == m.LOCAL and r["event_id"] == eid}
        assert handed == {station[client_cell(pub["ts_ns"])]}, (eid, handed)
    return set(pubs)


def check_puma(recs: list[Rec], scenario: Scenario, plan: Plan, t0_ns: float) -> set[str]:
    events = check_walk(recs, scenario, plan, t0_ns)
    # the client's only messages: its subscription and one reply per event (§5.3.1)
    assert _sent(recs, CLIENT) == Counter({m.SUBSCRIBE: 1, m.REPLY: len(events)})
    replies = {r["event_id"] for r in recs if r["event"] == "tx" and r["node"] == CLIENT
               and r["msg_type"] == m.REPLY}
    at_home = {r["event_id"] for r in recs if r["event"] == "rx" and r["node"] == HOME
               and r["msg_type"] == m.REPLY}
    assert at_home == replies  # every reply reached the previous broker
    trees = {r["event_id"] for r in recs if r["event"] == "tx" and r["node"] == HOME
             and r["msg_type"] == m.DELIVER}
    assert len(trees) == len(events) - 1  # the walked-away events went down a tree
    return events


def check_paging(recs: list[Rec], scenario: Scenario, plan: Plan, t0_ns: float) -> set[str]:
    events = check_walk(recs, scenario, plan, t0_ns)
    sent = _sent(recs, CLIENT)  # no reply; a report once two cells from the last one
    assert sent == Counter({m.SUBSCRIBE: 1, m.REPORT: 1}), sent
    pages = {r["event_id"] for r in recs if r["event"] == "tx" and r["node"] == HOME
             and r["msg_type"] == m.PAGE}
    assert len(pages) == 1  # the event after the report: paged around the reported cell
    return events


CHECKS = {"puma": check_puma, "paging": check_paging}


@pytest.mark.parametrize("protocol", ["puma", "paging"])
def test_puma_walk_in_the_simulator(tmp_path: Path, protocol: str) -> None:
    from simhelpers import read_run

    scenario = scenario_for(protocol)
    run_scenario(scenario, tmp_path / "run")
    CHECKS[protocol](read_run(tmp_path / "run")[1], scenario, make_plan(scenario), 0.0)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)")
@pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman")
@pytest.mark.parametrize("protocol", ["puma", "paging"])
def test_events_follow_a_walking_client_on_the_virtual_mesh(vmesh_fleet: Any, tmp_path: Path,
                                                            protocol: str) -> None:
    scenario = scenario_for(protocol)
    res = vmesh_fleet.scenario(scenario, tmp_path / "run")
    print(f"timings: {res.timings}")
    events = CHECKS[protocol](run_records(res.out), scenario, res.plan, res.t0 * 1e9)
    report = res.agents.get(CLIENT)
    assert report is not None, "no workload report from the client"
    seen = Counter((scenario_sub_id(d["body"]["sub_id"]), d["body"]["event_id"])
                   for d in report["deliveries"])
    assert seen == Counter({("alerts", eid): 1 for eid in events})  # over MQTT, once each
