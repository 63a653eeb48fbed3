"""Exact latency quantiles per run from one sorted column, as Spark's ``percentile`` has them.

The delivery statistics asked Spark for an exact ``percentile`` (a hash map of every
distinct latency, sorted) and for the upper median as an element of the sorted list
of every latency (``collect_list`` then ``array_sort``): two buffers of boxed values
per run, each sorted on the JVM. The first deliveries' latencies are one double per
delivered pair (13 MB at 10^7 records), so they come to the driver once as an Arrow
column and are sorted there once per run (numpy); every figure is then read off the
sorted values with Spark's own rule (``exact_percentile``), so metrics.json is
unchanged (docs/evaluation.md, "Performance").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

FRACTIONS = (0.5, 0.95, 0.99)
"""The exact quantiles of a run's latency: median, p95, p99."""


def exact_percentile(ordered: np.ndarray, fraction: float) -> float | None:
    """Spark's ``percentile(x, fraction)`` of the values ``ordered`` (ascending).

    Spark's rule (``Percentile.getPercentile``): position ``(n - 1) * fraction``; the
    values at its floor and ceiling (0-based, in the sorted multiset); the lower one if
    the two positions or the two values are equal, else the linear interpolation
    ``lower + (higher - lower) * (pos - lo)``: that expression, since the last bit
    depends on it (``(hi - pos) * lower + (pos - lo) * higher`` differs from the Spark of
    this project, pyspark 4, in the last bit; tests/telemetry/test_eval_quantiles.py
    compares with Spark itself). None for no values, as Spark's null.
    """
    n = len(ordered)
    if n == 0:
        return None
    position = (n - 1) * fraction
    lo, hi = math.floor(position), math.ceil(position)
    lower = float(ordered[lo])
    if hi == lo:
        return lower
    higher = float(ordered[hi])
    if higher == lower:
        return lower
    return lower + (higher - lower) * (position - lo)


def upper_median(ordered: np.ndarray) -> float | None:
    """Element ``floor(n / 2) + 1`` (1-based) of the sorted values: the median of an odd
    count, the upper of the two middle values of an even one; None for no values."""
    return float(ordered[len(ordered) // 2]) if len(ordered) else None


def latency_quantiles(table: Any, runs: Sequence[str]) -> dict[str, dict[str, float | None]]:
    """Per run of ``runs``: ``latency_median_s``, ``latency_p95_s``, ``latency_p99_s`` and
    ``latency_median_upper_s`` from ``table`` (a ``pyarrow.Table`` with columns ``run``
    and ``latency_s``, one row per first delivery; nulls ignored, as Spark's aggregates
    ignore them). A run without a latency gets None for each."""
    import pyarrow.compute as pc

    table = table.filter(pc.is_valid(table.column("latency_s")))
    encoded = pc.dictionary_encode(table.column("run")).combine_chunks()
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    names = encoded.dictionary.to_pylist()
    latency = table.column("latency_s").to_numpy()
    order = np.lexsort((latency, codes))  # by run, then latency
    codes, latency = codes[order], latency[order]
    bounds = np.searchsorted(codes, np.arange(len(names) + 1))
    out: dict[str, dict[str, float | None]] = {}
    by_name = {name: latency[bounds[i]:bounds[i + 1]] for i, name in enumerate(names)}
    empty = np.empty(0)
    for run in runs:
        ordered = by_name.get(run, empty)
        values = {f"latency_{name}_s": exact_percentile(ordered, fraction) for name, fraction
                  in zip(("median", "p95", "p99"), FRACTIONS, strict=True)}
        values["latency_median_upper_s"] = upper_median(ordered)
        out[run] = values
    return out
