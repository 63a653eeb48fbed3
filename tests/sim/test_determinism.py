"""Same scenario and seed -> byte-identical telemetry; another seed -> a different run."""

from __future__ import annotations

from pathlib import Path

from simhelpers import SCENARIOS, read_run

from meshsim.des.run import run_scenario
from meshsim.scenario import load_scenario


def _files(run_dir: Path) -> dict[str, bytes]:
    manifest, _ = read_run(run_dir)
    return {name: (run_dir / name).read_bytes() for name in manifest["files"]}


def test_same_seed_gives_identical_telemetry(tmp_path: Path) -> None:
    # random50 has random placement, generated workload, link loss and jitter timers.
    runs = []
    for i in range(2):
        scenario = load_scenario(SCENARIOS / "random50.toml")
        run_scenario(scenario, tmp_path / f"run{i}")
        runs.append(_files(tmp_path / f"run{i}"))
    assert len(runs[0]) == 50
    assert runs[0] == runs[1]


def test_another_seed_gives_another_run(tmp_path: Path) -> None:
    a = run_scenario(load_scenario(SCENARIOS / "random50.toml"), tmp_path / "a")
    b = run_scenario(load_scenario(SCENARIOS / "random50.toml", seed=8), tmp_path / "b")
    assert a.run != b.run
    assert a.plan.positions != b.plan.positions
    assert [p.event for p in a.plan.publications] != [p.event for p in b.plan.publications]


def test_epidemic_with_reliable_timers_is_deterministic(tmp_path: Path) -> None:
    for name in ("a", "b"):
        run_scenario(load_scenario(SCENARIOS / "epidemic-partition.toml"), tmp_path / name)
    assert _files(tmp_path / "a") == _files(tmp_path / "b")
