"""A grid manager's state (Li and Wang 2014, §IV-B1 and §IV-C): subscriptions, forest, GRSV.

The grid manager keeps every subscription of its grid (the exact filter, its
ARVs, the subscriber and its last reported position, a lease), organised as a
summary forest whose roots' summaries are the grid's representative set
(GRSV). A publication is matched in two stages: the roots' summaries with the
configured comparator, then each member of a matching tree, by default with
the subscription itself (no false positive reaches a subscriber).
This module holds state and decisions; the protocol sends the messages.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import msgpack

from meshsub.core.arv import ARV, Comparator
from meshsub.core.content import Event, Subscription
from meshsub.core.dedup import DuplicateCache
from meshsub.core.grid import Cell, Point
from meshsub.protocols.brvst import messages as m
from meshsub.protocols.brvst.forest import Filter, Summarised, entry_size, rsv_size
from meshsub.protocols.brvst.schema import PubView, Schema, SchemaError
from meshsub.protocols.brvst.tables import BoundedMap

SubKey = tuple[int, str]
"""A subscription's network-wide identity: (subscriber node, its local sub_id)."""

RECORD_OVERHEAD = 48
"""Bytes charged per subscription record besides its filter (key, position, lease)."""
SEEN_ENTRY_BYTES = 40
"""Bytes charged per remembered (publication, target) pair of a duplicate filter."""


class Upsert(enum.Enum):
    NEW = "new"
    RENEWED = "renewed"
    CHANGED = "changed"
    REFUSED = "refused"


@dataclass(slots=True)
class SubRecord:
    key: SubKey
    subscription: Subscription
    arvs: dict[int, ARV]
    pos: Point
    expiry: float
    size: int


def record_size(sub: Subscription, arvs: dict[int, ARV]) -> int:
    """Accounted bytes: the exact filter as packed, its S-ARVs encoded, a fixed overhead."""
    return len(sub.key) + entry_size(tuple(sorted(arvs.items()))) + RECORD_OVERHEAD


class GridManager(Summarised):
    def __init__(self, cell: Cell, epoch: int, schema: Schema, *, max_subs: int,
                 max_bytes: int, dedupe: int) -> None:
        super().__init__(epoch)
        self.cell = cell
        self.schema = schema
        self.table: BoundedMap[SubKey, SubRecord] = BoundedMap(
            max_subs, max_bytes, lambda r: r.size, victim=lambda _m, _k: None)
        self.served = DuplicateCache(dedupe)
        """(pub id, subscription) pairs already delivered: cache replays reach only new ones."""
        self.seen = DuplicateCache(dedupe)
        """Publications already published here (PUBLISH retransmissions)."""

    # ------------------------------------------------------------ subscriptions

    def upsert(self, key: SubKey, sub: Subscription, pos: Point, expiry: float) -> Upsert:
        """SUBSCRIBE: a new subscription, a refresh, or a modification (Algorithm 2 then 1).

        Raises ``SchemaError`` if the subscription cannot be summarised.
        """
        old = self.table.get(key)
        if old is not None and old.subscription == sub:
            old.pos, old.expiry = pos, expiry
            return Upsert.RENEWED
        arvs = self.schema.arvs(self.schema.subscription_ranges(sub))
        rec = SubRecord(key, sub, arvs, pos, expiry, record_size(sub, arvs))
        refused = self.table.put(key, rec)
        if refused:
            return Upsert.REFUSED
        self.forest.replace(Filter(key, arvs))
        return Upsert.NEW if old is None else Upsert.CHANGED

    def remove(self, key: SubKey) -> bool:
        if self.table.pop(key) is None:
            return False
        self.forest.remove(key)
        return True

    def locate(self, node: int, pos: Point) -> int:
        """A subscriber moved: every one of its records gets the new position."""
        moved = 0
        for (owner, _sid), rec in self.table.items():
            if owner == node:
                rec.pos = pos
                moved += 1
        return moved

    def expire(self, now: float) -> list[SubKey]:
        """Leases that ran out (Algorithm 2 for each)."""
        gone = [k for k, r in self.table.items() if r.expiry < now]
        for key in gone:
            self.remove(key)
        return gone

    def subscribers(self) -> dict[int, Point]:
        """Known subscriber nodes and their last positions (hand-over candidates)."""
        return {owner: rec.pos for (owner, _sid), rec in self.table.items()}

    def records(self) -> Iterator[SubRecord]:
        return iter(self.table.values())

    # ------------------------------------------------------------ matching

    def match(self, event: Event, view: PubView, mode: Comparator, *, exact_check: bool,
              for_sub: SubKey | None = None) -> dict[int, list[str]]:
        """Subscriber node -> sub_ids the publication matches (roots first, then members)."""
        if for_sub is not None:
            rec = self.table.get(for_sub)
            records = [] if rec is None else [rec]
        else:
            records = [self.table[f.id] for f in self.forest.candidates(  # type: ignore[index]
                lambda summary: self.schema.matches(view, summary, mode))]
        out: dict[int, list[str]] = {}
        for rec in records:
            hit = rec.subscription.matches(event) if exact_check \
                else self.schema.matches(view, rec.arvs, mode)
            if hit:
                out.setdefault(rec.key[0], []).append(rec.key[1])
        return out

    # ------------------------------------------------------------ hand-over

    def blob(self, now: float, budget: int) -> tuple[list[Any], int]:
        """The state a successor needs, within ``budget`` bytes; also how many were left out."""
        subs: list[Any] = []
        used, left_out = 0, 0
        for rec in self.table.values():
            item = [rec.key[0], rec.key[1], rec.subscription.to_wire(), rec.pos[0], rec.pos[1],
                    max(0.0, rec.expiry - now)]
            size = len(msgpack.packb(item, use_bin_type=True))
            if used + size > budget:
                left_out += 1
                continue
            used += size
            subs.append(item)
        return [0, subs], left_out

    def load(self, blob: list[Any] | tuple[Any, ...], now: float) -> int:
        """Install a predecessor's subscriptions (existing ones win); return how many were bad.

        The blob comes off the wire (STATE_XFER), so every field is read with the checks
        of a message body (``messages.Fields``): an item with a wrong type, an infinite or
        NaN number (which ``int()`` would raise on, or which would make a lease that never
        expires) is one bad item, never an exception.
        """
        if len(blob) != 2 or blob[0] != 0 or not isinstance(blob[1], list | tuple):
            return 1
        bad = 0
        for item in blob[1]:
            try:
                f = m.Fields(item, 6, "hand-over subscription")
                key = (f.node(), f.text())
                if key in self.table:
                    continue
                sub, pos, ttl = f.subscription(), (f.number(), f.number()), f.number()
                if self.upsert(key, sub, pos, now + ttl) is Upsert.REFUSED:
                    bad += 1
            except (ValueError, SchemaError):
                bad += 1
        return bad

    def state_size(self) -> dict[str, tuple[int, int]]:
        """(entries, bytes) per structure: subscriptions as held, the forest's summaries."""
        rep = self.representative()
        return {
            "gm_subscriptions": (len(self.table), self.table.bytes),
            "gm_summaries": (len(rep), rsv_size(rep)),
            "gm_seen": (len(self.served) + len(self.seen),
                        (len(self.served) + len(self.seen)) * SEEN_ENTRY_BYTES),
        }
