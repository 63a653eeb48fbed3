"""bench/tg_experiments.py's bookkeeping: shared runs, finished seeds, Fig. 4's verdict.

The recipe's runs take minutes each; what decides which runs a page reuses, which
seeds a stopped sweep's page shows and how R3 is judged is checked here on
hand-made inputs.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from types import ModuleType

import pytest

BENCH = "tg_experiments"
"""The script under test (the ``bench`` fixture, tests/unit/conftest.py)."""


def test_the_size_sweeps_500_nodes_are_the_recipes_runs(bench: ModuleType) -> None:
    recipe = bench.PRESETS["recipe"]
    sizes = bench.SWEEPS["size"].presets("recipe")
    assert sizes[0] is recipe  # same simulation: tg.md --recipe --reuse finds its runs
    assert bench.Point("TG", 3, sizes[0]).run_id == "tg-recipe-tg-s3"
    assert [p.name for p in sizes[1:]] == [f"recipe-n{n}" for n in (600, 700, 800, 900, 1000)]
    assert all(p is not recipe for p in bench.SWEEPS["speed"].presets("recipe"))


def _finish(bench: ModuleType, runs: Path, preset: object, seed: int, *schemes: str) -> None:
    for scheme in schemes:
        out = runs / bench.Point(scheme, seed, preset).run_id
        out.mkdir(parents=True)
        (out / "manifest.json").write_text("{}\n")


def test_finished_seeds_count_whole_seeds_from_the_first(bench: ModuleType,
                                                         tmp_path: Path) -> None:
    point = bench.SWEEPS["size"].presets("recipe")[1]
    assert bench.finished_seeds(point, tmp_path, 5) == 0
    _finish(bench, tmp_path, point, 1, "TG", "ST", "flooding")
    _finish(bench, tmp_path, point, 2, "TG", "ST")  # flooding's run was stopped
    _finish(bench, tmp_path, point, 3, "TG", "ST", "flooding")  # after a gap: not counted
    (tmp_path / bench.Point("flooding", 2, point).run_id).mkdir()  # partial: no manifest
    assert bench.finished_seeds(point, tmp_path, 5) == 1
    _finish(bench, tmp_path, bench.SWEEPS["size"].presets("recipe")[2], 1, "TG", "ST")
    assert bench.finished_seeds(bench.SWEEPS["size"].presets("recipe")[2], tmp_path, 5) == 0
    (tmp_path / bench.Point("flooding", 2, point).run_id / "manifest.json").write_text("{}")
    assert bench.finished_seeds(point, tmp_path, 5) == 3
    assert bench.finished_seeds(point, tmp_path, 2) == 2


def _runs(bench: ModuleType, scheme: str, notification: list[int],
          maintenance: list[int]) -> list[object]:
    return [bench.RunFigures(scheme, seed, 1.0, notification_tx=n, maintenance_tx=m,
                             measured_s=10.0, expected={"global": 10, "local": 10},
                             delivered={"global": 9, "local": 9})
            for seed, (n, m) in enumerate(zip(notification, maintenance, strict=True), 1)]


def _verdict(bench: ModuleType, figs: list[object], claim: str) -> tuple[str, str]:
    rows = bench.claim_rows(bench.estimates(figs))
    return next((key, verdict) for key, c, _rule, verdict in rows if c.startswith(claim))


def test_r3_compares_maintenance_shares_not_rates(bench: ModuleType) -> None:
    # TG sends more maintenance per second than ST but a smaller share of its traffic
    # (§4.2: ST's maintenance "accounts for a higher proportion")
    tg = _runs(bench, "TG", [9000, 9100, 8900], [3000, 3050, 2950])
    st = _runs(bench, "ST", [1000, 1010, 990], [2000, 2020, 1980])
    flooding = _runs(bench, "flooding", [5000, 5100, 4900], [0, 0, 0])
    key, verdict = _verdict(bench, tg + st + flooding, "R3: ST's maintenance share")
    assert (key, verdict) == ("breakdown", "holds")
    assert _verdict(bench, tg + st + flooding, "R3: flooding's overhead is all notification") \
        == ("breakdown", "holds")
    swapped = _runs(bench, "TG", [1000, 1010, 990], [2000, 2020, 1980]) \
        + _runs(bench, "ST", [9000, 9100, 8900], [3000, 3050, 2950]) + flooding
    assert _verdict(bench, swapped, "R3: ST's maintenance share")[1] == "fails"
    chatty = _runs(bench, "flooding", [5000, 5100, 4900], [1, 0, 0])
    assert _verdict(bench, tg + st + chatty, "R3: flooding's")[1] == "fails"
    assert "breakdown" not in bench.SWEEPS["speed"].claims  # Fig. 4 is one setting


def test_a_finished_page_names_its_seeds_and_missing_points(bench: ModuleType) -> None:
    plan = bench.SWEEPS["size"]
    presets = plan.presets("recipe")
    tg = _runs(bench, "TG", [900, 910], [300, 305])
    st = _runs(bench, "ST", [1000, 1010], [2000, 2020])
    flooding = _runs(bench, "flooding", [5000, 5100], [0, 0])
    by_point = {presets[0]: tg + st + flooding, presets[1]: tg[:1] + st[:1] + flooding[:1]}
    page = bench.write_sweep_report(plan, "recipe", by_point, "load", 1.0, finished=True)
    assert "--sweep size --recipe --finished`" in page
    assert "**Seeds: 1-2 of the plan's 5, per point**" in page
    assert "the plan's points 700, 800, 900, 1000 (nodes) have none" in page
    assert "500 nodes, 2 m/s, 10 s pauses, 20 s + 30 s, 2 of the plan's 5 seeds" in page
    cut = bench.write_sweep_report(plan, "recipe", {p: tg + st + flooding for p in presets},
                                   "load", 1.0)
    assert "--sweep size --recipe --seeds 2 --reuse`" in cut
    assert "**Seeds: 2 of the plan's 5.**" in cut


def test_finished_is_refused_without_a_sweep_or_runs(bench: ModuleType, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]
                                                     ) -> None:
    assert bench.main(["--recipe", "--finished"]) == 2
    assert bench.main(["--sweep", "size", "--recipe", "--finished",
                       "--runs", str(tmp_path / "none")]) == 2
    assert bench.main(["--sweep", "size", "--recipe", "--finished",
                       "--runs", str(tmp_path)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(line.startswith("tg_experiments: ") for line in err)
    assert not list(tmp_path.iterdir())


def test_sweep_page_shows_reads_seeds_per_point(bench: ModuleType, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bench, "SWEEP_REPORT", tmp_path / "tg-sweep-{name}.md")
    assert bench.sweep_page_shows("size") == "no figures yet"
    figures = [{"cpu_s": 1800.0}] * 3
    (tmp_path / "tg-sweep-size.json").write_text(json.dumps({"plan": "recipe", "points": [
        {"figures": figures * 2}, {"figures": figures}]}))
    assert bench.sweep_page_shows("size") == (
        "the recipe plan (`recipe`) with 1-2 of the recipe's 5 seeds per point at 2 of its "
        "6 points (their simulations took 4.5 hours of CPU, measured; the evaluation is "
        "not counted)")


def test_a_run_whose_telemetry_is_archived_is_refused_not_read_as_empty(
        bench: ModuleType, tmp_path: Path) -> None:
    """A stored run with its node files packed away (telemetry.tar.zst) would evaluate as
    a run without one record, a page of zeros: refused with one line instead."""
    point = bench.Point("TG", 1, bench.PRESETS["quick"])
    rundir = tmp_path / point.run_id
    rundir.mkdir()
    (rundir / "manifest.json").write_text("{}\n")
    (rundir / "telemetry.tar.zst").write_bytes(b"packed")
    with pytest.raises(SystemExit, match="no telemetry"):
        bench.evaluated(rundir, point, 1.0, rundir, reuse=True)
    assert not (rundir / "figures.json").exists()


@pytest.fixture(scope="module")
def tiny_run(bench: ModuleType, tmp_path_factory: pytest.TempPathFactory
             ) -> tuple[object, Path]:
    """A TG run of 20 nodes at Table 2's density and rate, 5 s warm-up and 20 s measured
    (about ten counted events), simulated once for the tests below."""
    preset = bench.Preset("tiny", 20, 5.0, 20.0, 1, drain_s=0.0)
    point = bench.Point("TG", 1, preset)
    rundir, _wall = bench.simulate(point, tmp_path_factory.mktemp("tg-runs"), reuse=False)
    return point, rundir


@pytest.mark.slow
def test_the_optimum_figures_come_out_of_a_run(bench: ModuleType,
                                               tiny_run: tuple[object, Path]) -> None:
    point, rundir = tiny_run
    every = bench.evaluate(rundir, point, 1.0, rundir, optimum_every=1)
    assert every.published >= 5 and every.opt_error is None
    assert every.opt_every == 1 and every.opt_sample == every.published
    assert 0 < every.opt_events <= every.opt_sample
    assert every.optimum_ratio is not None and every.optimum_ratio_high is not None
    assert 0 < every.optimum_ratio <= every.optimum_ratio_high
    assert every.opt_cpu_s >= 0
    # every third event by publish time: the sample, and a different cache entry
    third = bench.evaluated(rundir, point, 1.0, rundir, reuse=True, optimum_every=3)
    assert third.opt_every == 3 and third.opt_sample == -(-every.published // 3)
    assert third.published == every.published and third.spt_ratio == every.spt_ratio
    again = bench.evaluated(rundir, point, 1.0, rundir, reuse=True, optimum_every=1)
    assert (again.opt_sample, again.optimum_ratio) == (every.opt_sample, every.optimum_ratio)
    page = bench.write_report(point.preset, [every], "load", 1.0, [1])
    row = next(line for line in page.splitlines() if line.startswith("| TG |"))
    assert f"{every.optimum_ratio:.3f} ± inf" in row and "n/a" not in row
    assert f"over every counted event, {every.published} events per run" in page


def copy_of(rundir: Path, into: Path) -> Path:
    """A copy of the shared tiny run that a test may break without touching the others'."""
    copy = into / rundir.name
    shutil.copytree(rundir, copy)
    return copy


