"""Per-run metrics: delivery, latency, overhead, false positives, duplicates, energy.

Definitions (docs/evaluation.md has the prose, with sources):

- interested pair: (event, node) with an active matching subscription at publish
  time (``mesheval.truth``); the publisher is never in its own event's set. With a
  cache window, subscriptions starting up to that long after the publication count
  too (their latency runs from the subscription); a scoped event counts only the
  members of its scope.
- first delivery: the earliest ``deliver`` record of an interested pair;
  delivery_ratio = first deliveries / interested pairs.
- latency: first ``deliver.ts - publish.ts`` per interested pair.
- false positive: a (event, node) pair delivered to a node outside the set.
- duplicates: ``deliver`` records beyond the first per (event, node, subscription):
  copies a subscription received more than once. A node with k matching subscriptions
  gets k records of one event, which are not duplicates; ``duplicates_per_node``
  (records beyond the first per (event, node)) keeps that older, coarser count, labelled.
- overhead_ratio (the ONE simulator's MessageStatsReport, (relayed - delivered) /
  delivered): (data transmissions - first deliveries) / first deliveries.

Only events published after the warm-up count; transmissions that name such an
event count with it, other transmissions count when sent after the warm-up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from mesheval.energy import rx_energy_column, tx_energy_column
from mesheval.quantiles import latency_quantiles
from mesheval.settings import GROUP_KEYS
from mesheval.state import state_metrics
from mesheval.truth import (
    SCOPE_ATTR,
    interested_truth,
    member_intervals,
    scope_filter,
    subscription_intervals,
)

MSG_KINDS = ("data", "subscription", "control", "beacon")
CDF_POINTS = [i / 100 for i in range(101)]
FP_FORWARD_REASONS = {"drop": "false_positive_forward", "tx": "fp"}
"""Where a protocol reports a forwarding false positive: ``drop`` with this reason, or a
``tx`` with ``reason = "fp"``; a ``counter`` named ``false_positive_forward`` (value in
``bytes``) reports a total, and makes the figure 0 rather than NA when nothing happened."""


@dataclass
class Evaluation:
    """What the batch job computed; DataFrames are left for the caller to write."""

    runs: dict[str, dict[str, Any]]
    windows: list[dict[str, Any]]
    nodes: DataFrame
    """A row per (run, node), ``NODE_COLUMNS``, ordered (``_nodes``)."""
    run_cdf: dict[str, list[float]]
    group_cdf: list[dict[str, Any]]
    per_event: DataFrame
    state_timeline: list[dict[str, Any]] = field(default_factory=list)
    """Mean state per node by (run, role, report time): ``mesheval.state``."""
    cached: list[DataFrame] = field(default_factory=list)
    event_detail: DataFrame | None = None
    """Per measured event: publisher, publish time, interested nodes, first deliveries
    with their hop count and the event's data transmissions (for ``mesheval.optimum``)."""

    def release(self) -> None:
        """Drop the cached intermediate frames (after ``per_event`` has been written)."""
        for frame in self.cached:
            frame.unpersist()
        self.cached.clear()


def _i(cond: Column) -> Column:
    return F.when(cond, 1).otherwise(0)


def _collect_by_run(frame: DataFrame) -> dict[str, dict[str, Any]]:
    return {row["run"]: row.asDict() for row in frame.collect()}


def publications(records: DataFrame, settings: DataFrame) -> DataFrame:
    """One row per published event (first publish record wins), flagged ``measured``."""
    return (
        records.filter(F.col("event") == "publish")
        .groupBy("run", "event_id")
        .agg(
            F.min_by("node", "ts_ns").alias("pub_node"),
            F.min("ts_ns").alias("pub_ts"),
            F.min_by("topic", "ts_ns").alias("topic"),
            F.min_by("content", "ts_ns").alias("content"),
            F.count(F.lit(1)).alias("pub_records"),
        )
        .join(settings, "run")
        .withColumn("measured", (F.col("pub_ts") >= F.col("cutoff_ns")) & judged_in_time())
    )


def judged_in_time() -> Column:
    """An event with a deadline is judged only if its deadline falls within the run."""
    return (F.col("deadline_ns").isNull() | F.col("horizon_ns").isNull()
            | (F.col("pub_ts") + F.col("deadline_ns") <= F.col("horizon_ns")))


BROADCAST_EVENTS = 2_000_000
"""Most published events that the pairs and the traffic meet by a broadcast (a few
columns per event, some 30 MB in memory at that count) instead of shuffling every pair or
transmission to meet them; above it, a shuffled join as before."""


