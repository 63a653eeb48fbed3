"""PULL: the conservative baseline of the B-SUB paper (Zhao & Wu 2010, §VII-A).

"A node only collects messages that it is interested in from its directly
encountered neighbors": one hop, no relays. At each contact both ends send
their subscriptions (exact, in wire form, so nothing is pulled by mistake);
each end then sends every message it *published itself* that matches them and
that the peer is not known to hold, with per-hop reliable send. A message
published during a contact goes at once to connected neighbours that want it.
Own messages stay in the SCF buffer until their TTL ends.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from meshsub.core.api import (
    FIRST_PROTOCOL_TYPE,
    Message,
    MessageId,
    MsgKind,
    NeighborInfo,
    NodeId,
)
from meshsub.core.buffer import BufferEntry, DropPolicy
from meshsub.core.carry import StoreCarryForward, decode_carried, encode_carried
from meshsub.core.content import ContentError, Event, Subscription
from meshsub.core.params import OUR_DECISION, ParamDoc, ParameterError, ProtocolParams
from meshsub.core.reliable import ReliableParams

DATA = FIRST_PROTOCOL_TYPE
INTEREST = FIRST_PROTOCOL_TYPE + 1
MAX_INTERESTS = 256
"""Most subscriptions accepted from a peer in one contact."""


@dataclass(frozen=True, slots=True)
class PullParams(ReliableParams):
    TTL: float = 10 * 3600.0
    """Message lifetime from publication (s)."""
    buffer_size: int = 5000
    """Own messages kept (a producer's buffer)."""
    drop_policy: DropPolicy = DropPolicy.DROP_EXPIRING
    window: int = 8
    """DATA messages in flight (unacknowledged) per neighbour."""
    interest_chunk: int = 16
    """Subscriptions per INTEREST message (so each fits one frame)."""

    param_docs: ClassVar[Mapping[str, ParamDoc]] = {
        "TTL": ParamDoc("s", "Zhao & Wu 2010, §V-D (lifetime = maximum tolerable delay); "
                             "10 h as in §VII-B"),
        "buffer_size": ParamDoc("messages", OUR_DECISION),
        "drop_policy": ParamDoc("", OUR_DECISION,
                      "Which message goes when the buffer is full."),
        "window": ParamDoc("messages", OUR_DECISION),
        "interest_chunk": ParamDoc("subscriptions", OUR_DECISION),
    }

    def validate(self) -> None:
        ReliableParams.validate(self)
        if not (math.isfinite(self.TTL) and self.TTL > 0):
            raise ParameterError("TTL", "must be a positive number of seconds")
        if self.buffer_size < 1:
            raise ParameterError("buffer_size", "must be at least 1")
        if self.window < 1:
            raise ParameterError("window", "must be at least 1")
        if not 1 <= self.interest_chunk <= MAX_INTERESTS:
            raise ParameterError("interest_chunk", f"must be in 1..{MAX_INTERESTS}")


@dataclass
class _Peer:
    interests: list[Subscription] = field(default_factory=list)
    queue: deque[MessageId] = field(default_factory=deque)
    inflight: set[MessageId] = field(default_factory=set)
    sent: set[MessageId] = field(default_factory=set)


def decode_interest(body: Any) -> list[Subscription]:
    """An INTEREST body: a list of subscription wire forms; ``ValueError`` if bad."""
    if not isinstance(body, list | tuple) or len(body) > MAX_INTERESTS:
        raise ValueError(f"INTEREST is a list of at most {MAX_INTERESTS} subscriptions")
    try:
        return [Subscription.from_wire(item) for item in body]
    except (ContentError, TypeError) as exc:
        raise ValueError(f"bad subscription: {exc}") from None


def decode_data(body: Any) -> tuple[Event, float, float]:
    """``(event, published_at, remaining_s)``; ``ValueError`` if malformed."""
    return decode_carried(body, "PULL DATA")


class Pull(StoreCarryForward):
    """One-hop collection of wanted messages from the producers one meets."""

    name: ClassVar[str] = "pull"
    protocol_id: ClassVar[int] = 5
    Params: ClassVar[type[ProtocolParams]] = PullParams
    message_kinds: ClassVar[dict[int, MsgKind]] = {
        DATA: MsgKind.DATA,
        INTEREST: MsgKind.SUBSCRIPTION,
    }

    params: PullParams

    def __init__(self, node: NodeId, **kwargs: Any) -> None:
        super().__init__(node, **kwargs)
        self._peers: dict[NodeId, _Peer] = {}
        self._told: dict[MessageId, set[NodeId]] = {}
        """Per own message: neighbours that acknowledged it (never sent twice)."""

    # ------------------------------------------------------------------ hooks

    def on_publish(self, event: Event, event_id: MessageId) -> None:
        self.deliver_local(event, event_id, hop=0, published_at=self.now)
        body = encode_carried(event.to_wire(), self.now, self.params.TTL)
        if self.carry(Message(DATA, event_id, body, ttl=1), self.now + self.params.TTL):
            for node in sorted(self._peers):
                self._offer(node, [event_id])

    def on_neighbor_up(self, info: NeighborInfo) -> None:
        self._peers.setdefault(info.node, _Peer())
        subs = [sub.to_wire() for sub in self.subscriptions.values()]
        chunk = self.params.interest_chunk
        for i in range(0, len(subs), chunk):
            self.send_reliable(info.node, Message(INTEREST, self.new_message_id(),
                                                  subs[i:i + chunk], ttl=1))
        # The peer may have seen the link first: its INTEREST arrived before this
        # NeighborUp and queued offers that _pump held back. No ACK will run it.
        self._pump(info.node)

    def on_neighbor_down(self, node: NodeId) -> None:
        self._peers.pop(node, None)

    def on_frame(self, sender: NodeId, message: Message) -> None:
        if message.type == INTEREST:
            try:
                subs = decode_interest(message.body)
            except ValueError:
                self.drop("malformed", message, peer=sender)
                return
            peer = self._peers.setdefault(sender, _Peer())
            peer.interests.extend(subs)
            self.sweep()
            self._offer(sender, list(self.buffer.summary_vector()))
        elif message.type == DATA:
            try:
                event, published_at, remaining = decode_data(message.body)
            except ValueError:
                self.drop("malformed", message, peer=sender)
                return
            if remaining <= 0:
                self.drop("expired", message, peer=sender)
            elif not self.deliver_local(event, message.id, hop=1, published_at=published_at):
                self.drop("duplicate", message, peer=sender)
        else:
            self.drop("unknown_type", message, peer=sender)

    def on_reliable_acked(self, node: NodeId, message: Message) -> None:
        if message.type != DATA:
            return
        if message.id in self.buffer:
            self._told.setdefault(message.id, set()).add(node)
        peer = self._peers.get(node)
        if peer is not None:
            peer.inflight.discard(message.id)
            self._pump(node)

    def on_reliable_failed(self, node: NodeId, message: Message) -> None:
        peer = self._peers.get(node)
        if message.type == DATA and peer is not None:
            peer.inflight.discard(message.id)
            peer.sent.discard(message.id)
            self._pump(node)

    # ------------------------------------------------------------------ sending

    def _offer(self, node: NodeId, mids: list[MessageId]) -> None:
        peer = self._peers.get(node)
        if peer is None or not peer.interests:
            return
        for mid in sorted(mids, key=lambda m: m.seq):
            msg = self.buffer.get(mid)
            if msg is None or mid in peer.sent or node in self._told.get(mid, ()):
                continue
            event, _, _ = decode_data(msg.body)
            if any(sub.matches(event) for sub in peer.interests):
                peer.sent.add(mid)
                peer.queue.append(mid)
        self._pump(node)

    def _pump(self, node: NodeId) -> None:
        peer = self._peers.get(node)
        if peer is None or node not in self.neighbors:
            return
        while peer.queue and len(peer.inflight) < self.params.window:
            mid = peer.queue.popleft()
            entry = self.buffer.entry(mid)
            if entry is None or entry.expires_at <= self.now:
                continue
            body = list(entry.message.body)
            body[2] = entry.expires_at - self.now
            peer.inflight.add(mid)
            self.send_reliable(node, Message(DATA, mid, body, hop=0, ttl=1))

    # ------------------------------------------------------------------ buffer

    def on_buffer_drop(self, entry: BufferEntry, reason: str) -> None:
        self._told.pop(entry.message.id, None)
