"""Streaming mode: Structured Streaming over a JSON Lines spool, summarised as it goes.

Four queries over the spool (new files only; hidden temp files are ignored, which
is why writers rename finished files into place):

- ``control``: publish/subscribe/unsubscribe records, the input of the ground truth;
- ``deliveries``: every deliver record (raw, for duplicate counts);
- ``first``: deliveries de-duplicated with ``dropDuplicatesWithinWatermark`` on
  (run, event_id, node) and joined to their publish within ``ttl`` (watermarks on
  both sides), i.e. first deliveries with their latency;
- ``invalid``: the lines the schema checks rejected (file, reason).

Each lands in a Parquet sink with a checkpoint, so a later run resumes where the
last stopped. The summary (delivery ratio, latency, per-window ratio) is then
computed from the sinks with the batch ground truth (``mesheval.truth``).
With ``once``, the queries use ``trigger(availableNow=True)``: bounded runs, CI.

Unlike the batch job, "first" means first to *arrive* within a micro-batch and
the warm-up counts from the first control record of a run.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming.query import StreamingQuery

from mesheval.batch import clean, write_json
from mesheval.schema import CORRUPT, ERROR, FILE, error_column, record_schema
from mesheval.truth import ground_truth, subscription_intervals


def _source(spark: SparkSession, spool: Path) -> DataFrame:
    return (
        spark.readStream.schema(record_schema())
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .option("recursiveFileLookup", "true")
        .option("pathGlobFilter", "*.jsonl")
        .json(str(spool))
        .withColumn(FILE, F.col("_metadata.file_path"))
        .withColumn(ERROR, error_column())
    )


def _start(frame: DataFrame, out: Path, name: str, once: bool, interval_s: float
           ) -> StreamingQuery:
    writer = (frame.writeStream.format("parquet").outputMode("append")
              .option("path", str(out / name))
              .option("checkpointLocation", str(out / "_checkpoints" / name)))
    if once:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=f"{interval_s:g} seconds")
    return writer.start()


def start_queries(spark: SparkSession, spool: Path, out: Path, *, once: bool,
                  interval_s: float, ttl_s: float) -> list[StreamingQuery]:
    src = _source(spark, spool)
    valid = src.filter(F.col(ERROR).isNull()).withColumn(
        "ts", F.timestamp_seconds(F.col("ts_ns") / 1e9))
    invalid = src.filter(F.col(ERROR).isNotNull()).select(FILE, ERROR)
    control = valid.filter(F.col("event").isin("publish", "subscribe", "unsubscribe")).select(
        "run", "node", "protocol", "ts_ns", "event", "event_id", "sub_id", "topic", "content",
        "rec")
    deliver = valid.filter(F.col("event") == "deliver").select(
        "run", "node", "event_id", "sub_id", "ts_ns", "ts")
    ttl = f"{ttl_s:g} seconds"
    pubs = (valid.filter(F.col("event") == "publish")
            .select(F.col("run").alias("p_run"), F.col("event_id").alias("p_event_id"),
                    F.col("node").alias("pub_node"), F.col("ts_ns").alias("pub_ts"),
                    F.col("ts").alias("pub_time"))
            .withWatermark("pub_time", ttl))
    firsts = (deliver.withWatermark("ts", ttl)
              .dropDuplicatesWithinWatermark(["run", "event_id", "node"]))
    joined = firsts.join(
        pubs,
        F.expr(f"run = p_run AND event_id = p_event_id AND ts >= pub_time "
               f"AND ts <= pub_time + INTERVAL {int(ttl_s)} SECONDS"),
    ).select("run", "event_id", "node", "pub_node", "pub_ts", F.col("ts_ns").alias("first_ts"),
             ((F.col("ts_ns") - F.col("pub_ts")) / 1e9).alias("latency_s"))
    return [
        _start(control, out, "control", once, interval_s),
        _start(deliver.drop("ts"), out, "deliveries", once, interval_s),
        _start(joined, out, "first", once, interval_s),
        _start(invalid, out, "invalid", once, interval_s),
    ]


def _read(spark: SparkSession, path: Path) -> DataFrame | None:
    if not path.is_dir() or not any(path.glob("*.parquet")):
        return None
    return spark.read.parquet(str(path))


def summarise(spark: SparkSession, out: Path, *, warmup_s: float, window_s: float
              ) -> dict[str, Any]:
    """Running figures per run from what the sinks hold so far."""
    summary: dict[str, Any] = {"updated_unix": time.time(), "warmup_s": warmup_s, "runs": {}}
    bad = _read(spark, out / "invalid")
    summary["invalid_lines"] = bad.count() if bad is not None else 0
    control = _read(spark, out / "control")
    first = _read(spark, out / "first")
    raw = _read(spark, out / "deliveries")
    if control is None:
        return summary
    starts = control.groupBy("run").agg(F.min("ts_ns").alias("t0_ns"))
    pubs = (control.filter(F.col("event") == "publish").groupBy("run", "event_id")
            .agg(F.min_by("node", "ts_ns").alias("pub_node"), F.min("ts_ns").alias("pub_ts"),
                 F.min_by("topic", "ts_ns").alias("topic"),
                 F.min_by("content", "ts_ns").alias("content"))
            .join(starts, "run")
            .filter(F.col("pub_ts") >= F.col("t0_ns") + int(warmup_s * 1e9)))
    truth = ground_truth(pubs, subscription_intervals(control))
    interested = (truth.filter(F.col("status") == "match")
                  .select("run", "event_id", "node").distinct()
                  .join(pubs.select("run", "event_id", "pub_ts", "t0_ns"), ["run", "event_id"]))
    if first is not None:
        hits = first.select("run", "event_id", "node", "latency_s")
        pairs = interested.join(hits, ["run", "event_id", "node"], "left")
    else:
        pairs = interested.withColumn("latency_s", F.lit(None).cast("double"))
    got = F.col("latency_s").isNotNull()
    runs = summary["runs"]
    for row in pairs.groupBy("run").agg(
        F.count(F.lit(1)).alias("interested_pairs"),
        F.sum(F.when(got, 1).otherwise(0)).alias("first_deliveries"),
        F.avg("latency_s").alias("latency_mean_s"),
        F.percentile("latency_s", 0.5).alias("latency_median_s"),
        F.percentile("latency_s", 0.95).alias("latency_p95_s"),
        F.percentile("latency_s", 0.99).alias("latency_p99_s"),
        F.max("latency_s").alias("latency_max_s"),
    ).collect():
        values = row.asDict()
        run = values.pop("run")
        values["delivery_ratio"] = (values["first_deliveries"] / values["interested_pairs"]
                                    if values["interested_pairs"] else None)
        runs[run] = values
    for row in pubs.groupBy("run").agg(F.count(F.lit(1)).alias("events")).collect():
        runs.setdefault(row["run"], {})["events"] = row["events"]
    if raw is not None and first is not None:
        raw_n = {r["run"]: r["n"] for r in
                 raw.join(pubs.select("run", "event_id", "pub_node"), ["run", "event_id"])
                 .filter(F.col("node") != F.col("pub_node"))
                 .groupBy("run").agg(F.count(F.lit(1)).alias("n")).collect()}
        # as the batch job: copies beyond the first per (event, node, subscription)
        sub_n = {r["run"]: r["n"] for r in
                 raw.join(pubs.select("run", "event_id", "pub_node"), ["run", "event_id"])
                 .filter(F.col("node") != F.col("pub_node"))
                 .select("run", "event_id", "node", F.coalesce(F.col("sub_id"), F.lit("")))
                 .distinct().groupBy("run").agg(F.count(F.lit(1)).alias("n")).collect()}
        for run, n in raw_n.items():
            runs.setdefault(run, {})["duplicates"] = n - sub_n.get(run, 0)
    windows = (pairs.withColumn("window_start_s", F.floor(
        (F.col("pub_ts") - F.col("t0_ns")) / 1e9 / window_s) * window_s)
        .groupBy("run", "window_start_s")
        .agg(F.count(F.lit(1)).alias("interested"),
             F.sum(F.when(got, 1).otherwise(0)).alias("delivered"))
        .orderBy("run", "window_start_s").collect())
    for w in windows:
        runs.setdefault(w["run"], {}).setdefault("windows", []).append(
            {"window_start_s": w["window_start_s"], "interested": w["interested"],
             "delivered": w["delivered"],
             "delivery_ratio": w["delivered"] / w["interested"] if w["interested"] else None})
    cleaned: dict[str, Any] = clean(summary)
    return cleaned


def follow(spark: SparkSession, spool: Path, out: Path, *, once: bool, interval_s: float = 10.0,
           ttl_s: float = 300.0, window_s: float = 10.0, warmup_s: float = 0.0
           ) -> dict[str, Any]:
    """Run the streaming queries; with ``once`` until the spool is drained, else until ^C.

    The summary is rewritten to ``out/stream/summary.json`` after every interval.
    """
    sinks = out / "stream"
    sinks.mkdir(parents=True, exist_ok=True)
    queries = start_queries(spark, spool, sinks, once=once, interval_s=interval_s, ttl_s=ttl_s)
    try:
        if once:
            for query in queries:
                query.awaitTermination()
        else:
            try:
                while all(q.isActive for q in queries):
                    time.sleep(interval_s)
                    write_json(sinks / "summary.json",
                               summarise(spark, sinks, warmup_s=warmup_s, window_s=window_s))
            except KeyboardInterrupt:
                pass  # Ctrl-C ends following; the final summary below still runs
    finally:
        for query in queries:
            if query.isActive:
                query.stop()
    for query in queries:
        error = query.exception()
        if error is not None:
            raise RuntimeError(f"streaming query failed: {error}")
    summary = summarise(spark, sinks, warmup_s=warmup_s, window_s=window_s)
    write_json(sinks / "summary.json", summary)
    return summary


def format_summary(summary: dict[str, Any]) -> str:
    lines = ["run  events  interested  delivered  ratio  latency mean/median/p95 s  duplicates"]
    for run, v in sorted(summary.get("runs", {}).items()):
        def f(x: Any) -> str:
            return "n/a" if x is None else f"{x:.3g}" if isinstance(x, float) else str(x)
        lines.append(
            f"{run}  {f(v.get('events'))}  {f(v.get('interested_pairs'))}  "
            f"{f(v.get('first_deliveries'))}  {f(v.get('delivery_ratio'))}  "
            f"{f(v.get('latency_mean_s'))}/{f(v.get('latency_median_s'))}/"
            f"{f(v.get('latency_p95_s'))}  {f(v.get('duplicates'))}")
    lines.append(f"invalid lines: {summary.get('invalid_lines', 0)}")
    return "\n".join(lines)
