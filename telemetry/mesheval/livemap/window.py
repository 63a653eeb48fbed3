"""A bounded window of telemetry records for the map, with counted drops.

The map needs only the records that change what it draws: positions, links, what
was published, received and delivered, drops and counters. Every other record is
counted as ``ignored``; a record that does not parse as ``malformed``; and when the
window is full (entries or bytes) the oldest records go and are counted as
``evicted``, so a long live session costs a fixed amount of memory.
"""

from __future__ import annotations

import itertools
import threading
from collections import deque
from typing import Any

from meshsub.core.telemetry import TelemetryError, dump_line, parse_line

#: the events the page draws (docs/telemetry.md "Events")
MAP_EVENTS = frozenset({"position", "neighbor_up", "neighbor_down", "publish", "subscribe",
                        "rx", "deliver", "drop", "counter"})
#: the attributes the page reads; the rest of a record is not kept
MAP_FIELDS = ("node", "ts_ns", "event", "event_id", "peer", "x", "y", "hop", "topic",
              "sub_id", "reason", "count", "bytes", "msg_kind")


class EventWindow:
    """The newest ``max_entries`` map records of at most ``max_bytes`` (thread-safe).

    Each kept record gets a sequence number (1, 2, ...) so the page asks only for
    what it has not seen (``since``).
    """

    def __init__(self, max_entries: int = 200_000, max_bytes: int = 64 * 1024 * 1024) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("the window needs room for at least one record")
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._items: deque[tuple[int, str]] = deque()
        self._bytes = 0
        self._seq = 0
        self._lock = threading.Lock()
        self.counters = {"accepted": 0, "ignored": 0, "malformed": 0, "evicted": 0}

    def add_line(self, line: str) -> bool:
        """Parse one JSON Lines record and keep it if the map draws it."""
        try:
            record = parse_line(line)
        except TelemetryError:
            with self._lock:
                self.counters["malformed"] += 1
            return False
        return self.add(record)

    def add(self, record: dict[str, Any]) -> bool:
        if record.get("event") not in MAP_EVENTS:
            with self._lock:
                self.counters["ignored"] += 1
            return False
        text = dump_line({k: record[k] for k in MAP_FIELDS if k in record})
        size = len(text.encode("utf-8"))
        with self._lock:
            if size > self.max_bytes:
                self.counters["evicted"] += 1
                return False
            self._seq += 1
            self._items.append((self._seq, text))
            self._bytes += size
            self.counters["accepted"] += 1
            while len(self._items) > self.max_entries or self._bytes > self.max_bytes:
                _, old = self._items.popleft()
                self._bytes -= len(old.encode("utf-8"))
                self.counters["evicted"] += 1
        return True

    def since(self, after: int, limit: int) -> tuple[list[str], int, int]:
        """(records with a sequence number above ``after``, at most ``limit``; first kept
        sequence number; last sequence number given out)."""
        with self._lock:
            first = self._items[0][0] if self._items else self._seq + 1
            start = max(after + 1, first)  # sequence numbers in the window are consecutive
            out = [text for _, text in
                   itertools.islice(self._items, start - first, start - first + limit)]
            last = start + len(out) - 1 if out else max(first - 1, min(after, self._seq))
            return out, first, last

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {**self.counters, "entries": len(self._items), "bytes": self._bytes,
                    "max_entries": self.max_entries, "max_bytes": self.max_bytes}
