"""Checks a Parquet file's statistics prove (``mesheval.footer``): left out of its census,
never at the cost of a bad row (it stays a counted drop)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pq = pytest.importorskip("pyarrow.parquet")


def rec(node: int, ts: int, event: str, extra: str = "") -> str:
    return f'{{"run":"r","protocol":"p","node":{node},"ts_ns":{ts},"event":"{event}"{extra}}}'


GOOD = [rec(1, 10, "publish", ',"event_id":"e1","topic":"t","content":"t"'),
        rec(2, 20, "deliver", ',"event_id":"e1","sub_id":"s"'),
        rec(1, 11, "tx", ',"msg_kind":"data","bytes":10,"event_id":"e1"'),
        rec(3, 12, "tx", ',"msg_kind":"beacon","bytes":4'),
        rec(2, 13, "rx", ',"msg_kind":"data","bytes":10,"peer":1'),
        rec(1, 0, "position", ',"x":1.0,"y":2.0')]


def write(path: Path, lines: list[str], *, by_event: bool = True, **options: Any) -> None:
    from meshsim.telemetry_parquet import arrow_schema, lines_to_table, write_by_event

    table = lines_to_table(("\n".join(lines) + "\n").encode(), arrow_schema())
    with pq.ParquetWriter(path, arrow_schema(), **options) as writer:
        if by_event:
            write_by_event(writer, table)
        else:
            writer.write_table(table)


def unproven(path: Path) -> set[str]:
    from mesheval.footer import proven_checks
    from mesheval.schema import checks

    proven = proven_checks(path)
    return {c.text for c in checks() if c.text not in proven and c.kind != "corrupt"}


def test_a_clean_file_of_one_event_per_row_group_proves_all_but_what_varies(
        tmp_path: Path) -> None:
    """Row groups of one event type prove each event's required fields; a row group of
    two message kinds cannot prove its kinds from their bounds."""
    write(tmp_path / "a.parquet", GOOD)
    assert unproven(tmp_path / "a.parquet") == {"unknown msg_kind"}


def test_mixed_row_groups_prove_less_and_no_statistics_prove_nothing(tmp_path: Path) -> None:
    write(tmp_path / "mixed.parquet", GOOD, by_event=False)
    left = unproven(tmp_path / "mixed.parquet")
    assert {"unknown event", "publish without topic", "deliver without event_id"} <= left
    assert "negative ts_ns" not in left and "missing field node" not in left
    write(tmp_path / "bare.parquet", GOOD, write_statistics=False)
    assert "negative ts_ns" in unproven(tmp_path / "bare.parquet")
    assert "missing field run" in unproven(tmp_path / "bare.parquet")
    (tmp_path / "cut.parquet").write_bytes((tmp_path / "bare.parquet").read_bytes()[:-20])
    assert "negative ts_ns" in unproven(tmp_path / "cut.parquet")


@pytest.mark.parametrize(("bad", "reason"), [
    (rec(4, 40, "publish", ',"topic":"t","content":"t"'), "publish without event_id"),
    (rec(4, -5, "deliver", ',"event_id":"e1"'), "negative ts_ns"),
    (rec(4, 40, "rx", ',"msg_kind":"radio","bytes":3'), "unknown msg_kind"),
    (rec(-4, 40, "deliver", ',"event_id":"e1"'), "node out of range"),
    (rec(4, 40, "tx", ',"msg_kind":"data","bytes":-1'), "negative bytes"),
    (rec(4, 40, "position", ',"x":1.0'), "position without y"),
])
def test_a_bad_row_in_the_new_layout_is_still_a_counted_drop(
        spark: Any, tmp_path: Path, bad: str, reason: str) -> None:
    """The statistics of the bad row's row group fail to prove its check: the census
    keeps that check, counts the row with its reason and leaves it out of the records."""
    from mesheval.load import load_rundirs

    rundir = tmp_path / "run"
    rundir.mkdir()
    write(rundir / "telemetry.parquet", [*GOOD, bad])
    assert reason in unproven(rundir / "telemetry.parquet")
    loaded = load_rundirs(spark, [rundir], tmp_path / "out")
    (quality,) = loaded.quality
    assert (quality.lines, quality.valid, quality.errors) == (7, 6, {reason: 1})
    assert loaded.records.count() == 6


def test_a_run_and_protocol_constant_in_every_row_group_are_proven(tmp_path: Path) -> None:
    """One value in every row group (min = max, no null) is proven; a second value in
    any row group, a null, or no statistics prove nothing for that column."""
    from mesheval.footer import constant_strings

    write(tmp_path / "a.parquet", GOOD)
    assert constant_strings(tmp_path / "a.parquet") == {"run": "r", "protocol": "p"}
    other = rec(4, 40, "deliver", ',"event_id":"e1"').replace('"run":"r"', '"run":"s"')
    write(tmp_path / "two.parquet", [*GOOD, other])  # a second run in the deliver row group
    assert constant_strings(tmp_path / "two.parquet") == {"protocol": "p"}
    write(tmp_path / "two-groups.parquet", [*GOOD, other.replace('"deliver"', '"member"')])
    assert constant_strings(tmp_path / "two-groups.parquet") == {"protocol": "p"}
    unnamed = rec(4, 40, "deliver", ',"event_id":"e1"').replace('"protocol":"p",', "")
    write(tmp_path / "null.parquet", [*GOOD, unnamed])
    assert constant_strings(tmp_path / "null.parquet") == {"run": "r"}
    write(tmp_path / "bare.parquet", GOOD, write_statistics=False)
    assert constant_strings(tmp_path / "bare.parquet") == {}
    (tmp_path / "cut.parquet").write_bytes((tmp_path / "a.parquet").read_bytes()[:-20])
    assert constant_strings(tmp_path / "cut.parquet") == {}


def test_the_census_reads_a_proven_run_as_a_literal_and_the_records_keep_it(
        spark: Any, tmp_path: Path) -> None:
    """Two clean files of one RUNDIR: the census counts each file's rows under the run
    both prove (a literal: its scan reads no run column) and under each file's own
    protocol; the records the metrics read are the files' rows, their columns read."""
    from mesheval.load import RECORD_COLUMNS, load_rundirs, read_columnar

    rundir = tmp_path / "run"
    rundir.mkdir()
    write(rundir / "a.parquet", GOOD)
    write(rundir / "b.parquet", [line.replace('"protocol":"p"', '"protocol":"q"')
                                 for line in GOOD])
    loaded = load_rundirs(spark, [rundir], tmp_path / "out")
    assert {(r["run"], r["protocol"], r["records"]) for r in loaded.census} >= {
        ("r", "p", 3), ("r", "q", 3)}  # node 1's records of each file
    assert sum(r["records"] for r in loaded.census) == 12
    plain = spark.read.parquet(str(rundir / "a.parquet"), str(rundir / "b.parquet"))
    columns = [c for c in RECORD_COLUMNS if c in plain.columns]
    assert sorted(map(tuple, loaded.records.select(*columns).collect())) == sorted(
        map(tuple, plain.select(*columns).collect()))

    def read_schema(frame: Any) -> str:
        plan = frame._jdf.queryExecution().executedPlan().toString()
        return str(plan.split("ReadSchema: struct<")[1].split(">")[0])

    census = read_columnar(spark, [rundir / "a.parquet"], literals=True)
    assert "run:" not in read_schema(census) and "protocol:" not in read_schema(census)
    assert {r["run"] for r in census.select("run").distinct().collect()} == {"r"}
    assert "run:" in read_schema(read_columnar(spark, [rundir / "a.parquet"]))
