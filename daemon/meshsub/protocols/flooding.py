"""TTL-limited flooding: the "Flooding"/"DF" baseline of the MANET and WSN papers.

Every event is broadcast to the whole network (within ``ttl`` hops) and each
node filters locally with the exact matcher, so nothing is kept about
subscriptions: the upper bound on delivery and the lower bound on latency
that the content-based protocols are compared against. Each node rebroadcasts
each message once (duplicate suppression by ``MessageId``), after a small
random delay so that neighbours that heard the same copy do not transmit in
the same instant on a real radio.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from meshsub.core import bodies
from meshsub.core.api import FIRST_PROTOCOL_TYPE, Message, MessageId, MsgKind, NodeId
from meshsub.core.content import Event, decode_timed_event
from meshsub.core.params import OUR_DECISION, ParamDoc, ParameterError, ProtocolParams
from meshsub.core.protocol import Protocol

DATA = FIRST_PROTOCOL_TYPE
FORWARD_TIMER = "fwd:"


@dataclass(frozen=True, slots=True)
class FloodingParams(ProtocolParams):
    ttl: int = 16
    """Hops a message may travel (1 = the publisher's neighbours only)."""
    jitter: float = 0.01
    """Upper bound (s) of the uniform random delay before a rebroadcast; 0 = at once."""

    param_docs: ClassVar[Mapping[str, ParamDoc]] = {
        "ttl": ParamDoc("hops", OUR_DECISION),
        "jitter": ParamDoc("s", OUR_DECISION),
    }

    def validate(self) -> None:
        if not 1 <= self.ttl <= 255:
            raise ParameterError("ttl", "must be in 1..255")
        if not (math.isfinite(self.jitter) and 0.0 <= self.jitter <= 10.0):
            raise ParameterError("jitter", "must be between 0 and 10 seconds")


def encode_body(event: Event, published_at: float) -> list[Any]:
    return [event.to_wire(), published_at]


def decode_body(body: Any) -> tuple[Event, float]:
    """``(event, published_at)``; ``ValueError`` if the body is malformed."""
    event, published_at = decode_timed_event(body, "flooding DATA", ("published_at",))
    return event, published_at


class Flooding(Protocol):
    """Flood every event; deliver wherever a local subscription matches."""

    name: ClassVar[str] = "flooding"
    protocol_id: ClassVar[int] = 1
    Params: ClassVar[type[ProtocolParams]] = FloodingParams
    message_kinds: ClassVar[dict[int, MsgKind]] = {DATA: MsgKind.DATA}
    reloadable_params: ClassVar[frozenset[str]] = frozenset({"ttl", "jitter"})
    duplicate_types: ClassVar[frozenset[int]] = frozenset({DATA})
    """A copy of a message already seen is dropped by the core, before ``on_frame``."""

    params: FloodingParams

    def __init__(self, node: NodeId, **kwargs: Any) -> None:
        super().__init__(node, **kwargs)
        self._waiting: dict[str, Message] = {}
        """Rebroadcasts waiting for their jitter timer, by timer name."""

    def on_publish(self, event: Event, event_id: MessageId) -> None:
        self.is_duplicate(event_id)  # our own copy coming back is a duplicate
        self.deliver_local(event, event_id, hop=0, published_at=self.now)
        self.broadcast(Message(DATA, event_id, encode_body(event, self.now), hop=0,
                               ttl=self.params.ttl))

    def on_frame(self, sender: NodeId, message: Message) -> None:
        """A message not seen yet (the core dropped copies of seen ones: ``duplicate_types``)."""
        if message.type != DATA:
            self.drop("unknown_type", message, peer=sender)
            return
        try:
            event, published_at = bodies.shared_decode(decode_body, message.body)
        except ValueError:  # not recorded as seen: a good copy may follow
            self.drop("malformed", message, peer=sender)
            return
        self.is_duplicate(message.id)
        self.deliver_local(event, message.id, hop=message.hop + 1, published_at=published_at)
        copy = self.relay(message)
        if copy is None:
            return
        if self.params.jitter <= 0.0:
            self.broadcast(copy)
            return
        name = f"{FORWARD_TIMER}{message.id}"
        self._waiting[name] = copy
        self.set_timer(name, self.rng.uniform(0.0, self.params.jitter))

    def on_timer(self, name: str) -> None:
        copy = self._waiting.pop(name, None)
        if copy is not None:
            self.broadcast(copy)

    def status(self) -> dict[str, Any]:
        return {**super().status(), "waiting_rebroadcasts": len(self._waiting)}
