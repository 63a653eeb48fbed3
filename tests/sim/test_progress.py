"""Progress: a redrawn bar with the time left on a terminal, plain periodic lines in a log."""

from __future__ import annotations

import io
from pathlib import Path

from simhelpers import SCENARIOS
from test_records_unchanged import GOLDEN, digest

from meshsim.des.progress import Progress, format_duration
from meshsim.des.run import run_scenario
from meshsim.scenario import load_scenario


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def test_log_lines_every_interval_with_the_time_left() -> None:
    out, clock = io.StringIO(), Clock()
    p = Progress("sim x", 60.0, unit="s simulated", stream=out, every_s=10.0, tty=False,
                 clock=clock)
    for done in range(1, 61):  # one virtual second per wall second
        clock.t += 1.0
        p.update(float(done))
    p.finish()
    lines = out.getvalue().splitlines()
    assert lines[0] == "sim x: 17% (10 of 60 s simulated), 50 s left"
    assert lines[1] == "sim x: 33% (20 of 60 s simulated), 40 s left"
    assert len(lines) == 7 and lines[-1] == "sim x: 100% (60 of 60 s simulated), done in 1:00"


def test_terminal_bar_is_redrawn_in_place() -> None:
    out, clock = io.StringIO(), Clock()
    p = Progress("sweep", 4, unit="runs", stream=out, tty=True, clock=clock)
    clock.t += 30.0
    p.update(1)
    text = out.getvalue()
    assert text.startswith("\r[" + "#" * 8 + "." * 22 + "] sweep: 25% (1 of 4 runs), 1:30 left")
    p.finish()
    assert out.getvalue().endswith("done in 30 s\x1b[K\n") and "\n" not in text


def test_a_short_run_writes_nothing() -> None:
    out = io.StringIO()
    p = Progress("x", 10.0, stream=out, tty=False, clock=Clock())
    p.update(10.0)
    p.finish()
    assert out.getvalue() == ""


def test_durations() -> None:
    assert [format_duration(s) for s in (0.4, 59, 61, 3599, 3723)] == [
        "0 s", "59 s", "1:01", "59:59", "1:02:03"]


def test_a_run_reports_virtual_time_up_to_its_end(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "random50.toml", ["scenario.duration_s=20"])
    seen: list[float] = []
    run_scenario(scenario, tmp_path / "run", run_id="golden", drop_summary_s=0.0,
                 progress=seen.append)
    assert len(seen) == 200 and seen == sorted(seen) and seen[-1] == scenario.end_s
    assert digest(tmp_path / "run") == GOLDEN["flooding"]  # slices change no record
