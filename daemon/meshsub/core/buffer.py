"""The store-carry-forward buffer: bounded, expiring, with every drop accounted.

Delay-tolerant protocols (epidemic, B-SUB, GIANT) carry messages between
contacts. The buffer bounds memory (``capacity`` messages), forgets messages
whose lifetime ended (reason ``expired``) and, when full, evicts by a
configurable policy (reason ``buffer_full``). It never emits telemetry: it
returns what it dropped and the protocol calls ``Protocol.drop`` for each.

Storage sits behind ``BufferStore`` (put/get/delete/iterate/len of plain
msgpack-able values keyed by ``MessageId``), so the daemon can back the
buffer with SQLite and a restart loses nothing. ``ScfBuffer`` keeps a decoded
index in memory and writes through to the store.
"""

from __future__ import annotations

import enum
import heapq
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Protocol, TypeAlias

from meshsub.core.api import Message, MessageId

StoredValue: TypeAlias = list[Any]
"""The plain (msgpack-able) form a ``BufferStore`` keeps for one entry."""


class BufferFormatError(ValueError):
    """A stored value that is not a valid message or buffer entry."""


class DropPolicy(enum.StrEnum):
    """Which message a full buffer gives up for a new one.

    - ``drop_oldest``: the one stored longest ago (the ONE simulator's default;
      old messages have had most chances to spread).
    - ``drop_expiring``: the one whose lifetime ends soonest (ties: oldest);
      the incoming message itself if it would expire first.
    - ``drop_new``: refuse the incoming message (drop-tail; keeps custody of
      what is held).
    """

    DROP_OLDEST = "drop_oldest"
    DROP_EXPIRING = "drop_expiring"
    DROP_NEW = "drop_new"


# ---------------------------------------------------------------- plain forms


def _uint(value: Any, name: str, bits: int = 64) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < 1 << bits:
        raise BufferFormatError(f"{name} must be an unsigned {bits}-bit integer")
    return value


def message_id_to_obj(mid: MessageId) -> list[int]:
    return [mid.origin, mid.epoch, mid.seq]


def message_id_from_obj(obj: Any) -> MessageId:
    if not isinstance(obj, list | tuple) or len(obj) != 3:
        raise BufferFormatError("a message id is a list [origin, epoch, seq]")
    return MessageId(_uint(obj[0], "origin", 32), _uint(obj[1], "epoch"), _uint(obj[2], "seq"))


def message_to_obj(message: Message) -> list[Any]:
    """``[type, [origin, epoch, seq], body, hop, ttl, flags, reliable_id]``."""
    return [message.type, message_id_to_obj(message.id), message.body, message.hop,
            message.ttl, message.flags, message.reliable_id]


def message_from_obj(obj: Any) -> Message:
    """Inverse of ``message_to_obj``; ``BufferFormatError`` on anything malformed."""
    if not isinstance(obj, list | tuple) or len(obj) != 7:
        raise BufferFormatError("a stored message is a list of 7 fields")
    mtype, mid, body, hop, ttl, flags, rid = obj
    return Message(
        type=_uint(mtype, "type", 16),
        id=message_id_from_obj(mid),
        body=body,
        hop=_uint(hop, "hop", 16),
        ttl=_uint(ttl, "ttl", 16),
        flags=_uint(flags, "flags", 32),
        reliable_id=None if rid is None else _uint(rid, "reliable_id", 32),
    )


@dataclass(frozen=True, slots=True)
class BufferEntry:
    """A buffered message, when it was stored and when it expires (driver time)."""

    message: Message
    stored_at: float
    expires_at: float

    def to_obj(self) -> StoredValue:
        return [message_to_obj(self.message), self.stored_at, self.expires_at]

    @classmethod
    def from_obj(cls, obj: Any) -> BufferEntry:
        if not isinstance(obj, list | tuple) or len(obj) != 3:
            raise BufferFormatError("a stored entry is [message, stored_at, expires_at]")
        message = message_from_obj(obj[0])
        times = obj[1:]
        for t in times:
            if isinstance(t, bool) or not isinstance(t, int | float) or math.isnan(t):
                raise BufferFormatError("stored_at/expires_at must be numbers")
        return cls(message, float(obj[1]), float(obj[2]))


@dataclass(frozen=True, slots=True)
class Dropped:
    """An entry the buffer let go of, and why (``buffer_full`` or ``expired``)."""

    entry: BufferEntry
    reason: str


# ---------------------------------------------------------------- storage


class BufferStore(Protocol):
    """Where buffer entries live. Iteration is in insertion order (oldest first)."""

    def put(self, key: MessageId, value: StoredValue) -> None: ...
    def get(self, key: MessageId) -> StoredValue | None: ...
    def delete(self, key: MessageId) -> bool: ...
    def iterate(self) -> Iterator[tuple[MessageId, StoredValue]]: ...
    def __len__(self) -> int: ...


