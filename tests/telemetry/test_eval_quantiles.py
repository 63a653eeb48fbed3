"""Exact latency quantiles on the driver (``mesheval.quantiles``) equal Spark's
``percentile`` and the sorted list's upper median, bit for bit."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pytest


def test_spark_rule_on_small_cases() -> None:
    from mesheval.quantiles import exact_percentile, upper_median

    assert exact_percentile(np.array([]), 0.5) is None and upper_median(np.array([])) is None
    one = np.array([2.5])
    assert exact_percentile(one, 0.99) == 2.5 and upper_median(one) == 2.5
    four = np.array([1.0, 2.0, 3.0, 10.0])
    assert exact_percentile(four, 0.5) == 2.5  # position 1.5: halfway between 2 and 3
    assert upper_median(four) == 3.0
    assert exact_percentile(np.array([1.0, 4.0, 4.0, 9.0]), 0.5) == 4.0  # equal neighbours


def test_quantiles_equal_sparks_per_run(spark: Any) -> None:
    """Several runs (one without any latency), ties and values of many magnitudes: the
    four figures per run equal Spark's to the last bit."""
    pytest.importorskip("pyarrow")
    from pyspark.sql import functions as F

    from mesheval.quantiles import latency_quantiles

    rng = random.Random(7)
    rows: list[tuple[str, float | None]] = []
    for run, n in (("a", 1), ("b", 2), ("c", 1001), ("d", 64)):
        values = [round(rng.expovariate(3.0), rng.choice((2, 9, 17))) for _ in range(n)]
        rows += [(run, v) for v in values]
    rows += [("e", None), ("c", None)]
    frame = spark.createDataFrame(rows, "run string, latency_s double")
    lat = F.col("latency_s")
    expected = {r["run"]: r.asDict() for r in frame.groupBy("run").agg(
        F.percentile(lat, [0.5, 0.95, 0.99]).alias("q"),
        F.try_element_at(F.array_sort(F.collect_list(lat)),
                         (F.floor(F.count(lat) / 2) + 1).cast("int")).alias("upper"),
    ).collect()}
    got = latency_quantiles(frame.toArrow(), sorted(expected))
    for run, row in expected.items():
        q = row["q"] or [None] * 3
        assert got[run] == {"latency_median_s": q[0], "latency_p95_s": q[1],
                            "latency_p99_s": q[2], "latency_median_upper_s": row["upper"]}, run
    assert got["e"] == dict.fromkeys(got["e"])  # no latency: every figure None
