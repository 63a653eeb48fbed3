"""DF in the default run's virtual mesh: four devices in a line (vmesh-df-line).

DF is the per-subscriber geographic baseline of HESPER's thesis (Zheng 2008, §2 and
§4.4): each subscription travels on its own, by greedy geographic forwarding, to the
region it names (here the publisher's cell, at node 1), and every node on the way
keeps a gradient; events go back down every matching gradient, one copy per
distinct next node (docs/protocols/df.md). Node 3 subscribes to every reading, node
4 twice: three SUBSCRIBEs reach node 1 (nothing merges them, unlike HESPER), each
reading goes 1 -> 2 -> 3 once, and 3 passes 4 only the readings 4's filters take,
once each although two of them match both. Every matching subscription gets each
reading exactly once, at its hop distance; nothing is dropped. The same check runs
on the simulator's telemetry first (no root), so a failure on the containers is the
deployment's, not the scenario's. Assertions are on telemetry and the applications'
MQTT deliveries only.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from appdeliveries import app_deliveries
from fleet import SCENARIOS
from test_vmesh_bsub_scenarios import delivered_once, expected_deliveries

from meshsim.des.run import run_scenario
from meshsim.scenario import load_scenario
from meshsim.vmesh.devices import run_records
from meshsub.protocols.df import EVENT, SUBSCRIBE

SCENARIO = SCENARIOS / "vmesh-df-line.toml"
LINE = (1, 2, 3, 4)
"""Node ids along the line; the publisher first, one radio hop apart."""

Rec = dict[str, Any]


def check_df(recs: list[Rec]) -> set[tuple[int, str, str]]:
    """Per-subscriber paths, gradients down to the subscribers; returns the deliveries."""
    pubs = {r["event_id"] for r in recs if r["event"] == "publish" and r["node"] == 1}
    assert len(pubs) == 6
    expected = expected_deliveries(recs)
    assert len(expected) == 6 + 3 + 2, sorted(expected)
    assert delivered_once(recs) == expected
    for r in recs:
        if r["event"] == "deliver":
            assert r["hop"] == LINE.index(r["node"]), r  # straight down the line
    # Three subscriptions, three SUBSCRIBEs at the publisher: one path each.
    at_home = {r["event_id"] for r in recs if r["event"] == "rx" and r["node"] == 1
               and r.get("msg_type") == SUBSCRIBE}
    assert len(at_home) == 3, at_home
    # Down the gradients: one copy per event and next node, only where a filter matches.
    wanted_by = {node: {eid for n, _, eid in expected if n == node} for node in LINE}
    want = {(a, b, eid) for a, b in pairwise(LINE)
            for eid in set().union(*(wanted_by[n] for n in LINE[LINE.index(b):]))}
    sent = Counter((r["node"], r["peer"], r["event_id"]) for r in recs
                   if r["event"] == "tx" and r.get("msg_type") == EVENT)
    assert set(sent) == want and max(sent.values()) == 1, sent
    assert not [r for r in recs if r["event"] == "drop"], "a subscription or reading dropped"
    return expected


def test_df_line_in_the_simulator(tmp_path: Path) -> None:
    from simhelpers import read_run

    run_scenario(load_scenario(SCENARIO), tmp_path / "run")
    check_df(read_run(tmp_path / "run")[1])


@pytest.mark.root
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)")
@pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman")
def test_readings_go_down_each_subscribers_gradient_on_the_virtual_mesh(
        vmesh_fleet: Any, tmp_path: Path) -> None:
    res = vmesh_fleet.scenario(load_scenario(SCENARIO), tmp_path / "run")
    print(f"timings: {res.timings}")
    expected = check_df(run_records(res.out))
    assert app_deliveries(res) == expected  # what the applications got over MQTT
