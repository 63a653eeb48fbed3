"""The neighbour table: liveness and link quality from beacons, as up/changed/down events.

Pure logic with the clock passed in, so it is tested with a fake clock and
reused unchanged by any driver. Link quality is an EWMA of beacon reception:
each beacon sequence gap counts its missing beacons as zeros, and beacons
overdue by the clock are counted before the next one arrives (so a silent
neighbour's quality decays before it is declared down). A neighbour is down
after ``timeout_beacons`` of *its own* advertised intervals without a beacon.

Hostile senders: the table holds at most ``max_neighbors``; a new node beyond
that is refused (counted in ``refused``), never exchanged for a live one. A
beacon older than the newest heard from that node (by the transmitter's boot
epoch, then the beacon sequence) is stale: counted, and it changes nothing,
least of all the neighbour's address. A neighbour that restarted (a newer boot
epoch, or without epochs a sequence that began anew) is a new contact: down, then up.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from meshsub.core.api import (
    NeighborChanged,
    NeighborDown,
    NeighborInfo,
    NeighborUp,
    NodeId,
    Position,
)
from meshsub.runtime.link import Address

DEFAULT_MAX_NEIGHBORS = 256
"""One radio hears far fewer; a full table means made-up ids (an insider)."""


class EventKind(enum.StrEnum):
    UP = "up"
    CHANGED = "changed"
    DOWN = "down"


@dataclass(frozen=True, slots=True)
class NeighborEvent:
    """What the node turns into NeighborUp / NeighborChanged / NeighborDown."""

    kind: EventKind
    node: NodeId
    info: NeighborInfo | None = None
    address: Address | None = None


def to_input(event: NeighborEvent, now: float) -> NeighborUp | NeighborChanged | NeighborDown:
    """The protocol input for a neighbour event (what the node feeds to ``handle``)."""
    if event.kind == EventKind.DOWN:
        return NeighborDown(now, event.node)
    if event.info is None:
        raise ValueError(f"{event.kind.value} event without neighbour info")
    if event.kind == EventKind.UP:
        return NeighborUp(now, event.info)
    return NeighborChanged(now, event.info)


@dataclass(slots=True)
class Neighbor:
    node: NodeId
    address: Address
    interval: float
    first_heard: float
    last_heard: float
    last_seq: int
    epoch: int | None = None
    """The transmitter's boot epoch of the last beacon (None: the driver gives none)."""
    name: str = ""
    position: Position | None = None
    protocol: str = ""
    capabilities: tuple[str, ...] = ()
    lq: float = 1.0
    missed_applied: int = 0
    received: int = 1
    lost: int = 0
    reported_lq: float = 1.0
    reported_position: Position | None = None

    def info(self) -> NeighborInfo:
        return NeighborInfo(self.node, self.position, round(self.lq, 4), self.protocol,
                            self.capabilities)


