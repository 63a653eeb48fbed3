"""What B-SUB carries per message, stored in the core SCF buffer.

One buffer holds both a producer's own messages (with the copy bookkeeping
``copies_given``/``given_to`` of the limit C) and a broker's relay messages,
so the daemon's SQLite-backed store persists both and a reboot loses no
carried message and forgets no copy already given.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field

from meshsub.core.api import NODE_ID_MAX, Message, MessageId, NodeId
from meshsub.core.content import ContentError, Event
from meshsub.core.tcbf import canonical_key
from meshsub.protocols.bsub.wire import STORED


class Kind(enum.IntEnum):
    OWN = 0
    """Published here: leaves by direct delivery and by at most C broker copies."""
    RELAY = 1
    """A broker's copy: leaves by handoff to a broker with a higher preference."""


@dataclass(slots=True)
class Carried:
    kind: Kind
    event: Event
    published_at: float
    copies_given: int = 0
    given_to: list[NodeId] = field(default_factory=list)
    told: list[NodeId] = field(default_factory=list)
    """Nodes known to hold the message (given, delivered to, or it came from)."""

    @property
    def key(self) -> bytes:
        """The B-SUB key: the event's topic in canonical form (Zhao and Wu 2010, §V-A)."""
        return canonical_key(self.event.topic)

    def knows(self, node: NodeId) -> bool:
        return node in self.told or node in self.given_to

    def tell(self, node: NodeId, limit: int) -> None:
        if node not in self.told:
            self.told.append(node)
            if len(self.told) > limit:
                del self.told[: len(self.told) - limit]

    def to_message(self, mid: MessageId) -> Message:
        body = [int(self.kind), self.event.to_wire(), self.published_at, self.copies_given,
                list(self.given_to), list(self.told)]
        return Message(STORED, mid, body)

    @classmethod
    def from_message(cls, message: Message) -> Carried:
        """Inverse of ``to_message``; ``ValueError`` for anything else (a corrupt store)."""
        body = message.body
        if message.type != STORED or not isinstance(body, list | tuple) or len(body) != 6:
            raise ValueError("not a B-SUB buffer entry")
        kind, wire, published_at, copies, given_to, told = body
        try:
            event = Event.from_wire(wire)
        except (ContentError, TypeError) as exc:
            raise ValueError(f"bad event: {exc}") from None
        if isinstance(published_at, bool) or not isinstance(published_at, int | float) \
                or not math.isfinite(published_at):
            raise ValueError("published_at must be a finite number")
        if isinstance(copies, bool) or not isinstance(copies, int) or copies < 0:
            raise ValueError("copies_given must be a non-negative integer")
        nodes = []
        for group in (given_to, told):
            if not isinstance(group, list | tuple) or not all(
                    isinstance(n, int) and not isinstance(n, bool) and 0 <= n <= NODE_ID_MAX
                    for n in group):
                raise ValueError("given_to/told must be lists of node ids")
            nodes.append(list(group))
        if kind not in (0, 1):
            raise ValueError("kind must be 0 (own) or 1 (relay)")
        return cls(Kind(kind), event, float(published_at), copies, nodes[0], nodes[1])
