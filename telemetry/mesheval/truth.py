"""Ground truth: which nodes were interested in each event when it was published.

A node is interested in an event iff one of its subscriptions was active at the
event's publish time and ``Subscription.matches`` (the one matcher of
``meshsub.core``) accepts the event. Subscriptions are replayed into intervals
[subscribe, next unsubscribe or re-subscribe of the same sub_id); events and
intervals meet per (run, topic) in a cogrouped pandas UDF, so the work is split
by topic and only same-topic pairs are ever compared.

Two refinements for the protocols that need them (docs/evaluation.md):

- **cache window**: with ``window_ns`` > 0, a subscription that starts up to that
  long *after* the publication counts too (``late``): a protocol that keeps
  publications in a cache (BRVST's zone managers, Li and Wang 2014, §IV) can still
  serve it, and its matching time runs from the subscription;
- **scoped events**: an event whose ``_scope`` attribute names a group counts only
  the members of that group at publish time; ``@origin[:PREFIX]`` names the
  groups its publisher was in (TG's local events, Liu 2011, §4.2). Memberships
  come from the manifest's node groups and from ``member`` records
  (``scope_filter``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.pandas.functions import pandas_udf
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

SCOPE_ATTR = "_scope"

TRUTH_SCHEMA = StructType(
    [
        StructField("run", StringType()),
        StructField("event_id", StringType()),
        StructField("node", LongType()),
        StructField("sub_id", StringType()),
        StructField("status", StringType()),
        StructField("start_ns", LongType()),
        StructField("scope", StringType()),
    ]
)
"""One row per matching (event, node, subscription); ``status`` 'match', or 'bad_event' /
'bad_subscription' (with the offending id) for content the parser rejected. ``start_ns``
is the subscription's start (after the publication for a cache-window match), ``scope``
the event's ``_scope`` (null: every node)."""


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


def _match_group(events: pd.DataFrame, subs: pd.DataFrame, window_ns: int = 0,
                 pairs: bool = False) -> pd.DataFrame:
    """All active, matching (event, subscription) pairs of one (run, topic).

    Active: started by the publication, or up to ``window_ns`` after it; not ended
    before it. Vectorised: each subscription's time and publisher test runs over all
    the group's events at once (numpy), and ``Subscription.matches`` is asked once per
    distinct (subscription text, event text) pair (both parsers and the matcher are pure
    functions of the text), so a run's millions of candidate pairs cost a few thousand
    matcher calls. Rows come out in the order of the row-wise loop this replaces
    (subscription by subscription, events in their input order).

    ``pairs``: one match row per (event, node) instead, with the earliest start of the
    node's matching subscriptions and no ``sub_id`` (``interested_truth``). Every
    subscription that can match an event is in the event's (run, topic) group (wildcard
    filters are expanded into each topic they accept: ``by_event_topic``), so the pairs
    are complete and distinct here, without a shuffle of every match row to dedupe them.
    """
    from meshsub.core.disjunction import delivery_group
    from meshsub.core.syntax import parse_event, parse_subscription

    columns = TRUTH_SCHEMA.fieldNames()
    if events.empty or subs.empty:
        return pd.DataFrame([], columns=columns)
    run = events["run"].iat[0]
    parsed: dict[str, Any] = {}  # event text -> Event, or None if the parser rejects it
    for content in events["content"].unique():
        try:
            parsed[content] = parse_event(content)
        except ValueError:
            parsed[content] = None
    ok = events["content"].map(lambda c: parsed[c] is not None).to_numpy(dtype=bool)
    blocks: list[pd.DataFrame] = [pd.DataFrame({  # bad events first, as the loop had them
        "run": run, "event_id": events["event_id"].to_numpy(dtype=object)[~ok], "node": None,
        "sub_id": None, "status": "bad_event", "start_ns": None, "scope": None},
        columns=columns)]
    good = events[ok]
    ids = good["event_id"].to_numpy(dtype=object)
    pub_node = good["pub_node"].to_numpy(dtype="int64")
    pub_ts = good["pub_ts"].to_numpy(dtype="int64")
    codes, texts = pd.factorize(good["content"], use_na_sentinel=False)
    distinct = [parsed[t] for t in texts]
    scopes = np.array([s if isinstance(s := e.attrs.get(SCOPE_ATTR), str) else None
                       for e in distinct], dtype=object)
    verdicts: dict[str, np.ndarray] = {}  # subscription text -> per event text: -1 unknown
    subscriptions: dict[str, Any] = {}
    found: list[tuple[np.ndarray, int, int]] = []  # pairs: (event rows, node, start) per sub
    for node, sub_id, start, end, content in zip(
        subs["node"], subs["sub_id"], subs["start_ns"], subs["end_ns"], subs["content"], strict=True
    ):
        if content not in subscriptions:
            try:
                subscriptions[content] = parse_subscription(content)
            except ValueError:
                subscriptions[content] = None
        sub = subscriptions[content]
        if sub is None:
            blocks.append(pd.DataFrame([(run, None, int(node), sub_id, "bad_subscription",
                                         None, None)], columns=columns))
            continue
        start_ns = int(start)
        active = (pub_node != int(node)) & (pub_ts + window_ns >= start_ns)
        if not pd.isna(end):
            active &= pub_ts < int(end)
        candidates = np.flatnonzero(active)
        if candidates.size == 0:
            continue
        verdict = verdicts.setdefault(content, np.full(len(texts), -1, dtype=np.int8))
        wanted = codes[candidates]
        for code in np.unique(wanted[verdict[wanted] < 0]):
            verdict[code] = 1 if sub.matches(distinct[code]) else 0
        hits = candidates[verdict[wanted] == 1]
        if hits.size and pairs:
            found.append((hits, int(node), start_ns))
        elif hits.size:
            blocks.append(pd.DataFrame({
                "run": run, "event_id": ids[hits], "node": int(node),
                # the members of a disjunction are one subscription
                "sub_id": delivery_group(sub_id), "status": "match", "start_ns": start_ns,
                "scope": scopes[codes[hits]]}, columns=columns))
    if found:
        blocks.append(_earliest_pairs(run, ids, scopes[codes], found, columns))
    return pd.concat(blocks, ignore_index=True)


