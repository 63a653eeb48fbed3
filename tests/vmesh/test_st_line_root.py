"""ST, TG's single-tree baseline, in the default run's virtual mesh (vmesh-st-line).

Four devices in a line (each hears only its neighbours) build one subscription tree,
the line itself (Liu 2011, §4.1: "a subscription tree"); subscriptions travel along
it with covering (§4.2), and each publication goes only along the tree links whose
table holds a matching subscription, with no climb to a root (docs/protocols/st.md,
rule 4). The check: one group of all four before the first publication; every
matching subscription gets its event exactly once and nobody else; each event's
PUBLISH frames crossed exactly the links towards a matching table (an event nobody
subscribed to crossed none, where flooding would have sent every event over every
link). The same check runs on the simulator's telemetry first (no root), so a
failure on the containers is the deployment's, not the scenario's. Assertions are on
telemetry and the applications' MQTT deliveries only; a 10-second scenario on four
devices of the session's fleet (``vmesh_fleet``).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from appdeliveries import app_deliveries
from fleet import SCENARIOS

from meshsim.des.run import run_scenario
from meshsim.scenario import load_scenario
from meshsim.vmesh.devices import run_records
from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.protocols.st.messages import PUBLISH

SCENARIO = SCENARIOS / "vmesh-st-line.toml"
NODES = {1, 2, 3, 4}

Rec = dict[str, Any]


def groups_at(recs: list[Rec], ts_ns: float) -> dict[int, set[str]]:
    """Each node's groups at ``ts_ns``, from its ``member`` records."""
    held: dict[int, set[str]] = {n: set() for n in NODES}
    for r in sorted((r for r in recs if r["event"] == "member"), key=lambda r: r["ts_ns"]):
        if r["ts_ns"] > ts_ns:
            break
        (held[r["node"]].add if r["reason"] == "join" else held[r["node"]].discard)(r["group"])
    return held


def check_line(recs: list[Rec]) -> set[tuple[int, str, str]]:
    """The tree, the exact deliveries and the links each event crossed; returns the
    deliveries."""
    pubs = sorted((r for r in recs if r["event"] == "publish"), key=lambda r: r["ts_ns"])
    assert [(r["node"], r["content"]) for r in pubs] == [
        (1, "st a=true b=true"), (1, "st c=true"), (4, "st z=true"), (2, "st a=true")]
    ab, c, z, a = (r["event_id"] for r in pubs)
    # one tree of all four before the first publication
    held = groups_at(recs, pubs[0]["ts_ns"])
    assert all(len(g) == 1 for g in held.values()) and len(set.union(*held.values())) == 1, held
    # every matching subscription of another node once, nobody else
    subs = [(r["node"], r["sub_id"], parse_subscription(r["content"]))
            for r in recs if r["event"] == "subscribe"]
    expected = {(n, sid, p["event_id"]) for n, sid, sub in subs for p in pubs
                if sub.matches(parse_event(p["content"]))}
    assert expected == {(3, "narrow", ab), (4, "wide", ab), (2, "near", c), (4, "wide", a)}
    got = [(r["node"], r["sub_id"], r["event_id"]) for r in recs if r["event"] == "deliver"]
    assert sorted(got) == sorted(expected), sorted(got)
    # each event crossed exactly the tree links towards a matching table
    crossed = {eid: {(r["node"], r["peer"]) for r in recs if r["event"] == "tx"
                     and r.get("msg_type") == PUBLISH and r["event_id"] == eid}
               for eid in (ab, c, z, a)}
    assert crossed == {ab: {(1, 2), (2, 3), (3, 4)}, c: {(1, 2)}, z: set(),
                       a: {(2, 3), (3, 4)}}, crossed
    return expected


def test_st_line_in_the_simulator(tmp_path: Path) -> None:
    from simhelpers import read_run

    run_scenario(load_scenario(SCENARIO), tmp_path / "run")
    check_line(read_run(tmp_path / "run")[1])


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)")
@pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman")
def test_st_routes_along_one_tree_on_the_virtual_mesh(vmesh_fleet: Any, tmp_path: Path) -> None:
    res = vmesh_fleet.scenario(load_scenario(SCENARIO), tmp_path / "run")
    print(f"timings: {res.timings}")
    expected = check_line(run_records(res.out))
    assert app_deliveries(res) == expected  # what the applications got over MQTT
