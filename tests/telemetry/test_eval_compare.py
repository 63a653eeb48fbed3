"""Today's mesheval against the job before its rework (issue 16): every figure unchanged.

``data/compare/metrics-before.json`` is the old job's metrics.json of the three small
runs in ``data/compare/runs.tgz`` (data/compare/README.md says how both were made).
Floats may differ in the last bits (a sum's order); everything else is equal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalcompare import DATA, differences, unpack_runs


def test_metrics_json_equals_the_job_before_the_rework(spark: Any, tmp_path: Path) -> None:
    from mesheval.batch import run_batch

    run_batch(spark, unpack_runs(tmp_path / "runs"), tmp_path / "out")
    now = json.loads((tmp_path / "out" / "metrics.json").read_text(encoding="utf-8"))
    before = json.loads((DATA / "metrics-before.json").read_text(encoding="utf-8").replace(
        "@RUNS@", str(tmp_path / "runs")))
    found = differences(before, now)
    assert not found, "\n".join(found[:20])
    assert now["runs"] and now["quality"]["invalid_total"] > 0  # the fixture is not empty


def test_the_comparison_sees_a_changed_figure() -> None:
    before = {"runs": [{"metrics": {"delivery_ratio": 0.5, "events": 3}}]}
    assert not differences(before, json.loads(json.dumps(before)))
    nearly = {"runs": [{"metrics": {"delivery_ratio": 0.5 + 1e-6, "events": 3}}]}
    assert differences(before, nearly) == [
        ".runs[0].metrics.delivery_ratio: 0.5 before, 0.500001 now"]
    assert differences(before, {"runs": [{"metrics": {"delivery_ratio": 0.5, "events": 4}}]})
    assert differences(before, {"runs": []}) == [".runs: 1 items before, 0 now"]
