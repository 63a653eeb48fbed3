"""One place that starts Spark, with settings small enough for a 2-core laptop.

Under ``spark-submit`` the session already exists and its master and memory come
from the command line; ``getOrCreate`` then only adds the SQL settings.
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

from pyspark.sql import SparkSession

SQL_SETTINGS = {
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    # run ids such as "0042" must stay strings when read back from Parquet partitions
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.adaptive.enabled": "true",
    # No broadcast join chosen from the planner's size *estimate*: the estimate of a
    # Parquet-backed frame is its compressed file size, far below its size in memory, and
    # on the HESPER sweep (2.2 GB of telemetry) a table chosen that way outgrew a 2 GB
    # driver ("Not enough memory to build and broadcast the table"). Adaptive execution
    # still broadcasts a side whose *measured* shuffle output is under 10 MB, and the
    # job's explicit broadcast hints (a run's static positions) stay.
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.adaptive.autoBroadcastJoinThreshold": "10m",
    # The Parquet cache is partitioned by run, protocol and event: with concurrent writers
    # a task writes its ~15 partitions as rows come instead of sorting all its rows by
    # partition first (the sort was half of the JSON -> Parquet conversion)
    "spark.sql.maxConcurrentOutputFileWriters": "32",
}


LOCAL_JVM_OPTIONS = ("-XX:Tier4InvocationThreshold=15000 -XX:Tier4MinInvocationThreshold=1800 "
                     "-XX:Tier4CompileThreshold=45000 -XX:Tier4BackEdgeThreshold=120000 "
                     "-XX:+UseSerialGC")
"""The local JVM's optimising compiler (C2) starts three times later than by default,
and its garbage collector is the serial one.

Every Spark action brings new generated classes, and C2 compiled thousands of their
methods: its threads took 44.6 CPU-s of a 10^7-record job of about 150 (bench/profile_eval.py
prints them, docs/benchmarks.md), on a machine whose two cores also run the tasks. With
the thresholds tripled (HotSpot's defaults: 5000, 600, 15000, 40000), only methods
that stay hot reach C2; the rest run as C1 code. C1 alone (``TieredStopAtLevel=1``)
was slower: its code cost more than the compilation it saved (170 against 155 CPU-s
for the job in side measurements under load; tripled thresholds: 139, C2 34.6 CPU-s).

G1, the default collector, runs concurrent marking and refinement threads beside the two
task threads; the serial collector stops the tasks briefly instead and does no work
beside them. On the bench's 10^7 records, cold, idle, one job after another: 61.3 s
against 66.1 with G1 (mean of rounds, docs/benchmarks.md, "Ninth session"); the parallel
collector was slower than G1 (eighth session). Only a local session's JVM is started
here; a cluster's executors keep their own options."""

LOCAL_SQL_SETTINGS = {
    # The job caches a handful of derived tables (publications, the truth, the pairs),
    # each written once and read two or three times: on a local session's two cores
    # compressing and decompressing them cost more than the memory they save (55.4
    # against 61.3 s, both with the serial collector, at 10^7 records, docs/benchmarks.md).
    # Blocks that do not fit spill to disk as before. A cluster keeps Spark's default.
    "spark.sql.inMemoryColumnarStorage.compressed": "false",
}

DRIVER_MEMORY = "2g"
"""A local session's memory; a sweep of hundreds of runs needs more (``--driver-memory``,
or ``sized_driver_memory`` from the input's size)."""
GIB = 1 << 30


def sized_driver_memory(input_bytes: int, machine_bytes: int | None = None) -> str:
    """The local driver's memory when ``--driver-memory`` is not given: 2 GiB plus three
    times the telemetry's size on disk, in whole GiB, at most half the machine's memory
    and never below 2 GiB. Whole sweeps failed at a fixed 2 GiB after ten minutes or more
    (B-SUB's 285 runs, 1.9 GB: ``AGGREGATE_OUT_OF_MEMORY``; HESPER's 88 runs, 2 GB: a table
    too large to broadcast); both evaluate with 8 GiB, which this gives for 1.9 GB."""
    if machine_bytes is None:
        machine_bytes = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    want = min(2 * GIB + 3 * max(input_bytes, 0), max(2 * GIB, machine_bytes // 2))
    return f"{max(2, -(-want // GIB))}g"


def get_session(master: str | None = None, app_name: str = "mesheval",
                driver_memory: str | None = None) -> SparkSession:
    """The active session, or a new small one (``local[2]`` unless ``master`` says else)."""
    active = SparkSession.getActiveSession()
    if active is None:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        if not master or master.startswith("local"):
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        builder = SparkSession.builder.appName(app_name)
        if master:
            builder = builder.master(master)
        elif not _under_spark_submit():
            builder = builder.master("local[2]")
        builder = (
            builder.config("spark.ui.enabled", "false")
            .config("spark.driver.memory", driver_memory or DRIVER_MEMORY)
            .config("spark.ui.showConsoleProgress", "false")
        )
        if not master or master.startswith("local"):
            builder = builder.config("spark.driver.extraJavaOptions", LOCAL_JVM_OPTIONS)
        for key, value in SQL_SETTINGS.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
    else:
        spark = active
        for key, value in SQL_SETTINGS.items():
            spark.conf.set(key, value)
    if (spark.sparkContext.master or "local").startswith("local"):
        for key, value in LOCAL_SQL_SETTINGS.items():
            spark.conf.set(key, value)
    else:
        ship_packages(spark)
    return spark


def _under_spark_submit() -> bool:
    """True when ``spark-submit`` launched this driver (its JVM is already up)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def ship_packages(spark: SparkSession) -> None:
    """Send ``meshsub`` and ``mesheval`` to the executors (the ground-truth UDF imports them).

    Zipped from where this driver imports them, so that a cluster runs exactly the
    driver's code; harmless if ``--py-files`` already shipped them.
    """
    import mesheval
    import meshsub

    tmp = Path(tempfile.mkdtemp(prefix="mesheval-pyfiles-"))
    atexit.register(shutil.rmtree, tmp, True)
    archive = tmp / "mesheval-packages.zip"
    package_zip(archive, [meshsub, mesheval])
    spark.sparkContext.addPyFile(str(archive))


def package_zip(archive: Path, packages: Sequence[ModuleType]) -> None:
    """Zip ``packages`` (their ``.py`` and ``.toml`` files) for ``zipimport`` on a worker.

    zipimport cannot import a namespace package (a folder without ``__init__.py``, such
    as ``meshsub/core/cluster``): each one gets an empty ``__init__.py`` in the archive.
    """
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in packages:
            root = Path(package.__file__ or ".").resolve().parent
            files = [p for p in sorted(root.rglob("*")) if p.is_file()
                     and p.suffix in (".py", ".toml") and "__pycache__" not in p.parts]
            for path in files:
                zf.write(path, path.relative_to(root.parent).as_posix())
            for folder in sorted({p.parent for p in files if p.suffix == ".py"}):
                if not (folder / "__init__.py").is_file():
                    zf.writestr((folder / "__init__.py").relative_to(root.parent).as_posix(), "")
