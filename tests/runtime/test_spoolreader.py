"""Reading the spool in order from a position: what the live feed ships, and what it lost."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from meshsub.runtime.spool import TelemetrySpool
from meshsub.runtime.spoolreader import Position, SpoolReader


def spool(tmp_path: Path, **kw: Any) -> TelemetrySpool:
    kw.setdefault("flush_interval_s", 3600.0)  # tests flush explicitly
    return TelemetrySpool(tmp_path, node=5, epoch=3, protocol="flooding", **kw)


def drain(reader: SpoolReader, max_records: int = 1000, max_bytes: int = 1 << 20) -> list[int]:
    """Every rec the reader returns now, in order."""
    recs: list[int] = []
    while (chunk := reader.read(max_records, max_bytes)) is not None:
        lines = chunk.data.decode().splitlines()
        assert chunk.data.endswith(b"\n") and chunk.records == len(lines)
        recs += [json.loads(line)["rec"] for line in lines]
    return recs


async def test_closed_then_current_files_in_order_without_partial_lines(tmp_path: Path) -> None:
    s = spool(tmp_path)
    await s.start()
    for n in range(5):
        s.emit("neighbor_up", peer=n)
    s.roll()  # 5-3-1.jsonl closed
    for n in range(5, 8):
        s.emit("neighbor_up", peer=n)
    s.flush()  # .current-3-2.jsonl
    reader = SpoolReader(tmp_path, 5)
    assert drain(reader) == list(range(8))
    current = tmp_path / ".current-3-2.jsonl"
    with current.open("ab") as fh:  # half a line, as a reader may catch the writer
        fh.write(b'{"run":"field"')
    assert reader.read(10, 4096) is None
    assert reader.position == Position(3, 2, current.stat().st_size - len(b'{"run":"field"'))
    with current.open("r+b") as fh:  # (undo the fake half line)
        fh.truncate(reader.position.offset)
    s.emit("neighbor_up", peer=8)
    s.flush()
    assert drain(reader) == [8]
    await s.stop()
    reader.close()


async def test_follows_the_rename_and_resumes_from_a_position(tmp_path: Path) -> None:
    s = spool(tmp_path)
    await s.start()
    reader = SpoolReader(tmp_path, 5)
    got: list[int] = []
    for round_ in range(4):
        for _ in range(10):
            s.emit("tx", msg_kind="beacon", bytes=40)
        s.flush()
        got += drain(reader, max_records=3)
        if round_ % 2:
            s.roll()  # the file the reader has open is renamed under it
    assert got == list(range(40))
    stop_at = reader.position
    for _ in range(5):
        s.emit("tx", msg_kind="beacon", bytes=40)
    await s.stop()
    reader.close()
    # a new reader (a restarted daemon) from the saved position gets exactly the rest
    again = SpoolReader(tmp_path, 5, stop_at)
    assert drain(again) == list(range(40, 45))
    assert not again.counters


async def test_chunks_respect_both_bounds_but_keep_a_long_line_whole(tmp_path: Path) -> None:
    s = spool(tmp_path)
    await s.start()
    s.emit("publish", event_id="1-1-1", topic="t", content="t x=" + '"' + "a" * 5000 + '"')
    for _ in range(9):
        s.emit("tx", msg_kind="beacon", bytes=40)
    await s.stop()
    reader = SpoolReader(tmp_path, 5)
    first = reader.read(4, 1000)
    assert first is not None and first.records == 1 and len(first.data) > 5000
    sizes = []
    while (chunk := reader.read(4, 400)) is not None:
        sizes.append(chunk.records)
        assert len(chunk.data) <= 400
    assert sum(sizes) == 9 and max(sizes) <= 4


async def test_deleted_before_read_is_counted_once_and_open_files_are_finished(
        tmp_path: Path) -> None:
    s = spool(tmp_path, max_file_bytes=4096, max_total_bytes=4096 * 4)
    reader = SpoolReader(tmp_path, 5)
    s.on_delete = reader.deleted
    await s.start()
    for _ in range(10):
        s.emit("tx", msg_kind="beacon", bytes=40)
    s.roll()
    first = reader.read(1, 4096)  # holds 5-3-1 open, after its first line
    assert first is not None and first.records == 1
    while s.counters["files_deleted"] < 5:  # far beyond the bound: the oldest files go
        for _ in range(20):
            s.emit("tx", msg_kind="beacon", bytes=40)
        s.roll()
    await s.stop()
    assert not (tmp_path / "5-3-1.jsonl").exists()
    got = [0, *drain(reader)]
    assert got[:10] == list(range(10))
    # the first file was open: read in full although deleted; files deleted before the
    # reader got there are counted, never silently skipped; what remains is read in
    # order. Every number the spool gave out (its counter records too) is read or lost.
    assert s.counters["deleted_records"] > reader.lost > 0
    assert got == sorted(set(got)) and len(got) + reader.lost == s.next_rec
    assert reader.counters["vanished_files"] == 0
    reader.deleted(tmp_path / "5-3-2.jsonl", b"{}\n{}\n")  # reported twice: counted once
    assert len(got) + reader.lost == s.next_rec


def test_deleted_counts_only_what_lies_after_the_position(tmp_path: Path) -> None:
    (tmp_path / "5-1-1.jsonl").write_text('{"rec":0}\n{"rec":1}\n')
    (tmp_path / "5-1-2.jsonl").write_text('{"rec":2}\n{"rec":3}\n')
    (tmp_path / "5-1-3.jsonl").write_text('{"rec":4}\n')
    reader = SpoolReader(tmp_path, 5, Position(1, 2, 10))  # after rec 2
    reader.deleted(tmp_path / "5-1-1.jsonl", (tmp_path / "5-1-1.jsonl").read_bytes())
    reader.deleted(tmp_path / "5-1-2.jsonl", (tmp_path / "5-1-2.jsonl").read_bytes())
    reader.deleted(tmp_path / "7-1-9.jsonl", b"{}\n")  # another node's file
    assert reader.lost == 1  # rec 3; rec 0..2 had been read
    (tmp_path / "5-1-1.jsonl").unlink()
    (tmp_path / "5-1-2.jsonl").unlink()
    assert drain(reader) == [4] and reader.counters["vanished_files"] == 0


def test_a_vanished_position_is_counted_once_and_reading_goes_on(tmp_path: Path) -> None:
    reader = SpoolReader(tmp_path, 5, Position(1, 1, 10))
    assert reader.read(10, 100) is None and reader.read(10, 100) is None
    assert reader.counters["vanished_files"] == 1
    (tmp_path / "5-2-1.jsonl").write_text('{"rec":0}\n')
    assert drain(reader) == [0] and reader.counters["vanished_files"] == 1


def test_positions_that_are_not_line_boundaries(tmp_path: Path) -> None:
    (tmp_path / "5-1-1.jsonl").write_text('{"rec":0}\n{"rec":1}\n')
    misaligned = SpoolReader(tmp_path, 5, Position(1, 1, 4))
    assert drain(misaligned) == [0, 1]  # re-sent rather than lost
    assert misaligned.counters["position_misaligned"] == 1
    negative = SpoolReader(tmp_path, 5, Position(1, 1, -3))  # a damaged state row
    assert drain(negative) == [0, 1] and negative.counters["position_misaligned"] == 1
    beyond = SpoolReader(tmp_path, 5, Position(1, 1, 500))  # a power cut shortened the file
    assert drain(beyond) == [] and beyond.position == Position(1, 1, 20)
    assert beyond.counters["position_beyond_end"] == 1


def test_torn_tail_of_a_closed_file_is_counted_and_skipped(tmp_path: Path) -> None:
    (tmp_path / "5-1-1.jsonl").write_text('{"rec":0}\n{"rec":1')
    (tmp_path / "5-1-2.jsonl").write_text('{"rec":2}\n')
    reader = SpoolReader(tmp_path, 5)
    assert drain(reader) == [0, 2] and reader.counters["torn_lines"] == 1


def test_other_files_are_ignored_and_bad_bounds_refused(tmp_path: Path) -> None:
    (tmp_path / "6-1-1.jsonl").write_text('{"rec":9}\n')
    (tmp_path / "notes.txt").write_text("x\n")
    (tmp_path / "5-1-1.jsonl").write_text('{"rec":0}\n')
    reader = SpoolReader(tmp_path, 5)
    assert drain(reader) == [0]
    assert reader.backlog_bytes() == 0
    assert SpoolReader(tmp_path, 5).backlog_bytes() == 10
    with pytest.raises(ValueError):
        reader.read(0, 10)
    assert SpoolReader(tmp_path / "missing", 5).read(1, 1) is None
