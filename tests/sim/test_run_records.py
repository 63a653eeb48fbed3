"""``meshsim.run_records`` reads the same records of chosen event types from both layouts."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from simhelpers import SCENARIOS

from meshsim.des.run import run_scenario
from meshsim.run_records import NoTelemetryError, run_records
from meshsim.scenario import load_scenario
from meshsim.telemetry_parquet import writer_class

pytest.importorskip("pyarrow.parquet")


def _canonical(records: list[dict]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in records)


def test_both_layouts_give_the_records_of_the_chosen_events_only(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "random50.toml",
                             ["protocol.name=flooding", "scenario.duration_s=20"])
    run_scenario(scenario, tmp_path / "jsonl", run_id="same")
    run_scenario(scenario, tmp_path / "pq", run_id="same", writer_cls=writer_class("parquet"))
    for events in ({"deliver"}, {"publish", "deliver"}):
        lines = list(run_records(tmp_path / "jsonl", events))
        rows = list(run_records(tmp_path / "pq", events))
        assert lines and {r["event"] for r in lines} == events
        assert _canonical(rows) == _canonical(lines)
    counts = Counter(r["event"] for r in run_records(tmp_path / "jsonl", {"tx", "deliver"}))
    assert counts["tx"] > counts["deliver"] > 0
    assert list(run_records(tmp_path / "pq", {"no-such-event"})) == []
    assert list(run_records(tmp_path / "jsonl", {"no-such-event"})) == []
    (tmp_path / "archived").mkdir()
    with pytest.raises(NoTelemetryError, match="no telemetry"):
        run_records(tmp_path / "archived", {"deliver"})

