"""The virtual mesh's wall-clock timeline against a recording medium (no root, no containers)."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from meshsim.scenario import load_scenario, make_plan
from meshsim.scenario.load import from_dict
from meshsim.vmesh.timeline import Timeline

SCENARIOS = Path(__file__).resolve().parents[2] / "firmware-sim" / "meshsim" / "scenarios"


class Recorder:
    """Stands in for ``meshsim.medium.Medium``: records what it was told, instantly."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, Any]] = []

    def update(self, positions: Mapping[int, tuple[float, float]]) -> float:
        self.calls.append(("update", time.time(), dict(positions)))
        return 0.001

    def set_links(self, links: Mapping[tuple[int, int], float]) -> float:
        self.calls.append(("links", time.time(), dict(links)))
        return 0.001


def _timeline(scenario: Any) -> Timeline:
    plan = make_plan(scenario)
    return Timeline.of(scenario, plan.trajectories, tuple(sorted(plan.positions)))


def test_static_scenario_sets_the_start_links_once() -> None:
    tl = _timeline(load_scenario(SCENARIOS / "vmesh-line6.toml"))
    medium = Recorder()
    expected = tl.apply_start(medium)
    assert expected == {1: {2}, 2: {1, 3}, 3: {2, 4}, 4: {3, 5}, 5: {4, 6}, 6: {5}}
    assert tl.events(30.0) == []  # nothing moves: no further updates
    assert [c[0] for c in medium.calls] == ["update"]


def test_contacts_replay_as_directed_links_in_order() -> None:
    scenario = load_scenario(SCENARIOS / "epidemic-partition.toml",
                             ["radio.links=[{ a = 5, b = 6, loss = 0.25 }]"])
    tl = _timeline(scenario)
    medium = Recorder()
    expected = tl.apply_start(medium)
    assert expected[5] == {4} and expected[6] == {7}
    times = [t for t, c in tl.events(scenario.end_s)]
    assert times == [120.0, 150.0]
    tl._apply_contact(tl.events(scenario.end_s)[0][1])  # type: ignore[arg-type]
    links = tl._contact_links()
    assert links[5][6] == links[6][5] == 0.25  # the pair's own loss override


def test_play_applies_each_tick_at_its_time_and_merges_overdue_ones() -> None:
    doc = {
        "scenario": {"name": "t", "duration_s": 0.5, "drain_s": 0.0},
        "area": {"width_m": 100.0, "height_m": 100.0},
        "nodes": {"placement": "explicit", "positions": [{"x": 0.0, "y": 0.0},
                                                         {"x": 10.0, "y": 0.0}]},
        "mobility": {"model": "scripted", "tick_s": 0.1,
                     "waypoints": [[0.5, 2, 60.0, 0.0]]},
        "protocol": {"name": "flooding"},
    }
    tl = _timeline(from_dict(doc))
    assert [t for t, _ in tl.events(0.5)] == [0.1, 0.2, 0.30000000000000004, 0.4]
    medium = Recorder()
    t0 = time.time() + 0.05
    stats = tl.play(medium, t0, 0.5)
    assert stats["updates"] + stats["merged_ticks"] == 4
    for (_, at, _), (due, _) in zip(medium.calls, tl.events(0.5), strict=False):
        assert at >= t0 + due  # never before its time
    late = Recorder()
    stats = _timeline(from_dict(doc)).play(late, time.time() - 0.75, 0.5)  # all overdue
    assert (stats["updates"], stats["merged_ticks"]) == (1, 3)
    assert late.calls[0][2][2] == (50.0, 0.0)  # the newest due tick (t = 0.4), not a stale one
