"""TG on walking devices (issue 19): vmesh-tg-meet, six devices, on the virtual mesh.

Two groups of three form a group tree each; group B walks into A's range and the
trees merge (one group of six through a gateway and re-rooting, Liu 2011, §3.1);
B walks away and the trees split again (B's orphans repair into a group of their
own, §3.5). Events published while the topology stands still are delivered
exactly: every matching subscription of the publisher's connected devices once
(an OR subscription too: one delivery under its own id), nobody else. The
virtual-mesh test runs ``meshsim run``'s code on the first six devices of the
test session's fleet (``vmesh_fleet``, tests/vmesh/fleet.py); the same check runs on
the simulator's telemetry first (no root), so a failure on the containers is the
deployment's, not the scenario's. Assertions are on telemetry only.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from meshsim.des.run import run_scenario
from meshsim.scenario import load_scenario
from meshsim.scenario.plan import Plan, make_plan
from meshsim.vmesh.devices import run_records
from meshsub.core.disjunction import delivery_group
from meshsub.core.syntax import parse_event, parse_subscription

SCENARIO = (Path(__file__).resolve().parents[2] / "firmware-sim" / "meshsim" / "scenarios"
            / "vmesh-tg-meet.toml")
A, B = {1, 2, 3}, {4, 5, 6}
APART, MET, SPLIT = 10.0, 30.0, 48.0
"""Scenario times at which the groups stand apart, have merged, have split again."""

def component(plan: Plan, node: int, t: float, range_m: float) -> set[int]:
    """The devices connected to ``node`` at scenario time ``t`` (unit disk)."""
    pos = plan.trajectories.positions(t)
    seen, todo = {node}, [node]
    while todo:
        a = todo.pop()
        for b, (x, y) in pos.items():
            if b not in seen and math.dist(pos[a], (x, y)) <= range_m:
                seen.add(b)
                todo.append(b)
    return seen


def groups_at(recs: list[dict[str, Any]], t_ns: float) -> dict[int, set[str]]:
    """Each node's TG groups at ``t_ns``, from its ``member`` records."""
    held: dict[int, set[str]] = {}
    for r in sorted((r for r in recs if r["event"] == "member"), key=lambda r: r["ts_ns"]):
        if r["ts_ns"] > t_ns:
            break
        mine = held.setdefault(r["node"], set())
        (mine.add if r["reason"] == "join" else mine.discard)(r["group"])
    return held


def check_meet(recs: list[dict[str, Any]], plan: Plan, t0_ns: float, range_m: float) -> None:
    subs = {(r["node"], r["sub_id"]): parse_subscription(r["content"])
            for r in recs if r["event"] == "subscribe"}
    assert {delivery_group(s) for _, s in subs} == {"alpha", "either", "both", "other"}
    assert {(5, "either|0"), (5, "either|1")} <= set(subs)  # the OR's two members
    pubs = {r["event_id"]: (r["node"], (r["ts_ns"] - t0_ns) / 1e9, parse_event(r["content"]))
            for r in recs if r["event"] == "publish"}
    assert len(pubs) == 7
    expected = {(n, delivery_group(sid), eid)
                for eid, (publisher, t, event) in pubs.items()
                for (n, sid), sub in subs.items()
                if n in component(plan, publisher, t, range_m) and sub.matches(event)}
    assert len(expected) == 16
    got = Counter((r["node"], r["sub_id"], r["event_id"]) for r in recs
                  if r["event"] == "deliver")
    assert set(got) == expected, set(got) ^ expected
    assert max(got.values()) == 1  # the OR too: once, under its own id

    def at(t: float) -> dict[int, set[str]]:
        return groups_at(recs, t0_ns + t * 1e9)

    apart, met, split = at(APART), at(MET), at(SPLIT)
    assert all(len(apart[n]) == 1 for n in A | B)
    assert len({g for n in A for g in apart[n]}) == 1 == len({g for n in B for g in apart[n]})
    assert not {g for n in A for g in apart[n]} & {g for n in B for g in apart[n]}
    assert set.intersection(*(met[n] for n in A | B)), met  # merged: one group of six
    assert not {g for n in A for g in split[n]} & {g for n in B for g in split[n]}, split
    assert all(split[n] for n in A | B)  # split: nobody left without a group


def test_tg_meet_in_the_simulator(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIO)
    run_scenario(scenario, tmp_path / "run")
    recs = [json.loads(line) for path in sorted((tmp_path / "run").glob("node-*.jsonl"))
            for line in path.read_text().splitlines()]
    check_meet(recs, make_plan(scenario), 0.0, scenario.radio.range_m)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)")
@pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman")
def test_tg_trees_merge_and_split_on_walking_devices(vmesh_fleet: Any, tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIO)
    res = vmesh_fleet.scenario(scenario, tmp_path / "run")
    print(f"timings: {res.timings}")
    check_meet(run_records(res.out), res.plan, res.t0 * 1e9, scenario.radio.range_m)
