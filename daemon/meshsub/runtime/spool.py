"""The telemetry sink: validated JSON Lines, rolled and renamed atomically into a spool.

Records go to ``<spool>/.current-<epoch>-<n>.jsonl``; a file is closed when
it reaches ``max_file_bytes`` or ``max_file_age_s``, fsynced, and renamed to
``<spool>/<node>-<epoch>-<n>.jsonl``. Readers (Spark's file source, the
Ansible fetch) only ever see complete, closed files because a rename is atomic
and dot-files are ignored by both.

The event loop never waits on the disk for long: records are buffered in
memory and written on a timer, or at once when they reach ``flush_bytes`` (a
burst holds at most that much); the fsync and rename of a closed file run in a
worker thread. The spool is bounded: beyond ``max_total_bytes`` the oldest
closed files are deleted, and when the memory buffer is full new records are
dropped. Both losses are counted and written down as ``counter`` records.

Records built here (``emit``, and the loss counters) are numbered ``rec`` = 0,
1, 2, ... per boot epoch, in the order they are written: a reader (the live
feed, the collector) recognises a repeat by its number, and a number that
never appears is a lost record (one dropped at the full buffer keeps its
number, so the loss shows as a gap).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import os
import re
import time
from collections import Counter
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO, Any, cast

from meshsub.core.telemetry import (
    ATTRIBUTE_FIELDS,
    EVENTS,
    MSG_KINDS,
    TelemetryError,
    dump_line,
    make_record,
    validate_record,
)
from meshsub.runtime.logging import get_logger

log = get_logger("meshsub.spool")

_CLOSED = re.compile(r"^(\d+)-(\d+)-(\d+)\.jsonl$")
_CURRENT = re.compile(r"^\.current-(\d+)-(\d+)\.jsonl$")


_json_str = json.encoder.encode_basestring
"""The C string encoder ``json.dumps(ensure_ascii=False)`` uses."""
_float_repr = float.__repr__
_ALLOWED: dict[str, tuple[bool, bool, bool]] = {
    name: (str in types, int in types, float in types)
    for name, types in ATTRIBUTE_FIELDS.items()
}
"""Attribute name -> (str allowed, int allowed, float allowed), from the schema."""


class RecordLine:
    """Validates and encodes records of one node straight to their JSON line.

    The result is byte for byte what ``dump_line(validate_record(make_record(
    ...)))`` gives (a test checks it), without building the record dict or
    walking it twice: the daemon writes three records per forwarded frame,
    and the generic path was a third of a relay's CPU. Anything outside the
    schema raises ``TelemetryError`` (or ``ValueError`` for a non-finite
    number), as the generic path does.
    """

    def __init__(self, run: str, node: int, protocol: str) -> None:
        self.prefix = (f'{{"run":{_json_str(run)},"node":{int(node)},'
                       f'"protocol":{_json_str(protocol)},"ts_ns":')
        self._events = {event: f',"event":{_json_str(event)}' for event in EVENTS}

    def encode(self, event: str, ts_ns: int, attrs: Mapping[str, Any], epoch: int,
               rec: int) -> str:
        tail = self._events.get(event)
        if tail is None:
            raise TelemetryError(f"unknown event {event!r}")
        if type(ts_ns) is not int or ts_ns < 0:
            raise TelemetryError("field 'ts_ns' is negative or not an integer")
        parts = [self.prefix, str(ts_ns), tail]
        for key, value in attrs.items():
            if value is None:
                continue
            allowed = _ALLOWED.get(key)
            if allowed is None:
                raise TelemetryError(f"unknown field {key!r}")
            if key in ("epoch", "rec"):
                raise TelemetryError(f"field {key!r} is set by the spool")
            kind = type(value)
            if kind is bool:
                raise TelemetryError(f"field {key!r} has type bool")
            if allowed[0] and isinstance(value, str):
                if key == "msg_kind" and value not in MSG_KINDS:
                    raise TelemetryError(f"unknown msg_kind {value!r}")
                parts.append(f',"{key}":{_json_str(value)}')
            elif allowed[1] and isinstance(value, int):
                parts.append(f',"{key}":{value}' if kind is int else
                             f',"{key}":{int.__repr__(value)}')
            elif allowed[2] and isinstance(value, float):
                if not math.isfinite(value):
                    raise ValueError(f"field {key!r} is not a finite number")
                parts.append(f',"{key}":{_float_repr(value)}')
            else:
                raise TelemetryError(f"field {key!r} has type {kind.__name__}")
        parts.append(f',"epoch":{epoch},"rec":{rec}}}')
        return "".join(parts)


def closed_name(node: int, epoch: int, n: int) -> str:
    """File name of a closed (complete, renamed) spool file."""
    return f"{node}-{epoch}-{n}.jsonl"


def current_name(epoch: int, n: int) -> str:
    """File name of the file being written (hidden from readers of closed files)."""
    return f".current-{epoch}-{n}.jsonl"


def complete_lines(data: bytes) -> bytes:
    """The records of a file a process left open when it died: everything up to its last
    newline (the line it was writing is torn; records are written whole, so nothing
    before it is)."""
    return data[:data.rfind(b"\n") + 1]


def file_key(name: str, node: int) -> tuple[int, int, bool] | None:
    """(epoch, n, closed) of one of ``node``'s spool files, None for any other name."""
    if m := _CLOSED.match(name):
        return (int(m.group(2)), int(m.group(3)), True) if int(m.group(1)) == node else None
    if m := _CURRENT.match(name):
        return int(m.group(1)), int(m.group(2)), False
    return None


