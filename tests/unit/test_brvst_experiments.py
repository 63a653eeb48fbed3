"""bench/brvst_experiments.py's plan and bookkeeping: the steady-state start, the CPU
meter and the page's cost and run-length text, on hand-made inputs (a run takes minutes)."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import pytest

BENCH = "brvst_experiments"
"""The script under test (the ``bench`` fixture, tests/unit/conftest.py)."""


def test_every_point_of_the_plan_starts_steady_and_measures_after_the_issue_window(
        bench: ModuleType) -> None:
    from meshsim.sweep.point import resolve

    spec, todo = bench.plan(bench.PLAN, False, 0, [])
    assert len(todo) == 70 and {p.seed for p in todo} == {1, 2, 3, 4, 5}
    for point in todo:
        scenario, _ = resolve(spec, point)
        arrivals = scenario.workload.arrivals
        assert arrivals is not None and arrivals.steady_state_window_s is not None
        # measuring starts once the whole population is out (and the elections are done)
        assert arrivals.start_s + arrivals.steady_state_window_s < scenario.meta.warmup_s
        assert scenario.meta.warmup_s < scenario.meta.duration_s


def test_the_cpu_meter_rates_the_part_after_the_warm_up(bench: ModuleType,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = iter([0.0, 40.0])  # a third reading before the end would raise StopIteration
    monkeypatch.setattr(bench.time, "process_time", lambda: next(cpu))
    meter = bench.CpuMeter(60.0, 180.0)  # started at CPU 0
    meter(30.0)   # before the warm-up's end: nothing noted
    meter(60.9)   # CPU 40 at 60.9 s
    assert meter.steady_per_sim_s() is None  # not at the end yet
    meter(120.0)  # no mark between: not read
    monkeypatch.setattr(bench.time, "process_time", lambda: 162.9)
    meter(180.9)
    assert meter.marks == {"warm": (60.9, 40.0), "end": (180.9, 162.9)}
    assert meter.steady_per_sim_s() == pytest.approx(122.9 / 120.0)


def _figures(bench: ModuleType, proto: str, seed: int, **kw: Any) -> Any:
    point = bench.Point("default", proto=proto, seed=seed, run_id=f"{proto}.s{seed}")
    from dataclasses import asdict

    return bench.RunFigures(asdict(point), 100.0, **kw)


def test_the_cost_section_counts_the_metered_runs(bench: ModuleType) -> None:
    figs = [_figures(bench, "brvst", 1, sim_cpu_s=170.0, steady_cpu_per_sim_s=1.0,
                     analysis_cpu_s=46.0),
            _figures(bench, "brvst", 2, sim_cpu_s=174.0, steady_cpu_per_sim_s=1.04,
                     analysis_cpu_s=44.0),
            _figures(bench, "flooding", 1)]  # kept from before the meter: n/a
    text = "\n".join(bench.cost(figs))
    assert "| brvst alpha=0.9 speed=5 grid=250 rate=200 | 2 | 180 | 172 ± 25 | 1.02 ± 0.25 |" \
        in text
    assert "| flooding alpha=0.9 speed=5 grid=250 rate=200 | 1 | 180 | n/a | n/a | n/a |" in text
    assert f"These 3 runs: {(170 + 46 + 174 + 44) / 3600:.2f} CPU-hours for the 2 metered" in text


def test_the_run_length_says_whether_the_runs_start_steady(bench: ModuleType) -> None:
    steady = bench.run_length(_figures(bench, "brvst", 1, steady_state_window_s=30.0))
    assert "Run length: 180 s, warm-up 60 s." in steady
    assert "issued over the first 30 s" in steady
    cold = bench.run_length(_figures(bench, "brvst", 1))
    assert "start with no subscription" in cold and "at 300 s" in cold


def test_a_page_cut_to_fewer_seeds_says_so(bench: ModuleType) -> None:
    import argparse

    cut = argparse.Namespace(seeds=3, plan_seeds=5)
    note = " ".join(bench.seeds_note(cut))
    assert "Seeds: 3 of the plan's 5" in note and "2 degree(s) of freedom" in note
    assert bench.seeds_note(argparse.Namespace(seeds=0, plan_seeds=5)) == []
    assert bench.seeds_note(argparse.Namespace(seeds=5, plan_seeds=5)) == []
