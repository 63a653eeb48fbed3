"""What one tree neighbour offered an ST node, rebuilt in order from SUBS messages.

A neighbour's table reaches us as full tables (generations, each in several
parts) and deltas numbered within a generation. Frames do not keep their
order: a large part is overtaken by a small delta sent after it, a
retransmission comes late. Applied as they arrive, a late first part of a
full table would erase what the parts and deltas after it had added (seen in
the simulator: a static 40-node tree whose tables lacked a subscription for
good, so a publication found no route). So:

- a full table replaces the table only when all its parts are in, and only if
  its generation is newer than the one applied; an older generation's
  messages are stale and ignored;
- deltas apply in ``seq`` order on top of their own generation's full table;
  early ones wait (bounded), older generations' are ignored (the newer full
  table already contains their effect).

If a part or a delta never comes (a best-effort refresh lost, a reliable send
given up), the table stays at its last consistent state until the next full
table, at most ``T_FILTER_REFRESH`` later.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from meshsub.core.content import Subscription
from meshsub.protocols.st.messages import Subs

MAX_WAITING = 64
"""Deltas (and parts of one incomplete full table) held for their turn, per neighbour."""


class Outcome(enum.Enum):
    APPLIED = "applied"
    """The table changed state (a full table completed, deltas applied)."""
    WAITING = "waiting"
    """Held until what comes before it arrives."""
    STALE = "stale"
    """Of an older generation, or a delta already applied: ignored."""
    OVERFLOW = "overflow"
    """Nothing held any more room: dropped (the next full table heals)."""
    TABLE_FULL = "table_full"
    """Applied, but the table reached its bound: some adds were dropped."""


@dataclass(slots=True)
class Inbound:
    """One neighbour's offer to us: the table and what waits to be applied to it."""

    max_table: int
    table: dict[bytes, Subscription] = field(default_factory=dict)
    gen: int | None = None
    """The generation whose full table (and deltas up to ``next_seq - 1``) ``table`` is."""
    next_seq: int = 1
    _parts_gen: int | None = None
    _parts: dict[int, tuple[Subscription, ...]] = field(default_factory=dict)
    _parts_total: int = 0
    _deltas: dict[tuple[int, int], Subs] = field(default_factory=dict)
    truncated: bool = False
    """The last application hit ``max_table``."""

    def receive(self, subs: Subs) -> Outcome:
        """Take one SUBS message from the neighbour; what became of it."""
        self.truncated = False
        if self.gen is not None and subs.gen < self.gen:
            return Outcome.STALE
        if subs.full:
            return self._part(subs)
        if subs.gen == self.gen:
            if subs.seq < self.next_seq:
                return Outcome.STALE
            if subs.seq == self.next_seq:
                self._apply(subs)
                self._drain()
                return Outcome.TABLE_FULL if self.truncated else Outcome.APPLIED
        return self._hold(subs)

    def _part(self, subs: Subs) -> Outcome:
        if self.gen is not None and subs.gen == self.gen:
            return Outcome.STALE  # a repeated part of the applied generation
        if self._parts_gen is None or subs.gen > self._parts_gen:
            self._parts_gen, self._parts, self._parts_total = subs.gen, {}, subs.parts
        elif subs.gen < self._parts_gen or subs.parts != self._parts_total:
            return Outcome.STALE
        if subs.part not in self._parts and len(self._parts) >= MAX_WAITING:
            return Outcome.OVERFLOW
        self._parts[subs.part] = subs.adds
        if len(self._parts) < self._parts_total:
            return Outcome.WAITING
        self.table = {}
        self.truncated = False
        for part in range(self._parts_total):
            self._add(self._parts[part])
        self.gen, self.next_seq = self._parts_gen, 1
        self._parts_gen, self._parts, self._parts_total = None, {}, 0
        self._deltas = {k: v for k, v in self._deltas.items() if k[0] >= self.gen}
        self._drain()
        return Outcome.TABLE_FULL if self.truncated else Outcome.APPLIED

    def _hold(self, subs: Subs) -> Outcome:
        key = (subs.gen, subs.seq)
        if key not in self._deltas and len(self._deltas) >= MAX_WAITING:
            return Outcome.OVERFLOW
        self._deltas[key] = subs
        return Outcome.WAITING

    def _drain(self) -> None:
        while self.gen is not None:
            nxt = self._deltas.pop((self.gen, self.next_seq), None)
            if nxt is None:
                return
            self._apply(nxt)

    def _apply(self, subs: Subs) -> None:
        for s in subs.removes:
            self.table.pop(s.key, None)
        self._add(subs.adds)
        self.next_seq = subs.seq + 1

    def _add(self, adds: tuple[Subscription, ...]) -> None:
        for s in adds:
            if s.key in self.table:
                continue
            if len(self.table) >= self.max_table:
                self.truncated = True
                return
            self.table[s.key] = s
