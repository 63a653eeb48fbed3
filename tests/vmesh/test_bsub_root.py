"""B-SUB on the virtual mesh (root): groups that meet through a broker, and a contact cut.

``vmesh-bsub-groups`` (a courier, elected broker by the users it met, carries events
between two groups that never meet) and ``vmesh-bsub-cut`` (a contact cut in the middle
of a session that moves 48 broker copies, then met again) run with ``meshsim run``'s
code on seven devices of the test session's fleet (``vmesh_fleet``), one after the other
(each run wipes what the one before left, and a run without ``radio.bitrate_bps`` clears
the shaping of the one before). The assertions are the simulator test's
(tests/sim/test_vmesh_bsub_scenarios.py) on the daemons' telemetry: contacts are
delimited by the daemons' own ``neighbor_up``/``neighbor_down`` records, never by
elapsed time.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from fleet import SCENARIOS
from test_vmesh_bsub_scenarios import check_cut, check_groups, data_rx, expected_deliveries

from meshsim.scenario import load_scenario
from meshsim.vmesh.devices import run_records, scenario_sub_id

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.timeout(2400),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)"),
    pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman"),
]

DEVICES = 7


def run(fleet: Any, name: str, out: Path) -> Any:
    scenario = load_scenario(SCENARIOS / f"{name}.toml")
    assert len(scenario.source["nodes"]["positions"]) == DEVICES
    return fleet.scenario(scenario, out)


def records(out: Path) -> list[dict[str, Any]]:
    return run_records(out)


def seen_by_applications(res: Any) -> set[tuple[int, str, str]]:
    """(node, sub_id, event_id) the workload agents received over MQTT."""
    seen = set()
    for node, report in res.agents.items():
        assert report is not None, f"no workload report from node {node}"
        for d in report["deliveries"]:
            seen.add((node, scenario_sub_id(d["body"]["sub_id"]), d["body"]["event_id"]))
    return seen


def contact_story(recs: list[dict[str, Any]], manifest: dict[str, Any]) -> dict[str, Any]:
    """What a failed run's daemons saw, relative to t0 (seconds): each node's neighbour
    ups and downs, the B-SUB DATA frames it accepted from each peer, its deliveries and
    drops; it shows whether a missing delivery lacked the contact, the copy or the
    subscription."""
    t0 = int(manifest.get("t0_ns", 0)) / 1e9
    story: dict[str, Any] = {}
    for node in sorted({int(r["node"]) for r in recs}):
        mine = [r for r in recs if r["node"] == node]
        story[str(node)] = {
            "neighbors": [(round(r["ts_ns"] / 1e9 - t0, 1), r["event"], r.get("peer"))
                          for r in mine if r["event"] in ("neighbor_up", "neighbor_down")],
            "data_rx": dict(Counter(r.get("peer") for r in data_rx(recs, node))),
            "subscribe": [(r.get("sub_id"), r.get("content")) for r in mine
                          if r["event"] == "subscribe"],
            "deliver": len([r for r in mine if r["event"] == "deliver"]),
            "drops": dict(Counter(r.get("reason") for r in mine if r["event"] == "drop")),
        }
    return story


# In the long tier since the parallel suite: under its load one delivery of the run was
# missing (4 'fire', 2026-11-26); why is not understood (see docs/vmesh.md)
@pytest.mark.long
def test_groups_meet_through_an_elected_broker(vmesh_fleet: Any, tmp_path: Path) -> None:
    res = run(vmesh_fleet, "vmesh-bsub-groups", tmp_path / "run")
    recs = records(res.out)
    figures = check_groups(recs)
    print(figures)
    assert seen_by_applications(res) == expected_deliveries(recs)


@pytest.mark.long  # a 3-minute contact trace: ./test.sh -m long
def test_a_contact_cut_mid_session_loses_and_duplicates_nothing(
        vmesh_fleet: Any, tmp_path: Path) -> None:
    res = run(vmesh_fleet, "vmesh-bsub-cut", tmp_path / "run")
    recs = records(res.out)
    try:
        figures = check_cut(recs)
    except AssertionError:
        print(json.dumps(contact_story(recs, res.manifest), indent=1))
        raise
    print(figures)
    assert seen_by_applications(res) == expected_deliveries(recs)
