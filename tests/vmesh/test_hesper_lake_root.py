"""HESPER-II round a lake on the virtual mesh (root): vmesh-hesper-lake, nine devices.

Issue 21's void on real daemons: every cell of the straight path from the subscribers
to the publisher's cell lies in the lake, so the subscriptions are taken over by cells
along the shore and the events come back the same way. Run with ``meshsim run``'s code
on the first nine devices of the test session's fleet (``vmesh_fleet``,
tests/vmesh/fleet.py), which removes everything at the session's end. Assertions are
on telemetry only.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from meshsim.scenario import load_scenario
from meshsim.vmesh.devices import run_records
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
LOST = {"no_route", "empty_cell", "empty_phb_cell", "unreachable", "ttl_expired",
        "pending_expired", "reply_unknown_sub", "confirm_unknown"}
"""Drop reasons that would mean a subscription or an event was lost round the lake."""


def records(out: Path) -> list[dict[str, Any]]:
    return run_records(out)


def test_subscriptions_and_events_go_round_the_lake(vmesh_fleet: Any, tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIO)
    res = vmesh_fleet.scenario(scenario, tmp_path / "run")
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
