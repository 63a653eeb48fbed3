"""Drop summaries lose no drop: the same run with one record per drop and with summaries
gives mesheval the same drops per reason (docs/telemetry.md, "Drop summaries").

The metric itself (``drops``, ``drops_total`` in metrics.json) is read here on the
records alone; test_eval_batch.py checks it in the whole job's metrics."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from meshsim.des.run import run_scenario
from meshsim.scenario import load_scenario
from meshsub.core.telemetry import parse_line

pytestmark = pytest.mark.slow

SCENARIO = Path(__file__).resolve().parents[2] / "firmware-sim/meshsim/scenarios/random50.toml"
PROTOCOLS = ("flooding", "epidemic")


def _drop_records(rundir: Path) -> list[dict[str, Any]]:
    return [r for f in sorted(rundir.glob("node-*.jsonl"))
            for r in map(parse_line, f.read_text().splitlines()) if r["event"] == "drop"]


def test_summaries_keep_every_drop_per_reason(spark: Any, tmp_path: Path) -> None:
    from mesheval.metrics import drops_by_reason
    from mesheval.schema import record_schema

    expected: dict[str, Counter[str]] = {}
    for protocol in PROTOCOLS:
        scenario = load_scenario(SCENARIO, [f"protocol.name={protocol}",
                                            "scenario.duration_s=20"])
        single = run_scenario(scenario, tmp_path / f"{protocol}-single",
                              run_id=f"{protocol}-single", drop_summary_s=0.0)
        summed = run_scenario(scenario, tmp_path / f"{protocol}-summed",
                              run_id=f"{protocol}-summed")
        assert len(single.stats.deliveries) == len(summed.stats.deliveries) > 0

        singles = _drop_records(tmp_path / f"{protocol}-single")
        sums = _drop_records(tmp_path / f"{protocol}-summed")
        assert all("count" not in r for r in singles)
        assert any("count" in r for r in sums) and len(sums) < len(singles)  # fewer records
        by_record = Counter(r["reason"] for r in singles)
        by_count: Counter[str] = Counter()
        for r in sums:
            by_count[r["reason"]] += r.get("count", 1)
        assert by_count == by_record  # ... the same drops
        expected[protocol] = by_record

    files = [str(f) for f in sorted(tmp_path.glob("*/node-*.jsonl"))]
    runs = drops_by_reason(spark.read.schema(record_schema(with_corrupt=False)).json(files))
    for protocol, by_record in expected.items():
        single, summed = runs[f"{protocol}-single"], runs[f"{protocol}-summed"]
        assert summed["drops"] == single["drops"] == dict(sorted(by_record.items()))
        assert summed["drops_total"] == single["drops_total"] == by_record.total()