def _earliest_pairs(run: str, ids: np.ndarray, scopes: np.ndarray,
                    found: list[tuple[np.ndarray, int, int]], columns: list[str]
                    ) -> pd.DataFrame:
    """One match row per (event, node) of ``found`` (event rows, node, start per matching
    subscription), with the earliest start: a node interested through several
    subscriptions (or a disjunction's members) is one interested pair."""
    event = np.concatenate([hits for hits, _, _ in found])
    node = np.concatenate([np.full(hits.size, n, dtype="int64") for hits, n, _ in found])
    start = np.concatenate([np.full(hits.size, s, dtype="int64") for hits, _, s in found])
    order = np.lexsort((start, node, event))  # by event, node, then start: first is earliest
    event, node, start = event[order], node[order], start[order]
    first = np.ones(event.size, dtype=bool)
    first[1:] = (event[1:] != event[:-1]) | (node[1:] != node[:-1])
    event, node, start = event[first], node[first], start[first]
    return pd.DataFrame({"run": run, "event_id": ids[event], "node": node, "sub_id": None,
                         "status": "match", "start_ns": start, "scope": scopes[event]},
                        columns=columns)


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


def ground_truth(events: DataFrame, intervals: DataFrame, window_s: float = 0.0) -> DataFrame:
    """Matching rows (``TRUTH_SCHEMA``) for ``events`` (run, event_id, pub_node, pub_ts,
    topic, content) against ``intervals`` (from ``subscription_intervals``); subscriptions
    starting up to ``window_s`` after a publication count for it (the cache window).

    The publisher itself is never in the interested set of its own event
    (local delivery is not a network delivery).
    """
    # two alternatives of one disjunction matching an event owe one delivery (deliveries
    # name the group: meshsub.core.disjunction); other rows are distinct already
    return _cogrouped(events, intervals, window_s, pairs=False).dropDuplicates(
        ["run", "event_id", "node", "sub_id", "status"])


def interested_truth(events: DataFrame, intervals: DataFrame, window_s: float = 0.0
                     ) -> DataFrame:
    """``ground_truth`` with one match row per interested (event, node) pair: ``start_ns``
    the earliest start of the node's matching subscriptions, ``sub_id`` null (the batch
    job's pairs need no more). Built inside each (run, topic) group (``_match_group``),
    so no shuffle of every match row dedupes them; the other rows as in ``ground_truth``
    but not deduplicated (a bad subscription of a wildcard filter once per topic)."""
    return _cogrouped(events, intervals, window_s, pairs=True)


