"""Role shares from ``broker`` records: the time-averaged fraction of nodes in a role.

Protocols with roles (B-SUB's brokers, HESPER's cell brokers) emit a ``broker`` record
with ``role`` at every change. A node's role holds from its record until the next; a
node without any record is in no role. ``broker_share`` is the fraction of the run's
nodes whose role is ``broker``, averaged over the measurement ``[t0 + warm-up, end]``
exactly (piecewise constant), not sampled. Few records: collected to the driver.
"""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from mesheval.settings import RunSettings


def broker_share(records: DataFrame, settings: Sequence[RunSettings]) -> dict[str, float]:
    """Run -> time-averaged broker share (runs without ``broker`` records are absent)."""
    rows = (records.filter(F.col("event") == "broker")
            .select("run", "node", "ts_ns", "role").orderBy("run", "ts_ns").collect())
    by_run: dict[str, list[tuple[int, int, bool]]] = {}
    for r in rows:
        by_run.setdefault(r["run"], []).append((int(r["ts_ns"]), int(r["node"]),
                                                r["role"] == "broker"))
    out: dict[str, float] = {}
    for s in settings:
        changes = by_run.get(s.run)
        end = s.horizon_ns if s.horizon_ns is not None else s.end_ns
        if not changes or end <= s.cutoff_ns or s.nodes <= 0:
            continue
        share = _average(changes, s.cutoff_ns, end) / s.nodes
        out[s.run] = share
    return out


def _average(changes: list[tuple[int, int, bool]], start: int, end: int) -> float:
    """Time-average over [start, end] of the number of nodes in the role."""
    state: dict[int, bool] = {}
    count = 0
    area = 0.0
    last = start
    for ts, node, on in changes:
        if ts > start:
            t = min(ts, end)
            area += count * (t - last)
            last = t
        if ts >= end:
            break
        was = state.get(node, False)
        state[node] = on
        count += int(on) - int(was)
    area += count * (end - last)
    return area / (end - start)
