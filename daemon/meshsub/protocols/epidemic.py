"""Epidemic routing (Vahdat & Becker 2000): the PUSH baseline of the DTN papers.

Every node carries every event it has seen in its store-carry-forward buffer
and hands a copy to every node it meets that lacks it, so delivery is bounded
only by contacts, buffer space and lifetime: the upper bound B-SUB and GIANT
are measured against.

At each contact (``NeighborUp``) *both* ends send their summary vector (the ids
they hold, in chunks bounded by ``vector_chunk`` ids and ``vector_bytes`` bytes,
so each fits one frame). A vector or request from a node whose contact we have
not detected yet is served all the same. Each end requests the
ids it has never seen and the other sends those messages with per-hop reliable
send, at most ``window`` in flight per neighbour. The two transfers go in
opposite directions and each side requests only what it lacks, so nothing is
sent twice within a pair. As in the ONE's EpidemicRouter, messages created or
received during a contact are also passed on to connected neighbours not known
to hold them (by default as a one-id offer they request from). A node asks one
neighbour at a time for a given id and asks another one only if that neighbour
leaves or does not answer within ``request_timeout``. A contact that ends
mid-exchange loses nothing: senders keep their copies, and the next contact
repeats the exchange.

Message lifetime travels as *remaining* seconds (no synchronised clocks); hop
limit ``max_hops`` rides in ``Message.ttl``.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgpack

from meshsub.core.api import (
    FIRST_PROTOCOL_TYPE,
    Message,
    MessageId,
    MsgKind,
    NeighborInfo,
    NodeId,
)
from meshsub.core.buffer import (
    BufferFormatError,
    DropPolicy,
    message_id_from_obj,
    message_id_to_obj,
)
from meshsub.core.carry import StoreCarryForward, decode_carried, encode_carried
from meshsub.core.content import Event
from meshsub.core.params import OUR_DECISION, ParamDoc, ParameterError, ProtocolParams
from meshsub.core.reliable import ReliableParams

DATA = FIRST_PROTOCOL_TYPE
VECTOR = FIRST_PROTOCOL_TYPE + 1
REQUEST = FIRST_PROTOCOL_TYPE + 2
REQUEST_TIMER = "request"
MAX_IDS_PER_MESSAGE = 1024
"""Longest id list accepted from a peer (its chunk size may differ from ours)."""


@dataclass(frozen=True, slots=True)
class EpidemicParams(ReliableParams):
    buffer_size: int = 1000
    """Messages a node carries (ONE counts bytes; one entry here is one event)."""
    ttl_s: float = 3600.0
    """Message lifetime from publication, in seconds."""
    max_hops: int = 32
    """Hops a copy may travel; carried in ``Message.ttl``."""
    drop_policy: DropPolicy = DropPolicy.DROP_OLDEST
    vector_chunk: int = 64
    """Most ids per summary-vector or request message."""
    vector_bytes: int = 900
    """Most packed id bytes per such message, so that it fits one 1200-byte frame."""
    window: int = 8
    """DATA messages in flight (unacknowledged) per neighbour."""
    push_offer: bool = True
    """Announce new messages to connected neighbours (they request); False: push DATA."""
    request_timeout: float = 10.0
    """How long to wait for a requested message before asking another neighbour."""

    param_docs: ClassVar[Mapping[str, ParamDoc]] = {
        "buffer_size": ParamDoc("messages", OUR_DECISION),
        "ttl_s": ParamDoc("s", OUR_DECISION),
        "max_hops": ParamDoc("hops", OUR_DECISION),
        "drop_policy": ParamDoc("", OUR_DECISION,
                      "Which message goes when the buffer is full."),
        "vector_chunk": ParamDoc("ids", OUR_DECISION),
        "vector_bytes": ParamDoc("bytes", OUR_DECISION),
        "window": ParamDoc("messages", OUR_DECISION),
        "push_offer": ParamDoc("", OUR_DECISION),
        "request_timeout": ParamDoc("s", OUR_DECISION),
    }

    def validate(self) -> None:
        ReliableParams.validate(self)
        if self.buffer_size < 1:
            raise ParameterError("buffer_size", "must be at least 1")
        if not (math.isfinite(self.ttl_s) and self.ttl_s > 0):
            raise ParameterError("ttl_s", "must be a positive number of seconds")
        if not 1 <= self.max_hops <= 255:
            raise ParameterError("max_hops", "must be in 1..255")
        if not 1 <= self.vector_chunk <= MAX_IDS_PER_MESSAGE:
            raise ParameterError("vector_chunk", f"must be in 1..{MAX_IDS_PER_MESSAGE}")
        if not 32 <= self.vector_bytes <= 65536:
            raise ParameterError("vector_bytes", "must be in 32..65536")
        if not (math.isfinite(self.request_timeout) and self.request_timeout > 0):
            raise ParameterError("request_timeout", "must be a positive number of seconds")
        if self.window < 1:
            raise ParameterError("window", "must be at least 1")


@dataclass
class _Peer:
    """What we know of one connected neighbour during this contact."""

    has: set[MessageId] = field(default_factory=set)
    queue: deque[MessageId] = field(default_factory=deque)
    queued: set[MessageId] = field(default_factory=set)
    inflight: set[MessageId] = field(default_factory=set)


def encode_data(event_wire: Any, published_at: float, remaining_s: float) -> list[Any]:
    return encode_carried(event_wire, published_at, remaining_s)


def decode_data(body: Any) -> tuple[Event, float, float]:
    """``(event, published_at, remaining_s)``; ``ValueError`` if malformed."""
    return decode_carried(body, "epidemic DATA")


def decode_ids(body: Any) -> list[MessageId]:
    """A VECTOR/REQUEST body: a list of ``[origin, epoch, seq]``; ``ValueError`` if bad."""
    if not isinstance(body, list | tuple) or len(body) > MAX_IDS_PER_MESSAGE:
        raise ValueError(f"an id list has at most {MAX_IDS_PER_MESSAGE} entries")
    try:
        return [message_id_from_obj(item) for item in body]
    except BufferFormatError as exc:
        raise ValueError(str(exc)) from None


class Epidemic(StoreCarryForward):
    """Summary-vector exchange at every contact, plus push of new messages."""

    name: ClassVar[str] = "epidemic"
    protocol_id: ClassVar[int] = 2
    Params: ClassVar[type[ProtocolParams]] = EpidemicParams
    message_kinds: ClassVar[dict[int, MsgKind]] = {
        DATA: MsgKind.DATA,
        VECTOR: MsgKind.CONTROL,
        REQUEST: MsgKind.CONTROL,
    }

    params: EpidemicParams

    def __init__(self, node: NodeId, **kwargs: Any) -> None:
        super().__init__(node, **kwargs)
        self.dedup.extend(self.buffer.summary_vector())  # carried over a restart
        self._peers: dict[NodeId, _Peer] = {}
        self._requested: dict[MessageId, tuple[NodeId, float]] = {}
        """Ids asked for and not yet received: from whom, when (one supplier at a time)."""
        self._request_timer_at: float | None = None
        self._contact_vector: tuple[frozenset[MessageId], list[list[list[int]]]] | None = None
        """The held ids and their chunks as last sent at a contact (see ``_contact_chunks``)."""

    # ------------------------------------------------------------------ hooks

    def on_publish(self, event: Event, event_id: MessageId) -> None:
        self.is_duplicate(event_id)
        self.deliver_local(event, event_id, hop=0, published_at=self.now)
        message = Message(DATA, event_id, encode_data(event.to_wire(), self.now, self.params.ttl_s),
                          hop=0, ttl=self.params.max_hops)
        if self.carry(message, self.now + self.params.ttl_s):
            self._push(event_id, source=None)

    def on_neighbor_up(self, info: NeighborInfo) -> None:
        self._peers.setdefault(info.node, _Peer())  # its vector may have come first
        self.sweep()
        for chunk in self._contact_chunks():
            self.send_reliable(info.node, Message(VECTOR, self.new_message_id(), chunk, ttl=1))

    def on_neighbor_down(self, node: NodeId) -> None:
        self._peers.pop(node, None)
        self._rerequest([m for m, (n, _) in self._requested.items() if n == node])

    def on_frame(self, sender: NodeId, message: Message) -> None:
        if message.type == DATA:
            self._on_data(sender, message)
        elif message.type in (VECTOR, REQUEST):
            try:
                ids = decode_ids(message.body)
            except ValueError:
                self.drop("malformed", message, peer=sender)
                return
            if message.type == VECTOR:
                self._on_vector(sender, ids)
            else:
                self._on_request(sender, ids)
        else:
            self.drop("unknown_type", message, peer=sender)

    def on_timer(self, name: str) -> None:
        if name == REQUEST_TIMER:
            self._request_timer_at = None
            horizon = self.now - self.params.request_timeout
            self._rerequest([m for m, (_, at) in self._requested.items() if at <= horizon])
            self._arm_request_timer()

    def on_reliable_acked(self, node: NodeId, message: Message) -> None:
        peer = self._peers.get(node)
        if message.type == DATA:
            self.buffer.handed_on(message.id)  # a copy exists elsewhere: evictable now
        if message.type == DATA and peer is not None:
            peer.inflight.discard(message.id)
            peer.has.add(message.id)
            self._pump(node)

    def on_reliable_failed(self, node: NodeId, message: Message) -> None:
        # The copy stays in our buffer: the next contact offers it again.
        if node not in self.neighbors:  # a peer we only heard from: forget it
            self._peers.pop(node, None)
            return
        peer = self._peers.get(node)
        if message.type == DATA and peer is not None:
            peer.inflight.discard(message.id)
            self._pump(node)

    # ------------------------------------------------------------------ exchange

    def _on_data(self, sender: NodeId, message: Message) -> None:
        peer = self._peers.get(sender)
        if peer is not None:
            peer.has.add(message.id)
        if message.id in self.dedup:
            self.drop("duplicate", message, peer=sender)
            return
        try:
            event, published_at, remaining = decode_data(message.body)
        except ValueError:  # not recorded as seen: a good copy may follow
            self.drop("malformed", message, peer=sender)
            return
        self.is_duplicate(message.id)
        self._requested.pop(message.id, None)
        self.deliver_local(event, message.id, hop=message.hop + 1, published_at=published_at)
        if remaining <= 0.0:
            self.drop("expired", message, peer=sender)
            return
        copy = self.relay(message)
        if copy is not None and self.carry(copy, self.now + remaining):
            self._push(message.id, source=sender)

    def _on_vector(self, sender: NodeId, ids: list[MessageId]) -> None:
        # The sender may have detected the contact before we did: serve it anyway.
        peer = self._peers.setdefault(sender, _Peer())
        peer.has.update(ids)
        peer.queued.difference_update(ids)  # it has them: withdraw queued offers
        missing = [mid for mid in ids if mid not in self.dedup and mid not in self.buffer
                   and not self._awaited(mid)]
        self._request(sender, missing)

    def _request(self, node: NodeId, mids: list[MessageId]) -> None:
        for mid in mids:
            self._requested[mid] = (node, self.now)
        self._send_ids(node, REQUEST, [message_id_to_obj(mid) for mid in mids])
        self._arm_request_timer()

    def _rerequest(self, mids: list[MessageId]) -> None:
        """Ask another connected neighbour known to hold each id (the first asked
        left or did not answer in ``request_timeout``); forget ids nobody offers."""
        by_node: dict[NodeId, list[MessageId]] = {}
        for mid in mids:
            old, _ = self._requested.pop(mid)
            for node in sorted(self.neighbors):
                peer = self._peers.get(node)
                if node != old and peer is not None and mid in peer.has:
                    by_node.setdefault(node, []).append(mid)
                    break
        for node, wanted in by_node.items():
            self._request(node, wanted)

    def _arm_request_timer(self) -> None:
        if self._requested and self._request_timer_at is None:
            at = min(t for _, t in self._requested.values()) + self.params.request_timeout
            self._request_timer_at = at
            self.set_timer(REQUEST_TIMER, at - self.now)

    def _awaited(self, mid: MessageId) -> bool:
        """True if ``mid`` was requested recently from a peer still in contact."""
        asked = self._requested.get(mid)
        if asked is None:
            return False
        node, at = asked
        if node in self.neighbors and self.now - at < self.params.request_timeout:
            return True
        del self._requested[mid]  # its supplier left or is late: this offer may serve
        return False

    def _on_request(self, sender: NodeId, ids: list[MessageId]) -> None:
        peer = self._peers.setdefault(sender, _Peer())
        self.sweep()
        for mid in ids:
            if mid not in self.buffer:
                self.drop("request_unavailable", event_id=str(mid), peer=sender)
                continue
            peer.has.discard(mid)  # it says it lacks it, whatever we assumed
            self._enqueue(peer, mid)
        self._pump(sender)

    def _send_ids(self, node: NodeId, mtype: int, ids: list[list[int]]) -> None:
        """Send ``ids`` in chunks of at most ``vector_chunk`` ids and ``vector_bytes`` bytes."""
        for chunk in self._chunk_ids(ids):
            self.send_reliable(node, Message(mtype, self.new_message_id(), chunk, ttl=1))

    def _chunk_ids(self, ids: list[list[int]]) -> list[list[list[int]]]:
        """``ids`` cut into chunks of at most ``vector_chunk`` ids and ``vector_bytes`` bytes."""
        chunks: list[list[list[int]]] = []
        chunk: list[list[int]] = []
        size = 0
        for obj in ids:
            cost = len(msgpack.packb(obj))
            if chunk and (len(chunk) >= self.params.vector_chunk
                          or size + cost > self.params.vector_bytes):
                chunks.append(chunk)
                chunk, size = [], 0
            chunk.append(obj)
            size += cost
        if chunk:
            chunks.append(chunk)
        return chunks

    def _contact_chunks(self) -> list[list[list[int]]]:
        """The summary vector sent at a contact, in chunks, built once per buffer content.

        Every contact while the buffer holds the same ids shares these lists (message
        bodies are never modified), so a pending vector costs a neighbour one message
        object, not its own copy of every id: an insider beaconing from hundreds of new
        ids (each one a contact until the neighbour table is full) while the node carries
        hundreds of messages would otherwise pin ~10 MB of id lists in pending reliable
        sends (issue 25: ~140 bytes per id per contact).
        """
        held = self.buffer.summary_vector()
        if self._contact_vector is None or self._contact_vector[0] != held:
            ids = sorted(message_id_to_obj(mid) for mid in held)
            self._contact_vector = (held, self._chunk_ids(ids))
        return self._contact_vector[1]

    # ------------------------------------------------------------------ sending

    def _push(self, mid: MessageId, source: NodeId | None) -> None:
        """Pass a new message on to every connected neighbour not known to hold it.

        With ``push_offer`` the neighbour gets a one-id summary vector and
        requests the message only if it lacks it (and has not asked another
        neighbour for it), so densely connected nodes do not all receive the
        same DATA from each of their neighbours; without it, the DATA itself
        is sent, as the ONE's EpidemicRouter does (with an oracle we lack).
        """
        offer = [message_id_to_obj(mid)]
        for node in sorted(self.neighbors):
            peer = self._peers.setdefault(node, _Peer())
            if node == source or mid in peer.has:
                continue
            if self.params.push_offer:
                self._send_ids(node, VECTOR, offer)
            else:
                self._enqueue(peer, mid)
                self._pump(node)

    @staticmethod
    def _enqueue(peer: _Peer, mid: MessageId) -> None:
        if mid not in peer.queued and mid not in peer.inflight:
            peer.queue.append(mid)
            peer.queued.add(mid)

    def _pump(self, node: NodeId) -> None:
        """Send queued messages to ``node`` while fewer than ``window`` are in flight."""
        peer = self._peers.get(node)
        if peer is None:
            return
        while peer.queue and len(peer.inflight) < self.params.window:
            mid = peer.queue.popleft()
            if mid not in peer.queued:  # withdrawn: the peer turned out to hold it
                continue
            peer.queued.discard(mid)
            entry = self.buffer.entry(mid)
            if entry is None or entry.expires_at <= self.now or mid in peer.has:
                continue
            stored = entry.message
            body = list(stored.body)
            body[2] = entry.expires_at - self.now
            peer.inflight.add(mid)
            self.send_reliable(node, Message(DATA, mid, body, hop=stored.hop, ttl=stored.ttl))
