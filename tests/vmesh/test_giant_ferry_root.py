"""GIANT in the default run's virtual mesh: a ferry between two brokers (vmesh-giant-ferry).

Brokers 1 (the publisher's broker of topic ``reading``) and 2 (a subscriber's)
sit in the two cells of a 2 x 1 lattice and never hear each other (Zheng 2008,
§6.2); ferry 3 walks the lattice. The ferry carries the advertisement to broker
2, broker 2's subscription back to broker 1, and the matching event published
after that to broker 2's subscriber (§6.4). The event published before the
subscription reached broker 1 reaches nobody, and so does the one that matches
no subscription. Every exchange between a broker and the ferry happens while the
ferry is in the broker's cell (the in-cell check). The same checks run on the
simulator's telemetry first (no root), so a failure on the containers is the
deployment's, not the scenario's. Assertions are on telemetry and on what broker
2's application got over MQTT.
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
from meshsub.protocols.giant import messages as gm

SCENARIO = SCENARIOS / "vmesh-giant-ferry.toml"
PHB, SHB, FERRY = 1, 2, 3
CELL_M = 50.0

Rec = dict[str, Any]


def _rx(recs: list[Rec], node: int, msg_type: int) -> list[Rec]:
    return sorted((r for r in recs if r["event"] == "rx" and r["node"] == node
                   and r.get("msg_type") == msg_type), key=lambda r: r["ts_ns"])


def check_ferry(recs: list[Rec], scenario: Scenario, plan: Plan, t0_ns: float) -> str:
    """The one deliverable event went A -> ferry -> B's subscriber once; returns its id."""
    walk = trajectories_for(scenario, plan)

    def ferry_cell(ts_ns: float) -> int:
        return int(walk.position(FERRY, (ts_ns - t0_ns) / 1e9)[0] // CELL_M)

    cell_of = {n: int(plan.positions[n][0] // CELL_M) for n in (PHB, SHB)}
    subs = [(r["node"], r["sub_id"]) for r in recs if r["event"] == "subscribe"]
    assert subs == [(SHB, "readings")]
    pubs = sorted((r for r in recs if r["event"] == "publish"), key=lambda r: r["ts_ns"])
    assert [r["node"] for r in pubs] == [PHB] * 3
    early, carried, unmatched = (r["event_id"] for r in pubs)
    sub_at_phb = _rx(recs, PHB, gm.BUNDLE)  # the subscription, by ferry
    assert sub_at_phb and {r["peer"] for r in sub_at_phb} == {FERRY}
    assert pubs[0]["ts_ns"] < sub_at_phb[0]["ts_ns"] < pubs[1]["ts_ns"]
    got = Counter((r["node"], r["sub_id"], r["event_id"]) for r in recs
                  if r["event"] == "deliver")
    assert got == Counter({(SHB, "readings", carried): 1}), (got, early, unmatched)
    event_at_shb = _rx(recs, SHB, gm.BUNDLE)
    assert event_at_shb and {r["peer"] for r in event_at_shb} == {FERRY}
    # brokers never hear each other; every exchange with the ferry is in the broker's cell
    for broker in (PHB, SHB):
        talk = [r for r in recs if r["event"] == "rx" and r["node"] == broker
                and r.get("msg_type") in (gm.BUNDLE, gm.ADV)]
        assert talk and {r["peer"] for r in talk} == {FERRY}
        assert {ferry_cell(r["ts_ns"]) for r in talk} == {cell_of[broker]}, broker
    return str(carried)


def test_giant_ferry_in_the_simulator(tmp_path: Path) -> None:
    from simhelpers import read_run

    scenario = load_scenario(SCENARIO)
    run_scenario(scenario, tmp_path / "run")
    check_ferry(read_run(tmp_path / "run")[1], scenario, make_plan(scenario), 0.0)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)")
@pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman")
def test_a_ferry_carries_an_event_between_brokers_on_the_virtual_mesh(vmesh_fleet: Any,
                                                                      tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIO)
    res = vmesh_fleet.scenario(scenario, tmp_path / "run")
    print(f"timings: {res.timings}")
    carried = check_ferry(run_records(res.out), scenario, res.plan, res.t0 * 1e9)
    report = res.agents.get(SHB)
    assert report is not None, "no workload report from broker 2"
    seen = [(scenario_sub_id(d["body"]["sub_id"]), d["body"]["event_id"])
            for d in report["deliveries"]]
    assert seen == [("readings", carried)]  # over MQTT, once