def delivery_pairs(records: DataFrame, pubs: DataFrame, interested: DataFrame,
                   events: int | None = None) -> DataFrame:
    """(event, node) pairs that were interested, delivered, or both, with their state.

    ``pubs``: every published event with its ``measured`` flag (``publications``).
    ``interested``: one row per interested pair (run, event_id, node, sub_start).
    ``events``: how many events ``pubs`` holds, if the caller counted them; up to
    ``BROADCAST_EVENTS`` they are broadcast to the pairs (no shuffle and sort of every
    pair to meet its event).

    The pairs of every delivered event come out, ``measured`` false for the warm-up's and
    null for an event without a publish record (an orphan: ``_orphans`` counts its
    deliver records from these rows instead of aggregating them all again); the metrics
    read ``measured_pairs``."""
    # The interested pairs join the second level as rows of their own (null delivery
    # columns, which min, min_by, sum and count skip) instead of a full outer join of the
    # two sides: one hash aggregation of both, where the join sorted both.
    # Both sides hash-partitioned by the pair (run, event_id, node) before anything else:
    # Spark then aggregates the subscription level, unions the sides and aggregates the
    # pair level in one stage (a union keeps its sides' common partitioning), with one
    # shuffle of the deliver records and one of the interested rows, where it had
    # shuffled the deliver records' partial aggregates, then the whole union again. A
    # fixed number of partitions: adaptive execution may not coalesce one side's
    # partitions differently from the other's under the union's single aggregation.
    pair_keys = ("run", "event_id", "node")
    parts = int(records.sparkSession.conf.get("spark.sql.shuffle.partitions") or "4")
    wanted = interested.select(
        "run", "event_id", "node", *(F.lit(None).cast("long").alias(c) for c in ("ts", "hop", "n")),
        "sub_start").repartition(parts, *pair_keys)
    delivers = records.filter(F.col("event") == "deliver").repartition(parts, *pair_keys)
    both = per_subscription(delivers).select(
        "run", "event_id", "node", "ts", "hop", "n", F.lit(None).cast("long").alias("sub_start")
    ).unionByName(wanted)
    # Every buffer fixed-width (no string): Spark then aggregates in a hash map with
    # generated code; one string buffer (the first delivery's sub_id) made it sort every
    # row twice per level, and interpret the aggregation (``first_subscriptions`` finds
    # that sub_id for the false positives, the only pairs that need it).
    pairs = both.groupBy("run", "event_id", "node").agg(
        F.min("ts").alias("first_ts"),
        F.min_by("hop", "ts").alias("first_hop"),
        F.sum("n").alias("n_records"),
        F.count("n").alias("n_subs"),
        F.min("sub_start").alias("sub_start"),
        F.max(F.col("n").isNull()).alias("interested"),
    )
    # only the event columns the pairs' metrics read: the pairs are cached, one row per
    # pair, and the run's settings (group keys, ranges) would be stored in every row
    event = pubs.select("run", "event_id", "pub_node", "pub_ts", "deadline_ns", "t0_ns",
                        "measured")
    if events is not None and events <= BROADCAST_EVENTS:
        event = F.broadcast(event)
    pairs = pairs.join(event, ["run", "event_id"], "left")
    is_int = F.coalesce(F.col("interested"), F.lit(False))
    got = F.col("first_ts").isNotNull()
    local = F.col("node") == F.col("pub_node")
    late = F.col("deadline_ns").isNotNull() & (
        F.col("first_ts") > F.col("pub_ts") + F.col("deadline_ns"))
    return (
        pairs.withColumn("interested", is_int)
        .withColumn(
            "state",
            F.when(local, "local")
            .when(is_int & got & late, "late")
            .when(is_int & got, "hit")
            .when(is_int, "miss")
            .otherwise("fp"),
        )
        .withColumn(
            "latency_s",
            F.when(F.col("state") == "hit", (F.col("first_ts") - F.greatest(
                F.col("pub_ts"), F.coalesce(F.col("sub_start"), F.col("pub_ts")))) / 1e9),
        )
        .withColumn("n_records", F.coalesce(F.col("n_records"), F.lit(0)))
        .withColumn("n_subs", F.coalesce(F.col("n_subs"), F.lit(0)))
    )


def per_subscription(records: DataFrame) -> DataFrame:
    """Deliveries per (run, event_id, node, subscription): first ``ts``, its ``hop`` and
    ``sub`` (the record's sub_id), and ``n`` records.

    Plain aggregates (a countDistinct beside the others made Spark expand every deliver
    record into two rows; a collect_set, an object aggregate, falls back to sorting every
    record once a task holds more than 128 pairs:
    spark.sql.objectHashAggregate.sortBased.fallbackThreshold), all with fixed-width
    buffers (hash aggregation, see ``delivery_pairs``): the sub_id is the group's key, so
    only whether the first record's sub_id was null (a null and an empty sub_id share a
    group) is aggregated."""
    key = F.coalesce(F.col("sub_id"), F.lit(""))
    return (
        records.filter(F.col("event") == "deliver")
        .groupBy("run", "event_id", "node", key.alias("_sub"))
        .agg(
            F.min("ts_ns").alias("ts"),
            F.min_by("hop", "ts_ns").alias("hop"),
            F.count(F.lit(1)).alias("n"),
            F.min_by(F.col("sub_id").isNull(), "ts_ns").alias("_no_sub"),
        )
        .withColumn("sub", F.when(~F.col("_no_sub"), F.col("_sub")))
        .drop("_sub", "_no_sub")
    )


