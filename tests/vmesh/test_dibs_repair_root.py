"""DIBS in the default run's virtual mesh: a reference crashes, the tree repairs.

vmesh-dibs-repair: four static devices in a line, references 1 and 4 (Pham and
Tran 2012, m = 2): node 2's query lives on reference 1 while node 2 is in 1's
cluster; at t = 13 s reference 1's daemon is killed, node 2 joins reference 4's
cluster (§3.3.2's repair, §3.1's nearest reference) and re-places its query
there, and the deliveries resume. Checked from telemetry (the clusters from the ``member``
records, the designated nodes from the ``dibs_checked`` counters, deliveries)
and from what the applications got over MQTT. The same check runs on the
simulator's telemetry first (no root), so a failure on the containers is the
deployment's, not the scenario's.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from fleet import SCENARIOS

from meshsim.des.run import run_scenario
from meshsim.scenario import load_scenario
from meshsim.vmesh.devices import run_records, scenario_sub_id
from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.protocols.dibs.cres import cluster_group

SCENARIO = SCENARIOS / "vmesh-dibs-repair.toml"
DEAD_REF, LIVE_REF = 1, 4
CRASH_S = 13.0
"""The scenario's fault: reference 1 crashes at this scenario time."""

Rec = dict[str, Any]


def clusters_at(recs: list[Rec], ts_ns: float) -> dict[int, set[str]]:
    """Each node's clusters (``member`` groups) at ``ts_ns``."""
    held: dict[int, set[str]] = {}
    for r in sorted((r for r in recs if r["event"] == "member"), key=lambda r: r["ts_ns"]):
        if r["ts_ns"] > ts_ns:
            break
        mine = held.setdefault(r["node"], set())
        (mine.add if r["reason"] == "join" else mine.discard)(r["group"])
    return held


def check_repair(recs: list[Rec], t0_ns: float, crash_ns: float) -> set[tuple[int, str, str]]:
    """Deliveries before and after the crash, each once; the tree before and after it.

    ``crash_ns``: when reference 1 was gone (the scenario's fault). Returns the
    expected (node, sub_id, event_id) deliveries.
    """
    pubs = {r["event_id"]: r for r in recs if r["event"] == "publish"}
    n_of = {eid: parse_event(r["content"]).attrs["n"] for eid, r in pubs.items()}
    eid_of = {n: eid for eid, n in n_of.items()}
    assert sorted(n_of.values()) == [1, 2, 3, 4, 5, 6], n_of
    subs = [(r["node"], r["sub_id"], parse_subscription(r["content"]))
            for r in recs if r["event"] == "subscribe"]
    expected = {(node, sid, eid) for node, sid, sub in subs for eid, r in pubs.items()
                if sub.matches(parse_event(r["content"]))}
    assert expected == {(2, "mid", eid_of[1]), (3, "low", eid_of[2]),
                        (2, "mid", eid_of[4]), (3, "low", eid_of[5])}, expected
    got = [(r["node"], r["sub_id"], r["event_id"]) for r in recs if r["event"] == "deliver"]
    assert sorted(got) == sorted(expected), sorted(got)  # each exactly once, nobody else

    before, after = pubs[eid_of[1]]["ts_ns"], pubs[eid_of[4]]["ts_ns"]
    assert t0_ns + CRASH_S * 1e9 <= crash_ns and before < crash_ns < after
    c1, c4 = cluster_group(DEAD_REF), cluster_group(LIVE_REF)
    tree = clusters_at(recs, before)
    assert (tree.get(1), tree.get(2), tree.get(3), tree.get(4)) == ({c1}, {c1}, {c4}, {c4}), tree
    tree = clusters_at(recs, after)
    assert (tree.get(2), tree.get(3), tree.get(4)) == ({c4}, {c4}, {c4}), tree
    moved = [r for r in recs if r["event"] == "member" and r["node"] == 2
             and r["group"] == c1 and r["reason"] == "leave"]
    assert moved and max(r["ts_ns"] for r in moved) >= crash_ns, moved  # repaired after it
    assert not [r for r in recs if r["node"] == DEAD_REF and r["ts_ns"] > crash_ns]

    # One copy into each cluster (§3.2), checked only at the designated node: both
    # clusters before the crash, reference 4's alone after the repair.
    checked: dict[str, list[Rec]] = {}
    for r in recs:
        if r["event"] == "counter" and r.get("reason") == "dibs_checked":
            checked.setdefault(r["event_id"], []).append(r)
    for n in (1, 2, 3):
        assert sorted(r["peer"] for r in checked[eid_of[n]]) == [DEAD_REF, LIVE_REF], n
    for n in (4, 5, 6):
        assert [r["peer"] for r in checked[eid_of[n]]] == [LIVE_REF], n
    designated = {n: {r["node"] for r in checked[eid_of[n]] if r["entries"]} for n in (1, 4)}
    assert DEAD_REF in designated[1] and designated[4] == {LIVE_REF}, designated
    return expected


def test_dibs_repair_in_the_simulator(tmp_path: Path) -> None:
    from simhelpers import read_run

    run_scenario(load_scenario(SCENARIO), tmp_path / "run")
    check_repair(read_run(tmp_path / "run")[1], 0.0, CRASH_S * 1e9)


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)")
@pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman")
def test_a_reference_crashes_and_deliveries_resume_on_the_virtual_mesh(
        vmesh_fleet: Any, tmp_path: Path) -> None:
    res = vmesh_fleet.scenario(load_scenario(SCENARIO), tmp_path / "run")
    print(f"timings: {res.timings}")
    faults = res.manifest["stats"]["medium"]["faults"]
    assert [(f["action"], f["nodes"], f["error"]) for f in faults] == \
        [("crash", [DEAD_REF], None)], faults
    killed_s = faults[0]["at_s"] + faults[0]["took_s"]  # systemctl kill returned by then
    expected = check_repair(run_records(res.out), res.t0 * 1e9, (res.t0 + killed_s) * 1e9)
    seen = set()
    for node, report in res.agents.items():
        if node == DEAD_REF:
            continue  # its device's agent outlived the daemon; it expected nothing
        assert report is not None, f"no workload report from node {node}"
        seen |= {(node, scenario_sub_id(d["body"]["sub_id"]), d["body"]["event_id"])
                 for d in report["deliveries"]}
    assert seen == expected  # what the applications got over MQTT
