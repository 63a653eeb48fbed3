"""HESPER-II on the virtual mesh (root): vmesh-hesper-grid, 20 devices, no loss.

The shipped scenario runs with ``meshsim run``'s code on the test session's fleet
(``vmesh_fleet``, all 20 of its devices). The assertions are on telemetry only:
every subscription gets every event that matches it, once, and nothing else.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from meshsim.scenario import load_scenario
from meshsim.scenario.plan import make_plan as make_scenario_plan
from meshsim.vmesh.devices import run_records
from meshsub.core.syntax import parse_event, parse_subscription

pytestmark = [
    pytest.mark.long,  # 20 devices: ./test.sh -m long (the lake test runs by default)
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.timeout(2700),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)"),
    pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman"),
]

SCENARIO = (Path(__file__).resolve().parents[2] / "firmware-sim" / "meshsim" / "scenarios"
            / "vmesh-hesper-grid.toml")

def records(out: Path) -> list[dict[str, Any]]:
    return run_records(out)


def test_every_subscription_gets_every_matching_event_exactly_once(
        vmesh_fleet: Any, tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIO)
    res = vmesh_fleet.scenario(scenario, tmp_path / "run")
    print(f"timings: {res.timings}")
    recs = records(res.out)
    subs = {(r["node"], r["sub_id"]): parse_subscription(r["content"])
            for r in recs if r["event"] == "subscribe"}
    pubs = {r["event_id"]: (r["node"], parse_event(r["content"]))
            for r in recs if r["event"] == "publish"}
    plan = make_scenario_plan(scenario)
    assert len(subs) == len(plan.subscriptions) == 13
    assert len(pubs) == len(plan.publications) == 60
    expected = {(node, sid, eid) for (node, sid), sub in subs.items()
                for eid, (origin, event) in pubs.items() if origin != node and sub.matches(event)}
    got = Counter((r["node"], r["sub_id"], r["event_id"]) for r in recs
                  if r["event"] == "deliver")
    assert len(expected) > 150  # the workload is not trivially small
    assert set(got) - expected == set()  # nothing that does not match, nothing unknown
    assert expected - set(got) == set()  # every matching event arrived ...
    assert max(got.values()) == 1  # ... exactly once
    drops = Counter(r["reason"] for r in recs if r["event"] == "drop")
    assert not {"no_route", "empty_cell", "unreachable", "ttl_expired"} & set(drops), drops