def measured_pairs(pairs: DataFrame) -> DataFrame:
    """The pairs of measured events (of ``delivery_pairs``): what every pair metric reads."""
    return pairs.filter(F.col("measured")).drop("measured")


def first_subscriptions(records: DataFrame, pairs: DataFrame) -> DataFrame:
    """``pairs`` (run, event_id, node, first_ts, ...; delivered) with ``first_sub``: the
    sub_id of the pair's first deliver record (of several at that time, the least: a tie
    had no rule before, Spark's ``min_by`` took the first row it met). Meant for a few
    pairs (the false positives): their deliver records are found by a join, not by
    aggregating every deliver record again."""
    firsts = records.filter(F.col("event") == "deliver").select(
        "run", "event_id", "node", F.col("ts_ns").alias("first_ts"), "sub_id")
    return pairs.join(firsts, ["run", "event_id", "node", "first_ts"]).groupBy(
        *pairs.columns).agg(F.min("sub_id").alias("first_sub"))


def _positions_asof(tx: DataFrame, positions: DataFrame, key: str, px: str, py: str) -> DataFrame:
    """Add the last known position (at or before ``ts_ns``) of node ``key`` to each row."""
    pos = positions.select(F.col("run"), F.col("node").alias(key), "ts_ns",
                           F.col("x").alias(px), F.col("y").alias(py),
                           F.lit(1).alias("_is_pos"))
    both = tx.withColumn("_is_pos", F.lit(0)).unionByName(pos, allowMissingColumns=True)
    order = (Window.partitionBy("run", key).orderBy("ts_ns", F.desc("_is_pos"))
             .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    return (
        both.withColumn(px, F.last(px, ignorenulls=True).over(order))
        .withColumn(py, F.last(py, ignorenulls=True).over(order))
        .filter(F.col("_is_pos") == 0)
        .drop("_is_pos")
    )


def traffic(records: DataFrame, pubs: DataFrame, settings: DataFrame,
            message_bits: int | None = None, positions_per_node: int | None = None,
            events: int | None = None) -> DataFrame:
    """tx/rx records inside the measurement, with their radio energy in joules.

    ``message_bits`` charges every transmission as a message of that many bits instead
    of its frame's bytes: the thesis's abstraction (HESPER's Table 4.1, M_b = 320), under
    which protocols whose frames differ in size cost the same per message.
    ``positions_per_node``: the most position records of one node, if the caller counted
    them already (``mesheval.load.Loaded.positions_per_node``); else a scan counts them.
    ``events``: how many events ``pubs`` holds, if the caller counted them; up to
    ``BROADCAST_EVENTS`` their flags are broadcast, so the transmissions (most of a
    run's records) are not shuffled and sorted to meet them.
    """
    radio = records.filter(F.col("event").isin("tx", "rx")).select(
        "run", "node", "event", "ts_ns", "msg_kind", "bytes", "peer", "event_id", "reason"
    )
    charged = F.col("bytes") if message_bits is None else F.lit(message_bits / 8)
    event_flag = pubs.select("run", "event_id", F.col("measured").alias("_event_measured"))
    if events is not None and events <= BROADCAST_EVENTS:
        event_flag = F.broadcast(event_flag)
    radio = radio.join(event_flag, ["run", "event_id"], "left").join(
        settings.select("run", "cutoff_ns", "range_m"), "run"
    )
    radio = radio.withColumn("of_event", F.col("_event_measured").isNotNull()).withColumn(
        "included", F.coalesce(F.col("_event_measured"), F.col("ts_ns") >= F.col("cutoff_ns"))
    ).filter(F.col("included"))
    positions = records.filter(F.col("event") == "position").select(
        "run", "node", "ts_ns", "x", "y")
    tx = radio.filter(F.col("event") == "tx").withColumn("_peer", F.col("peer"))
    if positions_per_node is None:
        most = positions.groupBy("run", "node").count().agg(F.max("count")).first()
        positions_per_node = (most[0] or 0) if most is not None else 0
    if positions_per_node <= 1:
        # static nodes (at most one position each): a broadcast join, no sort of all tx
        place = positions.select("run", "node", "x", "y")
        tx = tx.join(F.broadcast(place.toDF("run", "node", "sx", "sy")), ["run", "node"], "left")
        tx = tx.join(F.broadcast(place.toDF("run", "_peer", "rx_x", "rx_y")), ["run", "_peer"],
                     "left")
    else:
        tx = _positions_asof(tx, positions, "node", "sx", "sy")
        tx = _positions_asof(tx, positions, "_peer", "rx_x", "rx_y")
    distance = F.sqrt(F.pow(F.col("sx") - F.col("rx_x"), 2) + F.pow(F.col("sy") - F.col("rx_y"), 2))
    tx = tx.withColumn(
        "energy_j", tx_energy_column(charged, F.when(F.col("peer").isNotNull(), distance),
                                     F.col("range_m"))
    ).drop("sx", "sy", "rx_x", "rx_y", "_peer")
    rx = radio.filter(F.col("event") == "rx").withColumn(
        "energy_j", rx_energy_column(charged))
    return tx.unionByName(rx)


def drop_count() -> Column:
    """Drops a ``drop`` record stands for: its ``count`` (a periodic summary of a
    high-volume reason such as ``duplicate``), else one (docs/telemetry.md)."""
    return F.coalesce(F.col("count"), F.lit(1))


def drops_by_reason(records: DataFrame) -> Runs:
    """Per run: drops by reason (``drops``) and in all (``drops_total``), both record forms."""
    rows = (records.filter(F.col("event") == "drop").groupBy("run", "reason")
            .agg(F.sum(drop_count()).alias("n")).collect())
    runs: Runs = {}
    for row in sorted(rows, key=lambda r: (r["run"], r["reason"])):
        run = runs.setdefault(row["run"], {"drops": {}, "drops_total": 0})
        run["drops"][row["reason"]] = int(row["n"])
        run["drops_total"] += int(row["n"])
    return runs


def forwarding_fp(records: DataFrame, pubs: DataFrame, settings: DataFrame) -> DataFrame:
    """Per run: reported forwarding false positives (records and counter totals)."""
    marked = records.filter(
        ((F.col("event") == "drop") & (F.col("reason") == FP_FORWARD_REASONS["drop"]))
        | ((F.col("event") == "tx") & (F.col("reason") == FP_FORWARD_REASONS["tx"]))
    ).join(pubs.select("run", "event_id", F.col("measured").alias("_m")), ["run", "event_id"],
           "left").join(settings.select("run", "cutoff_ns"), "run")
    marked = marked.filter(F.coalesce(F.col("_m"), F.col("ts_ns") >= F.col("cutoff_ns")))
    counts = marked.groupBy("run").agg(F.sum(drop_count()).alias("fp_forward_records"))
    counters = (
        records.filter((F.col("event") == "counter")
                       & (F.col("reason") == FP_FORWARD_REASONS["drop"]))
        .groupBy("run", "node").agg(F.max_by("bytes", "ts_ns").alias("last"))
        .groupBy("run").agg(F.sum("last").alias("fp_forward_counter"))
    )
    return counts.join(counters, "run", "full_outer")


Runs = dict[str, dict[str, Any]]


def _merge(runs: Runs, part: Runs) -> None:
    for run, values in part.items():
        runs.setdefault(run, {}).update({k: v for k, v in values.items() if k != "run"})


# Built when used, not at import: pyspark needs a running session for any Column.
def _lat() -> Column:
    return F.col("latency_s")


def _hit() -> Column:
    return F.col("state") == "hit"


def _nonlocal() -> Column:
    return F.col("state") != "local"


def _delivery_stats(pairs: DataFrame) -> Runs:
    """Ground truth against deliveries: ratio, latency, false positives, duplicates."""
    runs = _collect_by_run(pairs.groupBy("run").agg(
        F.sum(_i(F.col("interested") & _nonlocal())).alias("interested_pairs"),
        F.sum(_i(F.col("interested") & _nonlocal() & (F.col("sub_start") > F.col("pub_ts"))))
        .alias("interested_pairs_late"),
        F.sum(_i(_hit())).alias("first_deliveries"),
        F.sum(_i(F.col("state") == "fp")).alias("fp_deliveries"),
        F.sum(_i(F.col("state") == "local")).alias("local_deliveries"),
        F.sum(_i(F.col("state") == "late")).alias("late_deliveries"),
        F.sum(_i(_nonlocal() & (F.col("n_records") > 0))).alias("delivered_pairs"),
        F.sum(F.when(_nonlocal(), F.col("n_records"))).alias("deliver_records"),
        F.sum(F.when(_nonlocal(), F.col("n_records") - F.col("n_subs"))).alias("duplicates"),
        F.sum(F.when(_nonlocal() & (F.col("n_records") > 1), F.col("n_records") - 1))
        .alias("duplicates_per_node"),
        F.avg(_lat()).alias("latency_mean_s"),
        F.avg(F.when(_hit(), F.col("first_hop"))).alias("hop_mean"),
        F.max(F.when(_hit(), F.col("first_hop"))).alias("hop_max"),
        F.min(_lat()).alias("latency_min_s"),
        F.max(_lat()).alias("latency_max_s"),
        F.percentile_approx(_lat(), CDF_POINTS, 10000).alias("_cdf"),
    ))
    # the exact quantiles and the upper median from the latencies sorted once on the
    # driver (mesheval.quantiles), with Spark's rule: no buffers of boxed latencies
    exact = latency_quantiles(pairs.filter(_lat().isNotNull()).select("run", "latency_s")
                              .toArrow(), sorted(runs))
    for run, values in runs.items():
        values.update(exact[run])
    return runs


def _late_subscribers(records: DataFrame, pairs: DataFrame, intervals: DataFrame) -> Runs:
    """False positives whose delivering subscription began after the publish."""
    fp = pairs.filter(F.col("state") == "fp").select("run", "event_id", "node", "first_ts",
                                                     "pub_ts")
    return _collect_by_run(
        first_subscriptions(records, fp)
        .join(intervals.select("run", "node", F.col("sub_id").alias("first_sub"), "start_ns"),
              ["run", "node", "first_sub"])
        .filter((F.col("start_ns") > F.col("pub_ts")) & (F.col("start_ns") <= F.col("first_ts")))
        .select("run", "event_id", "node").distinct()
        .groupBy("run").agg(F.count(F.lit(1)).alias("fp_late_subscriber"))
    )


def _orphans(pairs: DataFrame) -> Runs:
    """Deliver records of events that have no publish record (lost telemetry), from every
    event's pairs (``delivery_pairs``: ``measured`` null; a null ``event_id`` is one
    event there, and an orphan, as each of its records was)."""
    return _collect_by_run(
        pairs.filter(F.col("measured").isNull())
        .groupBy("run").agg(F.sum("n_records").alias("orphan_deliveries"))
    )


def _event_tx(records: DataFrame) -> DataFrame:
    """Data transmissions per event id (``data_tx``), for the measured events to join.

    Counted per event id before meeting the events (one row per event leaves the scan,
    not one per transmission): a transmission counts for a measured event whatever its
    time, as in ``traffic``. Not joined with the measured events here: both readers
    (``_per_event``, ``event_detail``) left-join it to them, which keeps exactly their
    rows, so an inner join before was a shuffle of every event's count for nothing."""
    return (records.filter((F.col("event") == "tx") & (F.col("msg_kind") == "data"))
            .groupBy("run", "event_id").agg(F.count(F.lit(1)).alias("data_tx")))


def event_detail(measured: DataFrame, interested: DataFrame, pairs: DataFrame,
                 event_tx: DataFrame) -> DataFrame:
    """Per measured event, what the optimum needs (see ``Evaluation.event_detail``)."""
    sets = interested.groupBy("run", "event_id").agg(F.collect_list("node").alias("interested"))
    hits = pairs.filter(_hit()).groupBy("run", "event_id").agg(
        F.collect_list(F.struct("node", F.col("first_hop").alias("hop"))).alias("hits"))
    return (measured.select("run", "event_id", "pub_node", "pub_ts", "t0_ns")
            .join(sets, ["run", "event_id"], "left").join(hits, ["run", "event_id"], "left")
            .join(event_tx, ["run", "event_id"], "left"))


def _per_event(measured: DataFrame, pairs: DataFrame, event_tx: DataFrame) -> DataFrame:
    """One row per measured event: its interested set, deliveries, latency, data tx.

    The events' transmission counts join the pairs as rows of their own (null pair
    columns, which every aggregate below skips or counts as 0) in one aggregation per
    event: one join with the events instead of two."""
    rows = pairs.select("run", "event_id", "interested", "state", "n_records", "n_subs",
                        "latency_s").unionByName(event_tx, allowMissingColumns=True)
    return (
        measured.drop("content")
        .join(
            rows.groupBy("run", "event_id").agg(
                F.sum(_i(F.col("interested") & _nonlocal())).alias("interested"),
                F.sum(_i(_hit())).alias("delivered"),
                F.sum(_i(F.col("state") == "fp")).alias("false_positives"),
                F.sum(F.when(_nonlocal(), F.col("n_records") - F.col("n_subs")))
                .alias("duplicates"),
                F.sum(F.when(_nonlocal() & (F.col("n_records") > 1), F.col("n_records") - 1))
                .alias("duplicates_per_node"),
                F.avg(_lat()).alias("latency_mean_s"),
                F.max(_lat()).alias("latency_max_s"),
                F.sum("data_tx").alias("data_tx"),
            ),
            ["run", "event_id"],
            "left",
        )
        .fillna(0, ["interested", "delivered", "false_positives", "duplicates",
                    "duplicates_per_node", "data_tx"])
        .withColumn("pub_time_s", (F.col("pub_ts") - F.col("t0_ns")) / 1e9)
        .withColumn(
            "delivery_ratio",
            F.when(F.col("interested") > 0, F.col("delivered") / F.col("interested")),
        )
        .select("run", "event_id", "topic", "pub_node", "pub_time_s", "interested", "delivered",
                "delivery_ratio", "false_positives", "duplicates", "duplicates_per_node",
                "latency_mean_s", "latency_max_s", "data_tx")
    )


def _event_stats(per_event: DataFrame) -> Runs:
    return _collect_by_run(per_event.groupBy("run").agg(
        F.sum(_i(F.col("interested") > 0)).alias("events_with_interest"),
        F.avg("delivery_ratio").alias("event_delivery_ratio_mean"),
        F.sum(_i(F.col("delivery_ratio") == 1.0)).alias("events_fully_delivered"),
        F.sum(_i((F.col("interested") > 0) & (F.col("delivered") > 0))).alias("events_reached"),
    ))


def _radio_by_node(radio: DataFrame) -> DataFrame:
    """The traffic family's one pass over the radio records: count, bytes and energy per
    (run, tx|rx, msg_kind, node), a few rows per node (the caller caches it);
    ``_traffic_stats`` and the nodes' load (``_tx_load``) are sums of these rows, taken in
    Spark: a sweep of hundreds of runs of thousands of nodes has millions of them
    (9 million for HESPER's 440 runs), which collected to the driver filled its heap."""
    return radio.groupBy("run", "event", "msg_kind", "node").agg(
        F.count(F.lit(1)).alias("n"), F.sum("bytes").alias("b"), F.sum("energy_j").alias("e"),
        F.sum(F.when(F.col("of_event"), F.col("energy_j"))).alias("e_event"),
    )


def _traffic_stats(by_node: DataFrame) -> Runs:
    """Counts, bytes and energy per (tx|rx, msg_kind); data energy of measured events."""
    runs: Runs = {}
    for row in by_node.groupBy("run", "event", "msg_kind").agg(
            F.sum("n").alias("n"), F.sum("b").alias("b"), F.sum("e").alias("e"),
            F.sum("e_event").alias("e_event")).collect():
        r = runs.setdefault(row["run"], {})
        prefix = f"{row['event']}_{row['msg_kind']}"
        r[f"{prefix}_count"] = row["n"]
        r[f"{prefix}_bytes"] = row["b"]
        r[f"{prefix}_energy_j"] = row["e"]
        if row["msg_kind"] == "data":
            r[f"{row['event']}_data_event_energy_j"] = row["e_event"] or 0.0
    return runs


def _tx_load(by_node: DataFrame) -> DataFrame:
    """Per (run, node): transmissions, their bytes and energy (from ``_radio_by_node``)."""
    return by_node.filter(F.col("event") == "tx").groupBy("run", "node").agg(
        F.sum("n").alias("tx"), F.sum("b").alias("tx_bytes"), F.sum("e").alias("tx_energy_j"))


def _windows(pairs: DataFrame, window_s: float) -> list[dict[str, Any]]:
    """Interested and delivered pairs per tumbling window of publish time since t0."""
    windows = [
        row.asDict()
        for row in pairs.filter(_nonlocal() & F.col("interested"))
        .withColumn("window_start_s",
                    F.floor((F.col("pub_ts") - F.col("t0_ns")) / 1e9 / window_s) * window_s)
        .groupBy("run", "window_start_s")
        .agg(F.count(F.lit(1)).alias("interested"), F.sum(_i(_hit())).alias("delivered"))
        .orderBy("run", "window_start_s")
        .collect()
    ]
    for w in windows:
        w["delivery_ratio"] = w["delivered"] / w["interested"] if w["interested"] else None
    return windows


NODE_COLUMNS = ("run", "node", "tx", "tx_bytes", "tx_energy_j", "x", "y", "interested",
                "delivered", "false_positives", "delivery_ratio", "role",
                "state_entries_mean", "state_bytes_mean", "state_bytes_max")
"""The node table's columns, in the order of tables/nodes.csv."""


def _nodes(records: DataFrame, load: DataFrame, pairs: DataFrame, state: DataFrame,
           names: DataFrame | None = None) -> DataFrame:
    """Per (run, node): load (transmissions, bytes, energy: ``_tx_load``), mean position,
    deliveries, state size (``mesheval.state``: null without reports). A DataFrame: a
    sweep has a row per node of every run, millions, which the caller writes with Spark
    (``mesheval.batch``) rather than collects."""
    place = records.filter(F.col("event") == "position").groupBy("run", "node").agg(
        F.avg("x").alias("x"), F.avg("y").alias("y"))
    recv = pairs.filter(_nonlocal()).groupBy("run", "node").agg(
        F.sum(_i(F.col("interested"))).alias("interested"), F.sum(_i(_hit())).alias("delivered"),
        F.sum(_i(F.col("state") == "fp")).alias("false_positives"))
    if names is None:
        names = records.select("run", "node").distinct()
    return (
        names.join(load, ["run", "node"], "left")
        .join(place, ["run", "node"], "left").join(recv, ["run", "node"], "left")
        .fillna(0, ["tx", "tx_bytes", "tx_energy_j", "interested", "delivered", "false_positives"])
        .withColumn("delivery_ratio", F.when(F.col("interested") > 0,
                                             F.col("delivered") / F.col("interested")))
        .join(state, ["run", "node"], "left")
        .select(*NODE_COLUMNS).orderBy("run", "node")
    )


def _may_be_scoped(measured: DataFrame) -> bool:
    """Whether any measured event's content mentions the scope attribute. Without one
    the scope filter keeps every truth row, and skipping it spares a second cache of the
    matcher's rows (a run of a protocol without scoped events, most runs); with one the
    filter decides exactly (a mention in a value only costs the filter)."""
    return bool(measured.filter(F.col("content").contains(SCOPE_ATTR)).limit(1).count())


def _group_cdf(pairs: DataFrame, settings: DataFrame) -> list[dict[str, Any]]:
    """Latency quantiles per configuration, pooled over its runs; in the order of the
    configurations' keys (a collect's order follows the plan, which changed with it)."""
    keys = settings.select("run", *GROUP_KEYS)
    rows = [
        row.asDict()
        for row in pairs.filter(_hit()).select("run", "latency_s")
        .join(F.broadcast(keys), "run")
        .groupBy(*GROUP_KEYS)
        .agg(F.percentile_approx(_lat(), CDF_POINTS, 10000).alias("quantiles"),
             F.count(F.lit(1)).alias("n"))
        .collect()
    ]
    return sorted(rows, key=lambda r: [(r[k] is not None, str(r[k])) for k in GROUP_KEYS])


def evaluate(records: DataFrame, settings: DataFrame, window_s: float = 10.0,
             message_bits: int | None = None, *, cache_window_s: float = 0.0,
             groups: DataFrame | None = None, names: DataFrame | None = None,
             positions_per_node: int | None = None) -> Evaluation:
    """Compute everything per run; ``settings`` from ``mesheval.settings.settings_frame``.

    ``message_bits``: see ``traffic`` (energy per message instead of per frame byte).
    ``cache_window_s``: subscriptions starting this long after a publication still count
    for it. ``groups``: (run, node, group, role) of the scenarios' node groups (scoped
    events, state size by role). ``names``: the (run, node) pairs of the records, if the
    caller knows them already (``mesheval.load.Loaded.census``). ``positions_per_node``:
    see ``traffic``.
    """
    spark = records.sparkSession
    if groups is None:
        groups = spark.createDataFrame([], "run string, node long, group string, role string")
    pubs = publications(records, settings).cache()
    measured = pubs.filter(F.col("measured")).drop("measured")
    intervals = subscription_intervals(records).cache()
    members = member_intervals(records, groups.select("run", "node", "group"))
    matched = interested_truth(measured, intervals, cache_window_s)
    if _may_be_scoped(measured):
        # the matcher's rows are cached before the scope filter too: ``scope_filter``
        # reads them twice (events without a scope, scoped events), and Spark shares no
        # Python UDF's output between two branches of a plan, so the cogrouped matcher
        # ran twice (at 10^6 records 6.9 -> 4.9 CPU-s for the truth, docs/benchmarks.md)
        matched = matched.cache()
        truth = scope_filter(matched, measured, members).cache()
    else:  # no event names a scope: the filter would keep every row, read twice
        truth = matched.cache()
    interested = truth.filter(F.col("status") == "match").select(
        "run", "event_id", "node", F.col("start_ns").alias("sub_start"))
    runs: Runs = {}
    _merge(runs, _collect_by_run(pubs.groupBy("run").agg(
        F.sum(_i(F.col("measured"))).alias("events"),
        F.sum(_i(~F.col("measured"))).alias("events_warmup"),
        F.sum(F.col("pub_records") - 1).alias("publish_duplicates"),
    )))
    published = sum(int(v.get("events") or 0) + int(v.get("events_warmup") or 0)
                    for v in runs.values())
    every_pair = delivery_pairs(records, pubs.drop("content"), interested, published).cache()
    pairs = measured_pairs(every_pair)
    radio = traffic(records, pubs, settings, message_bits, positions_per_node, published)
    # the truth family in one pass, over the rows it counts: a match of an event without
    # a scope adds to none of the three (a countDistinct of three columns expands every
    # row it is given into three)
    _merge(runs, _collect_by_run(truth.filter(
        (F.col("status") != "match") | F.col("scope").isNotNull()).groupBy("run").agg(
        F.countDistinct(F.when(F.col("status") == "bad_event", F.col("event_id")))
        .alias("bad_event_content"),
        F.countDistinct(F.when(F.col("status") == "bad_subscription",
                               F.concat_ws("/", F.col("node"), F.col("sub_id"))))
        .alias("bad_subscription_content"),
        F.countDistinct(F.when(F.col("scope").isNotNull(), F.col("event_id")))
        .alias("scoped_events"),
    )))
    _merge(runs, _delivery_stats(pairs))
    state_runs, state_nodes, state_timeline = state_metrics(
        records, settings, groups.select("run", "node", "role").dropDuplicates(["run", "node"]))
    _merge(runs, state_runs)
    _merge(runs, _collect_by_run(
        records.filter(F.col("event") == "subscribe").groupBy("run")
        .agg(F.countDistinct("node").alias("subscribers"))))
    _merge(runs, _late_subscribers(records, pairs, intervals))
    _merge(runs, _orphans(every_pair))
    event_tx = _event_tx(records).cache()
    # cached: its statistics and the per-event table (written by the caller) read it
    # both, and one row per event is small beside the pairs it is summed from
    per_event = _per_event(measured, pairs, event_tx).cache()
    _merge(runs, _event_stats(per_event))
    by_node = _radio_by_node(radio).cache()
    _merge(runs, _traffic_stats(by_node))
    _merge(runs, _collect_by_run(forwarding_fp(records, pubs, settings)))
    _merge(runs, drops_by_reason(records))
    windows = _windows(pairs, window_s)
    # cached: the caller counts it, collects some or all of it and writes it
    nodes = _nodes(records, _tx_load(by_node), pairs, state_nodes, names).cache()
    group_cdf = _group_cdf(pairs, settings)
    run_cdf = {run: values.pop("_cdf") or [] for run, values in runs.items() if "_cdf" in values}
    for values in runs.values():
        values.pop("_cdf", None)
        _derive(values)
    detail = event_detail(measured, interested, pairs, event_tx)
    return Evaluation(runs, windows, nodes, run_cdf, group_cdf, per_event, state_timeline,
                      cached=[pubs, intervals, matched, truth, every_pair, event_tx,
                              per_event, by_node, state_nodes, nodes],
                      event_detail=detail)


def _ratio(num: float | None, den: float | None) -> float | None:
    if num is None or not den:
        return None
    return num / den


def _derive(m: dict[str, Any]) -> None:
    """Ratios and totals from the counts of one run (in place); None where undefined."""
    m.setdefault("drops", {})
    for key in ("drops_total", "events", "events_warmup", "interested_pairs", "first_deliveries",
                "fp_deliveries", "local_deliveries", "deliver_records", "duplicates",
                "duplicates_per_node", "fp_late_subscriber", "orphan_deliveries",
                "interested_pairs_late", "scoped_events",
                "publish_duplicates", "bad_event_content", "bad_subscription_content",
                "events_with_interest", "events_fully_delivered", "subscribers",
                "late_deliveries", "delivered_pairs", "events_reached"):
        m[key] = int(m.get(key) or 0)
    hits = m["first_deliveries"]
    m["delivery_ratio"] = _ratio(hits, m["interested_pairs"])
    m["fp_ratio"] = _ratio(m["fp_deliveries"], m["fp_deliveries"] + hits)
    m["duplicates_per_delivery"] = _ratio(m["duplicates"], hits)
    m["event_any_delivery_ratio"] = _ratio(m["events_reached"], m["events_with_interest"])
    for event in ("tx", "rx"):
        for kind in MSG_KINDS:
            for what in ("count", "bytes"):
                m[f"{event}_{kind}_{what}"] = int(m.get(f"{event}_{kind}_{what}") or 0)
            m[f"{event}_{kind}_energy_j"] = float(m.get(f"{event}_{kind}_energy_j") or 0.0)
    tx_all = sum(m[f"tx_{k}_count"] for k in MSG_KINDS)
    bytes_all = sum(m[f"tx_{k}_bytes"] for k in MSG_KINDS)
    m["tx_count"] = tx_all
    m["tx_bytes"] = bytes_all
    for kind in MSG_KINDS:
        m[f"tx_{kind}_per_delivery"] = _ratio(m[f"tx_{kind}_count"], hits)
        m[f"bytes_{kind}_per_delivery"] = _ratio(m[f"tx_{kind}_bytes"], hits)
    m["tx_per_delivery"] = _ratio(tx_all, hits)
    m["tx_data_per_event"] = _ratio(m["tx_data_count"], m["events"])
    m["bytes_per_delivery"] = _ratio(bytes_all, hits)
    m["control_share_bytes"] = _ratio(bytes_all - m["tx_data_bytes"], bytes_all)
    m["overhead_ratio"] = _ratio(m["tx_data_count"] - hits, hits) if hits else None
    m["overhead_ratio_rx"] = _ratio(m["rx_data_count"] - hits, hits) if hits else None
    m["rx_data_per_delivery"] = _ratio(m["rx_data_count"], hits)
    energy = sum(m[f"{e}_{k}_energy_j"] for e in ("tx", "rx") for k in MSG_KINDS)
    data_event = float(m.pop("tx_data_event_energy_j", 0.0) or 0.0) + float(
        m.pop("rx_data_event_energy_j", 0.0) or 0.0)
    m["energy_j"] = energy
    m["energy_data_j"] = data_event
    m["energy_per_event_j"] = _ratio(data_event, m["events"])
    m["energy_per_subscriber_j"] = _ratio(data_event, m["interested_pairs"])
    m["energy_per_delivery_j"] = _ratio(energy, hits)
    m["energy_subscription_j"] = m["tx_subscription_energy_j"] + m["rx_subscription_energy_j"]
    m["energy_subscription_per_subscriber_j"] = _ratio(m["energy_subscription_j"],
                                                       m["subscribers"])
    records_fp = m.pop("fp_forward_records", None)
    counter_fp = m.pop("fp_forward_counter", None)
    m["fp_forward"] = (int(records_fp) if records_fp
                       else int(counter_fp) if counter_fp is not None else None)
    fpf = m["fp_forward"]
    m["fp_forward_share"] = (None if fpf is None
                             else _ratio(fpf, fpf + m["delivered_pairs"]))
