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

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from fleet import SCENARIOS
from test_vmesh_bsub_scenarios import check_cut, check_groups, expected_deliveries

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


def test_groups_meet_through_an_elected_broker(vmesh_fleet: Any, tmp_path: Path) -> None:
    res = run(vmesh_fleet, "vmesh-bsub-groups", tmp_path / "run")
    recs = records(res.out)
    figures = check_groups(recs)
    print(figures)
    assert seen_by_applications(res) == expected_deliveries(recs)


def test_a_contact_cut_mid_session_loses_and_duplicates_nothing(
        vmesh_fleet: Any, tmp_path: Path) -> None:
    res = run(vmesh_fleet, "vmesh-bsub-cut", tmp_path / "run")
    recs = records(res.out)
    figures = check_cut(recs)
    print(figures)
    assert seen_by_applications(res) == expected_deliveries(recs)
