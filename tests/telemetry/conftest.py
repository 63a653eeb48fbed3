"""One Spark session per test session: starting Spark costs seconds to a minute."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    pytest.importorskip("pyspark")
    from mesheval.session import get_session

    session = get_session("local[2]")
    yield session
    session.stop()


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[object]:
    """A Spark standalone cluster on loopback: a master and two one-core workers
    (``meshsim.sweep.standalone``; the Spark of the pyspark wheel, Java 17). Its ports are
    free ports of 127.0.0.1, its logs and work under a ``msub-spark-*`` temporary folder;
    every daemon and what it started is stopped at the end, also when a test failed.
    A driver of it runs in its own process (one SparkContext per process, and the
    ``spark`` fixture's is local) with ``cluster.env()`` and ``cluster.master``."""
    pytest.importorskip("pyspark")
    from meshsim.sweep.standalone import standalone_cluster

    with standalone_cluster(workers=2, cores=1, memory="1g") as cluster:
        yield cluster
