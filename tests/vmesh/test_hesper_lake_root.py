"""HESPER-II round a lake on the virtual mesh (root): vmesh-hesper-lake, nine devices.

Issue 21's void on real daemons: every cell of the straight path from the subscribers
to the publisher's cell lies in the lake, so the subscriptions are taken over by cells
along the shore and the events come back the same way. Run with ``meshsim run``'s code
on its own run name and state directory; the finaliser removes the devices, the medium
and the run's state even when the test fails. Assertions are on telemetry only.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from privatehome import private_vmesh_home

from meshsim.scenario import load_scenario
from meshsim.scenario.plan import make_plan as make_scenario_plan
from meshsub.core.syntax import parse_event, parse_subscription

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)"),
    pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman"),
]

SCENARIO = (Path(__file__).resolve().parents[2] / "firmware-sim" / "meshsim" / "scenarios"
            / "vmesh-hesper-lake.toml")
RUN = "t21lk"
LOST = {"no_route", "empty_cell", "empty_phb_cell", "unreachable", "ttl_expired",
        "pending_expired", "reply_unknown_sub", "confirm_unknown"}
"""Drop reasons that would mean a subscription or an event was lost round the lake."""


@pytest.fixture(scope="module")
def vmesh_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    devices = len(make_scenario_plan(load_scenario(SCENARIO)).positions)
    with private_vmesh_home(tmp_path_factory, RUN, devices) as home:
        yield home


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted((out / "nodes").rglob("*.jsonl"))
            for line in path.read_text().splitlines()]


def test_subscriptions_and_events_go_round_the_lake(vmesh_home: Path, tmp_path: Path) -> None:
    from meshsim.vmesh.scenario_run import RunOptions, run_on_vmesh

    scenario = load_scenario(SCENARIO)
    res = run_on_vmesh(scenario, RunOptions(out=tmp_path / "run", vmesh_run=RUN,
                                            log=lambda m: print(f"run: {m}", flush=True)))
    print(f"timings: {res.timings}")
    recs = records(res.out)
    subs = {(r["node"], r["sub_id"]): parse_subscription(r["content"])
            for r in recs if r["event"] == "subscribe"}
    pubs = {r["event_id"]: parse_event(r["content"]) for r in recs if r["event"] == "publish"}
    assert set(subs) == {(9, "across"), (6, "corner")} and len(pubs) == 10
    expected = {(node, sid, eid) for (node, sid), sub in subs.items()
                for eid, event in pubs.items() if sub.matches(event)}
    assert len(expected) == 15
    got = Counter((r["node"], r["sub_id"], r["event_id"]) for r in recs
                  if r["event"] == "deliver")
    assert set(got) == expected and max(got.values()) == 1
    # Round the lake: eight radio hops along the shore from node 1 to node 9 at least.
    assert min(r["hop"] for r in recs if r["event"] == "deliver" and r["node"] == 9) >= 8
    drops = Counter(r["reason"] for r in recs if r["event"] == "drop")
    assert not LOST & set(drops), drops
