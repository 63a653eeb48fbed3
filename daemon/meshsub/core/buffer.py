"""The store-carry-forward buffer: bounded, expiring, with every drop accounted.

Delay-tolerant protocols (epidemic, B-SUB, GIANT) carry messages between
contacts. The buffer bounds memory and disk twice, by ``capacity`` messages
and by ``max_bytes`` (the size of each entry's stored form), forgets messages
whose lifetime ended (reason ``expired``) and, when full, evicts by a
configurable policy (reason ``buffer_full``). It never emits telemetry: it
returns what it dropped and the protocol calls ``Protocol.drop`` for each.

A buffer shared with other nodes' messages is also a target: a node holding
the fleet key can send thousands of large, never-expiring junk messages. So:

- a remaining lifetime is capped at ``max_lifetime`` (the protocol's own
  message lifetime) on arrival, so nothing outlives what the protocol allows;
- the node's *own* messages (origin ``local``) that no neighbour holds yet
  (``handed_on`` not called) are never evicted for another node's message:
  when nothing else can make room, the incoming remote message is refused
  (reason ``buffer_refused``), because an acknowledged local event has no
  other copy anywhere;
- when the buffer is full, a remote origin holding more than ``origin_share``
  of the buffer (in messages or bytes) gives up its own entries first, so one
  origin cannot push every other origin out.

Storage sits behind ``BufferStore`` (put/get/delete/iterate/len of plain
msgpack-able values keyed by ``MessageId``), so the daemon can back the
buffer with SQLite and a restart loses nothing. ``ScfBuffer`` keeps an index
in memory and writes through to the store. A store that keeps the messages
itself (``resident`` false: the daemon's SQLite table) gets an index without
bodies, so the bodies (up to ``max_bytes``, 16 MB, of decoded Python objects:
about 20 MB of a daemon's RSS when an insider fills the buffer) live on disk
only and are read back when a protocol asks for a message; the in-memory cost
per entry is then a few hundred bytes whatever the message's size.
"""

from __future__ import annotations

import enum
import heapq
import math
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Any, Final, Protocol, TypeAlias

import msgpack

from meshsub.core.api import Message, MessageId, NodeId

StoredValue: TypeAlias = list[Any]
"""The plain (msgpack-able) form a ``BufferStore`` keeps for one entry."""


DEFAULT_MAX_BYTES: Final = 16_000_000
"""Bytes of stored entries a buffer may hold: a few percent of a Raspberry Pi's memory
and well under its state partition, whatever the message count limit says."""
DEFAULT_ORIGIN_SHARE: Final = 0.25
"""Share of a full buffer (messages and bytes) beyond which a remote origin's own
entries are evicted first."""


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
    """A buffered message, when it was stored and when it expires (driver time).

    ``handed_on``: a neighbour acknowledged a copy (only tracked for the node's
    own messages, which are protected from eviction until then).
    """

    message: Message
    stored_at: float
    expires_at: float
    handed_on: bool = False

    def to_obj(self) -> StoredValue:
        # the flag is always written, so that handing a message on never changes the
        # size charged against ``max_bytes`` (older stores hold 3 fields: still read)
        return [message_to_obj(self.message), self.stored_at, self.expires_at, self.handed_on]

    @classmethod
    def from_obj(cls, obj: Any) -> BufferEntry:
        if not isinstance(obj, list | tuple) or len(obj) not in (3, 4):
            raise BufferFormatError("a stored entry is [message, stored_at, expires_at(, handed)]")
        message = message_from_obj(obj[0])
        times = obj[1:3]
        for t in times:
            if isinstance(t, bool) or not isinstance(t, int | float) or math.isnan(t):
                raise BufferFormatError("stored_at/expires_at must be numbers")
        handed = obj[3] if len(obj) == 4 else False
        if not isinstance(handed, bool):
            raise BufferFormatError("handed_on must be a boolean")
        return cls(message, float(obj[1]), float(obj[2]), handed)


