"""Wall time of one 16-run sweep: locally with one process, with ``--jobs 2``, and as tasks
of a Spark standalone cluster of two one-core workers on this host (issue 27).

    flock -x /tmp/msub-locks/cpu.lock python bench/bench_sweep_cluster.py [--quick]

The sweep: flooding-200 (200 nodes, unit disk) x protocol {flooding, epidemic} x radio
range {150, 200} m x 4 seeds, 90 s of simulated time each (``--quick``: 30 s). Each mode
is the ``meshsim sweep`` command from start to exit, into its own fresh directory, so
every mode pays its own start-up: Python imports for all three, and for the cluster the
driver's JVM and the executors' start (the cluster itself is started before, its start
printed apart). The three sweeps' telemetry is compared: a mode that ran different
simulations would not be a fair comparison (and would be a bug). Speed-ups are against
the one-process baseline of the same run; the machine's load is printed beside them.
"""

from __future__ import annotations

import argparse
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from meshsim.sweep.standalone import standalone_cluster

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "firmware-sim" / "meshsim" / "scenarios" / "flooding-200.toml"
MESHSIM = str(Path(sys.executable).parent / "meshsim")

SWEEP = """
[sweep]
name = "bench"
scenario = "{scenario}"
seeds = [1, 2, 3, 4]
set = {{ "scenario.duration_s" = {duration} }}

[[sweep.axis]]
name = "protocol"
levels = [
  {{ value = "flooding", set = {{ "protocol.name" = "flooding" }} }},
  {{ value = "epidemic", set = {{ "protocol.name" = "epidemic" }} }},
]

[[sweep.axis]]
name = "range"
values = [150.0, 200.0]
keys = ["radio.range_m"]

[[grid]]
name = "g"
axes = ["protocol", "range"]
"""


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def timed(args: list[str], env: dict[str, str] | None = None) -> float:
    started = time.perf_counter()
    proc = subprocess.run([MESHSIM, "sweep", *args], capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        sys.exit(f"meshsim sweep {' '.join(args)} failed:\n{proc.stdout[-2000:]}"
                 f"{proc.stderr[-2000:]}")
    return wall


def same_telemetry(a: Path, b: Path) -> bool:
    """Every file of every run equal, but the two that hold wall-clock times."""
    for run in sorted((a / "runs").iterdir()):
        names = [p.name for p in run.iterdir()
                 if p.name not in ("manifest.json", "sweep-point.json")]
        _same, mismatch, errors = filecmp.cmpfiles(run, b / "runs" / run.name, names,
                                                   shallow=False)
        if mismatch or errors:
            return False
    return True


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="30 s of simulated time per run")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="msub-bench-sweep-"))
    try:
        sweep = tmp / "sweep.toml"
        sweep.write_text(SWEEP.format(scenario=SCENARIO, duration=30.0 if args.quick else 90.0))
        print(f"sweep: 16 runs of {SCENARIO.name}, {os.cpu_count()} CPUs; load before: {load()}")
        one = timed([str(sweep), "--out", str(tmp / "one")])
        print(f"local, 1 process      : {one:7.1f} s  (1.00x)  load: {load()}", flush=True)
        two = timed([str(sweep), "--out", str(tmp / "two"), "--jobs", "2"])
        print(f"local, --jobs 2       : {two:7.1f} s  ({one / two:.2f}x)  load: {load()}",
              flush=True)
        started = time.perf_counter()
        with standalone_cluster(workers=2, cores=1, memory="1g") as cluster:
            up = time.perf_counter() - started
            spark = timed([str(sweep), "--out", str(tmp / "spark"), "--spark", cluster.master],
                          env=cluster.env())
        print(f"Spark, 2 workers x 1  : {spark:7.1f} s  ({one / spark:.2f}x)  load: {load()}"
              f"  (cluster start {up:.1f} s, not included)")
        equal = same_telemetry(tmp / "one", tmp / "two") and same_telemetry(
            tmp / "one", tmp / "spark")
        print(f"telemetry of the 16 runs identical in all three modes: {equal}")
        return 0 if equal else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
