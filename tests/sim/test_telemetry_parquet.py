"""The simulator's Parquet telemetry holds exactly the records of its JSON Lines files."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from simhelpers import SCENARIOS

from meshsim.des.run import run_scenario
from meshsim.scenario import load_scenario
from meshsim.telemetry_parquet import PARQUET_FILE, ParquetRunWriter, writer_class
from meshsub.core.telemetry import FIELDS

pq = pytest.importorskip("pyarrow.parquet")


def jsonl_records(rundir: Path) -> list[dict[str, Any]]:
    """Records of the node files, numbers of the schema's float fields as floats."""
    floats = {name for name, types in FIELDS.items() if float in types}
    return [{k: float(v) if k in floats else v for k, v in json.loads(line).items()}
            for f in sorted(rundir.glob("node-*.jsonl"))
            for line in f.read_text(encoding="utf-8").splitlines()]


def parquet_records(rundir: Path) -> list[dict[str, Any]]:
    """Rows as the records they came from: unset (null) attributes left out."""
    rows = pq.read_table(rundir / PARQUET_FILE).to_pylist()
    return [{k: v for k, v in row.items() if v is not None} for row in rows]


def canonical(records: list[dict[str, Any]]) -> list[str]:
    return sorted(json.dumps(r, sort_keys=True) for r in records)