def entry_size(value: StoredValue) -> int:
    """Bytes an entry costs against ``max_bytes``: its msgpack form, as a store keeps it.

    A value msgpack cannot pack is charged by its ``repr`` (the store refuses
    it anyway; the buffer must not raise while accounting).
    """
    try:
        return len(msgpack.packb(value, use_bin_type=True))
    except (TypeError, ValueError, OverflowError):
        return len(repr(value))


@dataclass(frozen=True, slots=True)
class Dropped:
    """An entry the buffer let go of, and why.

    ``expired``; ``buffer_full`` (evicted for another message, or refused by
    ``drop_new``/``drop_expiring``); ``buffer_refused`` (an incoming remote
    message for which only protected local messages could have made room);
    ``too_large`` (a single entry above ``max_bytes``).
    """

    entry: BufferEntry
    reason: str


# ---------------------------------------------------------------- storage


class BufferStore(Protocol):
    """Where buffer entries live. Iteration is in insertion order (oldest first).

    ``resident``: the values stay in memory anyway (``MemoryStore``), so the
    buffer's index may share them; false (a store on disk): the index keeps no
    message bodies and ``get`` reads them back.
    """

    resident: bool

    def put(self, key: MessageId, value: StoredValue) -> None: ...
    def get(self, key: MessageId) -> StoredValue | None: ...
    def delete(self, key: MessageId) -> bool: ...
    def iterate(self) -> Iterator[tuple[MessageId, StoredValue]]: ...
    def __len__(self) -> int: ...


