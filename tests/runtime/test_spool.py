"""The telemetry spool: validation, rolling, atomic names, bounds, crash recovery."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from meshsub.core.telemetry import make_record, parse_line
from meshsub.runtime.spool import TelemetrySpool


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def record(n: int = 0, **attrs: Any) -> dict[str, Any]:
    return make_record(run="r", node=5, protocol="flooding", ts_ns=1000 + n, event="tx",
                       attrs={"rec": n, "bytes": 100, **attrs})


def lines(path: Path) -> list[dict[str, Any]]:
    return [parse_line(line) for line in path.read_text().splitlines()]


def spool(tmp_path: Path, **kw: Any) -> TelemetrySpool:
    kw.setdefault("flush_interval_s", 3600.0)  # tests flush explicitly
    return TelemetrySpool(tmp_path, node=5, epoch=3, protocol="flooding", **kw)


async def test_records_end_up_in_a_closed_file(tmp_path: Path) -> None:
    s = spool(tmp_path)
    await s.start()
    for n in range(3):
        assert s.write(record(n))
    assert s.emit("neighbor_up", peer=9)
    await s.stop()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["5-3-1.jsonl"]
    got = lines(tmp_path / "5-3-1.jsonl")
    assert [r["event"] for r in got] == ["tx", "tx", "tx", "neighbor_up"]
    assert got[3]["node"] == 5 and got[3]["epoch"] == 3 and got[3]["peer"] == 9


async def test_invalid_records_are_counted_not_written(tmp_path: Path) -> None:
    s = spool(tmp_path)
    await s.start()
    assert not s.write({"event": "tx"})
    assert not s.write(record(1, colour="red"))
    assert not s.write(record(2, bytes=float("nan")))
    assert s.write(record(3))
    await s.stop()
    assert s.counters["invalid"] == 3
    assert [r["rec"] for r in lines(tmp_path / "5-3-1.jsonl")] == [3]


async def test_roll_by_size_and_age(tmp_path: Path) -> None:
    clock = Clock()
    s = spool(tmp_path, max_file_bytes=500, max_file_age_s=10.0, clock=clock)
    await s.start()
    for n in range(10):  # ~100 bytes a line: the size bound rolls
        s.write(record(n))
        s.flush()
    rolled_by_size = s._n
    assert rolled_by_size >= 2
    s.write(record(99))
    s.flush()
    assert s._file is not None
    clock.t = 11.0  # the age bound rolls too
    s.flush()
    assert s._file is None
    await s.stop()
    names = sorted(p.name for p in tmp_path.iterdir())
    assert not any(n.startswith(".current") for n in names)
    assert len(names) == s._n
    recs = [r["rec"] for p in s.closed_files() for r in lines(p)]
    assert recs == [*range(10), 99]  # nothing lost, nothing duplicated, in order
    assert all(p.stat().st_size <= 500 + 200 for p in s.closed_files())


async def test_flush_timer_writes_without_blocking(tmp_path: Path) -> None:
    s = spool(tmp_path, flush_interval_s=0.01)
    await s.start()
    s.write(record(1))
    current = tmp_path / ".current-3-1.jsonl"
    for _ in range(500):
        if current.exists() and current.stat().st_size > 0:
            break
        await asyncio.sleep(0.01)
    assert json.loads(current.read_text())["rec"] == 1
    await s.stop()


async def test_spool_bound_deletes_oldest_and_accounts(tmp_path: Path) -> None:
    s = spool(tmp_path, max_file_bytes=300, max_total_bytes=900)
    await s.start()
    for n in range(40):
        s.write(record(n))
        s.roll()
    await s.stop()
    files = s.closed_files()
    assert sum(p.stat().st_size for p in files) <= 900
    assert s.counters["files_deleted"] > 0
    counters = [r for p in files for r in lines(p) if r["event"] == "counter"]
    assert counters and counters[-1]["reason"] == "telemetry_dropped"
    kept = [r["rec"] for p in files for r in lines(p) if r["event"] == "tx"]
    assert kept == sorted(kept) and kept[-1] == 39
    assert counters[-1]["bytes"] >= 40 - len(kept) - 1


async def test_full_buffer_drops_new_records_and_says_so(tmp_path: Path) -> None:
    s = spool(tmp_path, max_buffer_records=5)
    await s.start()
    results = [s.write(record(n)) for n in range(8)]
    assert results == [True] * 5 + [False] * 3
    await s.stop()
    got = lines(tmp_path / "5-3-1.jsonl")
    assert [r["rec"] for r in got if r["event"] == "tx"] == [0, 1, 2, 3, 4]
    assert got[-1]["event"] == "counter" and got[-1]["bytes"] == 3


async def test_emit_numbers_every_record_and_a_drop_leaves_a_gap(tmp_path: Path) -> None:
    """``rec`` counts records as the spool made them: a dropped one keeps its number (the
    loss is a visible gap) and the loss's own counter record is numbered too, so a reader
    can recognise a re-sent copy of every record."""
    s = spool(tmp_path, max_buffer_records=3)
    await s.start()
    assert [s.emit("neighbor_up", peer=n) for n in range(4)] == [True, True, True, False]
    s.flush()
    assert s.emit("neighbor_down", peer=1)
    await s.stop()
    got = lines(tmp_path / "5-3-1.jsonl")
    assert [(r["event"], r["rec"]) for r in got] == [
        ("neighbor_up", 0), ("neighbor_up", 1), ("neighbor_up", 2), ("neighbor_down", 4),
        ("counter", 5)]
    assert got[-1]["reason"] == "telemetry_dropped" and got[-1]["bytes"] == 1
    assert all(r["epoch"] == 3 for r in got)


async def test_crash_leftovers_are_recovered(tmp_path: Path) -> None:
    good = json.dumps(record(1), separators=(",", ":"))
    (tmp_path / ".current-2-4.jsonl").write_text(good + "\n" + good[:20])  # torn last line
    (tmp_path / ".current-2-5.jsonl").write_text("")  # nothing in it
    s = spool(tmp_path)
    await s.start()
    await s.stop()
    assert [r["rec"] for r in lines(tmp_path / "5-2-4.jsonl")] == [1]
    assert not (tmp_path / ".current-2-5.jsonl").exists()
    assert s.counters["torn_lines"] == 1 and s.counters["recovered_files"] == 1


async def test_recovery_never_overwrites_and_numbering_follows(tmp_path: Path) -> None:
    good = json.dumps(record(7), separators=(",", ":")) + "\n"
    (tmp_path / "5-3-1.jsonl").write_text(good)
    (tmp_path / ".current-3-1.jsonl").write_text(good)  # same epoch, same number
    s = spool(tmp_path)
    await s.start()
    s.write(record(8))
    await s.stop()
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "5-3-1.jsonl", "5-3-2.jsonl", "5-3-3.jsonl"]
    assert [r["rec"] for r in lines(tmp_path / "5-3-3.jsonl")] == [8]


async def test_numbering_continues_within_an_epoch(tmp_path: Path) -> None:
    for _ in range(2):
        s = spool(tmp_path)
        await s.start()
        s.write(record(0))
        await s.stop()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["5-3-1.jsonl", "5-3-2.jsonl"]


async def test_hooks_are_told_and_may_fail(tmp_path: Path) -> None:
    """A reader is woken after each flush and shown a file before the bound deletes it;
    a failing hook is counted and changes nothing for the spool."""
    flushes: list[int] = []
    deleted: list[tuple[str, int]] = []

    def on_flush() -> None:
        flushes.append(s._file_bytes)
        if len(flushes) == 2:
            raise RuntimeError("reader gone")

    def on_delete(path: Path, data: bytes) -> None:
        deleted.append((path.name, data.count(b"\n")))
        raise RuntimeError("reader gone")

    s = spool(tmp_path, max_file_bytes=300, max_total_bytes=600, on_flush=on_flush,
              on_delete=on_delete)
    await s.start()
    s.flush()  # nothing written: no call
    for n in range(8):
        s.write(record(n))
        s.roll()
    await s.stop()
    assert len(flushes) >= 8 and all(size > 0 for size in flushes)
    assert deleted and deleted[0] == ("5-3-1.jsonl", 1)
    assert not (tmp_path / "5-3-1.jsonl").exists()  # deleted all the same
    assert s.counters["hook_errors"] == 1 + len(deleted)


def test_bad_bounds() -> None:
    with pytest.raises(ValueError):
        TelemetrySpool(Path("/nonexistent"), node=1, epoch=1, max_file_bytes=10,
                       max_total_bytes=5)


def test_from_config(tmp_path: Path) -> None:
    from meshsub.runtime.config import TelemetryConfig

    cfg = TelemetryConfig(max_spool_bytes=2_000_000, roll_bytes=10_000, roll_seconds=5.0)
    s = TelemetrySpool.from_config(cfg, tmp_path, node=1, epoch=2, protocol="flooding")
    assert (s.max_file_bytes, s.max_file_age_s, s.max_total_bytes) == (10_000, 5.0, 2_000_000)


async def test_deferred_records_are_the_lines_emit_writes_in_order(tmp_path: Path) -> None:
    """The daemon's per-frame records are encoded at the flush: the same bytes as
    ``emit_attrs``, in emission order among other records, the caller's mapping copied;
    one outside the schema is counted invalid then and leaves a gap in ``rec``."""
    now = spool(tmp_path / "now")
    later = spool(tmp_path / "later")
    await now.start()
    await later.start()
    attrs: dict[str, object] = {"msg_kind": "data", "msg_type": 16, "event_id": "1-2-3",
                                "hop": 1, "bytes": 57, "peer": 4}
    for s in (now, later):
        assert s.write(record(0))
    assert now.emit_attrs("rx", 1_000, attrs)
    later.emit_deferred("rx", 1_000, attrs)
    attrs["hop"] = 9  # reused by the caller afterwards: the deferred record keeps 1
    assert now.emit("neighbor_up", 2_000, peer=4)
    later.emit_deferred("neighbor_up", 2_000, {"peer": 4})
    later.emit_deferred("rx", 3_000, {"colour": "red"})  # invalid: found at the flush
    assert later.counters["invalid"] == 0 and later.status()["buffered"] == 4
    later.emit_deferred("tx", 4_000, {"msg_kind": "beacon", "bytes": 40})
    await now.stop()
    await later.stop()
    written_now = (tmp_path / "now" / "5-3-1.jsonl").read_text().splitlines()
    written_later = (tmp_path / "later" / "5-3-1.jsonl").read_text().splitlines()
    assert written_later[:3] == written_now
    # the first line is a ready-made record (its own rec 0); the spool numbers from 0
    assert [r["rec"] for r in lines(tmp_path / "later" / "5-3-1.jsonl")] == [0, 0, 1, 3]
    assert later.counters["invalid"] == 1 and later.counters["records"] == 4


async def test_a_burst_of_records_holds_at_most_flush_bytes_in_memory(tmp_path: Path) -> None:
    """Issue 25: an insider's 10,000 new ids made ~5,000 records within one timed flush;
    the deferred records waited as dicts (twice their line) and their peak stayed in the
    daemon's RSS. The buffer now holds at most ``encode_batch`` records unencoded and
    writes its lines once they reach ``flush_bytes``: a burst of any length costs a
    bounded number of bytes, and every record still reaches the file, in order, as
    ``emit_attrs`` would have written it."""
    import gc
    import tracemalloc

    def attrs(n: int) -> dict[str, Any]:
        return {"msg_kind": "data", "msg_type": 16, "event_id": f"{0x10000 + n}-1-{n}",
                "hop": 1, "bytes": 57, "peer": 0x10000 + n}

    now, later = spool(tmp_path / "now"), spool(tmp_path / "later")
    await now.start()
    await later.start()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for n in range(3_000):
            later.emit_deferred("tx", 1_000 + n, attrs(n))
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < 300_000, f"a burst of 3,000 records kept {held} bytes"
    assert later.status()["buffered"] <= 1_000  # 64 KiB of lines of >= 100 bytes, 256 waiting
    for n in range(3_000):
        assert now.emit_attrs("tx", 1_000 + n, attrs(n))
    await now.stop()
    await later.stop()
    written_now = [p.read_bytes() for p in sorted((tmp_path / "now").iterdir())]
    written_later = [p.read_bytes() for p in sorted((tmp_path / "later").iterdir())]
    assert b"".join(written_later) == b"".join(written_now)
    assert later.counters["records"] == 3_000 and later.counters["dropped"] == 0


async def test_a_failed_write_is_retried_by_the_timed_flush_not_by_every_record(
        tmp_path: Path) -> None:
    """A full disk: the write that ``flush_bytes`` triggered fails once (counted, logged
    once); the records stay buffered (bounded by ``max_buffer_records``) and the next
    records do not each try again, the timed flush does, and then writes them all."""
    s = spool(tmp_path, flush_bytes=2_000, encode_batch=8)
    await s.start()
    s.emit("neighbor_up", peer=1)
    s.flush()  # opens the current file
    real = s._file

    class Full:
        def write(self, data: bytes) -> int:
            raise OSError(28, "No space left on device")

        def flush(self) -> None:
            pass

    s._file = Full()  # type: ignore[assignment]
    for n in range(100):
        s.emit_deferred("neighbor_up", 1_000 + n, {"peer": n})
    assert s.counters["write_errors"] == 1 and s.status()["buffered"] == 100
    s._file = real
    s.flush()
    await s.stop()
    got = lines(tmp_path / "5-3-1.jsonl")
    assert [r["peer"] for r in got] == [1, *range(100)]


async def test_a_file_that_cannot_be_opened_is_a_counted_write_error(tmp_path: Path) -> None:
    """A write by size runs in the daemon's per-frame path: a spool directory that went
    away is a counted write error there, never an exception; the records wait."""
    s = spool(tmp_path / "spool", flush_bytes=500)
    await s.start()
    (tmp_path / "spool").rmdir()
    for n in range(10):
        assert s.emit("neighbor_up", peer=n)
    assert s.counters["write_errors"] == 1 and s.status()["buffered"] == 10
    (tmp_path / "spool").mkdir()
    await s.stop()
    assert [r["peer"] for r in lines(tmp_path / "spool" / "5-3-1.jsonl")] == list(range(10))
