"""Every model in the simulator, the run's mobility log, and its exact replay."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from simhelpers import base_doc, read_run

from meshsim.cli import main
from meshsim.des.run import run_scenario
from meshsim.mobility import Trajectories, trajectories_for, write_mobility_log
from meshsim.scenario import from_dict, make_plan
from meshsim.scenario.traces import parse_waypoints

MODELS: dict[str, dict[str, Any]] = {
    "static": {},
    "random_waypoint": {"speed_min": 2.0, "speed_max": 15.0, "pause_max": 5.0},
    "random_walk": {"speed_min": 2.0, "speed_max": 10.0, "walk_distance": 30.0},
    "gauss_markov": {"alpha": 0.6, "mean_speed": 8.0, "sigma_speed": 2.0,
                     "sigma_direction": 40.0, "time_step": 0.7},
    "group": {"group_size": 3, "radius": 30.0, "speed_min": 2.0, "speed_max": 12.0,
              "member_step": 1.3},
}


def _doc(model: str) -> dict[str, Any]:
    doc = base_doc()
    doc["scenario"].update(duration_s=60.0, seed=3)
    doc["area"] = {"width_m": 400.0, "height_m": 300.0}
    doc["radio"].update(range_m=120.0, loss=0.1)
    doc["nodes"] = {"count": 8, "placement": "random"}
    doc["mobility"] = {"model": model, "tick_s": 0.5, **MODELS[model]}
    doc["protocol"] = {"name": "flooding", "flooding": {"jitter": 0.05}}
    doc["workload"] = {
        "subscribers": {"fraction": 0.5, "expressions": [{"expr": "a/b x>1"}]},
        "generator": {"rate_per_s": 1.0, "templates": [
            {"topic": "a/b", "attrs": {"x": {"uniform_int": [0, 9]}}}]},
    }
    return doc


def _node_files(run_dir: Path) -> dict[str, bytes]:
    manifest, _ = read_run(run_dir)
    return {name: (run_dir / name).read_bytes() for name in manifest["files"]}


def _points(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if not line.startswith("#")]


@pytest.mark.parametrize("model", sorted(MODELS))
def test_a_run_replayed_from_its_mobility_log_is_identical(model: str, tmp_path: Path) -> None:
    first = run_scenario(from_dict(_doc(model)), tmp_path / "first", run_id="r")
    log = tmp_path / "first" / "mobility.log"
    manifest, records = read_run(tmp_path / "first")
    assert manifest["mobility_log"] == {"file": "mobility.log", "model": model,
                                        "points": len(_points(log))}
    positions = [r for r in records if r["event"] == "position"]
    assert all(0 <= r["x"] <= 400.0 and 0 <= r["y"] <= 300.0 for r in positions)
    if model != "static":
        assert len(positions) > 8 * 10 and first.stats.neighbor_changes > 0

    replay_doc = _doc(model)
    replay_doc["mobility"] = {"model": "scripted", "tick_s": 0.5, "file": str(log)}
    replay = from_dict(replay_doc)
    run_scenario(replay, tmp_path / "replay", run_id="r")
    assert _node_files(tmp_path / "replay") == _node_files(tmp_path / "first")
    assert _points(tmp_path / "replay" / "mobility.log") == _points(log)


def test_simulate_writes_the_log_into_the_run_directory(tmp_path: Path) -> None:
    scenario = tmp_path / "s.toml"
    scenario.write_text("""
[scenario]
name = "rwp"
duration_s = 30.0
[area]
width_m = 500.0
height_m = 500.0
[nodes]
count = 10
placement = "random"
[mobility]
model = "random_waypoint"
speed_min = 1.0
speed_max = 20.0
pause_max = 10.0
[protocol]
name = "flooding"
""")
    assert main(["simulate", str(scenario), "--out", str(tmp_path / "run"), "-q"]) == 0
    lines = (tmp_path / "run" / "mobility.log").read_text().splitlines()
    assert lines[0].startswith("# meshsim mobility log: run rwp-s1-")
    assert not list((tmp_path / "run").glob("*.tmp"))
    # The log is a valid scripted file for the same scenario.
    replay = tmp_path / "replay.toml"
    replay.write_text(scenario.read_text().replace(
        'model = "random_waypoint"\nspeed_min = 1.0\nspeed_max = 20.0\npause_max = 10.0',
        f'model = "scripted"\nfile = "{tmp_path / "run" / "mobility.log"}"'))
    assert main(["validate", str(replay)]) == 0


def test_the_drivers_api_gives_the_simulators_tracks_and_writes_the_log(tmp_path: Path) -> None:
    scenario = from_dict(_doc("random_waypoint"))
    plan = make_plan(scenario)
    traj = trajectories_for(scenario, plan)
    assert traj == make_plan(scenario).trajectories and traj.nodes == tuple(range(1, 9))
    assert traj.positions(0.0) == plan.positions
    n = write_mobility_log(traj, tmp_path / "mobility.log", header="vmesh run")
    assert not list(tmp_path.glob("*.tmp"))
    lines = (tmp_path / "mobility.log").read_text().splitlines()
    assert lines[0] == "# vmesh run" and len(lines) == n + 1
    replay = Trajectories.from_waypoints(parse_waypoints(lines, "log"), plan.positions)
    assert replay == traj