class MemoryStore:
    """The in-memory ``BufferStore`` (simulation, tests, daemons without a state dir)."""

    resident = True

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
    """A bounded store-carry-forward buffer of messages keyed by ``MessageId``.

    ``capacity`` messages and ``max_bytes`` bytes (``entry_size``) at most;
    ``max_lifetime`` seconds of remaining lifetime at most (``None``: no cap);
    ``local`` is this node's id (its messages are protected until handed on;
    ``None``: every message counts as remote); ``origin_share`` in (0, 1].
    """

    def __init__(self, capacity: int, policy: DropPolicy = DropPolicy.DROP_OLDEST,
                 store: BufferStore | None = None, *, max_bytes: int = DEFAULT_MAX_BYTES,
                 max_lifetime: float | None = None, local: NodeId | None = None,
                 origin_share: float = DEFAULT_ORIGIN_SHARE) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int) or capacity < 1:
            raise ValueError(f"buffer capacity must be a positive integer, got {capacity!r}")
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise ValueError(f"buffer max_bytes must be a positive integer, got {max_bytes!r}")
        if max_lifetime is not None and not max_lifetime > 0:
            raise ValueError(f"buffer max_lifetime must be positive, got {max_lifetime!r}")
        if not 0 < origin_share <= 1:
            raise ValueError(f"buffer origin_share must be in (0, 1], got {origin_share!r}")
        self.capacity = capacity
        self.max_bytes = max_bytes
        self.max_lifetime = max_lifetime
        self.local = local
        self.origin_share = origin_share
        self.policy = DropPolicy(policy)
        self.store: BufferStore = store if store is not None else MemoryStore()
        self.resident = self.store.resident
        """Whether the index holds the messages' bodies (else the store alone does)."""
        self._entries: dict[MessageId, BufferEntry] = {}  # insertion order = age order
        """The index, oldest first; without bodies when the store is not resident."""
        self._sizes: dict[MessageId, int] = {}
        self._expiry: list[tuple[float, MessageId]] = []  # lazy min-heap
        self._handed: set[MessageId] = set()
        """Own messages a neighbour acknowledged; kept across ``discard`` + ``add``
        (a protocol rewriting an entry's bookkeeping) and pruned to held ids."""
        self._origin_count: Counter[NodeId] = Counter()
        self._origin_bytes: Counter[NodeId] = Counter()
        self._hogs: set[NodeId] = set()
        """Remote origins holding more than their share (kept up to date per change)."""
        self.bytes = 0
        """Bytes held (sum of ``entry_size``)."""
        self.corrupt = 0
        """Entries found unreadable in the store (at start, or when read back: deleted,
        counted here)."""
        self._reloaded = False
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
            self._insert(self._slim(entry), entry_size(entry.to_obj()))  # charged as written
            self._reloaded = True

    def _settle_reloaded(self, now: float) -> list[Dropped]:
        """At the first clock reading after a reload: apply today's limits to what the
        store held (a smaller capacity, a lifetime cap, junk kept by an older version).

        Lifetimes beyond ``now + max_lifetime`` are cut; entries over the limits
        are evicted oldest first, protected own messages last, and reported.
        """
        self._reloaded = False
        if self.max_lifetime is not None:
            horizon = now + self.max_lifetime
            for key, entry in list(self._entries.items()):
                if entry.expires_at > horizon:
                    full = self._full(key, entry)
                    if full is None:
                        continue
                    self._rewrite(key, replace(full, expires_at=horizon))
                    heapq.heappush(self._expiry, (horizon, key))
        out: list[Dropped] = []
        order = sorted(self._entries.values(), key=lambda e: self.protected(e.message.id))
        for entry in order:
            if len(self._entries) <= self.capacity and self.bytes <= self.max_bytes:
                break
            self._remove(entry.message.id)
            out.append(Dropped(entry, "buffer_full"))
        return out

    # ------------------------------------------------------------- queries

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def __iter__(self) -> Iterator[Message]:
        return iter([e.message for e in self.entries()])

    def entries(self) -> list[BufferEntry]:
        """All entries, oldest first (read back from a store that is not resident)."""
        if self.resident:
            return list(self._entries.values())
        return [full for key, entry in list(self._entries.items())
                if (full := self._full(key, entry)) is not None]

    def get(self, key: MessageId) -> Message | None:
        entry = self.entry(key)
        return entry.message if entry is not None else None

    def entry(self, key: MessageId) -> BufferEntry | None:
        entry = self._entries.get(key)
        return entry if entry is None or self.resident else self._full(key, entry)

    def summary_vector(self) -> frozenset[MessageId]:
        """The ids held: what a peer need not send (Vahdat & Becker's summary vector)."""
        return frozenset(self._entries)

    def next_expiry(self) -> float | None:
        """Earliest expiry time of a held message, for the protocol's expiry timer."""
        self._prune_heap()
        return self._expiry[0][0] if self._expiry else None

    def is_local(self, key: MessageId) -> bool:
        return self.local is not None and key.origin == self.local

    def protected(self, key: MessageId) -> bool:
        """An own message no neighbour acknowledged yet: never evicted for a remote one."""
        return self.is_local(key) and key not in self._handed

    def status(self) -> dict[str, int | float | None]:
        """Occupancy and limits, for operators."""
        return {"messages": len(self._entries), "capacity": self.capacity,
                "bytes": self.bytes, "max_bytes": self.max_bytes,
                "protected": sum(1 for k in self._entries if self.protected(k)),
                "origins": len(self._origin_count), "max_lifetime_s": self.max_lifetime}

    # ------------------------------------------------------------- changes

    def add(self, message: Message, now: float, expires_at: float) -> tuple[bool, list[Dropped]]:
        """Store ``message``; return whether it is now held, and what was dropped.

        Expired entries are purged first (so they never cost an eviction). A
        message already held is left as it is (``False, []``). A message that
        is already expired is not stored and is returned as ``expired``. The
        lifetime is capped at ``now + max_lifetime``.
        """
        dropped = self.expire(now)
        if message.id in self._entries:
            return False, dropped
        if self.max_lifetime is not None:
            expires_at = min(expires_at, now + self.max_lifetime)
        entry = BufferEntry(message, now, expires_at, message.id in self._handed)
        if expires_at <= now:
            dropped.append(Dropped(entry, "expired"))
            return False, dropped
        value = entry.to_obj()
        size = entry_size(value)
        if size > self.max_bytes:
            dropped.append(Dropped(entry, "too_large"))
            return False, dropped
        if len(self._entries) >= self.capacity or self.bytes + size > self.max_bytes:
            victims, reason = self._make_room(entry, size)
            if victims is None:
                dropped.append(Dropped(entry, reason))
                return False, dropped
            for victim in victims:
                self._remove(victim.message.id)
                dropped.append(Dropped(victim, "buffer_full"))
        self._insert(self._slim(entry), size)
        self.store.put(message.id, value)
        return True, dropped

    def handed_on(self, key: MessageId) -> bool:
        """A neighbour acknowledged a copy of ``key``: an own message loses its protection.

        Returns True if that changed something. Remote messages are not tracked.
        """
        if not self.is_local(key) or key in self._handed:
            return False
        self._handed.add(key)
        entry = self._entries.get(key)
        full = None if entry is None else self._full(key, entry)
        if full is not None:
            self._rewrite(key, replace(full, handed_on=True))  # same place in the age order
        return True

    def discard(self, key: MessageId) -> bool:
        """Remove a message on purpose (delivered, custody passed on); not a drop."""
        if key not in self._entries:
            return False
        self._remove(key)
        return True

    def expire(self, now: float) -> list[Dropped]:
        """Remove and return every entry whose expiry time is ``<= now``.

        The first call after a reload also applies the limits to the reloaded
        entries (``_settle_reloaded``), so the protocol reports those drops too.
        """
        out: list[Dropped] = self._settle_reloaded(now) if self._reloaded else []
        heap = self._expiry
        while heap and heap[0][0] <= now:
            at, key = heapq.heappop(heap)
            entry = self._entries.get(key)
            if entry is not None and entry.expires_at == at:
                self._remove(key)
                self._handed.discard(key)
                out.append(Dropped(entry, "expired"))
        return out

    # ------------------------------------------------------------- eviction

    def _make_room(self, incoming: BufferEntry,
                   size: int) -> tuple[list[BufferEntry] | None, str]:
        """Entries to evict so that ``incoming`` fits, or ``(None, reason)`` to refuse it.

        Candidates, in order of preference: the incoming origin's own entries
        if that origin would exceed its share; else entries of origins over
        their share; else every entry not protected; and for an own message,
        as the last resort, older own messages too. Within a set the policy
        decides the order.
        """
        if self.policy is DropPolicy.DROP_NEW:
            return None, "buffer_full"
        mid = incoming.message.id
        local = self.is_local(mid)
        tiers: list[Callable[[MessageId], bool]] = []
        if not local and self._over_share(mid.origin, 1, size):
            tiers.append(lambda k: k.origin == mid.origin)
        else:
            hogs = set(self._hogs)
            if hogs:
                tiers.append(lambda k: k.origin in hogs)
            tiers.append(lambda k: not self.protected(k))
            if local:
                tiers.append(lambda k: True)
        for tier in tiers:
            victims, expires_first = self._victims(incoming, size, tier)
            if victims is not None:
                return victims, ""
            if expires_first:
                return None, "buffer_full"  # drop_expiring: the newcomer goes first
        return None, "buffer_full" if local else "buffer_refused"

    def _over_share(self, origin: NodeId, count: int, size: int) -> bool:
        """Would ``origin`` hold more than its share with ``count``/``size`` more?

        The share is never less than one message, so that a small buffer still
        takes a message from every origin.
        """
        return (self._origin_count[origin] + count > max(1.0, self.origin_share * self.capacity)
                or self._origin_bytes[origin] + size > self.origin_share * self.max_bytes)

    def _victims(self, incoming: BufferEntry, size: int, eligible: Callable[[MessageId], bool],
                 ) -> tuple[list[BufferEntry] | None, bool]:
        """The fewest eligible entries, in policy order, whose removal makes ``incoming`` fit.

        ``(None, True)`` when ``drop_expiring`` finds the newcomer expiring first;
        ``(None, False)`` when the eligible entries cannot make enough room.
        """
        need_count = len(self._entries) + 1 - self.capacity
        need_bytes = self.bytes + size - self.max_bytes
        chosen: list[BufferEntry] = []
        for entry in self._policy_order(eligible):
            if need_count <= 0 and need_bytes <= 0:
                break
            if self.policy is DropPolicy.DROP_EXPIRING and incoming.expires_at < entry.expires_at:
                return None, True
            chosen.append(entry)
            need_count -= 1
            need_bytes -= self._sizes[entry.message.id]
        if need_count > 0 or need_bytes > 0:
            return None, False
        return chosen, False

    def _policy_order(self, eligible: Callable[[MessageId], bool]) -> Iterator[BufferEntry]:
        """Eligible entries, first victim first (lazily: one eviction is the usual case)."""
        if self.policy is not DropPolicy.DROP_EXPIRING:
            return (e for k, e in self._entries.items() if eligible(k))
        return self._expiring_order(eligible)

    def _expiring_order(self, eligible: Callable[[MessageId], bool]) -> Iterator[BufferEntry]:
        """Soonest expiry first, ties to the oldest; the heap head answers the first one."""
        self._prune_heap()
        first: BufferEntry | None = None
        if self._expiry:
            soonest = self._expiry[0][0]
            first = next(e for e in self._entries.values() if e.expires_at == soonest)
            if eligible(first.message.id):
                yield first
            else:
                first = None
        rest = [(e.expires_at, i, e) for i, (k, e) in enumerate(self._entries.items())
                if e is not first and eligible(k)]
        rest.sort(key=lambda t: (t[0], t[1]))
        yield from (e for _, _, e in rest)

    # ------------------------------------------------------------- bookkeeping

    def _slim(self, entry: BufferEntry) -> BufferEntry:
        """The index's form of ``entry``: without its body when the store keeps it."""
        if self.resident:
            return entry
        return replace(entry, message=replace(entry.message, body=None))

    def _full(self, key: MessageId, entry: BufferEntry) -> BufferEntry | None:
        """``entry`` with its body, read back from the store when the index has none.

        A stored value that is gone or unreadable (a damaged database) is forgotten
        and counted in ``corrupt``; the caller sees no entry.
        """
        if self.resident:
            return entry
        value = self.store.get(key)
        try:
            if value is None:
                raise BufferFormatError("missing from the store")
            full = BufferEntry.from_obj(value)
            if full.message.id != key:
                raise BufferFormatError("key does not match the stored message id")
        except BufferFormatError:
            self._remove(key)
            self._handed.discard(key)
            self.corrupt += 1
            return None
        return replace(full, expires_at=entry.expires_at, handed_on=entry.handed_on)

    def _rewrite(self, key: MessageId, full: BufferEntry) -> None:
        """Replace a held entry's bookkeeping in place (same age, same size charged)."""
        self._entries[key] = self._slim(full)
        self.store.put(key, full.to_obj())

    def _insert(self, entry: BufferEntry, size: int) -> None:
        key = entry.message.id
        self._entries[key] = entry
        self._sizes[key] = size
        self.bytes += size
        self._origin_count[key.origin] += 1
        self._origin_bytes[key.origin] += size
        self._rate(key.origin)
        if entry.handed_on:
            self._handed.add(key)
        heapq.heappush(self._expiry, (entry.expires_at, key))
        if len(self._handed) > 2 * len(self._entries) + 64:
            self._handed = {k for k in self._handed if k in self._entries}

    def _remove(self, key: MessageId) -> None:
        del self._entries[key]
        size = self._sizes.pop(key)
        self.bytes -= size
        origin = key.origin
        self._origin_count[origin] -= 1
        self._origin_bytes[origin] -= size
        if self._origin_count[origin] <= 0:
            del self._origin_count[origin], self._origin_bytes[origin]
        self._rate(origin)
        self.store.delete(key)
        if len(self._expiry) > 2 * len(self._entries) + 64:  # compact stale heap entries
            self._expiry = [(e.expires_at, k) for k, e in self._entries.items()]
            heapq.heapify(self._expiry)

    def _rate(self, origin: NodeId) -> None:
        """Re-decide whether ``origin`` is over its share after one of its changes."""
        if origin != self.local and self._over_share(origin, 0, 0):
            self._hogs.add(origin)
        else:
            self._hogs.discard(origin)

    def _prune_heap(self) -> None:
        """Pop heap heads that no longer describe a held entry (lazy deletion)."""
        heap = self._expiry
        while heap:
            at, key = heap[0]
            entry = self._entries.get(key)
            if entry is not None and entry.expires_at == at:
                return
            heapq.heappop(heap)
