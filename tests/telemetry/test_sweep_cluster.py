"""``meshsim sweep --spark``: a sweep's simulations as tasks of a standalone Spark cluster.

The cluster is real (``spark_cluster``: a master and two workers on loopback); the driver
is the ``meshsim`` command in its own process. The runs must be byte-for-byte the runs of
a local sweep (only wall-clock fields differ), a task whose Python worker is killed must
be retried and reported, and the cluster's finished runs must count as finished for a
later (local) run of the same sweep.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from meshsim.sweep import load_sweep
from meshsim.sweep.runner import run_sweep

SCENARIOS = Path(__file__).resolve().parents[2] / "firmware-sim" / "meshsim" / "scenarios"
MESHSIM = str(Path(sys.executable).parent / "meshsim")
KILLED = "main.protocol-flooding.ttl-60.s2"

SWEEP = f"""
[sweep]
name = "cl"
scenario = "{SCENARIOS / 'epidemic-partition.toml'}"
seeds = [1, 2]
set = {{ "scenario.duration_s" = 200.0 }}
derive = "killer.py:derive"

[[sweep.axis]]
name = "protocol"
levels = [
  {{ value = "epidemic", set = {{ "protocol.name" = "epidemic" }} }},
  {{ value = "flooding", set = {{ "protocol.name" = "flooding" }} }},
]

[[sweep.axis]]
name = "ttl"
values = [60, 600]
keys = ["protocol.epidemic.ttl_s"]

[[grid]]
name = "main"
axes = ["protocol", "ttl"]
"""

# The sweep's derive hook runs inside the task: while the marker file is there, the
# first task of the marked point removes it and kills its own Python worker (SIGKILL,
# as the OOM killer or a lost node would), so that attempt dies without a word.
KILLER = """
import os
import signal
from pathlib import Path


def derive(scenario, point):
    marker = Path(__file__).parent / f"kill-{point.id}"
    if marker.exists():
        marker.unlink()
        os.kill(os.getpid(), signal.SIGKILL)
    return []
"""

WALL_CLOCK = {"manifest.json": [("started",), ("stats", "wall_s")],
              "sweep-point.json": [("wall_s",), ("finished",)]}
"""The fields that tell when and how fast a run ran, not what it did."""


def _without_wall_clock(name: str, text: str) -> Any:
    doc = json.loads(text)
    for path in WALL_CLOCK[name]:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node.pop(path[-1])
    return doc


def test_a_sweep_on_a_standalone_cluster_gives_the_local_runs_and_survives_a_killed_task(
        tmp_path: Path, spark_cluster: Any) -> None:
    (tmp_path / "sweep.toml").write_text(SWEEP)
    (tmp_path / "killer.py").write_text(KILLER)
    spec = load_sweep(tmp_path / "sweep.toml")
    local = run_sweep(spec, tmp_path / "local", jobs=1, log=lambda _m: None)
    assert len(local) == 8 and {r.status for r in local.values()} == {"done"}

    (tmp_path / f"kill-{KILLED}").write_text("")
    out = tmp_path / "cluster"
    proc = subprocess.run(
        [MESHSIM, "sweep", str(tmp_path / "sweep.toml"), "--out",
         str(out), "--spark", spark_cluster.master],
        env=spark_cluster.env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:] + spark_cluster.logs()
    assert "2 task slot(s)" in proc.stdout
    assert f"{KILLED}: attempt 2 succeeded after 1 failed task attempt(s)" in proc.stdout
    assert not (tmp_path / f"kill-{KILLED}").exists()  # the hook did kill a worker
    rows = {r["id"]: r for r in json.loads((out / "sweep.json").read_text())["points"]}
    assert {i: (r["status"], r["attempts"]) for i, r in rows.items()} == {
        i: ("done", 2 if i == KILLED else 1) for i in local}

    for point_id in local:
        mine, theirs = tmp_path / "local" / "runs" / point_id, out / "runs" / point_id
        names = sorted(p.name for p in mine.iterdir())
        assert names == sorted(p.name for p in theirs.iterdir())
        assert any(n.endswith(".jsonl") for n in names)
        for name in names:
            a, b = (mine / name).read_text(), (theirs / name).read_text()
            if name in WALL_CLOCK:
                assert _without_wall_clock(name, a) == _without_wall_clock(name, b), name
            else:
                assert a == b, f"{point_id}/{name} differs between local and cluster"

    again = run_sweep(spec, out, jobs=1, log=lambda _m: None)  # resumes what the cluster ran
    assert {r.status for r in again.values()} == {"kept"}


@pytest.mark.parametrize(("extra", "message"), [
    (["--spark", " "], "meshsim sweep: --spark needs a master URL (spark://HOST:PORT, "
                       "local[N], yarn, ...)"),
    (["--spark", "local[2]", "--jobs", "2"],
     "meshsim sweep: --jobs and --spark exclude each other (on Spark, the cluster's cores "
     "decide how many points run at once)"),
])
def test_spark_options_are_checked_before_anything_runs(tmp_path: Path, extra: list[str],
                                                        message: str) -> None:
    (tmp_path / "sweep.toml").write_text(SWEEP)
    (tmp_path / "killer.py").write_text(KILLER)
    proc = subprocess.run(
        [MESHSIM, "sweep", str(tmp_path / "sweep.toml"), "--out", str(tmp_path / "o"),
         *extra], capture_output=True, text=True, env={**os.environ}, timeout=60)
    assert (proc.returncode, proc.stderr.strip()) == (2, message)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(("master", "configured", "attempts"), [
    ("local[2]", None, 1), ("local[2,3]", None, 3), ("local[*, 4]", "9", 4),
    ("spark://127.0.0.1:7077", None, 4), ("spark://127.0.0.1:7077", "8", 8),
])
def test_the_attempts_a_point_gets_follow_the_master(master: str, configured: str | None,
                                                     attempts: int) -> None:
    from meshsim.sweep.cluster import max_attempts

    assert max_attempts(master, configured) == attempts
