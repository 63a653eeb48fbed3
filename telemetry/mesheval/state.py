"""State size: the entries and bytes a node holds, from the protocols' ``state`` records.

Protocols report each store they keep (``Protocol.state_sizes``: the local
subscriptions, a store-carry-forward buffer, a broker's tables) every
``state_every_s``; a node's state at a report time is the sum over its stores.
Per run: the mean over nodes of each node's mean state over the measurement
(``state_entries_mean``, ``state_bytes_mean``), the largest state any node held
(``state_bytes_max``), the mean per store (``state_<store>_bytes_mean``) and per
role (``state_bytes_mean_role_<role>``: BRVST compares a broker's storage with a
non-broker's, Li and Wang 2014, §V-B). Nodes without reports are left out (n/a,
not 0: a protocol that reports nothing has no measure).
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

Runs = dict[str, dict[str, Any]]
NO_ROLE = "none"


def state_snapshots(records: DataFrame, settings: DataFrame) -> DataFrame:
    """(run, node, t_s, entries, bytes) per report, summed over stores.

    One report's records are written together, but a daemon stamps each with the wall
    clock as it writes it: records within 0.1 s of each other are one report.
    """
    return (
        records.filter(F.col("event") == "state")
        .join(settings.select("run", "cutoff_ns", "t0_ns"), "run")
        .filter(F.col("ts_ns") >= F.col("cutoff_ns"))
        .withColumn("t_s", F.round((F.col("ts_ns") - F.col("t0_ns")) / 1e9, 1))
        .groupBy("run", "node", "t_s")
        .agg(F.sum("entries").alias("entries"), F.sum("bytes").alias("bytes"))
    )


def state_metrics(records: DataFrame, settings: DataFrame, roles: DataFrame
                  ) -> tuple[Runs, DataFrame, list[dict[str, Any]]]:
    """Per-run measures, per-node means, and the mean state per (run, role, report time).

    ``roles``: (run, node, role) of the scenario's node groups (may be empty). The
    per-node means are a cached DataFrame (run, node, role, state_entries_mean,
    state_bytes_mean, state_bytes_max), a row per reporting node of every run: the
    caller joins it into its node table and unpersists it.
    """
    snaps = state_snapshots(records, settings).cache()
    per_node = snaps.groupBy("run", "node").agg(
        F.avg("entries").alias("state_entries_mean"), F.avg("bytes").alias("state_bytes_mean"),
        F.max("bytes").alias("state_bytes_max"))
    with_role = per_node.join(roles, ["run", "node"], "left").fillna(NO_ROLE, ["role"]).select(
        "run", "node", "role", "state_entries_mean", "state_bytes_mean", "state_bytes_max"
    ).cache()
    runs: Runs = {}
    for row in per_node.groupBy("run").agg(
            F.avg("state_entries_mean").alias("state_entries_mean"),
            F.avg("state_bytes_mean").alias("state_bytes_mean"),
            F.max("state_bytes_max").alias("state_bytes_max"),
            F.count(F.lit(1)).alias("state_nodes")).collect():
        runs[row["run"]] = {k: row[k] for k in ("state_entries_mean", "state_bytes_mean",
                                                "state_bytes_max", "state_nodes")}
    store_means = (
        records.filter(F.col("event") == "state")
        .join(settings.select("run", "cutoff_ns"), "run")
        .filter(F.col("ts_ns") >= F.col("cutoff_ns"))
        .groupBy("run", "node", "store").agg(F.avg("bytes").alias("b"))
        .groupBy("run", "store").agg(F.avg("b").alias("b")).collect())
    for row in store_means:
        runs.setdefault(row["run"], {})[f"state_{row['store']}_bytes_mean"] = row["b"]
    for row in with_role.groupBy("run", "role").agg(
            F.avg("state_bytes_mean").alias("b")).collect():
        runs.setdefault(row["run"], {})[f"state_bytes_mean_role_{row['role']}"] = row["b"]
    timeline = [
        row.asDict() for row in snaps.join(roles, ["run", "node"], "left")
        .fillna(NO_ROLE, ["role"])
        .groupBy("run", "role", "t_s").agg(F.avg("bytes").alias("bytes_mean"),
                                           F.avg("entries").alias("entries_mean"),
                                           F.count(F.lit(1)).alias("nodes"))
        .orderBy("run", "role", "t_s").collect()
    ]
    snaps.unpersist()
    return runs, with_role, timeline
