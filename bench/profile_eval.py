"""Where mesheval's time goes: every Spark action of one batch job, timed, with its CPU.

    .venv/bin/python bench/profile_eval.py JOBDIR RUNDIR OUTDIR

``JOBDIR`` is the folder holding the ``mesheval`` package to profile (``telemetry`` of
this checkout, or ``bench_eval.py``'s ``before-job/telemetry`` for another revision).
Each action (``collect``, ``first``, ``count``, ``toPandas``, ``toArrow``, a writer's
``csv`` / ``parquet`` / ``json``) prints its wall time, the CPU seconds of the driver and of
everything it started (the JVM, the Python workers: live descendants, read from
/proc), and the call stack that asked for it; the last lines give the job's totals, so
the CPU spent outside actions (planning, the driver's own Python) is the difference.
The fixed costs are printed too: the session's start (the JVM), and at the end the CPU
of the JVM's own threads by kind (JIT compilers, garbage collectors), read from
/proc/PID/task: threads that ended before are not counted, so those are lower bounds.
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


def proc_stats() -> dict[int, list[str]]:
    """Every process's /proc/PID/stat fields after the command name (field 3 on)."""
    stats: dict[int, list[str]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            stat = Path(f"/proc/{name}/stat").read_text()
        except OSError:
            continue
        stats[int(name)] = stat[stat.rindex(")") + 2:].split()
    return stats


def descendants(stats: dict[int, list[str]] | None = None) -> list[int]:
    """This process and its live descendants (from ``stats``, else read now)."""
    kids: dict[int, list[int]] = {}
    for pid, rest in (stats if stats is not None else proc_stats()).items():
        kids.setdefault(int(rest[1]), []).append(pid)
    found, todo = [], [os.getpid()]
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo += kids.get(pid, [])
    return found


def tree_cpu() -> float:
    """CPU seconds of this process and its live descendants (user + system, children's
    waited-for time included), from one read of /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    stats = proc_stats()
    return sum(sum(int(x) for x in stats[pid][11:15]) for pid in descendants(stats)
               if pid in stats) / tick


JVM_THREADS = {"C2 CompilerThre": "JIT C2", "C1 CompilerThre": "JIT C1", "GC Thread": "GC",
               "G1 ": "GC", "VM Thread": "VM"}
"""Thread names (/proc/PID/task/TID/comm, cut to 15 characters) of the JVM's own work."""


def jvm_threads_cpu() -> dict[str, float]:
    """CPU seconds of the live JVM threads under this process, by ``JVM_THREADS`` kind
    (the rest as "other", the Spark tasks among them)."""
    tick = os.sysconf("SC_CLK_TCK")
    kinds: dict[str, float] = {}
    for pid in descendants():
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() != "java":
                continue
            tasks = list(Path(f"/proc/{pid}/task").iterdir())
        except OSError:
            continue
        for task in tasks:
            try:
                comm = (task / "comm").read_text().rstrip("\n")
                stat = (task / "stat").read_text()
            except OSError:
                continue
            rest = stat[stat.rindex(")") + 2:].split()
            kind = next((v for k, v in JVM_THREADS.items() if comm.startswith(k)), "other")
            kinds[kind] = kinds.get(kind, 0.0) + sum(int(x) for x in rest[11:13]) / tick
    return kinds


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
    for cls, names in ((DataFrame, ("collect", "first", "toPandas", "toArrow", "count")),
                       (DataFrameWriter, ("csv", "parquet", "json"))):
        for name in names:
            setattr(cls, name, timed(log, name, getattr(cls, name)))
    wall, cpu = time.perf_counter(), tree_cpu()
    spark = get_session("local[2]")
    print(f"session start (JVM): {time.perf_counter() - wall:.1f} s, cpu {tree_cpu() - cpu:.1f} s",
          flush=True)
    wall, cpu = time.perf_counter(), tree_cpu()
    run_batch(spark, [rundir], out)
    wall, cpu = time.perf_counter() - wall, tree_cpu() - cpu
    print(f"job: {wall:.1f} s, cpu {cpu:.1f} s; in actions {sum(w for w, _ in log):.1f} s, "
          f"cpu {sum(c for _, c in log):.1f} s; load average "
          + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    threads = jvm_threads_cpu()
    print("JVM threads' cpu (session and job; live threads only): " + ", ".join(
        f"{kind} {threads[kind]:.1f} s" for kind in sorted(threads)))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
