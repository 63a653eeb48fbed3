"""Ground truth: which nodes were interested in each event when it was published.

A node is interested in an event iff one of its subscriptions was active at the
event's publish time and ``Subscription.matches`` (the one matcher of
``meshsub.core``) accepts the event. Subscriptions are replayed into intervals
[subscribe, next unsubscribe or re-subscribe of the same sub_id); events and
intervals meet per (run, topic) in a cogrouped pandas UDF, so the work is split
by topic and only same-topic pairs are ever compared.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import pandas_udf
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

TRUTH_SCHEMA = StructType(
    [
        StructField("run", StringType()),
        StructField("event_id", StringType()),
        StructField("node", LongType()),
        StructField("sub_id", StringType()),
        StructField("status", StringType()),
    ]
)
"""One row per matching (event, node, subscription); ``status`` 'match', or 'bad_event' /
'bad_subscription' (with the offending id) for content the parser rejected."""


def subscription_intervals(records: DataFrame) -> DataFrame:
    """(run, node, sub_id, topic, content, start_ns, end_ns) per subscribe record.

    ``end_ns`` is the time of the next subscribe/unsubscribe of the same
    (run, node, sub_id), or null (still active at the end of the run).
    """
    ops = records.filter(F.col("event").isin("subscribe", "unsubscribe")).select(
        "run", "node", "sub_id", "event", "ts_ns", "topic", "content",
        F.coalesce(F.col("rec"), F.lit(0)).alias("_rec"),
    )
    order = Window.partitionBy("run", "node", "sub_id").orderBy("ts_ns", "_rec")
    return (
        ops.withColumn("end_ns", F.lead("ts_ns").over(order))
        .filter(F.col("event") == "subscribe")
        .select("run", "node", "sub_id", "topic", "content",
                F.col("ts_ns").alias("start_ns"), "end_ns")
    )


def _match_group(events: pd.DataFrame, subs: pd.DataFrame) -> pd.DataFrame:
    """All active, matching (event, subscription) pairs of one (run, topic)."""
    from meshsub.core.syntax import parse_event, parse_subscription

    out: list[tuple[Any, ...]] = []
    if events.empty or subs.empty:
        return pd.DataFrame(out, columns=TRUTH_SCHEMA.fieldNames())
    run = events["run"].iat[0]
    parsed_events = []
    for event_id, pub_node, pub_ts, content in zip(
        events["event_id"], events["pub_node"], events["pub_ts"], events["content"], strict=True
    ):
        try:
            parsed_events.append((event_id, int(pub_node), int(pub_ts), parse_event(content)))
        except ValueError:
            out.append((run, event_id, None, None, "bad_event"))
    for node, sub_id, start, end, content in zip(
        subs["node"], subs["sub_id"], subs["start_ns"], subs["end_ns"], subs["content"], strict=True
    ):
        try:
            sub = parse_subscription(content)
        except ValueError:
            out.append((run, None, int(node), sub_id, "bad_subscription"))
            continue
        start_ns = int(start)
        end_ns = None if pd.isna(end) else int(end)
        for event_id, pub_node, pub_ts, event in parsed_events:
            if pub_node == node or pub_ts < start_ns or (end_ns is not None and pub_ts >= end_ns):
                continue
            if sub.matches(event):
                out.append((run, event_id, int(node), sub_id, "match"))
    return pd.DataFrame(out, columns=TRUTH_SCHEMA.fieldNames())


def _topic_matches(filters: pd.Series, topics: pd.Series) -> pd.Series:
    from meshsub.core.topics import topic_matches

    return pd.Series([topic_matches(f, t) for f, t in zip(filters, topics, strict=True)])


_filter_matches: Any = pandas_udf(_topic_matches, BooleanType())  # type: ignore[call-overload]


def by_event_topic(events: DataFrame, intervals: DataFrame) -> DataFrame:
    """Intervals keyed by the event topics they can match (MQTT wildcards expanded).

    A filter without ``+``/``#`` is its own topic; a wildcard filter is paired with
    each distinct topic published in its run that ``topic_matches`` accepts.
    """
    wild = F.col("topic").contains("+") | F.col("topic").contains("#")
    exact = intervals.filter(~wild)
    topics = events.select(F.col("run").alias("_run"), F.col("topic").alias("_topic")).distinct()
    expanded = (
        intervals.filter(wild)
        .join(topics, F.col("run") == F.col("_run"))
        .filter(_filter_matches(F.col("topic"), F.col("_topic")))
        .withColumn("topic", F.col("_topic"))
        .drop("_run", "_topic")
    )
    return exact.unionByName(expanded)


def ground_truth(events: DataFrame, intervals: DataFrame) -> DataFrame:
    """Matching rows (``TRUTH_SCHEMA``) for ``events`` (run, event_id, pub_node, pub_ts,
    topic, content) against ``intervals`` (from ``subscription_intervals``).

    The publisher itself is never in the interested set of its own event
    (local delivery is not a network delivery).
    """
    ev = events.select("run", "topic", "event_id", "pub_node", "pub_ts", "content")
    # fresh column ids on one side: both sides descend from the same records, and a
    # cogroup of two plans sharing attribute ids is rejected as an ambiguous self-join
    sb = by_event_topic(ev, intervals).select(
        *(F.col(c).alias(c) for c in ("run", "topic", "node", "sub_id", "start_ns", "end_ns",
                                      "content")))
    return (
        ev.groupBy("run", "topic")
        .cogroup(sb.groupBy("run", "topic"))
        .applyInPandas(_match_group, schema=TRUTH_SCHEMA)
    )
