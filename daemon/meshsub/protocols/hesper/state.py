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
from collections.abc import Hashable, Iterator
from dataclasses import dataclass, field
from typing import Any

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

    def merge(self, wire_entries: tuple[Any, ...] | list[Any], now: float) -> int:
        """Install entries handed over by a previous broker; return how many were bad."""
        bad = 0
        for raw in wire_entries:
            try:
                entry = Entry.from_wire(raw, now)
            except ValueError:
                bad += 1
                continue
            mine = self.entries.get(entry.owner)
            if mine is None:
                self.entries[entry.owner] = entry
                continue
            for key, ds in entry.downstream.items():
                mine.downstream.setdefault(key, ds)
            if entry.active and not mine.active:
                mine.active, mine.upstream = True, entry.upstream
        return bad
