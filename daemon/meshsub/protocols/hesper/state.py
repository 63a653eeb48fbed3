"""A broker's per-topic state (Zheng 2008, §4.3's routing table): entries, downstream leases, dedup.

One ``Entry`` per subscription that *created* a path segment here (its
``owner`` sub_id); other subscriptions that the entry covers join its
downstream set. Each downstream pointer keeps its own filter and lease, so an
event is sent to a downstream only when one of that downstream's own filters
matches: removing a subscription never needs a weaker filter to be re-sent
upstream and over-delivery stays one hop long at most.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

import msgpack

from meshsub.core.content import ContentError, Event, Subscription
from meshsub.core.grid import Cell
from meshsub.protocols.hesper.messages import Target


class TimedDedup:
    """Seen-before cache bounded by size *and* age (4096 ids or 120 s)."""

    def __init__(self, capacity: int, max_age: float) -> None:
        self.capacity = capacity
        self.max_age = max_age
        self._seen: OrderedDict[Hashable, float] = OrderedDict()

    def check_and_add(self, key: Hashable, now: float) -> bool:
        """True if ``key`` was seen within ``max_age``; records it otherwise."""
        while self._seen:
            oldest_key, t = next(iter(self._seen.items()))
            if now - t <= self.max_age and len(self._seen) <= self.capacity:
                break
            del self._seen[oldest_key]
        if key in self._seen:
            return True
        self._seen[key] = now
        return False

    def __len__(self) -> int:
        return len(self._seen)


class TimedBest:
    """The least value seen for each key, bounded by size and age like ``TimedDedup``."""

    def __init__(self, capacity: int, max_age: float) -> None:
        self.capacity = capacity
        self.max_age = max_age
        self._best: OrderedDict[Hashable, tuple[float, tuple[int, ...]]] = OrderedDict()

    def offer(self, key: Hashable, value: tuple[int, ...], now: float) -> bool:
        """True if ``value`` is no worse than every value offered for ``key`` within
        ``max_age``; it is then the one kept."""
        while self._best:
            oldest_key, (t, _v) = next(iter(self._best.items()))
            if now - t <= self.max_age:
                break
            del self._best[oldest_key]
        seen = self._best.get(key)
        if seen is not None and seen[1] < value:
            return False
        self._best[key] = (now if seen is None else seen[0], value)
        while len(self._best) > self.capacity:
            self._best.popitem(last=False)
        return True

    def __len__(self) -> int:
        return len(self._best)


class Budget:
    """A bound on a table's entries and bytes that its many writers need not keep exact.

    Writers ``admit`` what they are about to insert (an upper estimate); the running
    totals only grow between measurements, so they never under-count what the table
    holds. When an insertion would pass a bound, the totals are first re-measured
    exactly (``measure``) if anything was admitted since the last measurement or it is
    ``remeasure_s`` old (removals since), and the insertion is refused only if the
    table is still too full: a stream of refused insertions costs no measurement each.
    ``resync`` (the periodic lease sweep) brings the totals back to exact.
    """

    def __init__(self, max_entries: int, max_bytes: int,
                 measure: Callable[[], tuple[int, int]], remeasure_s: float = 1.0) -> None:
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._measure = measure
        self._remeasure_s = remeasure_s
        self._measured_at = -float("inf")
        self._admitted = False
        self.entries = 0
        self.bytes = 0

    def admit(self, entries: int, nbytes: int, now: float) -> bool:
        """True (and counted) if ``entries`` more entries of ``nbytes`` bytes fit."""
        if not self._fits(entries, nbytes):
            if not self._admitted and now - self._measured_at < self._remeasure_s:
                return False
            self.resync(now)
            if not self._fits(entries, nbytes):
                return False
        self.entries += entries
        self.bytes += nbytes
        self._admitted = True
        return True

    def resync(self, now: float) -> None:
        self.entries, self.bytes = self._measure()
        self._measured_at = now
        self._admitted = False

    def _fits(self, entries: int, nbytes: int) -> bool:
        return (self.entries + entries <= self.max_entries
                and self.bytes + nbytes <= self.max_bytes)


def wire_size(value: Any) -> int:
    """Bytes of ``value`` msgpack-encoded (the state-size measure of ``state`` records)."""
    return len(msgpack.packb(value))


CELL_BYTES = 6
"""Bytes counted per cell of a route record (two small integers, msgpack-encoded)."""


@dataclass(slots=True)
class Downstream:
    filter: Subscription
    expiry: float


@dataclass(slots=True)
class Entry:
    owner: str
    filter: Subscription
    region: Cell
    upstream: Cell | None
    """Next cell towards the PHB; ``None`` at the PHB (and while PENDING)."""
    active: bool
    expiry: float
    variant: str = "I"
    downstream: dict[tuple[Target, str], Downstream] = field(default_factory=dict)
    relayed: tuple[int, int] | None = None
    """HESPER-II relay: rank (new links, total hops) of the best REPLY passed on so far
    for this subscription; worse ones are not passed on (local, not handed over)."""

    def size(self) -> tuple[int, int]:
        """``(entries, bytes)`` as ``Budget`` counts them: the entry and each downstream
        pointer, with their filters and sub_ids."""
        entries = 1 + len(self.downstream)
        nbytes = len(self.owner.encode()) + wire_size(self.filter.to_wire())
        nbytes += sum(len(sid.encode()) + wire_size(d.filter.to_wire())
                      for (_t, sid), d in self.downstream.items())
        return entries, nbytes

    def covers(self, sub: Subscription, region: Cell) -> bool:
        return self.active and self.region == region and self.filter.covers(sub)

    def targets_for(self, event: Event) -> Iterator[Target]:
        for (target, _sid), ds in self.downstream.items():
            if ds.filter.matches(event):
                yield target

    def to_wire(self, now: float) -> list[Any]:
        return [
            self.owner, self.filter.to_wire(), self.region[0], self.region[1],
            None if self.upstream is None else list(self.upstream), self.active,
            max(0.0, self.expiry - now), self.variant,
            [[list(t), sid, d.filter.to_wire(), max(0.0, d.expiry - now)]
             for (t, sid), d in self.downstream.items()],
        ]

    @classmethod
    def from_wire(cls, v: Any, now: float) -> Entry:
        """Inverse of ``to_wire`` (lease times are relative); ``ValueError`` if malformed."""
        try:
            owner, flt, rx, ry, up, active, ttl, variant, downs = v
            if variant not in ("I", "II"):
                raise ValueError(f"variant {variant!r}")
            entry = cls(str(owner), Subscription.from_wire(flt), Cell(int(rx), int(ry)),
                        None if up is None else Cell(int(up[0]), int(up[1])), bool(active),
                        now + float(ttl), variant)
            for t, sid, dflt, dttl in downs:
                target = (int(t[0]), int(t[1]), int(t[2]))
                entry.downstream[(target, str(sid))] = Downstream(
                    Subscription.from_wire(dflt), now + float(dttl))
        except (ValueError, TypeError, ContentError, IndexError) as exc:
            raise ValueError(f"bad routing entry: {exc}") from None
        return entry


@dataclass(slots=True)
class ReplyCandidate:
    """A REPLY collected by a HESPER-II SHB during its reply window."""

    new_links: int
    total_hops: int
    arrival: int
    route_record: tuple[Cell, ...]
    replier_cell: Cell

    def rank(self) -> tuple[int, int, int]:
        """Fewest new links (most sharing), then fewest total hops, then earliest."""
        return (self.new_links, self.total_hops, self.arrival)


@dataclass(slots=True)
class TopicState:
    """Everything a broker keeps for one topic."""

    topic: str
    entries: dict[str, Entry] = field(default_factory=dict)
    awaiting_confirm: dict[str, tuple[str, Target, Subscription]] = field(default_factory=dict)
    """HESPER-II replier: sub_id -> (covering entry owner, downstream to add, filter)."""
    replies: dict[str, list[ReplyCandidate]] = field(default_factory=dict)
    """HESPER-II SHB: reply windows open, by sub_id."""
    reply_deadline: dict[str, float] = field(default_factory=dict)
    """HESPER-II SHB: when each open reply window closes (stretched by the hops the
    replies actually took)."""

    def size(self) -> tuple[int, int]:
        """``(entries, bytes)`` this topic holds, as ``Budget`` counts them: the topic
        itself, each entry, downstream pointer, subscription awaiting a CONFIRM and
        REPLY collected, with the filters, sub_ids and route records they keep."""
        entries, nbytes = 1, len(self.topic.encode())
        for entry in self.entries.values():
            e, b = entry.size()
            entries, nbytes = entries + e, nbytes + b
        for sub_id, (_owner, _t, flt) in self.awaiting_confirm.items():
            entries += 1
            nbytes += len(sub_id.encode()) + wire_size(flt.to_wire())
        for sub_id, window in self.replies.items():
            entries += len(window)
            nbytes += len(sub_id.encode()) + sum(CELL_BYTES * (len(c.route_record) + 1)
                                                 for c in window)
        return entries, nbytes

    def covering(self, sub: Subscription, region: Cell) -> Entry | None:
        """An ACTIVE entry whose filter covers ``sub`` for the same region (Zheng 2008, §4.3)."""
        for entry in self.entries.values():
            if entry.covers(sub, region):
                return entry
        return None

    def holding(self, target: Target, sub_id: str) -> Entry | None:
        """The entry whose downstream holds ``(target, sub_id)``, if any."""
        for entry in self.entries.values():
            if (target, sub_id) in entry.downstream:
                return entry
        return None

    def to_wire(self, now: float) -> list[Any]:
        return [e.to_wire(now) for e in self.entries.values()]

    def merge(self, wire_entries: tuple[Any, ...] | list[Any], now: float,
              admit: Callable[[int, int], bool]) -> tuple[int, int]:
        """Install entries handed over by a previous broker, each if ``admit`` lets its
        size in (``Budget``); return how many were bad and how many did not fit."""
        bad = full = 0
        for raw in wire_entries:
            try:
                entry = Entry.from_wire(raw, now)
            except ValueError:
                bad += 1
                continue
            mine = self.entries.get(entry.owner)
            if mine is None:
                if admit(*entry.size()):
                    self.entries[entry.owner] = entry
                else:
                    full += 1
                continue
            for key, ds in entry.downstream.items():
                if key in mine.downstream:
                    continue
                if admit(1, len(key[1].encode()) + wire_size(ds.filter.to_wire())):
                    mine.downstream[key] = ds
                else:
                    full += 1
            if entry.active and not mine.active:
                mine.active, mine.upstream = True, entry.upstream
        return bad, full
