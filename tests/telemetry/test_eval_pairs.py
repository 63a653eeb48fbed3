"""Interested pairs built inside the ground truth's (run, topic) groups, and the delivery
pairs as one aggregation of the interested and the delivered side (mesheval.truth,
mesheval.metrics.delivery_pairs), on hand-built runs.

The bugs these guard against: a node with several matching subscriptions counted as
several interested pairs (or its deliveries as several pairs), a pair given the start of
a later subscription than its earliest (a cache window's latency runs from the earliest
matching subscription), a delivered but uninterested pair lost or counted interested.

Timeline of the run (seconds; warm-up 5 s, t0 = 0 from the first record at t=0.5);
topic ``temp``; E1 by node 1 at t=10, ``temp x=1``:

- node 2: ``s`` (``temp``, from t=1) and ``t`` (``temp x>0``, from t=2) both match; ``s``
  gets E1 at 10.4 and again at 10.9, ``t`` at 10.5: one interested pair, first delivery
  10.4 (latency 0.4), 3 records, 2 subscriptions: 1 duplicate, 2 beyond the first per node;
- node 3: the disjunction ``g|0`` / ``g|1`` (both match, one delivery owed, named ``g``)
  from t=1 and the wildcard filter ``#`` from t=1: one pair, delivered at 10.6;
- node 4: ``late`` (``temp``) from t=12 and ``later`` (``temp x>0``) from t=14; delivered
  once at 13 under ``late``. Without a cache window not interested (a false positive by a
  late subscriber); with a 5 s window interested from its *earliest* start, 12: latency
  1.0 (from 14 it would be -1);
- node 5: ``gone`` from t=1 to its unsubscribe at t=8: not interested; delivered at 10.7:
  a false positive, not a late subscriber;
- node 6: ``cold`` (``temp x>5``) from t=1, no match: not interested, nothing delivered.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd
import pytest

RUN = "pairs"
S = 1_000_000_000
E1 = "1-0-1"


def records() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []

    def add(node: int, t: float, event: str, **attrs: Any) -> None:
        out.append({"run": RUN, "node": node, "protocol": "flooding", "ts_ns": round(t * S),
                    "event": event, **attrs})

    add(1, 0.5, "position", x=0.0, y=0.0)
    for node, sub_id, t, content in (
            (2, "s", 1, "temp"), (2, "t", 2, "temp x>0"),
            (3, "g|0", 1, "temp x>0"), (3, "g|1", 1, "temp x<5"),
            (4, "late", 12, "temp"), (4, "later", 14, "temp x>0"),
            (5, "gone", 1, "temp"), (6, "cold", 1, "temp x>5")):
        add(node, t, "subscribe", sub_id=sub_id, topic="temp", content=content)
    add(3, 1, "subscribe", sub_id="w", topic="#", content="#")
    add(5, 8, "unsubscribe", sub_id="gone")
    add(1, 10, "publish", event_id=E1, topic="temp", content="temp x=1")
    for node, sub_id, t in ((2, "s", 10.4), (2, "s", 10.9), (2, "t", 10.5), (3, "g", 10.6),
                            (4, "late", 13.0), (5, "gone", 10.7)):
        add(node, t, "deliver", event_id=E1, sub_id=sub_id, hop=1, topic="temp")
    return out


@pytest.fixture(scope="module")
def evaluated(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[float, Any]:
    from mesheval.batch import run_batch

    base = tmp_path_factory.mktemp("pairs-eval")
    rundir = base / "run"
    rundir.mkdir()
    (rundir / "node-all.jsonl").write_text("\n".join(json.dumps(r) for r in records()) + "\n")
    return {window: run_batch(spark, [rundir], base / f"out{window:g}", warmup_s=5.0,
                              cache_window_s=window, optimum=False)
            for window in (0.0, 5.0)}


@pytest.mark.slow
def test_several_matching_subscriptions_make_one_pair(evaluated: Any) -> None:
    m = evaluated[0.0].evaluation.runs[RUN]
    assert m["events"] == 1
    assert (m["interested_pairs"], m["first_deliveries"]) == (2, 2)  # nodes 2 and 3
    assert m["fp_deliveries"] == 2 and m["fp_late_subscriber"] == 1  # 4 (late) and 5
    assert m["delivered_pairs"] == 4 and m["deliver_records"] == 6
    assert m["duplicates"] == 1  # node 2's second copy under s; t's copy is its own
    assert m["duplicates_per_node"] == 2
    assert m["latency_min_s"] == pytest.approx(0.4)
    assert m["latency_max_s"] == pytest.approx(0.6)
    assert m["interested_pairs_late"] == 0
    nodes = {n["node"]: n for n in evaluated[0.0].document["nodes"]}
    assert [nodes[i]["interested"] for i in range(1, 7)] == [0, 1, 1, 0, 0, 0]
    assert [nodes[i]["false_positives"] for i in range(1, 7)] == [0, 0, 0, 1, 1, 0]


@pytest.mark.slow
def test_a_cache_window_pair_starts_at_its_earliest_subscription(evaluated: Any) -> None:
    m = evaluated[5.0].evaluation.runs[RUN]
    assert (m["interested_pairs"], m["first_deliveries"], m["fp_deliveries"]) == (3, 3, 1)
    assert m["interested_pairs_late"] == 1 and m["fp_late_subscriber"] == 0
    assert m["latency_max_s"] == pytest.approx(1.0)  # 13 - 12, not 13 - 14
    assert m["latency_min_s"] == pytest.approx(0.4)


def _groups(rng: np.random.Generator, n_events: int, n_subs: int
            ) -> tuple[pd.DataFrame, pd.DataFrame]:
    events = pd.DataFrame({
        "run": "r", "topic": "t", "event_id": [f"e{i}" for i in range(n_events)],
        "pub_node": rng.integers(1, 6, n_events), "pub_ts": rng.integers(0, 100, n_events),
        "content": [f"t x={v}" for v in rng.integers(0, 10, n_events)]})
    ends = rng.integers(10, 200, n_subs).astype("float")
    ends[rng.random(n_subs) < 0.5] = np.nan
    subs = pd.DataFrame({
        "node": rng.integers(1, 6, n_subs),
        "sub_id": [f"s{i % 4}|{i % 2}" if i % 3 == 0 else f"s{i}" for i in range(n_subs)],
        "start_ns": rng.integers(0, 120, n_subs), "end_ns": ends,
        "content": [f"t x>{v}" if v >= 0 else "t" for v in rng.integers(-2, 9, n_subs)]})
    return events, subs


@pytest.mark.parametrize("window_ns", [0, 30])
@pytest.mark.parametrize("seed", range(5))
def test_the_groups_pairs_are_its_match_rows_per_event_and_node(seed: int,
                                                                window_ns: int) -> None:
    """``_match_group(pairs=True)`` against its per-subscription rows reduced by hand:
    the same (event, node) set, each with its earliest start; non-match rows unchanged."""
    from mesheval.truth import _match_group

    events, subs = _groups(np.random.default_rng(seed), 40, 25)
    events.loc[3, "content"] = "not an event ("  # a bad event row, kept in both forms
    rows = _match_group(events, subs, window_ns)
    pairs = _match_group(events, subs, window_ns, pairs=True)
    match = rows[rows["status"] == "match"]
    assert match.duplicated(["event_id", "node"]).any()  # the data has repeats to merge
    want = (match.groupby(["event_id", "node"])["start_ns"].min()
            .reset_index().sort_values(["event_id", "node"]).reset_index(drop=True))
    got = pairs[pairs["status"] == "match"]
    assert got["sub_id"].isna().all()
    got = got[["event_id", "node", "start_ns"]].sort_values(["event_id", "node"])
    pd.testing.assert_frame_equal(got.reset_index(drop=True).astype(want.dtypes), want)
    other = [sorted(map(str, r)) for r in rows[rows["status"] != "match"].itertuples(index=False)]
    assert other == [sorted(map(str, r)) for r in
                     pairs[pairs["status"] != "match"].itertuples(index=False)] and other
