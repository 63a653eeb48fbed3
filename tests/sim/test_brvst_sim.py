"""BRVST in the simulator (Li and Wang 2014): managers elected and exact deliveries.

One run of ``brvst-lattice.toml`` (81 static nodes, 16 grids of 125 m in 4 zones, 80 m
radio, the paper's generated range workload), checked from its telemetry with the
exact matcher, as the evaluation does. The paper-scale experiments are
bench/brvst_experiments.py's.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from simhelpers import SCENARIOS, read_run

from meshsim.des.run import run_scenario
from meshsim.scenario import load_scenario
from meshsub.core.content import Event, Subscription
from meshsub.core.syntax import parse_event, parse_subscription

SCENARIO = SCENARIOS / "brvst-lattice.toml"
GRID = 125.0
T_CACHE = 600.0  # BrvstParams.T_cache: a later subscription gets earlier events this long


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    run_dir: Path = tmp_path_factory.mktemp("brvst") / "run"
    run_scenario(load_scenario(SCENARIO), run_dir)
    return read_run(run_dir)


def _s(ns: int) -> float:
    return ns / 1e9


@pytest.mark.slow
def test_one_manager_per_grid_and_zone(run: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    """Every 125 m grid of the lattice elects one grid manager, every 2 x 2 zone one zone
    manager, and on a static field nobody loses or hands over a role."""
    _manifest, records = run
    pos = {r["node"]: (r["x"], r["y"]) for r in records if r["event"] == "position"}
    roles = Counter((r["node"], r["role"]) for r in records if r["event"] == "broker")
    gms = [n for (n, role) in roles if role == "grid_manager"]
    zms = [n for (n, role) in roles if role == "zone_manager"]
    assert not [k for k in roles if k[1] not in ("grid_manager", "zone_manager")]
    assert max(roles.values()) == 1
    cells = {(int(pos[n][0] // GRID), int(pos[n][1] // GRID)) for n in gms}
    zones = {(int(pos[n][0] // (2 * GRID)), int(pos[n][1] // (2 * GRID))) for n in zms}
    assert len(gms) == len(cells) == 16
    assert len(zms) == len(zones) == 4


@pytest.mark.slow
def test_every_active_subscription_gets_each_matching_event_once_and_nothing_else(
        run: tuple[dict[str, Any], list[dict[str, Any]]]) -> None:
    """After the elections (warm-up), every subscription active when an event is published
    and matching it exactly gets it, once; any other delivery is a later subscription
    served from the zone cache (§IV-D), and it matches too."""
    manifest, records = run
    warmup = float(manifest["warmup_s"])
    subs: dict[tuple[int, str], tuple[float, Subscription]] = {}
    ends: dict[tuple[int, str], float] = {}
    pubs: dict[str, tuple[float, Event]] = {}
    got: Counter[tuple[str, int, str]] = Counter()
    for r in records:
        if r["event"] == "subscribe":
            subs[(r["node"], r["sub_id"])] = (_s(r["ts_ns"]), parse_subscription(r["content"]))
        elif r["event"] == "unsubscribe":
            ends[(r["node"], r["sub_id"])] = _s(r["ts_ns"])
        elif r["event"] == "publish":
            pubs[r["event_id"]] = (_s(r["ts_ns"]), parse_event(r["content"]))
        elif r["event"] == "deliver":
            got[(r["event_id"], r["node"], r["sub_id"])] += 1
    assert max(got.values()) == 1
    expected = {(e, *k) for e, (t, ev) in pubs.items() if t >= warmup
                for k, (ts, s) in subs.items()
                if ts < t < ends.get(k, float("inf")) and s.matches(ev)}
    assert len(expected) > 30
    assert expected <= set(got)
    for e, n, sid in set(got) - expected:
        t, ev = pubs[e]
        ts, s = subs[(n, sid)]
        assert s.matches(ev)
        assert t < warmup or t <= ts <= t + T_CACHE  # before the warm-up, or from the cache
