"""ST's messages, on top of the group-tree machine's.

- SUBS ``[full, adds, removes]``: subscriptions (core wire form) the sender
  now offers to, or withdraws from, the receiver; ``full`` replaces
  everything the receiver held from the sender (sent when the link joins the
  tree and every refresh period).
- PUBLISH ``[event, published_at]``; the frame's id is the event's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from meshsub.core import bodies as b
from meshsub.core.api import MsgKind
from meshsub.core.cluster.messages import FIRST_OWN_TYPE, KINDS
from meshsub.core.content import Event, Subscription

SUBS = FIRST_OWN_TYPE
PUBLISH = FIRST_OWN_TYPE + 1
ST_KINDS: dict[int, MsgKind] = {**KINDS, SUBS: MsgKind.SUBSCRIPTION, PUBLISH: MsgKind.DATA}
MAX_SUBS = 32
"""Subscriptions per SUBS message (larger tables go in several)."""


@dataclass(frozen=True, slots=True)
class Subs:
    full: bool
    adds: tuple[Subscription, ...]
    removes: tuple[Subscription, ...]

    def encode(self) -> list[Any]:
        return [self.full, [s.to_wire() for s in self.adds], [s.to_wire() for s in self.removes]]

    @classmethod
    def decode(cls, body: Any) -> Subs:
        full, adds, removes = b.fields(body, 3, "SUBS")
        if not isinstance(full, bool):
            raise b.BodyError("SUBS full: expected true or false")
        return cls(full, tuple(b.subscription(s, "add") for s in b.items(adds, "adds", MAX_SUBS)),
                   tuple(b.subscription(s, "remove")
                         for s in b.items(removes, "removes", MAX_SUBS)))


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
