"""The run writer: schema-identical lines, atomic files, refusal of used directories."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from meshsim.telemetry_files import RunDirError, RunWriter, base_manifest
from meshsub.core.api import CoreType, MsgKind, TelemetryValue
from meshsub.core.telemetry import dump_line, make_record, parse_line


def test_lines_equal_the_core_schema_functions(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path / "run", "r-1", "flooding", flush_lines=2)
    cases = [
        ("tx", {"bytes": 71, "msg_kind": "data", "msg_type": 16, "event_id": "1-1-1",
                "hop": 0, "peer": None}),
        ("publish", {"event_id": "1-1-2", "topic": "räume/temp", "content": 'a/b s="x\\"y"'}),
        ("position", {"x": 1.5, "y": 0.0}),
        ("neighbor_up", {"peer": 2}),
    ]
    for i, (event, attrs) in enumerate(cases):
        writer.record(7, i * 1000, event, attrs)
    assert not (tmp_path / "run" / "node-7.jsonl").exists()  # only the .tmp until close
    writer.close(base_manifest(run="r-1", scenario_name="s", seed=1, protocol="flooding",
                               params={}, warmup_s=0.0, nodes=1, scenario={}))
    lines = (tmp_path / "run" / "node-7.jsonl").read_text(encoding="utf-8").splitlines()
    expected = [dump_line(make_record(run="r-1", node=7, protocol="flooding", ts_ns=i * 1000,
                                      event=event, attrs={"rec": i, "epoch": 1, **attrs}))
                for i, (event, attrs) in enumerate(cases)]
    assert lines == expected
    assert all(parse_line(line) for line in lines)
    manifest = json.loads((tmp_path / "run" / "manifest.json").read_text())
    assert manifest["files"] == ["node-7.jsonl"] and manifest["records"] == 4
    assert manifest["tier"] == "simulation" and manifest["meshsub_version"]
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["manifest.json",
                                                                      "node-7.jsonl"]


def test_one_record_for_many_nodes_and_attributes_named_like_fields(tmp_path: Path) -> None:
    writer = RunWriter(tmp_path / "run", 'r"2', "flooding", flush_lines=3)
    writer.record(4, 5, "neighbor_down", {"peer": None})
    rx = {"bytes": 9, "msg_kind": "data", "msg_type": 16, "event_id": "1-1-1", "hop": 2,
          "peer": 1}
    writer.record_many([4, 2, 3], 10, "rx", rx)
    writer.record(2, 11, "drop", {"reason": "x", "epoch": 9})  # replaces the writer's epoch
    writer.close(base_manifest(run='r"2', scenario_name="s", seed=1, protocol="flooding",
                               params={}, warmup_s=0.0, nodes=3, scenario={}))

    def line(node: int, rec: int, ts: int, event: str, attrs: dict[str, object]) -> str:
        return dump_line(make_record(run='r"2', node=node, protocol="flooding", ts_ns=ts,
                                     event=event, attrs={"rec": rec, "epoch": 1, **attrs}))

    def read(node: int) -> list[str]:
        return (tmp_path / "run" / f"node-{node}.jsonl").read_text().splitlines()

    assert read(4) == [line(4, 0, 5, "neighbor_down", {}), line(4, 1, 10, "rx", rx)]
    assert read(3) == [line(3, 0, 10, "rx", rx)]
    assert read(2) == [line(2, 0, 10, "rx", rx),
                       line(2, 1, 11, "drop", {"reason": "x", "epoch": 9})]


def test_attribute_values_of_every_kind_are_the_schema_functions_bytes(tmp_path: Path) -> None:
    """The writer encodes plain strings, ints, bools and floats itself; the rest (enum
    members, non-finite floats) as the JSON encoder does, refusals included."""
    cases: list[dict[str, TelemetryValue]] = [
        {"s": "é\u2028\"\\\n\x00\ud7ff", "i": -3, "big": 2**70, "t": True, "f": False},
        {"x": 1e-7, "y": 0.1 + 0.2, "z": -0.0, "w": 1e300, "n": 0},
        {"kind": MsgKind.DATA, "type": CoreType.ACK, "ratio": 2.5},
    ]
    writer = RunWriter(tmp_path / "run", "r", "flooding")
    for i, attrs in enumerate(cases):
        writer.record(1, i, "state", attrs)
    with pytest.raises(ValueError):
        writer.record(1, 9, "state", {"x": math.nan})
    writer.close(base_manifest(run="r", scenario_name="s", seed=1, protocol="flooding",
                               params={}, warmup_s=0.0, nodes=1, scenario={}))
    lines = (tmp_path / "run" / "node-1.jsonl").read_text(encoding="utf-8").split("\n")
    assert lines == [dump_line(make_record(run="r", node=1, protocol="flooding", ts_ns=i,
                                           event="state", attrs={"rec": i, "epoch": 1, **a}))
                     for i, a in enumerate(cases)] + [""]


def test_used_or_unusable_run_dirs_are_refused(tmp_path: Path) -> None:
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "x").write_text("")
    with pytest.raises(RunDirError, match="not empty"):
        RunWriter(tmp_path / "used", "r", "p")
    (tmp_path / "file").write_text("")
    with pytest.raises(RunDirError, match="cannot use"):
        RunWriter(tmp_path / "file", "r", "p")
