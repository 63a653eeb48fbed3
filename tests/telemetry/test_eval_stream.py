"""Streaming mode over a spool that grows between two bounded (availableNow) passes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import evaldata
import pytest

pytestmark = pytest.mark.slow


def _put(spool: Path, nodes: list[int]) -> None:
    """Write node files the way a collector does: hidden temp file, then rename."""
    records = evaldata.records()
    for node in nodes:
        tmp = spool / f".node-{node}.jsonl.tmp"
        tmp.write_text("\n".join(json.dumps(r) for r in records[node]) + "\n", encoding="utf-8")
        tmp.rename(spool / f"node-{node}.jsonl")


def test_follow_twice_resumes_and_matches_batch(spark: Any, tmp_path: Path) -> None:
    from mesheval.stream import follow, format_summary

    spool, out = tmp_path / "spool", tmp_path / "out"
    spool.mkdir()
    _put(spool, [1, 2, 3])
    (spool / "bad.jsonl").write_text("not json\n", encoding="utf-8")
    (spool / ".half.jsonl.tmp").write_text('{"run": "r1", "no', encoding="utf-8")

    first = follow(spark, spool, out, once=True, warmup_s=5.0)["runs"][evaldata.RUN]
    # only n1..n3 so far: E1 {n2, n3}, E2 {n3}, E3 {n1}; all four delivered; n2's second
    # copy of E1 is a duplicate
    assert (first["events"], first["interested_pairs"], first["first_deliveries"]) == (3, 4, 4)
    assert first["duplicates"] == 1
    assert first["latency_mean_s"] == pytest.approx((0.5 + 2.0 + 0.2 + 0.5) / 4)

    _put(spool, [4, 5, 6])
    summary = follow(spark, spool, out, once=True, warmup_s=5.0)
    run = summary["runs"][evaldata.RUN]
    # the checkpoint resumes: same figures as the batch job on the whole run
    assert (run["interested_pairs"], run["first_deliveries"]) == (6, 5)
    assert run["delivery_ratio"] == pytest.approx(5 / 6)
    assert run["latency_mean_s"] == pytest.approx(7.2 / 5)
    assert run["latency_median_s"] == pytest.approx(0.5)
    assert run["duplicates"] == 1
    assert summary["invalid_lines"] == 1  # the hidden temp file is never read
    # windows count from the first control record (t=1): E1 9 s later, E2 19 s, E3 24 s
    ratios = {w["window_start_s"]: (w["interested"], w["delivered"]) for w in run["windows"]}
    assert ratios == {0.0: (2, 2), 10.0: (3, 2), 20.0: (1, 1)}
    assert json.loads((out / "stream" / "summary.json").read_text())["runs"][evaldata.RUN][
        "first_deliveries"] == 5
    assert "0.833" in format_summary(summary)
