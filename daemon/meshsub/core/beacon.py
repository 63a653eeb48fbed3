"""One-hop state beacons: what each neighbour last announced, and when to announce.

Tree protocols learn their neighbourhood from one-hop broadcasts of their own
state. DIBS's CRES (Pham and Tran 2012) builds its clusters, virtual
addresses and distance vectors from a heartbeat each node "periodically
sends ... advertising its information to all its neighbors", with one period
for all (§3.1); each neighbour of a failed node "will detect the failure"
(§3.3.2: here, by its silence), and a node whose VA changed advertises it at
once (§3.3.2), which we rate-limit (docs/protocols/dibs.md, rule 1). The
tree-group protocol of Liu (2011, §3.5) sends "a heartbeats message ...
between parents and children nodes in a tree periodically to identify
whether they are connected"; our machine also finds groups to join in its
neighbours' heartbeats (docs/protocols/tg.md, rule 8). Both need the same two
pieces, kept here sans-I/O:

- ``BeaconTable``: each neighbour's latest beacon state (any type ``S``) with
  the time it was heard; ``silent``/``expire`` name the neighbours silent for
  longer than the caller's limit, so the protocol reacts to each. Bounded in
  entries and in bytes (the caller's ``size_of``): a new neighbour beyond a
  bound is refused, or, with ``evict_stalest``, replaces the least recently
  heard ones (a flood of fake ids then costs nothing but churn). Refusals and
  evictions are return values the caller counts (as in ``core.tree``);
- ``BeaconSchedule``: the send decisions as pure functions of ``now``: the
  first beacon's phase, the jittered period, and triggered beacons, each
  soon after a change but never closer than ``min_gap`` periods to the
  previous triggered one (DIBS: 0.2 T, our value). The protocol arms the timers
  (``core.protocol``'s ``set_timer``) with the delays returned; the random
  draws come from the protocol's own generator, so runs stay reproducible.

The table iterates in the order neighbours were first heard (a refresh keeps
an entry's place): protocols that break ties by iteration order stay
deterministic however often neighbours are heard.
"""

from __future__ import annotations

import enum
import math
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from meshsub.core.api import NodeId

S = TypeVar("S")


@dataclass(slots=True)
class Entry(Generic[S]):
    """A neighbour's latest beacon state and when it arrived."""

    node: NodeId
    state: S
    last_heard: float
    size: int
    """Bytes of ``state`` (the caller's ``size_of``): the bytes bound and the state-size measure."""
    tick: int
    """The table's count of beacons kept when this one arrived (orders entries by recency)."""


class Status(enum.Enum):
    NEW = "new"
    REFRESHED = "refreshed"
    FULL = "full"
    """Refused: a new neighbour and the table holds ``max_entries`` (or its bytes, no room)."""
    TOO_BIG = "too_big"
    """Refused: this one state is larger than ``max_bytes``."""


@dataclass(frozen=True, slots=True)
class Heard:
    """What ``BeaconTable.hear`` did: kept or refused, and who was evicted to make room."""

    status: Status
    evicted: tuple[NodeId, ...] = ()

    @property
    def kept(self) -> bool:
        return self.status is Status.NEW or self.status is Status.REFRESHED


_NEW = Heard(Status.NEW)
_REFRESHED = Heard(Status.REFRESHED)
_FULL = Heard(Status.FULL)
_TOO_BIG = Heard(Status.TOO_BIG)


