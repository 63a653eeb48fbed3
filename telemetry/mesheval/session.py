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
from pathlib import Path

from pyspark.sql import SparkSession

SQL_SETTINGS = {
    "spark.sql.shuffle.partitions": "4",
    "spark.sql.session.timeZone": "UTC",
    # run ids such as "0042" must stay strings when read back from Parquet partitions
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.adaptive.enabled": "true",
}


DRIVER_MEMORY = "2g"
"""A local session's memory; a sweep of hundreds of runs needs more (``--driver-memory``)."""


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
        for key, value in SQL_SETTINGS.items():
            builder = builder.config(key, value)
        spark = builder.getOrCreate()
        spark.sparkContext.setLogLevel("ERROR")
    else:
        spark = active
        for key, value in SQL_SETTINGS.items():
            spark.conf.set(key, value)
    if not (spark.sparkContext.master or "local").startswith("local"):
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
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in (meshsub, mesheval):
            root = Path(package.__file__ or ".").resolve().parent
            for path in root.rglob("*.py"):
                zf.write(path, path.relative_to(root.parent).as_posix())
    spark.sparkContext.addPyFile(str(archive))
