"""Where mesheval's time goes: every Spark action of one batch job, timed, with its CPU.

    .venv/bin/python bench/profile_eval.py JOBDIR RUNDIR OUTDIR

``JOBDIR`` is the folder holding the ``mesheval`` package to profile (``telemetry`` of
this checkout, or ``bench_eval.py``'s ``before-job/telemetry`` for another revision).
Each action (``collect``, ``first``, ``count``, ``toPandas``, a writer's ``csv`` /
``parquet`` / ``json``) prints its wall time, the CPU seconds of the driver and of
everything it started (the JVM, the Python workers: live descendants, read from
/proc), and the call stack that asked for it; the last lines give the job's totals, so
the CPU spent outside actions (planning, the driver's own Python) is the difference.
CPU seconds rather than wall time because the machine is shared (docs/benchmarks.md).
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any


def tree_cpu() -> float:
    """CPU seconds of this process and its live descendants (user + system, children's
    waited-for time included)."""
    tick = os.sysconf("SC_CLK_TCK")
    kids: dict[int, list[int]] = {}
    cpu: dict[int, float] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        rest = stat[stat.rindex(")") + 2:].split()
        kids.setdefault(int(rest[1]), []).append(int(name))
        cpu[int(name)] = sum(int(x) for x in rest[11:15]) / tick
    total, todo = 0.0, [os.getpid()]
    while todo:
        pid = todo.pop()
        total += cpu.get(pid, 0.0)
        todo += kids.get(pid, [])
    return total


def timed(log: list[tuple[float, float]], name: str, orig: Callable[..., Any]
          ) -> Callable[..., Any]:
    def action(self: Any, *args: Any, **kwargs: Any) -> Any:
        stack = traceback.extract_stack()[:-1]
        where = " < ".join(f"{Path(f.filename).stem}:{f.lineno}:{f.name}" for f in stack[-5:])
        wall, cpu = time.perf_counter(), tree_cpu()
        result = orig(self, *args, **kwargs)
        wall, cpu = time.perf_counter() - wall, tree_cpu() - cpu
        log.append((wall, cpu))
        print(f"{wall:7.2f} s cpu {cpu:6.2f} {name:8s} {where}", flush=True)
        return result
    return action


def main() -> int:
    if len(sys.argv) != 4:
        print("usage: profile_eval.py JOBDIR RUNDIR OUTDIR", file=sys.stderr)
        return 2
    job, rundir, out = (Path(a) for a in sys.argv[1:])
    sys.path.insert(0, str(job))
    from pyspark.sql.classic.dataframe import DataFrame
    from pyspark.sql.readwriter import DataFrameWriter

    from mesheval.batch import run_batch
    from mesheval.session import get_session

    log: list[tuple[float, float]] = []
    for cls, names in ((DataFrame, ("collect", "first", "toPandas", "count")),
                       (DataFrameWriter, ("csv", "parquet", "json"))):
        for name in names:
            setattr(cls, name, timed(log, name, getattr(cls, name)))
    spark = get_session("local[2]")
    wall, cpu = time.perf_counter(), tree_cpu()
    run_batch(spark, [rundir], out)
    wall, cpu = time.perf_counter() - wall, tree_cpu() - cpu
    print(f"job: {wall:.1f} s, cpu {cpu:.1f} s; in actions {sum(w for w, _ in log):.1f} s, "
          f"cpu {sum(c for _, c in log):.1f} s; load average "
          + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