class BeaconTable(Generic[S]):
    """Each neighbour's latest beacon state, bounded in entries and bytes."""

    __slots__ = ("_entries", "_tick", "bytes", "evict_stalest", "max_bytes", "max_entries",
                 "size_of")

    def __init__(self, *, max_entries: int, max_bytes: int,
                 size_of: Callable[[S], int] | None = None,
                 evict_stalest: bool = False) -> None:
        if max_entries < 1 or max_bytes < 0:
            raise ValueError("beacon table bounds must be positive")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self.size_of = size_of
        self.evict_stalest = evict_stalest
        self.bytes = 0
        """Bytes of the states held (the sum of the entries' ``size``)."""
        self._entries: dict[NodeId, Entry[S]] = {}
        self._tick = 0

    def __contains__(self, node: object) -> bool:
        return node in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[NodeId]:
        return iter(self._entries)

    def get(self, node: NodeId) -> Entry[S] | None:
        return self._entries.get(node)

    def entries(self) -> list[Entry[S]]:
        return list(self._entries.values())

    def items(self) -> Iterator[tuple[NodeId, Entry[S]]]:
        return iter(self._entries.items())

    def hear(self, node: NodeId, state: S, now: float) -> Heard:
        """Keep ``state`` as ``node``'s latest, heard at ``now``; the outcome says if it was kept.

        A refresh replaces the state in place; a refused beacon leaves the
        table as it was (the neighbour's older state, if any, stays).
        """
        size = self.size_of(state) if self.size_of is not None else 0
        if size > self.max_bytes:
            return _TOO_BIG
        old = self._entries.get(node)
        room = self.max_bytes - self.bytes + (old.size if old is not None else 0)
        full = old is None and len(self._entries) >= self.max_entries
        evicted: list[NodeId] = []
        if full or size > room:
            if not self.evict_stalest:
                return _FULL
            while full or size > room:
                stalest = min((e for e in self._entries.values() if e.node != node),
                              key=lambda e: e.tick)
                self.forget(stalest.node)
                evicted.append(stalest.node)
                room += stalest.size
                full = False
        self._tick += 1
        if old is not None:
            self.bytes += size - old.size
            old.state, old.last_heard, old.size, old.tick = state, now, size, self._tick
            return Heard(Status.REFRESHED, tuple(evicted)) if evicted else _REFRESHED
        self._entries[node] = Entry(node, state, now, size, self._tick)
        self.bytes += size
        return Heard(Status.NEW, tuple(evicted)) if evicted else _NEW

    def forget(self, node: NodeId) -> Entry[S] | None:
        """Remove ``node`` (a link layer's down, a protocol's own verdict); its entry, if any."""
        entry = self._entries.pop(node, None)
        if entry is not None:
            self.bytes -= entry.size
        return entry

    def silent(self, now: float, after: float) -> list[NodeId]:
        """The neighbours not heard for more than ``after`` seconds, in table order.

        For a protocol that reacts to each loss before the next is removed
        (``forget`` each in turn); ``expire`` removes them all at once.
        """
        return [n for n, e in self._entries.items() if now - e.last_heard > after]

    def expire(self, now: float, after: float) -> list[Entry[S]]:
        """Remove and return the neighbours not heard for more than ``after`` seconds."""
        gone = [e for e in self._entries.values() if now - e.last_heard > after]
        for e in gone:
            self.forget(e.node)
        return gone


@dataclass(slots=True)
class BeaconSchedule:
    """When to send beacons: decisions on ``now`` and the protocol's random generator.

    ``min_gap`` is the shortest spacing of triggered beacons in periods (a
    burst of changes costs one beacon per ``min_gap`` periods, not one per
    change; DIBS uses 0.2); ``settle`` the range of a triggered beacon's
    delay, so that a burst of changes in one input leaves as one beacon and
    neighbours told of one change do not all answer at once; ``jitter`` the
    range of the periodic interval in periods (periodic beacons of nodes
    started together drift apart instead of colliding every period).
    """

    min_gap: float = 0.2
    settle: tuple[float, float] = (0.02, 0.1)
    jitter: tuple[float, float] = (0.9, 1.1)
    _triggered_at: float = -math.inf
    """When the latest triggered beacon was (or is) due."""

    def __post_init__(self) -> None:
        lo, hi = self.settle
        if self.min_gap < 0 or not 0 <= lo <= hi or not 0 < self.jitter[0] <= self.jitter[1]:
            raise ValueError("beacon schedule: gaps and delays must be non-negative and ordered")

    def phase(self, period: float, rng: random.Random) -> float:
        """Delay of the first periodic beacon: a random phase within one period."""
        return rng.uniform(0.0, period)

    def interval(self, period: float, rng: random.Random) -> float:
        """Delay of the next periodic beacon: ``period`` scaled by the jitter."""
        return period * rng.uniform(*self.jitter)

    def pending(self, now: float) -> bool:
        """A triggered beacon is due later (it will carry any change made until then)."""
        return self._triggered_at > now

    def trigger(self, now: float, period: float, rng: random.Random) -> float | None:
        """Ask for a beacon soon after a change: its delay from ``now``, or ``None`` if one is due.

        The beacon is due after a ``settle`` delay, but no sooner than
        ``min_gap * period`` after the previous triggered one.
        """
        if self._triggered_at > now:
            return None
        at = max(now + rng.uniform(*self.settle), self._triggered_at + self.min_gap * period)
        self._triggered_at = at
        return at - now
