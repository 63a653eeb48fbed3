"""The fleet benches answer bad arguments with one line and exit 2, before any build.

Both check the scenarios they will play with ``vmesh_load.refused`` first (no root,
no wheel, no image needed for that): a traffic shorter than the scenario's warm-up
used to end bench_upgrade.py in a traceback after its newer build was made.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.mark.parametrize(("script", "args", "says"), [
    ("bench_upgrade.py", ["--traffic", "4"], "scenario.warmup_s: must be less than duration_s"),
    ("bench_upgrade.py", ["--protocols", "epidemic", "nosuch"], "unknown protocol 'nosuch'"),
    ("bench_upgrade.py", ["--nodes", "0"], "nodes.count: must be >= 1"),
    ("bench_upgrade.py", ["--traffic", "60", "--rollout-at", "60"], "--rollout-at 60 s is not"),
    ("bench_vmesh.py", ["--nodes", "20", "--traffic", "5"], "scenario.warmup_s: must be less"),
    ("bench_vmesh.py", ["--nodes", "20", "--before-nodes", "0"], "nodes.count: must be >= 1"),
])
def test_a_bad_argument_is_one_line_and_exit_2(script: str, args: list[str], says: str) -> None:
    res = subprocess.run([sys.executable, str(BENCH / script), *args], capture_output=True,
                         text=True, timeout=120, check=False)
    assert res.returncode == 2, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0], res.stderr
    assert res.stdout == ""


def test_the_ready_verdict_holds_at_the_target_and_needs_convergence() -> None:
    sys.path.insert(0, str(BENCH))
    try:
        import bench_vmesh
    finally:
        sys.path.remove(str(BENCH))
    target = bench_vmesh.READY_TARGET_S
    assert "): met (ready 300.0 s, converged)" in bench_vmesh.ready_verdict(100, target, True)
    assert "NOT met" in bench_vmesh.ready_verdict(100, target + 0.1, True)
    assert "NOT met (ready 10.0 s, not converged)" in bench_vmesh.ready_verdict(100, 10.0, False)
