"""Ground truth for a disjunction: its members (``g|0``, ``g|1``) owe one delivery per
event, under the application's id, as the protocols deliver it (meshsub.core.disjunction)."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.slow


def test_members_of_one_disjunction_owe_one_delivery(spark: Any) -> None:
    from mesheval.truth import ground_truth

    events = spark.createDataFrame(
        [("r", "news", "e1", 1, 10, "news a=true b=true"),
         ("r", "news", "e2", 1, 20, "news b=true")],
        "run string, topic string, event_id string, pub_node long, pub_ts long, "
        "content string")
    intervals = spark.createDataFrame(
        [("r", 2, "g|0", "news", "news a=true", 0, None),
         ("r", 2, "g|1", "news", "news b=true", 0, None),
         ("r", 3, "h", "news", "news a=true", 0, None)],
        "run string, node long, sub_id string, topic string, content string, "
        "start_ns long, end_ns long")
    rows = sorted((r["event_id"], r["node"], r["sub_id"], r["status"])
                  for r in ground_truth(events, intervals).collect())
    assert rows == [("e1", 2, "g", "match"), ("e1", 3, "h", "match"),
                    ("e2", 2, "g", "match")]