class TelemetrySpool:
    """Buffered, bounded, atomically rolled JSON Lines telemetry files."""

    def __init__(
        self,
        spool_dir: Path,
        *,
        node: int,
        epoch: int,
        run: str = "field",
        protocol: str = "",
        max_file_bytes: int = 4 * 1024 * 1024,
        max_file_age_s: float = 60.0,
        max_total_bytes: int = 256 * 1024 * 1024,
        max_buffer_records: int = 10000,
        flush_interval_s: float = 1.0,
        flush_bytes: int = 64 * 1024,
        encode_batch: int = 256,
        on_flush: Callable[[], None] | None = None,
        on_delete: Callable[[Path, bytes], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if max_file_bytes < 1 or max_total_bytes < max_file_bytes:
            raise ValueError("need 0 < max_file_bytes <= max_total_bytes")
        self.dir = Path(spool_dir)
        self.node = node
        self.epoch = epoch
        self.run = run
        self.protocol = protocol
        self.max_file_bytes = max_file_bytes
        self.max_file_age_s = max_file_age_s
        self.max_total_bytes = max_total_bytes
        self.max_buffer_records = max_buffer_records
        self.flush_interval_s = flush_interval_s
        self.flush_bytes = flush_bytes
        """Buffered lines of at least this many bytes are written at once, not at the next
        timed flush: a burst of records (an insider's 10,000 new ids, a relay at full
        rate) holds at most this much (issue 25: every buffer bounded in bytes)."""
        self.encode_batch = encode_batch
        """At most this many ``emit_deferred`` records wait unencoded (a record's dict
        costs about twice its line)."""
        self.on_flush = on_flush
        """Called (in the event loop) after new lines reached the current file."""
        self.on_delete = on_delete
        """Called with a file's path and content just before the size bound deletes it
        (in a worker thread), so that a reader can count what it had not read yet."""
        self._clock = clock
        self.counters: Counter[str] = Counter()
        self._buffer: list[str | tuple[str, int, dict[str, Any], int]] = []
        """Lines, and records of ``emit_deferred`` (event, ts_ns, attrs, rec) that
        ``flush`` encodes, in the order they were made."""
        self._encoded = 0
        """``_buffer[:_encoded]`` are lines; deferred records wait after it."""
        self._deferred = 0
        self._buffer_bytes = 0
        """Bytes of the buffer's lines (newlines included)."""
        self._write_failed = False
        self._file: IO[bytes] | None = None
        self._file_path: Path | None = None
        self._file_bytes = 0
        self._file_opened = 0.0
        self._n = 0
        self._task: asyncio.Task[None] | None = None
        self._closing: set[asyncio.Task[None]] = set()
        self._reported_drops = 0
        self.next_rec = 0
        self._line = RecordLine(run, node, protocol)

    @classmethod
    def from_config(cls, telemetry: Any, spool_dir: Path, **kwargs: Any) -> TelemetrySpool:
        """From ``meshsub.runtime.config.TelemetryConfig`` plus node/epoch/protocol."""
        return cls(
            Path(spool_dir),
            max_file_bytes=telemetry.roll_bytes,
            max_file_age_s=telemetry.roll_seconds,
            max_total_bytes=telemetry.max_spool_bytes,
            **kwargs,
        )

    # ------------------------------------------------------------ records

    def write(self, record: Mapping[str, Any]) -> bool:
        """Validate and buffer one record; False (counted) if invalid or dropped."""
        try:
            line = dump_line(validate_record(dict(record)))
        except (TelemetryError, ValueError, TypeError) as exc:
            self.counters["invalid"] += 1
            if self.counters["invalid"] <= 10:  # a buggy emitter must not flood the log
                log.warning("invalid telemetry record", exc=exc)
            return False
        if len(self._buffer) >= self.max_buffer_records:
            self.counters["dropped"] += 1
            return False
        self._buffer.append(line)
        self.counters["records"] += 1
        self._grew(len(line) + 1)
        return True

    def emit(self, event: str, ts_ns: int | None = None, **attrs: Any) -> bool:
        """Build a record for this node (resource fields and ``rec`` filled in), write it."""
        return self.emit_attrs(event, time.time_ns() if ts_ns is None else ts_ns, attrs)

    def emit_attrs(self, event: str, ts_ns: int, attrs: Mapping[str, Any]) -> bool:
        """``emit`` with the attributes as a mapping: the daemon's per-frame path."""
        rec, self.next_rec = self.next_rec, self.next_rec + 1
        try:
            line = self._line.encode(event, ts_ns, attrs, self.epoch, rec)
        except (TelemetryError, ValueError, TypeError) as exc:
            self.counters["invalid"] += 1
            if self.counters["invalid"] <= 10:  # a buggy emitter must not flood the log
                log.warning("invalid telemetry record", exc=exc)
            return False
        if len(self._buffer) >= self.max_buffer_records:
            self.counters["dropped"] += 1
            return False
        self._buffer.append(line)
        self.counters["records"] += 1
        self._grew(len(line) + 1)
        return True

    def emit_deferred(self, event: str, ts_ns: int, attrs: Mapping[str, Any]) -> None:
        """``emit_attrs`` whose line is built at the next flush: the daemon's per-frame path.

        A relay writes three records per forwarded frame; encoding each in the
        wake-up that made it ran the encoder on a cold cache there (a sixth of
        the relay's Python path). The record is numbered now (``rec``) and its
        attributes copied (the caller may reuse its mapping); ``flush`` encodes
        the buffer in one pass. A record outside the schema is counted
        ``invalid`` then, and its number stays a gap, as for a dropped one.
        """
        rec, self.next_rec = self.next_rec, self.next_rec + 1
        if len(self._buffer) >= self.max_buffer_records:
            self.counters["dropped"] += 1
            return
        self._buffer.append((event, ts_ns, dict(attrs), rec))
        self.counters["records"] += 1
        self._deferred += 1
        if self._deferred >= self.encode_batch:
            self._encode_deferred()
            self._grew(0)

    def _grew(self, nbytes: int) -> None:
        """Count ``nbytes`` of new lines; write the buffer now if it reached
        ``flush_bytes`` (not after a failed write: the timed flush retries)."""
        self._buffer_bytes += nbytes
        if self._buffer_bytes >= self.flush_bytes and not self._write_failed:
            self.flush()

    def _encode_deferred(self) -> None:
        """Encode the deferred records in one pass (invalid ones counted, left out)."""
        buffer, start = self._buffer, self._encoded
        if self._deferred:
            lines: list[str] = []
            added = 0
            encode, epoch = self._line.encode, self.epoch
            for item in buffer[start:]:
                if isinstance(item, str):
                    lines.append(item)
                    continue
                event, ts_ns, attrs, rec = item
                try:
                    line = encode(event, ts_ns, attrs, epoch, rec)
                except (TelemetryError, ValueError, TypeError) as exc:
                    self.counters["records"] -= 1
                    self.counters["invalid"] += 1
                    if self.counters["invalid"] <= 10:
                        log.warning("invalid telemetry record", exc=exc)
                    continue
                lines.append(line)
                added += len(line) + 1
            buffer[start:] = lines
            self._deferred = 0
            self._buffer_bytes += added
        self._encoded = len(buffer)

    def _make(self, event: str, ts_ns: int | None, attrs: Mapping[str, Any]) -> dict[str, Any]:
        rec, self.next_rec = self.next_rec, self.next_rec + 1
        return make_record(
            run=self.run,
            node=self.node,
            protocol=self.protocol,
            ts_ns=time.time_ns() if ts_ns is None else ts_ns,
            event=event,
            attrs={**attrs, "epoch": self.epoch, "rec": rec},
        )

    # ------------------------------------------------------------ files

    def _open_next(self) -> None:
        path = self.dir / current_name(self.epoch, self._n + 1)
        self._file = open(path, "ab")  # noqa: SIM115 - closed by _roll
        self._n, self._file_path = self._n + 1, path
        self._file_bytes = 0
        self._file_opened = self._clock()

    def _final_name(self, epoch: int, n: int) -> Path:
        return self.dir / closed_name(self.node, epoch, n)

    def flush(self) -> None:
        """Write the buffer to the current file (no fsync); roll if it is full or old."""
        if self._buffer:
            self._encode_deferred()  # encoded once, also if the write fails
            lines = cast(list[str], self._buffer)
            data = ("\n".join(lines) + "\n").encode() if lines else b""
            try:
                if self._file is None:
                    self._open_next()
                assert self._file is not None
                self._file.write(data)
                self._file.flush()
            except OSError as exc:
                # keep the records for the next try; the buffer bound limits the damage
                self.counters["write_errors"] += 1
                self._write_failed = True
                log.error("telemetry write failed", exc=exc, path=str(self._file_path))
                return
            self._write_failed = False
            self._buffer.clear()
            self._encoded = self._buffer_bytes = 0
            self._file_bytes += len(data)
            if self.on_flush is not None:
                try:
                    self.on_flush()
                except Exception as exc:  # a reader's wake-up must not stop the spool
                    self.counters["hook_errors"] += 1
                    log.error("telemetry flush hook failed", exc=exc)
        if self._file is not None and (
            self._file_bytes >= self.max_file_bytes
            or self._clock() - self._file_opened >= self.max_file_age_s
        ):
            self._schedule_close()

    def _detach(self) -> tuple[IO[bytes], Path, Path] | None:
        if self._file is None or self._file_path is None:
            return None
        detached = (self._file, self._file_path, self._final_name(self.epoch, self._n))
        self._file = None
        self._file_path = None
        return detached

    def _schedule_close(self) -> None:
        detached = self._detach()
        if detached is None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self._close_file(*detached)
            return
        task = loop.create_task(asyncio.to_thread(self._close_file, *detached))
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)

    def _close_file(self, handle: IO[bytes], path: Path, final: Path) -> None:
        """fsync, close, rename atomically, fsync the directory, enforce the bound."""
        try:
            handle.flush()
            os.fsync(handle.fileno())
            handle.close()
            os.replace(path, final)
            self._fsync_dir()
            self.counters["files"] += 1
        except OSError as exc:
            self.counters["close_errors"] += 1
            log.error("telemetry file close failed", exc=exc, path=str(path))
            with contextlib.suppress(OSError):
                handle.close()
        self._enforce_bound()

    def _fsync_dir(self) -> None:
        fd = os.open(self.dir, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def closed_files(self) -> list[Path]:
        """This node's closed files, oldest first."""
        found: list[tuple[int, int, Path]] = []
        with contextlib.suppress(OSError):
            for entry in os.scandir(self.dir):
                m = _CLOSED.match(entry.name)
                if m and int(m.group(1)) == self.node:
                    found.append((int(m.group(2)), int(m.group(3)), Path(entry.path)))
        return [p for _, _, p in sorted(found)]

    def _enforce_bound(self) -> None:
        files = self.closed_files()
        sizes = {}
        for path in files:
            with contextlib.suppress(OSError):
                sizes[path] = path.stat().st_size
        total = sum(sizes.values()) + self._file_bytes
        for path in files:
            if total <= self.max_total_bytes:
                break
            try:
                data = path.read_bytes()
                self._deleting(path, data)
                path.unlink()
            except OSError as exc:
                log.error("cannot delete old telemetry file", exc=exc, path=str(path))
                continue
            lines = data.count(b"\n")
            total -= sizes.get(path, 0)
            self.counters["files_deleted"] += 1
            self.counters["deleted_records"] += lines
            log.warning("spool full: deleted oldest telemetry file", path=path.name, records=lines)

    def _deleting(self, path: Path, data: bytes) -> None:
        if self.on_delete is None:
            return
        try:
            self.on_delete(path, data)
        except Exception as exc:  # the reader's bookkeeping must not stop the bound
            self.counters["hook_errors"] += 1
            log.error("telemetry delete hook failed", exc=exc, path=path.name)

    def _recover(self) -> None:
        """Close files a crashed run left open: trim a torn last line, then rename."""
        for entry in list(os.scandir(self.dir)):
            m = _CURRENT.match(entry.name)
            if not m:
                continue
            epoch, n = int(m.group(1)), int(m.group(2))
            path = Path(entry.path)
            try:
                data = path.read_bytes()
                cut = len(complete_lines(data))
                if cut < len(data):
                    self.counters["torn_lines"] += 1
                    with open(path, "r+b") as fh:
                        fh.truncate(cut)
                if cut == 0:
                    path.unlink()
                    continue
                with open(path, "rb") as fh:
                    os.fsync(fh.fileno())
                final = self._final_name(epoch, n)
                while final.exists():  # never overwrite a closed file: take the next number
                    n += 1
                    final = self._final_name(epoch, n)
                os.replace(path, final)
                self.counters["recovered_files"] += 1
            except OSError as exc:
                log.error("cannot recover telemetry file", exc=exc, path=entry.name)

    def roll(self) -> None:
        """Flush and close the current file now, synchronously (tests, SIGHUP, stop)."""
        self._report_drops()
        self.flush()
        detached = self._detach()
        if detached is not None:
            self._close_file(*detached)

    def _report_drops(self) -> None:
        lost = self.counters["dropped"] + self.counters["deleted_records"]
        if lost != self._reported_drops:
            self._reported_drops = lost
            # bypass the buffer bound: this record is the account of the loss
            record = self._make("counter", None, {"reason": "telemetry_dropped", "bytes": lost})
            self._buffer.append(dump_line(record))

    # ------------------------------------------------------------ lifecycle

    def status(self) -> dict[str, Any]:
        return {
            "dir": str(self.dir),
            "buffered": len(self._buffer),
            "current_bytes": self._file_bytes,
            **dict(self.counters),
        }

    async def start(self) -> None:
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OSError(f"telemetry spool {self.dir}: {exc.strerror or exc}") from None
        await asyncio.to_thread(self._recover)
        existing = [
            int(m.group(3)) for p in self.closed_files()
            if (m := _CLOSED.match(p.name)) and int(m.group(2)) == self.epoch
        ]
        self._n = max(existing, default=0)
        self._task = asyncio.get_running_loop().create_task(self._flusher())

    async def _flusher(self) -> None:
        while True:
            await asyncio.sleep(self.flush_interval_s)
            self._report_drops()
            self.flush()

    async def stop(self) -> None:
        """Flush everything and close the current file; the spool is complete after this."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        self._report_drops()
        self.flush()
        detached = self._detach()
        if detached is not None:
            await asyncio.to_thread(self._close_file, *detached)
        if self._closing:
            await asyncio.gather(*self._closing, return_exceptions=True)

    async def __aenter__(self) -> TelemetrySpool:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