class NeighborTable:
    """Neighbours heard through beacons; every call returns the events it caused."""

    def __init__(
        self,
        *,
        timeout_beacons: int = 3,
        alpha: float = 0.2,
        lq_threshold: float = 0.1,
        move_threshold: float = 10.0,
        min_lq: float = 0.05,
        max_neighbors: int = DEFAULT_MAX_NEIGHBORS,
    ) -> None:
        if timeout_beacons < 1 or not 0 < alpha <= 1 or lq_threshold <= 0:
            raise ValueError("timeout_beacons >= 1, 0 < alpha <= 1 and lq_threshold > 0")
        if max_neighbors < 1:
            raise ValueError("max_neighbors must be at least 1")
        self.max_neighbors = max_neighbors
        self.timeout_beacons = timeout_beacons
        self.alpha = alpha
        self.lq_threshold = lq_threshold
        self.move_threshold = move_threshold
        self.min_lq = min_lq
        self._table: dict[NodeId, Neighbor] = {}
        self.duplicates = 0
        self.restarts = 0
        self.stale = 0
        """Beacons older than the newest of their node: ignored."""
        self.refused = 0
        """New nodes refused because the table was full."""

    def __len__(self) -> int:
        return len(self._table)

    def __contains__(self, node: object) -> bool:
        return node in self._table

    def __iter__(self) -> Iterator[Neighbor]:
        return iter(list(self._table.values()))

    def get(self, node: NodeId) -> Neighbor | None:
        return self._table.get(node)

    def _decay(self, n: Neighbor, misses: int) -> None:
        n.lq *= (1.0 - self.alpha) ** misses
        n.lost += misses

    def check(self, node: NodeId, seq: int, epoch: int | None = None) -> str | None:
        """Why a beacon would change nothing (``duplicate``, ``stale``, ``table_full``), or
        ``None`` if ``heard`` takes it. No update (``heard`` counts)."""
        n = self._table.get(node)
        if n is None:
            return "table_full" if len(self._table) >= self.max_neighbors else None
        if epoch is not None and n.epoch is not None and epoch != n.epoch:
            return None if epoch > n.epoch else "stale"
        if seq == n.last_seq:
            return "duplicate"
        if seq < n.last_seq and epoch is not None and n.epoch is not None:
            return "stale"  # same boot, older beacon: a late copy or a replay
        return None

    def heard(
        self,
        node: NodeId,
        seq: int,
        interval: float,
        now: float,
        *,
        address: Address,
        epoch: int | None = None,
        name: str = "",
        position: Position | None = None,
        protocol: str = "",
        capabilities: tuple[str, ...] = (),
    ) -> list[NeighborEvent]:
        """A beacon from ``node`` (sequence ``seq``, next one due within ``interval``),
        sent in the transmitter's boot ``epoch`` (``None``: order by ``seq`` alone)."""
        if not (interval > 0 and math.isfinite(interval)):
            raise ValueError("interval must be positive")
        why = self.check(node, seq, epoch)
        if why is not None:
            if why == "duplicate":
                self.duplicates += 1  # the same beacon by another path (unicast + broadcast)
            elif why == "stale":
                self.stale += 1
            else:
                self.refused += 1
            return []
        n = self._table.get(node)
        restarted = n is not None and (
            (epoch is not None and n.epoch is not None and epoch > n.epoch) or seq < n.last_seq)
        if n is None or restarted:
            # A restarted neighbour is a new contact: whatever it held in memory about
            # this node (what it was sent, what it asked for, its reliable receiver) is
            # gone, so protocols must see it leave and arrive again, as its own side sees
            # us arrive. Staying "up" across its restart left a copy sent to the old
            # process unoffered for good once the retransmissions were spent.
            events = []
            if n is not None:
                self.restarts += 1
                events.append(NeighborEvent(EventKind.DOWN, node, None, n.address))
            n = Neighbor(node, address, interval, now, now, seq, epoch, name, position,
                         protocol, capabilities)
            n.reported_position = position
            self._table[node] = n
            events.append(NeighborEvent(EventKind.UP, node, n.info(), address))
            return events
        n.epoch = epoch if epoch is not None else n.epoch
        gap_losses = seq - n.last_seq - 1
        self._decay(n, max(0, gap_losses - n.missed_applied))
        n.lq = (1.0 - self.alpha) * n.lq + self.alpha
        n.received += 1
        n.missed_applied = 0
        n.last_seq, n.last_heard, n.interval = seq, now, interval
        n.address = address
        old = (n.name, n.protocol, n.capabilities)
        n.name, n.position, n.protocol, n.capabilities = name, position, protocol, capabilities
        if self._notable(n) or old != (n.name, n.protocol, n.capabilities):
            return [self._changed(n)]
        return []

    def _moved(self, n: Neighbor) -> bool:
        a, b = n.position, n.reported_position
        if a is None or b is None:
            return (a is None) != (b is None)
        return math.hypot(a.x - b.x, a.y - b.y) > self.move_threshold

    def _notable(self, n: Neighbor) -> bool:
        return abs(n.lq - n.reported_lq) >= self.lq_threshold or self._moved(n)

    def _changed(self, n: Neighbor) -> NeighborEvent:
        n.reported_lq = n.lq
        n.reported_position = n.position
        return NeighborEvent(EventKind.CHANGED, n.node, n.info(), n.address)

    def missed(self, n: Neighbor, now: float) -> int:
        """Beacons overdue: one counts once half an interval past its due time (jitter)."""
        return max(0, math.floor((now - n.last_heard) / n.interval - 0.5))

    def expire(self, now: float) -> list[NeighborEvent]:
        """Declare silent neighbours down; let overdue beacons lower link quality."""
        events: list[NeighborEvent] = []
        for n in list(self._table.values()):
            missed = self.missed(n, now)
            if missed >= self.timeout_beacons:
                del self._table[n.node]
                events.append(NeighborEvent(EventKind.DOWN, n.node, None, n.address))
                continue
            if missed > n.missed_applied:
                self._decay(n, missed - n.missed_applied)
                n.missed_applied = missed
                if n.lq < self.min_lq:
                    del self._table[n.node]
                    events.append(NeighborEvent(EventKind.DOWN, n.node, None, n.address))
                elif self._notable(n):
                    events.append(self._changed(n))
        return events

    def remove(self, node: NodeId) -> list[NeighborEvent]:
        n = self._table.pop(node, None)
        return [] if n is None else [NeighborEvent(EventKind.DOWN, node, None, n.address)]

    def status(self, now: float) -> list[dict[str, Any]]:
        """One row per neighbour for ``meshsubctl neighbors``."""
        rows = []
        for n in sorted(self._table.values(), key=lambda n: n.node):
            pos = n.position
            rows.append({
                "node": n.node,
                "name": n.name,
                "address": _fmt(n.address),
                "lq": round(n.lq, 3),
                "age_s": round(now - n.last_heard, 3),
                "up_s": round(now - n.first_heard, 3),
                "interval_s": n.interval,
                "received": n.received,
                "lost": n.lost,
                "protocol": n.protocol,
                "capabilities": list(n.capabilities),
                "x": None if pos is None else round(pos.x, 2),
                "y": None if pos is None else round(pos.y, 2),
            })
        return rows


def _fmt(addr: Address) -> str:
    host, port = addr[0], addr[1]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
