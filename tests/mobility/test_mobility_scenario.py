"""The [mobility] section: keys per model, strict validation, seeded sub-streams."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from simhelpers import base_doc

from meshsim.scenario import ScenarioError, from_dict, make_plan
from meshsim.scenario.mobility_section import MAX_TRACK_POINTS, MODEL_KEYS
from meshsim.scenario.model import GaussMarkov, GroupMobility, RandomWalk, RandomWaypoint

MODELS: dict[str, dict[str, Any]] = {
    "random_waypoint": {"speed_min": 1.0, "speed_max": 5.0, "pause_max": 3.0},
    "random_walk": {"speed_min": 1.0, "speed_max": 5.0, "walk_time": 2.0},
    "gauss_markov": {"alpha": 0.7, "mean_speed": 3.0, "sigma_speed": 1.0,
                     "sigma_direction": 30},
    "group": {"group_size": 2, "radius": 10.0, "speed_min": 1.0, "speed_max": 3.0},
}


def _doc(model: str, **extra: Any) -> dict[str, Any]:
    doc = base_doc()
    doc["mobility"] = {"model": model, **MODELS.get(model, {}), **extra}
    return doc


def test_defaults_and_resolved_parameters() -> None:
    m = from_dict(_doc("random_waypoint")).mobility
    assert m.params == RandomWaypoint(1.0, 5.0, 0.0, 3.0, True) and m.nodes == (1, 2, 3, 4, 5)
    m = from_dict(_doc("random_walk")).mobility
    assert m.params == RandomWalk(1.0, 5.0, 2.0, None)
    doc = _doc("random_walk")
    del doc["mobility"]["walk_time"]
    assert from_dict(doc).mobility.params == RandomWalk(1.0, 5.0, 1.0, None)  # ns-3's 1 s
    m = from_dict(_doc("gauss_markov")).mobility
    assert m.params == GaussMarkov(0.7, 3.0, 1.0, 30.0, None, 1.0, 10.0)  # 10 % of 100 m
    m = from_dict(_doc("group")).mobility
    assert m.params == GroupMobility(((1, 2), (3, 4), (5,)), 10.0, 1.0, 3.0, 0.0, 0.0, 1.0)
    doc = _doc("group", groups=[[5, 1], [3]])
    del doc["mobility"]["group_size"]
    m = from_dict(doc).mobility
    assert m.params is not None and m.params.groups == ((1, 5), (3,))  # type: ignore[union-attr]
    assert m.nodes == (1, 3, 5)
    assert from_dict(_doc("random_walk", nodes=[4, 2])).mobility.nodes == (2, 4)


BAD: list[tuple[Callable[[dict[str, Any]], None], str]] = [
    (lambda m: m.update(model="brownian"), "mobility.model: must be one of static, scripted"),
    (lambda m: m.update(alpha=0.5), 'mobility.alpha: only for model = "gauss_markov"'),
    (lambda m: m.update(waypoints=[]), 'mobility.waypoints: only for model = "scripted"'),
    (lambda m: m.update(file="x"), 'mobility.file: only for model = "scripted" or "setdest"'),
    (lambda m: m.update(speed="fast"), "mobility.speed: unknown key (known here:"),
    (lambda m: m.update(speed_min="1"), "mobility.speed_min: expected a number, got string"),
    (lambda m: m.update(speed_min=0.0),
     "mobility.speed_min: must be > 0: with speeds down to 0 the mean trip time is infinite"),
    (lambda m: m.update(speed_max=0.5), "mobility.speed_max: must be >= speed_min (1)"),
    (lambda m: m.update(pause_min=5.0), "mobility.pause_max: must be >= pause_min (5)"),
    (lambda m: m.update(pause_min=-1.0), "mobility.pause_min: must be >= 0"),
    (lambda m: m.update(steady_state="yes"), "mobility.steady_state: expected true or false"),
    (lambda m: m.update(nodes=[1, 9]), "mobility.nodes[1]: unknown node 9"),
    (lambda m: m.update(nodes=[1, 1]), "mobility.nodes[1]: node 1 is listed twice"),
    (lambda m: m.update(nodes="some"), 'mobility.nodes: expected "all" or a non-empty array'),
    (lambda m: m.update(tick_s=0), "mobility.tick_s: must be > 0"),
]


@pytest.mark.parametrize(("change", "message"), BAD)
def test_bad_random_waypoint_keys(change: Callable[[dict[str, Any]], None],
                                  message: str) -> None:
    doc = _doc("random_waypoint")
    change(doc["mobility"])
    with pytest.raises(ScenarioError) as err:
        from_dict(doc)
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


@pytest.mark.parametrize(("model", "extra", "message"), [
    ("random_walk", {"walk_distance": 3.0}, "mobility.walk_distance: give walk_time or"),
    ("random_walk", {"walk_time": None, "walk_distance": 3.0, "speed_min": 0.0},
     "mobility.speed_min: must be > 0: a walk of fixed distance at speed 0 never ends"),
    ("random_walk", {"walk_time": 0}, "mobility.walk_time: must be > 0"),
    ("random_walk", {"walk_time": 1e-6},
     f"mobility.walk_time: about 60,000,000 track points for this run "
     f"(limit {MAX_TRACK_POINTS:,})"),
    ("gauss_markov", {"alpha": 1.5}, "mobility.alpha: must be <= 1"),
    ("gauss_markov", {"mean_speed": -1}, "mobility.mean_speed: must be >= 0"),
    ("gauss_markov", {"edge_margin": 50.0}, "mobility.edge_margin: must be less than half"),
    ("gauss_markov", {"mean_direction": "north"}, "mobility.mean_direction: expected a number"),
    ("gauss_markov", {"sigma_speed": None}, "mobility.sigma_speed: required key is missing"),
    ("group", {"radius": 50.0}, "mobility.radius: 2 * radius must be less than"),
    ("group", {"speed_min": 0}, "mobility.speed_min: must be > 0: reference points move by"),
    ("group", {"group_size": 0}, "mobility.group_size: must be >= 1"),
    ("group", {"groups": [[1, 2]]}, "mobility.group_size: not with groups"),
    ("group", {"group_size": None, "groups": [[1, 2], [2, 3]]},
     "mobility.groups[1]: node 2 is in two groups"),
    ("group", {"group_size": None, "groups": []}, "mobility.groups: at least one group"),
    ("group", {"group_size": None}, "mobility.groups: give groups (arrays of node ids)"),
    ("group", {"member_step": 1e-6}, "mobility.member_step: about 60,000,000"),
    ("group", {"walk_time": 1.0}, 'mobility.walk_time: only for model = "random_walk"'),
])
def test_bad_keys_of_other_models(model: str, extra: dict[str, Any], message: str) -> None:
    doc = _doc(model, **extra)
    for key in [k for k, v in doc["mobility"].items() if v is None]:
        del doc["mobility"][key]
    with pytest.raises(ScenarioError) as err:
        from_dict(doc)
    assert str(err.value).startswith(message), str(err.value)


def test_scripted_waypoints_must_lie_in_the_area() -> None:
    doc = _doc("scripted", waypoints=[[5.0, 1, 301.0, 50.0]])
    with pytest.raises(ScenarioError, match=r"mobility.waypoints: node 1 at t=5: \(301, 50\) "
                                            "is outside the area"):
        from_dict(doc)


def test_drawn_start_positions_conflict_with_placement_promises() -> None:
    doc = _doc("random_waypoint")
    doc["nodes"] = {"count": 5, "placement": "random", "connected": True}
    doc["radio"]["range_m"] = 400.0
    with pytest.raises(ScenarioError, match=r"^mobility.steady_state: nodes.connected judges"):
        from_dict(doc)
    doc["mobility"]["steady_state"] = False  # the classic model starts from the placement
    from_dict(doc)
    doc = _doc("group")
    doc["nodes"]["pinned"] = [{"id": 2, "x": 1.0, "y": 1.0}]
    doc["nodes"]["placement"] = "grid"
    del doc["nodes"]["spacing_m"]
    with pytest.raises(ScenarioError, match=r"^mobility.model: node 2 is pinned, but group"):
        from_dict(doc)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_same_seed_same_tracks_other_seed_other_tracks(model: str) -> None:
    a = make_plan(from_dict(_doc(model))).trajectories
    b = make_plan(from_dict(_doc(model))).trajectories
    doc = _doc(model)
    doc["scenario"]["seed"] = 2
    c = make_plan(from_dict(doc)).trajectories
    assert a == b and a != c
    assert a.last_t >= 12.0 and set(a.moving()) == {1, 2, 3, 4, 5}


@pytest.mark.parametrize("model", sorted(MODELS))
def test_mobility_draws_do_not_shift_other_streams(model: str) -> None:
    static = make_plan(from_dict(base_doc() | {"workload": _generated()}))
    moving = make_plan(from_dict(_doc(model) | {"workload": _generated()}))
    assert moving.publications == static.publications
    assert moving.subscriptions == static.subscriptions


def test_only_the_listed_nodes_move_and_others_keep_their_tracks() -> None:
    some = make_plan(from_dict(_doc("random_walk", nodes=[2, 4]))).trajectories
    every = make_plan(from_dict(_doc("random_walk"))).trajectories
    assert some.moving() == (2, 4)
    assert some.track(2) == every.track(2) and some.track(4) == every.track(4)  # per-node streams
    assert some.position(1, 11.0) == (50.0, 50.0)


@pytest.mark.parametrize("model", sorted(MODELS))
def test_every_model_stays_in_the_area_through_the_plan(model: str) -> None:
    doc = _doc(model)
    doc["scenario"]["duration_s"] = 300.0
    doc["area"] = {"width_m": 120.0, "height_m": 80.0}
    doc["nodes"]["spacing_m"] = 20.0
    traj = make_plan(from_dict(doc)).trajectories
    for node in traj.nodes:
        for t in range(0, 311):
            x, y = traj.position(node, float(t))
            assert -1e-9 <= x <= 120.0 + 1e-9 and -1e-9 <= y <= 80.0 + 1e-9
        assert all(0 <= x <= 120.0 and 0 <= y <= 80.0 for _, x, y in traj.track(node).points())


def test_plan_positions_are_the_trajectories_start() -> None:
    plan = make_plan(from_dict(_doc("random_waypoint")))
    assert plan.positions == plan.trajectories.positions(0.0)
    assert plan.positions[1] != (50.0, 50.0)  # steady state draws the start
    assert not any(math.isnan(c) for p in plan.positions.values() for c in p)


def _generated() -> dict[str, Any]:
    return {
        "subscribers": {"fraction": 0.6, "expressions": [{"expr": "a/b x>1"}]},
        "generator": {"rate_per_s": 2.0, "templates": [
            {"topic": "a/b", "attrs": {"x": {"uniform_int": [0, 9]}}}]},
    }


def test_every_key_and_model_is_documented() -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "scenarios.md").read_text()
    section = doc.split("### `[mobility]`", 1)[1].split("### `[contacts]`", 1)[0]
    for model, keys in MODEL_KEYS.items():
        assert f"`{model}`" in section, model
        for key in keys:
            assert f"`{key}`" in section, (model, key)
