"""Reading one node's telemetry spool in order, from a byte position, for the live feed.

The spool's files are append-only and never rewritten: ``.current-<e>-<n>.jsonl``
grows, is closed and renamed ``<node>-<e>-<n>.jsonl``, and may later be deleted
at the size bound. So a place in the spool is a ``Position`` (epoch, file
number, byte offset), files are read in (epoch, n) order, and nothing needs to
be parsed to resume. Only complete lines are returned: a partial line at the
end of the file being written is read again once its newline arrived.

Memory is bounded by the chunk size: files are streamed, never loaded whole. A
file is kept open while it is read, so it can be finished even if the spool
renames or deletes it meanwhile (the inode lives on).

Deleted before read: the spool calls ``deleted`` (from its worker thread)
with a file's content just before its size bound removes it; the lines this
reader had not reached yet are counted in ``lost``. They are gone; the feed
says so in its status and in a ``counter`` record. A file that disappeared
without such a call is counted in ``vanished_files``: what it held beyond the
position is unknowable. That happens when files are removed while the daemon
is not running, and in one corner of a full spool: the feed had read a file
(its lines were in flight, not yet acknowledged), the bound deleted it, and
the daemon stopped before the broker acknowledged them.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from meshsub.runtime.spool import closed_name, current_name, file_key

LINE_LIMIT = 16 * 1024 * 1024
"""A line longer than this is not a record the spool wrote: skipped and counted."""


@dataclass(frozen=True, slots=True, order=True)
class Position:
    """Just after the last line read (or acknowledged) in file (epoch, n)."""

    epoch: int
    n: int
    offset: int

    @property
    def file(self) -> tuple[int, int]:
        return self.epoch, self.n


@dataclass(frozen=True, slots=True)
class Chunk:
    """Complete lines, in spool order, and where the next read starts."""

    data: bytes
    records: int
    end: Position


class SpoolReader:
    """Streams complete JSON lines of one node's spool files from a position.

    Not thread-safe except ``deleted``, which the spool may call from its
    worker thread while ``read`` runs in another.
    """

    def __init__(self, spool_dir: Path, node: int, start: Position | None = None) -> None:
        self.dir = Path(spool_dir)
        self.node = node
        self.counters: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._pos = start  # None: start at the oldest file
        self._fh: IO[bytes] | None = None
        self._fh_file: tuple[int, int] | None = None
        self._fh_closed = False  # opened under its closed name: complete
        self._condemned: set[tuple[int, int]] = set()  # the spool is deleting these
        self._vanished: tuple[int, int] | None = None  # counted already

    @property
    def position(self) -> Position | None:
        return self._pos

    @property
    def lost(self) -> int:
        """Records the spool deleted before this reader reached them."""
        return self.counters["lost"]

    # ------------------------------------------------------------ reading

    def read(self, max_records: int, max_bytes: int) -> Chunk | None:
        """Up to ``max_records`` complete lines (about ``max_bytes``), or None when all
        that was written so far has been read."""
        if max_records < 1 or max_bytes < 1:
            raise ValueError("max_records and max_bytes must be positive")
        while True:
            if self._fh is None and not self._open():
                return None
            data = self._read_lines(max_records, max_bytes)
            if data is None:
                if self._still_written():
                    return None
                # closed since we last looked: what it holds now is all it will hold
                data = self._read_lines(max_records, max_bytes)
            if data is not None:
                assert self._pos is not None
                pos = Position(self._pos.epoch, self._pos.n, self._pos.offset + len(data))
                self._pos = pos
                return Chunk(data, data.count(b"\n"), pos)
            if not self._advance():
                return None

    def _open(self) -> bool:
        """Open the file at the position, or the next one that exists; False if none."""
        while True:
            pos = self._pos
            if pos is None:
                first = self._next_file(None)
                if first is None:
                    return False
                pos = self._pos = Position(*first, 0)
            with self._lock:
                if pos.file not in self._condemned:
                    for name, closed in ((closed_name(self.node, *pos.file), True),
                                         (current_name(*pos.file), False)):
                        try:
                            self._fh = open(self.dir / name, "rb")  # noqa: SIM115
                        except FileNotFoundError:
                            continue
                        except OSError:
                            self.counters["read_errors"] += 1
                            return False
                        self._fh_file, self._fh_closed = pos.file, closed
                        break
                if self._fh is None and pos.file not in self._condemned \
                        and pos.file != self._vanished:
                    self.counters["vanished_files"] += 1
                    self._vanished = pos.file
            if self._fh is not None:
                self._seek(pos)
                return True
            following = self._next_file(pos.file)
            if following is None:
                return False
            self._pos = Position(*following, 0)

    def _seek(self, pos: Position) -> None:
        """Resume at ``pos``; a position that is not a line boundary of this file is
        not one we wrote (a power cut shortened the file, a damaged state): re-read
        the whole file rather than lose records (the collector drops repeats)."""
        assert self._fh is not None
        size = os.fstat(self._fh.fileno()).st_size
        offset = pos.offset
        if offset > size:
            # the unsynced tail the cursor points into was lost by a power cut after it
            # was shipped: nothing of it is left to send
            self.counters["position_beyond_end"] += 1
            offset = size
        elif offset < 0:
            self.counters["position_misaligned"] += 1
            offset = 0
        elif offset > 0:
            self._fh.seek(offset - 1)
            if self._fh.read(1) != b"\n":
                self.counters["position_misaligned"] += 1
                offset = 0
        self._fh.seek(offset)
        self._pos = Position(pos.epoch, pos.n, offset)

    def _read_lines(self, max_records: int, max_bytes: int) -> bytes | None:
        """Complete lines from the open file (the file offset follows), None at its end."""
        fh = self._fh
        assert fh is not None
        start = fh.tell()
        data = fh.read(max_bytes)
        cut = _cut(data, max_records)
        while cut == 0 and len(data) >= max_bytes and len(data) < LINE_LIMIT:
            more = fh.read(max_bytes)  # one line longer than a chunk: take it whole
            if not more:
                break
            data += more
            cut = _cut(data, 1)
        if cut == 0 and len(data) >= LINE_LIMIT:
            nl = _skip_line(fh)
            self.counters["oversized_lines"] += 1
            assert self._pos is not None
            self._pos = Position(self._pos.epoch, self._pos.n, nl)
            return self._read_lines(max_records, max_bytes)
        fh.seek(start + cut)
        return data[:cut] if cut else None

    def _still_written(self) -> bool:
        """True while the open file is the spool's current file (more lines may come)."""
        if self._fh_closed or self._fh is None or self._fh_file is None:
            return False
        try:
            st = os.stat(self.dir / current_name(*self._fh_file))
        except FileNotFoundError:
            return False
        except OSError:
            self.counters["read_errors"] += 1
            return True  # look again later rather than skip what may still come
        return st.st_ino == os.fstat(self._fh.fileno()).st_ino

    def _advance(self) -> bool:
        """The open file is complete and fully read: move to the next file if one exists."""
        assert self._fh is not None and self._pos is not None
        if os.fstat(self._fh.fileno()).st_size > self._fh.tell():
            # bytes after the last newline of a complete file: a line torn by a crash
            # that recovery did not trim; it can never be shipped
            self.counters["torn_lines"] += 1
        following = self._next_file(self._pos.file)
        if following is None:
            return False
        self._close()
        with self._lock:
            self._pos = Position(*following, 0)
            self._condemned = {f for f in self._condemned if f >= following}
        return True

    def _next_file(self, after: tuple[int, int] | None) -> tuple[int, int] | None:
        """The first of this node's spool files after ``after`` (any, if None)."""
        best: tuple[int, int] | None = None
        try:
            with os.scandir(self.dir) as entries:
                for entry in entries:
                    key = file_key(entry.name, self.node)
                    if key is None:
                        continue
                    f = key[:2]
                    if (after is None or f > after) and (best is None or f < best) \
                            and f not in self._condemned:
                        best = f
        except OSError:
            self.counters["read_errors"] += 1
            return None
        return best

    def backlog_bytes(self) -> int:
        """Bytes in the spool after the position (what is still to be read)."""
        total = 0
        pos = self._pos
        with contextlib.suppress(OSError), os.scandir(self.dir) as entries:
            for entry in entries:
                key = file_key(entry.name, self.node)
                if key is None:
                    continue
                with contextlib.suppress(OSError):
                    size = entry.stat().st_size
                    if pos is None or key[:2] > pos.file:
                        total += size
                    elif key[:2] == pos.file:
                        total += max(0, size - pos.offset)
        return total

    def close(self) -> None:
        self._close()

    def _close(self) -> None:
        with self._lock:
            if self._fh is not None:
                with contextlib.suppress(OSError):
                    self._fh.close()
            self._fh = None
            self._fh_file = None
            self._fh_closed = False

    # ------------------------------------------------------------ the spool's hook

    def deleted(self, path: Path, data: bytes) -> None:
        """The spool is about to delete ``path`` (content ``data``): count what was not read.

        A file this reader has open is not lost (the open handle reads it to its end).
        """
        key = file_key(path.name, self.node)
        if key is None:
            return
        f = key[:2]
        with self._lock:
            if f in self._condemned or f == self._fh_file:
                return
            self._condemned.add(f)
            pos = self._pos
            if pos is None or f > pos.file:
                lost = data.count(b"\n")
            elif f == pos.file:
                lost = data.count(b"\n", min(pos.offset, len(data)))
            else:
                lost = 0
            self.counters["lost"] += lost


def _cut(data: bytes, max_records: int) -> int:
    """Length of the first ``max_records`` complete lines of ``data`` (0 if none)."""
    end = -1
    for _ in range(max_records):
        nl = data.find(b"\n", end + 1)
        if nl < 0:
            break
        end = nl
    return end + 1


def _skip_line(fh: IO[bytes]) -> int:
    """Move past the next newline (or to the end); the new offset."""
    while chunk := fh.read(1 << 20):
        nl = chunk.find(b"\n")
        if nl >= 0:
            fh.seek(nl + 1 - len(chunk), os.SEEK_CUR)
            break
    return fh.tell()