def _cogrouped(events: DataFrame, intervals: DataFrame, window_s: float, *, pairs: bool
               ) -> DataFrame:
    """``_match_group`` of each (run, topic): its events against its intervals."""
    window_ns = round(window_s * 1e9)
    ev = events.select("run", "topic", "event_id", "pub_node", "pub_ts", "content")
    # fresh column ids on one side: both sides descend from the same records, and a
    # cogroup of two plans sharing attribute ids is rejected as an ambiguous self-join
    sb = by_event_topic(ev, intervals).select(
        *(F.col(c).alias(c) for c in ("run", "topic", "node", "sub_id", "start_ns", "end_ns",
                                      "content")))
    return (
        ev.groupBy("run", "topic")
        .cogroup(sb.groupBy("run", "topic"))
        .applyInPandas(lambda e, s: _match_group(e, s, window_ns, pairs), schema=TRUTH_SCHEMA)
    )


def member_intervals(records: DataFrame, static: DataFrame) -> DataFrame:
    """(run, node, group, start_ns, end_ns): who was in which group when.

    ``static`` holds the scenario's node groups (run, node, group), members for the
    whole run; ``member`` records add the groups protocols form, [join, next join or
    leave of the same group).
    """
    ops = records.filter(F.col("event") == "member").select(
        "run", "node", "group", "ts_ns", "reason",
        F.coalesce(F.col("rec"), F.lit(0)).alias("_rec"))
    order = Window.partitionBy("run", "node", "group").orderBy("ts_ns", "_rec")
    dynamic = (
        ops.withColumn("end_ns", F.lead("ts_ns").over(order))
        .filter(F.col("reason") == "join")
        .select("run", "node", "group", F.col("ts_ns").alias("start_ns"), "end_ns")
    )
    fixed = static.select("run", "node", "group", F.lit(0).cast("long").alias("start_ns"),
                          F.lit(None).cast("long").alias("end_ns"))
    return fixed.unionByName(dynamic)


def _at(ts: str) -> Column:
    return (F.col("_ms") <= F.col(ts)) & (F.col("_me").isNull() | (F.col(ts) < F.col("_me")))


def scope_filter(truth: DataFrame, events: DataFrame, members: DataFrame) -> DataFrame:
    """The truth rows of scoped events kept only for members of the scope at publish time;
    rows of events without a scope unchanged.

    ``truth`` is read twice (its unscoped rows and its scoped ones): pass it cached when
    it is a UDF's output (``interested_truth``), or the UDF runs once per read."""
    pubs = events.select("run", "event_id", "pub_node", "pub_ts")
    free = truth.filter(F.col("scope").isNull())
    scoped = truth.filter(F.col("scope").isNotNull()).join(pubs, ["run", "event_id"])

    def m() -> DataFrame:  # fresh column ids each time: the sides share their lineage
        return members.select(*(F.col(a).alias(b) for a, b in (
            ("run", "_m_run"), ("node", "_m_node"), ("group", "_g"), ("start_ns", "_ms"),
            ("end_ns", "_me"))))

    same_run = F.col("run") == F.col("_m_run")
    named = scoped.filter(~F.col("scope").startswith("@")).join(
        m(), same_run & (F.col("node") == F.col("_m_node")) & (F.col("scope") == F.col("_g"))
        & _at("pub_ts"), "left_semi")
    origin = scoped.filter(F.col("scope").startswith("@origin")).withColumn(
        "_prefix", F.regexp_extract("scope", r"^@origin:?(.*)$", 1))
    publisher_groups = origin.join(
        m(), same_run & (F.col("_m_node") == F.col("pub_node")) & _at("pub_ts")
        & F.col("_g").startswith(F.col("_prefix"))).select(
        *truth.columns, "pub_ts", F.col("_g").alias("_pub_group"))
    same_group = publisher_groups.join(
        m(), same_run & (F.col("node") == F.col("_m_node"))
        & (F.col("_pub_group") == F.col("_g")) & _at("pub_ts"), "left_semi")
    keep = named.select(*truth.columns).unionByName(same_group.select(*truth.columns))
    return free.unionByName(keep.distinct())