class MemoryStore:
    """The in-memory ``BufferStore`` (simulation, tests, daemons without a state dir)."""

    def __init__(self) -> None:
        self._items: dict[MessageId, StoredValue] = {}

    def put(self, key: MessageId, value: StoredValue) -> None:
        self._items.pop(key, None)  # re-put moves to the end, like an INSERT OR REPLACE
        self._items[key] = value

    def get(self, key: MessageId) -> StoredValue | None:
        return self._items.get(key)

    def delete(self, key: MessageId) -> bool:
        return self._items.pop(key, None) is not None

    def iterate(self) -> Iterator[tuple[MessageId, StoredValue]]:
        return iter(list(self._items.items()))

    def __len__(self) -> int:
        return len(self._items)


# ---------------------------------------------------------------- the buffer


class ScfBuffer:
    """A bounded store-carry-forward buffer of messages keyed by ``MessageId``."""

    def __init__(self, capacity: int, policy: DropPolicy = DropPolicy.DROP_OLDEST,
                 store: BufferStore | None = None) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"buffer capacity must be a positive integer, got {capacity!r}")
        self.capacity = capacity
        self.policy = DropPolicy(policy)
        self.store: BufferStore = store if store is not None else MemoryStore()
        self._entries: dict[MessageId, BufferEntry] = {}  # insertion order = age order
        self._expiry: list[tuple[float, MessageId]] = []  # lazy min-heap
        self.corrupt = 0
        """Entries found unreadable in the store at start (deleted, counted here)."""
        self._load()

    def _load(self) -> None:
        for key, value in self.store.iterate():
            try:
                entry = BufferEntry.from_obj(value)
                if entry.message.id != key:
                    raise BufferFormatError("key does not match the stored message id")
            except BufferFormatError:
                self.store.delete(key)
                self.corrupt += 1
                continue
            self._entries[key] = entry
            heapq.heappush(self._expiry, (entry.expires_at, key))

    # ------------------------------------------------------------- queries

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[Message]:
        return iter([e.message for e in self._entries.values()])

    def entries(self) -> list[BufferEntry]:
        """All entries, oldest first."""
        return list(self._entries.values())

    def get(self, key: MessageId) -> Message | None:
        entry = self._entries.get(key)
        return entry.message if entry is not None else None

    def entry(self, key: MessageId) -> BufferEntry | None:
        return self._entries.get(key)

    def summary_vector(self) -> frozenset[MessageId]:
        """The ids held: what a peer need not send (Vahdat & Becker's summary vector)."""
        return frozenset(self._entries)

    def next_expiry(self) -> float | None:
        """Earliest expiry time of a held message, for the protocol's expiry timer."""
        self._prune_heap()
        return self._expiry[0][0] if self._expiry else None

    # ------------------------------------------------------------- changes

    def add(self, message: Message, now: float, expires_at: float) -> tuple[bool, list[Dropped]]:
        """Store ``message``; return whether it is now held, and what was dropped.

        Expired entries are purged first (so they never cost an eviction). A
        message already held is left as it is (``False, []``). A message that
        is already expired is not stored and is returned as ``expired``.
        """
        dropped = self.expire(now)
        if message.id in self._entries:
            return False, dropped
        entry = BufferEntry(message, now, expires_at)
        if expires_at <= now:
            dropped.append(Dropped(entry, "expired"))
            return False, dropped
        if len(self._entries) >= self.capacity:
            victim = self._victim(entry)
            dropped.append(Dropped(victim, "buffer_full"))
            if victim is entry:
                return False, dropped
            self._remove(victim.message.id)
        self._entries[message.id] = entry
        heapq.heappush(self._expiry, (expires_at, message.id))
        self.store.put(message.id, entry.to_obj())
        return True, dropped

    def _victim(self, incoming: BufferEntry) -> BufferEntry:
        if self.policy is DropPolicy.DROP_NEW:
            return incoming
        if self.policy is DropPolicy.DROP_OLDEST:
            return next(iter(self._entries.values()))
        self._prune_heap()
        soonest = self._entries[self._expiry[0][1]]
        if incoming.expires_at < soonest.expires_at:
            return incoming
        # ties resolve to the oldest entry with that expiry
        for entry in self._entries.values():
            if entry.expires_at == soonest.expires_at:
                return entry
        return soonest  # pragma: no cover - the heap head is always held

    def discard(self, key: MessageId) -> bool:
        """Remove a message on purpose (delivered, custody passed on); not a drop."""
        if key not in self._entries:
            return False
        self._remove(key)
        return True

    def _remove(self, key: MessageId) -> None:
        del self._entries[key]
        self.store.delete(key)
        if len(self._expiry) > 2 * len(self._entries) + 64:  # compact stale heap entries
            self._expiry = [(e.expires_at, k) for k, e in self._entries.items()]
            heapq.heapify(self._expiry)

    def expire(self, now: float) -> list[Dropped]:
        """Remove and return every entry whose expiry time is ``<= now``."""
        out: list[Dropped] = []
        heap = self._expiry
        while heap and heap[0][0] <= now:
            at, key = heapq.heappop(heap)
            entry = self._entries.get(key)
            if entry is not None and entry.expires_at == at:
                self._remove(key)
                out.append(Dropped(entry, "expired"))
        return out

    def _prune_heap(self) -> None:
        """Pop heap heads that no longer describe a held entry (lazy deletion)."""
        heap = self._expiry
        while heap:
            at, key = heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry.expires_at == at:
                return
            heapq.heappop(heap)