@pytest.mark.slow
def test_a_run_without_a_topology_has_no_optimum(bench: ModuleType,
                                                 tiny_run: tuple[object, Path],
                                                 tmp_path: Path) -> None:
    point, rundir = tiny_run
    bare = copy_of(rundir, tmp_path)
    manifest = json.loads((bare / "manifest.json").read_text())
    del manifest["scenario"]["radio"]  # the radio model the optimum's graph needs
    (bare / "manifest.json").write_text(json.dumps(manifest))
    fig = bench.evaluate(bare, point, 1.0, bare, optimum_every=1)
    assert fig.published >= 5 and not math.isnan(fig.spt_ratio)  # the rest is there
    assert fig.optimum_ratio is None and fig.optimum_ratio_high is None
    assert fig.opt_error is not None and "radio" in fig.opt_error
    page = bench.write_report(point.preset, [fig], "load", 1.0, [1])
    row = next(line for line in page.splitlines() if line.startswith("| TG |"))
    assert row.split(" | ")[-4:-1] == ["n/a", "n/a", "n/a"]
    assert "n/a: no topology for the optimum in TG seed 1: " in page


def test_positions_move_between_their_points(bench: ModuleType, tmp_path: Path) -> None:
    """mobility.log holds each track's points (waypoints, pauses' ends): a node between
    two is on its way, not still at the first (it met node 1 here long before its point)."""
    (tmp_path / "mobility.log").write_text(
        "# t node x y\n0.0 1 0.0 0.0\n0.0 2 1000.0 0.0\n100.0 2 0.0 0.0\n")
    positions = bench.Positions(tmp_path)
    assert positions.graph(50.0) == {1: [], 2: []}  # 500 m apart
    assert positions.graph(90.0) == {1: [2], 2: [1]}  # 100 m apart, in range
    assert positions.graph(200.0) == {1: [2], 2: [1]}  # holds its last point


def test_a_run_without_tracks_is_refused_with_one_line(bench: ModuleType,
                                                       tiny_run: tuple[object, Path],
                                                       tmp_path: Path) -> None:
    point, rundir = tiny_run
    bare = copy_of(rundir, tmp_path)
    (bare / "mobility.log").unlink()
    (bare / "figures.json").unlink(missing_ok=True)  # left by the tests before
    with pytest.raises(SystemExit, match=r"^tg_experiments: .*mobility.log: No such file"):
        bench.evaluated(bare, point, 1.0, bare, reuse=False)
    assert not (bare / "figures.json").exists()
