"""ST's messages, on top of the group-tree machine's.

- SUBS ``[gen, seq, part, parts, adds, removes]``: subscriptions (core wire
  form) the sender offers to, or withdraws from, the receiver. A *full table*
  (sent when the link joins the tree and every refresh period) is generation
  ``gen``, in ``parts`` messages numbered ``part`` (``seq = 0``); it replaces
  everything the receiver held from the sender once all its parts are in. A
  *delta* (``parts = 0``) is number ``seq`` (from 1) of generation ``gen``, and
  applies on top of that full table, in ``seq`` order. Messages may arrive in
  any order (a large part overtaken by a small delta, a retransmission):
  ``meshsub.protocols.st.inbound`` puts them back in order.
- PUBLISH ``[event, published_at]``; the frame's id is the event's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import msgpack

from meshsub.core import bodies as b
from meshsub.core.api import MsgKind
from meshsub.core.cluster.messages import FIRST_OWN_TYPE, KINDS
from meshsub.core.content import Event, Subscription

SUBS = FIRST_OWN_TYPE
PUBLISH = FIRST_OWN_TYPE + 1
ST_KINDS: dict[int, MsgKind] = {**KINDS, SUBS: MsgKind.SUBSCRIPTION, PUBLISH: MsgKind.DATA}
MAX_SUBS = 32
"""Subscriptions per SUBS message (larger tables go in several)."""
MAX_PARTS = 1 << 12
"""Parts of one full table (``max_table`` / ``MAX_SUBS`` at most)."""
CACHE_ENTRIES = 4096


class SubscriptionCache:
    """Decoded subscriptions by their packed wire form, bounded.

    A node hears the same subscriptions over and over (every refresh repeats a
    whole table); validating each again was most of ST's CPU in the
    simulator. Equal packed forms decode to equal subscriptions, so a hit is
    exact. Full: emptied and refilled (no eviction order to keep).
    """

    __slots__ = ("_entries", "limit")

    def __init__(self, limit: int = CACHE_ENTRIES) -> None:
        self.limit = limit
        self._entries: dict[bytes, Subscription] = {}

    def decode(self, value: Any, what: str) -> Subscription:
        try:
            packed = msgpack.packb(value, use_bin_type=True)
        except (TypeError, ValueError, OverflowError):
            return b.subscription(value, what)  # raises the decoder's own error
        hit = self._entries.get(packed)
        if hit is None:
            hit = b.subscription(value, what)
            if len(self._entries) >= self.limit:
                self._entries.clear()
            self._entries[packed] = hit
        return hit


@dataclass(frozen=True, slots=True)
class Subs:
    gen: int
    """The sender's generation of its full table on this link (increasing)."""
    seq: int
    """0 in a full table's parts; a delta's number in its generation, from 1."""
    part: int
    parts: int
    """How many messages the full table has; 0: this is a delta."""
    adds: tuple[Subscription, ...]
    removes: tuple[Subscription, ...]

    @property
    def full(self) -> bool:
        return self.parts > 0

    def encode(self) -> list[Any]:
        return [self.gen, self.seq, self.part, self.parts, [s.to_wire() for s in self.adds],
                [s.to_wire() for s in self.removes]]

    @classmethod
    def decode(cls, body: Any, cache: SubscriptionCache | None = None) -> Subs:
        sub = cache.decode if cache is not None else b.subscription
        gen, seq, part, parts, adds, removes = b.fields(body, 6, "SUBS")
        out = cls(b.integer(gen, "gen"), b.integer(seq, "seq"),
                  b.integer(part, "part", 0, MAX_PARTS - 1),
                  b.integer(parts, "parts", 0, MAX_PARTS),
                  tuple(sub(s, "add") for s in b.items(adds, "adds", MAX_SUBS)),
                  tuple(sub(s, "remove") for s in b.items(removes, "removes", MAX_SUBS)))
        if out.full and (out.seq != 0 or out.part >= out.parts or out.removes):
            raise b.BodyError("SUBS: a full table's part has seq 0, part < parts, no removes")
        if not out.full and (out.seq == 0 or out.part != 0):
            raise b.BodyError("SUBS: a delta has seq >= 1 and part 0")
        return out


@dataclass(frozen=True, slots=True)
class Publish:
    event: Event
    published_at: float

    def encode(self) -> list[Any]:
        return [self.event.to_wire(), self.published_at]

    @classmethod
    def decode(cls, body: Any) -> Publish:
        event, at = b.fields(body, 2, "PUBLISH")
        return cls(b.event(event, "event"), b.number(at, "published_at"))
