"""Run a sweep's simulations as tasks of a Spark cluster (``meshsim sweep --spark MASTER``).

Every simulated point becomes one Spark job of one task, submitted from a pool of driver
threads as wide as the cluster's cores: the driver learns of each point the moment it
finishes (progress and time left as with ``--jobs``), and Spark's own task retry
(``spark.task.maxFailures``, 4 on a cluster) re-runs a point whose task failed or whose
worker process was killed. The task is ``run_point``, the function a local sweep runs:
it writes the run's telemetry, manifest and stamp into ``OUT/runs/<point>/``, so ``OUT``
must be a path every worker can write and the driver can read (a local directory for a
cluster on one host, else a shared filesystem mounted at the same path everywhere), and
the sweep file, its scenarios and the files they name must be readable at the same paths.
A rerun skips the points whose stamp is there with the same input, as locally.

The driver ships its own ``meshsub`` and ``meshsim`` packages to the executors (zipped
from where it imports them, like ``mesheval.session.ship_packages``), so the workers run
exactly the driver's code; their Python needs the wheels' dependencies (install the
meshsub and meshsub-tools[sim] wheels there) and the driver's Python minor version.
Each task reports the meshsub version it imported; a mismatch fails the point with a clear line.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from meshsim.sweep.point import PointResult, rundir_of
from meshsim.sweep.points import Point
from meshsim.sweep.spec import SweepSpec
from meshsub import __version__

APP_NAME = "meshsim-sweep"


def under_spark_submit() -> bool:
    """True when ``spark-submit`` launched this driver (its JVM is already up)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def _task(spec: SweepSpec, point: Point, out: str) -> tuple[PointResult, int, str, str]:
    """One point on an executor: its result, the attempt number (1 = first), and the
    meshsub version and Python version the executor runs."""
    from pyspark import TaskContext

    from meshsim.sweep.runner import run_one

    context = TaskContext.get()
    attempt = (context.attemptNumber() if context is not None else 0) + 1
    python = f"{sys.version_info.major}.{sys.version_info.minor}"
    return run_one(spec, point, Path(out)), attempt, __version__, python


def session(master: str | None) -> Any:
    """The active Spark session (``spark-submit``) or a new one on ``master``."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(APP_NAME)
    if master and not under_spark_submit():
        builder = builder.master(master)
    spark = (builder.config("spark.ui.showConsoleProgress", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    if not (spark.sparkContext.master or "local").startswith("local"):
        ship_packages(spark.sparkContext)
    return spark


def ship_packages(sc: Any) -> None:
    """Send this driver's ``meshsub`` and ``meshsim`` to the executors (a zip on the
    Python path of every task: it wins over an installed copy)."""
    import meshsim
    import meshsub
    from mesheval.session import package_zip

    tmp = Path(tempfile.mkdtemp(prefix="meshsim-pyfiles-"))
    atexit.register(shutil.rmtree, tmp, True)
    archive = tmp / "meshsim-packages.zip"
    package_zip(archive, [meshsub, meshsim])  # mesheval's: one way to ship code to workers
    sc.addPyFile(str(archive))


def _first_line(exc: BaseException) -> str:
    """The useful line of a failed Spark job: the Python error of the last attempt."""
    text = str(exc)
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for marker in ("Error:", "Exception:"):
        for line in reversed(lines):
            if marker in line and not line.startswith(("at ", "py4j")):
                return line[:300]
    return (lines[0] if lines else type(exc).__name__)[:300]


def slots(spark: Any) -> int:
    """Tasks the cluster runs at once (its executors' cores)."""
    return max(1, int(spark.sparkContext.defaultParallelism))


def max_attempts(master: str, configured: str | None) -> int:
    """Attempts Spark gives a task: ``local[N,F]`` says F, a bare ``local[N]`` 1 (no retry),
    a cluster ``spark.task.maxFailures`` (default 4)."""
    local = re.fullmatch(r"local\[[^,\]]+,\s*(\d+)\]", master)
    if local:
        return int(local.group(1))
    if master.startswith("local"):
        return 1
    return int(configured) if configured and configured.isdigit() else 4


def run_on_spark(spark: Any, spec: SweepSpec, points: Sequence[Point], out: Path,
                 record: Callable[[PointResult], None], log: Callable[[str], None]) -> None:
    """Run ``points`` as Spark tasks, calling ``record`` with each result as it comes."""
    sc = spark.sparkContext
    width = slots(spark)
    attempts = max_attempts(sc.master, sc.getConf().get("spark.task.maxFailures"))
    log(f"sweep {spec.name}: Spark master {sc.master}, {width} task slot(s), "
        f"up to {attempts} attempt(s) per point")
    out_text = str(out.resolve())

    def one(point: Point) -> PointResult:
        sc.setJobDescription(f"sweep {spec.name}: {point.id}")
        try:
            result, attempt, version, python = sc.parallelize([point], 1).map(
                lambda p: _task(spec, p, out_text)).collect()[0]
        except Exception as exc:  # the job failed after all its attempts
            return PointResult(point.id, "failed", 0.0, rundir_of(out, point), "",
                               error=f"Spark task failed {attempts} time(s): "
                                     f"{_first_line(exc)}", attempts=attempts)
        mine = f"{sys.version_info.major}.{sys.version_info.minor}"
        if version != __version__ or python != mine:
            return PointResult(point.id, "failed", result.wall_s, result.rundir, result.digest,
                               error=f"worker runs meshsub {version} on Python {python}, "
                                     f"the driver meshsub {__version__} on Python {mine}")
        if attempt > 1:
            log(f"{point.id}: attempt {attempt} succeeded after {attempt - 1} failed "
                f"task attempt(s)")
        return PointResult(result.id, result.status, result.wall_s, result.rundir,
                           result.digest, result.derived, result.error, attempt)

    with ThreadPoolExecutor(max_workers=width, thread_name_prefix="sweep-spark") as pool:
        futures: list[Future[PointResult]] = [pool.submit(one, p) for p in points]

        for fut in as_completed(futures):
            record(fut.result())