def test_parquet_run_has_the_records_of_the_jsonl_run(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "random50.toml",
                             ["protocol.name=flooding", "scenario.duration_s=20"])
    run_scenario(scenario, tmp_path / "jsonl", run_id="same")
    run_scenario(scenario, tmp_path / "pq", run_id="same",
                 writer_cls=writer_class("parquet"))
    before, now = jsonl_records(tmp_path / "jsonl"), parquet_records(tmp_path / "pq")
    assert len(now) > 500 and canonical(now) == canonical(before)
    manifest = json.loads((tmp_path / "pq" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["files"] == [PARQUET_FILE] and manifest["records"] == len(now)
    assert manifest["telemetry_format"] == "parquet"
    assert not list((tmp_path / "pq").glob("*.jsonl")) and not list(
        (tmp_path / "pq").glob("*.tmp"))


def test_batches_become_row_groups_in_node_order(tmp_path: Path) -> None:
    writer = ParquetRunWriter(tmp_path / "run", "r", "flooding", flush_lines=3)
    for i in range(7):
        writer.record(2 - i % 2, 1000 + i, "tx", {"msg_kind": "data", "bytes": 10 + i,
                                                   "peer": None, "latency_s": 1})
    writer.close({"run": "r"})
    meta = pq.ParquetFile(tmp_path / "run" / PARQUET_FILE).metadata
    assert meta.num_row_groups == 3 and meta.num_rows == 7
    rows = parquet_records(tmp_path / "run")
    assert [(r["node"], r["rec"]) for r in rows] == [
        (1, 0), (2, 0), (2, 1), (1, 1), (1, 2), (2, 2), (2, 3)]
    assert rows[0]["latency_s"] == 1.0 and "peer" not in rows[0]


def test_each_row_group_holds_one_event_type(tmp_path: Path) -> None:
    """A batch of mixed events becomes one row group per event type (events in name
    order, each group's rows by node and ``rec`` as before), so a reader filtering on
    ``event`` skips the others by their statistics; the records are those recorded."""
    writer = ParquetRunWriter(tmp_path / "run", "r", "flooding", flush_lines=5)
    calls = [(1, "tx", {"msg_kind": "data", "bytes": 10}), (2, "rx", {"msg_kind": "data",
             "bytes": 10, "peer": 1}), (2, "deliver", {"event_id": "e"}),
             (1, "tx", {"msg_kind": "beacon", "bytes": 4}), (3, "rx", {"msg_kind": "data",
             "bytes": 10, "peer": 1}), (1, "publish", {"event_id": "f", "topic": "t",
             "content": "t"}), (3, "tx", {"msg_kind": "data", "bytes": 12})]
    for i, (node, event, attrs) in enumerate(calls):
        writer.record(node, 100 + i, event, attrs)
    writer.close({"run": "r"})
    meta = pq.ParquetFile(tmp_path / "run" / PARQUET_FILE).metadata
    groups = [meta.row_group(i) for i in range(meta.num_row_groups)]
    event = meta.schema.names.index("event")
    stats = [(g.column(event).statistics.min, g.column(event).statistics.max, g.num_rows)
             for g in groups]
    # first batch (5 calls): deliver, rx, tx; second batch (2 calls): publish, tx
    assert stats == [("deliver", "deliver", 1), ("rx", "rx", 2), ("tx", "tx", 2),
                     ("publish", "publish", 1), ("tx", "tx", 1)]
    rows = parquet_records(tmp_path / "run")
    assert [(r["node"], r["rec"], r["event"]) for r in rows] == [
        (2, 1, "deliver"), (2, 0, "rx"), (3, 0, "rx"), (1, 0, "tx"), (1, 1, "tx"),
        (1, 2, "publish"), (3, 1, "tx")]
    assert canonical([{k: v for k, v in r.items() if k not in ("run", "protocol", "epoch",
                                                                 "rec")} for r in rows]) == \
        canonical([{"node": n, "ts_ns": 100 + i, "event": e, **a}
                   for i, (n, e, a) in enumerate(calls)])


def test_unknown_format_is_refused_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown telemetry format 'csv'"):
        writer_class("csv")
    scenario = SCENARIOS / "random50.toml"
    done = subprocess.run([sys.executable, "-m", "meshsim.cli", "simulate", str(scenario),
                           "--out", str(tmp_path / "r"), "--telemetry-format", "csv"],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "invalid choice: 'csv'" in done.stderr


@pytest.mark.parametrize(("attrs", "error"), [
    ({"colour": "red"}, "unknown field 'colour'"),
    ({"node": 3}, "attribute 'node' would replace a field the writer sets"),
    ({"bytes": "12"}, "field 'bytes': str is not int"),
    ({"bytes": True}, "field 'bytes': bool is not int"),
    ({"hop": 1.5}, "field 'hop': float is not int"),
    ({"latency_s": float("nan")}, "Out of range float values are not JSON compliant"),
])
def test_a_record_the_columns_would_change_is_refused(tmp_path: Path, attrs: dict[str, Any],
                                                      error: str) -> None:
    """What the JSON Lines writer refuses, or a column would silently convert (a bool or
    a fraction into an integer column), stops the run at the record, in one line."""
    writer = ParquetRunWriter(tmp_path / "run", "r", "flooding")
    writer.record(1, 5, "tx", {"bytes": 10, "latency_s": 2})  # fine: an int is a float
    with pytest.raises(ValueError, match=error):
        writer.record(1, 6, "tx", attrs)
    assert writer.records == 1


def test_enum_values_are_their_json_values(tmp_path: Path) -> None:
    """An ``IntEnum`` attribute (a core message type) is the integer, a ``str`` enum the
    string: what the JSON Lines writer writes for them."""
    from meshsub.core.api import CoreType, MsgKind

    writer = ParquetRunWriter(tmp_path / "run", "r", "epidemic")
    writer.record(4, 7, "tx", {"msg_type": CoreType.ACK, "msg_kind": MsgKind.CONTROL})
    writer.close({"run": "r"})
    (row,) = parquet_records(tmp_path / "run")
    assert row["msg_type"] == int(CoreType.ACK) and row["msg_kind"] == "control"
    assert type(row["msg_type"]) is int and type(row["msg_kind"]) is str


@pytest.mark.parametrize("name", sorted(p.stem for p in SCENARIOS.glob("vmesh-*.toml")))
def test_every_bundled_vmesh_scenario_writes_the_records_of_its_node_files(
        tmp_path: Path, name: str) -> None:
    """Every protocol's scenarios (their roles, faults, GPS, contacts) in both formats."""
    scenario = load_scenario(SCENARIOS / f"{name}.toml")
    run_scenario(scenario, tmp_path / "jsonl", run_id="same")
    run_scenario(scenario, tmp_path / "pq", run_id="same", writer_cls=writer_class("parquet"))
    now = parquet_records(tmp_path / "pq")
    assert now and canonical(now) == canonical(jsonl_records(tmp_path / "jsonl"))
