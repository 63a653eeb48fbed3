"""DR, double ruling: the location-based baseline DIBS is compared against (Pham and Tran 2012, §4).

Every node knows its position. A query is stored at every node of the
*vertical* line through its subscriber, an event travels along the
*horizontal* line through its publisher, and the two lines cross; the paper
gives no more (docs/protocols/dr.md lists what we decided):

- a node is on the line through ``(x0, ·)`` when ``|x - x0| <= dr_halfwidth``
  (the horizontal line likewise in y); the line is covered by a flood
  confined to it (each node on it rebroadcasts a message once), both ways to
  the field's edges;
- every node that receives the event, on the line or overhearing a node on
  it, checks its stored queries (the computation cost); one that holds a
  match notifies the subscriber by greedy geographic forwarding to the
  position in the query (the subscriber drops repeats). Overhearing makes the
  rendezvous hold where no node lies in both narrow bands;
- queries are leased and refreshed like DIBS's (``lease_s``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import msgpack

from meshsub.core import bodies as b
from meshsub.core.api import FIRST_PROTOCOL_TYPE, Message, MessageId, MsgKind, NodeId
from meshsub.core.content import Event, Subscription
from meshsub.core.params import OUR_DECISION, ParamDoc, ParameterError, ProtocolParams, positive
from meshsub.core.protocol import Protocol
from meshsub.protocols.dibs.keys import KeyError_, event_key, query_interval
from meshsub.protocols.dibs.messages import key_decode, key_wire

SUBSCRIBE = FIRST_PROTOCOL_TYPE
PUBLISH = FIRST_PROTOCOL_TYPE + 1
NOTIFY = FIRST_PROTOCOL_TYPE + 2
T_REFRESH = "dr:refresh"
T_FORWARD = "dr:fwd:"
MAX_SUB_IDS = 64


@dataclass(frozen=True, slots=True)
class DRParams(ProtocolParams):
    dr_halfwidth: float = 4.0
    """Half-width (m) of a line's band (docs/protocols/dr.md: calibrated on §4's results)."""
    k: int = 64
    """Key bits, as DIBS's (queries are key intervals in both)."""
    key_attr: str = "key"
    """The event attribute carrying a key (k/4 lowercase hex digits)."""
    lease_s: float = 120.0
    """Lease of a stored query; subscribers refresh every third of it."""
    jitter: float = 0.01
    """Upper bound (s) of the random delay before a rebroadcast along a line."""
    ttl: int = 64
    """Hops a notification may travel."""
    max_queries: int = 20000
    """Stored queries per node (more are a counted drop)."""
    max_query_bytes: int = 4 << 20
    """Bytes of stored queries per node (more are a counted drop)."""

    param_docs: ClassVar[Mapping[str, ParamDoc]] = {
        "dr_halfwidth": ParamDoc("m", OUR_DECISION),
        "k": ParamDoc("bits", "Pham and Tran 2012, §4 (64)"),
        "key_attr": ParamDoc("", OUR_DECISION),
        "lease_s": ParamDoc("s", OUR_DECISION),
        "jitter": ParamDoc("s", OUR_DECISION),
        "ttl": ParamDoc("hops", OUR_DECISION),
        "max_queries": ParamDoc("entries", OUR_DECISION),
        "max_query_bytes": ParamDoc("bytes", OUR_DECISION),
    }

    def validate(self) -> None:
        positive("dr_halfwidth", self.dr_halfwidth)
        positive("lease_s", self.lease_s)
        if not (4 <= self.k <= 256 and self.k % 4 == 0):
            raise ParameterError("k", "must be a multiple of 4 in 4..256")
        if not self.key_attr.isidentifier():
            raise ParameterError("key_attr", "must be an attribute name")
        if not (math.isfinite(self.jitter) and 0.0 <= self.jitter <= 10.0):
            raise ParameterError("jitter", "must be between 0 and 10 seconds")
        if not 1 <= self.ttl <= 255:
            raise ParameterError("ttl", "must be in 1..255")
        if self.max_queries < 1 or self.max_query_bytes < 1:
            raise ParameterError("max_queries", "bounds must be at least 1")


@dataclass(frozen=True, slots=True)
class LineQuery:
    """SUBSCRIBE ``[sub_node, sub_id, x, y, lo, hi, lease_s, subscription]``."""

    sub_node: NodeId
    sub_id: str
    x: float
    y: float
    lo: int
    hi: int
    lease_s: float
    subscription: Subscription

    def encode(self, k: int) -> list[Any]:
        return [self.sub_node, self.sub_id, self.x, self.y, key_wire(self.lo, k),
                key_wire(self.hi, k), self.lease_s, self.subscription.to_wire()]

    @classmethod
    def decode(cls, body: Any, k: int) -> LineQuery:
        node, sub_id, x, y, lo, hi, lease, sub = b.fields(body, 8, "SUBSCRIBE")
        low, high = key_decode(lo, k, "lo"), key_decode(hi, k, "hi")
        if low > high:
            raise b.BodyError("SUBSCRIBE: lo > hi")
        return cls(b.node(node, "sub_node"), b.text(sub_id, "sub_id", 128),
                   b.number(x, "x", -1e7, 1e7), b.number(y, "y", -1e7, 1e7), low, high,
                   b.number(lease, "lease_s", 0.0, 86400.0), b.subscription(sub, "subscription"))


@dataclass(frozen=True, slots=True)
class LinePublish:
    """PUBLISH ``[y0, key, event, published_at]``: the horizontal line through ``y0``."""

    y0: float
    key: int
    event: Event
    published_at: float

    def encode(self, k: int) -> list[Any]:
        return [self.y0, key_wire(self.key, k), self.event.to_wire(), self.published_at]

    @classmethod
    def decode(cls, body: Any, k: int) -> LinePublish:
        y0, key, event, at = b.fields(body, 4, "PUBLISH")
        return cls(b.number(y0, "y0", -1e7, 1e7), key_decode(key, k, "key"),
                   b.event(event, "event"), b.number(at, "published_at"))


@dataclass(frozen=True, slots=True)
class GeoNotify:
    """NOTIFY ``[sub_node, x, y, sub_ids, event, published_at]``, forwarded greedily."""

    sub_node: NodeId
    x: float
    y: float
    sub_ids: tuple[str, ...]
    event: Event
    published_at: float

    def encode(self) -> list[Any]:
        return [self.sub_node, self.x, self.y, list(self.sub_ids), self.event.to_wire(),
                self.published_at]

    @classmethod
    def decode(cls, body: Any) -> GeoNotify:
        node, x, y, ids, event, at = b.fields(body, 6, "NOTIFY")
        return cls(b.node(node, "sub_node"), b.number(x, "x", -1e7, 1e7),
                   b.number(y, "y", -1e7, 1e7),
                   tuple(b.text(i, "sub_id", 128) for i in b.items(ids, "sub_ids", MAX_SUB_IDS)),
                   b.event(event, "event"), b.number(at, "published_at"))


class DR(Protocol):
    """Double ruling on position bands."""

    name: ClassVar[str] = "dr"
    protocol_id: ClassVar[int] = 14
    Params: ClassVar[type[ProtocolParams]] = DRParams
    message_kinds: ClassVar[dict[int, MsgKind]] = {
        SUBSCRIBE: MsgKind.CONTROL, PUBLISH: MsgKind.DATA, NOTIFY: MsgKind.DATA}
    params: DRParams

    def __init__(self, node: NodeId, **kwargs: Any) -> None:
        super().__init__(node, **kwargs)
        self.store: dict[tuple[NodeId, str], tuple[LineQuery, float, int]] = {}
        self._store_bytes = 0
        self._waiting: dict[str, Message] = {}
        self._refresh_armed = False
        self.stats: dict[str, int] = {"published": 0, "evaluations": 0, "matches": 0,
                                      "stored": 0, "subscribe_tx": 0, "publish_tx": 0,
                                      "notify_tx": 0}

    # ---------------------------------------------------------------- lines

    def _on_line(self, x0: float | None, y0: float | None) -> bool:
        pos = self.position
        if pos is None:
            return False
        w = self.params.dr_halfwidth
        if x0 is not None:
            return abs(pos.x - x0) <= w
        return y0 is not None and abs(pos.y - y0) <= w

    def _rebroadcast(self, message: Message) -> None:
        self.stats["subscribe_tx" if message.type == SUBSCRIBE else "publish_tx"] += 1
        if self.params.jitter <= 0.0:
            self.broadcast(message)
            return
        name = f"{T_FORWARD}{message.type}:{message.id}"
        self._waiting[name] = message
        self.set_timer(name, self.rng.uniform(0.0, self.params.jitter))

    def on_timer(self, name: str) -> None:
        if name == T_REFRESH:
            for sub_id, sub in sorted(self.subscriptions.items()):
                self._inject(sub_id, sub, self.params.lease_s)
            for qid in [q for q, (_, until, _) in self.store.items() if until <= self.now]:
                self._unstore(qid)
            self.set_timer(T_REFRESH, self.params.lease_s / 3)
            return
        copy = self._waiting.pop(name, None)
        if copy is not None:
            self.broadcast(copy)

    # ---------------------------------------------------------------- queries

    def on_subscribe(self, sub_id: str, subscription: Subscription) -> None:
        self._inject(sub_id, subscription, self.params.lease_s)
        if not self._refresh_armed:
            self._refresh_armed = True
            self.set_timer(T_REFRESH, self.params.lease_s / 3)

    def on_unsubscribe(self, sub_id: str, subscription: Subscription) -> None:
        self._inject(sub_id, subscription, 0.0)

    def _inject(self, sub_id: str, subscription: Subscription, lease: float) -> None:
        interval = query_interval(subscription, self.params.k, self.params.key_attr)
        if interval is None:
            self.drop("empty_key_interval", sub_id=sub_id)
            return
        if self.position is None:
            self.drop("no_position", sub_id=sub_id)
            return
        q = LineQuery(self.node, sub_id, self.position.x, self.position.y, interval[0],
                      interval[1], lease, subscription)
        message = Message(SUBSCRIBE, self.new_message_id(), q.encode(self.params.k), ttl=255)
        self.is_duplicate(message.id)
        self._apply_query(q)
        self.stats["subscribe_tx"] += 1
        self.broadcast(message)

    def _apply_query(self, q: LineQuery) -> None:
        qid = (q.sub_node, q.sub_id)
        if q.lease_s <= 0:
            self._unstore(qid)
            return
        size = len(msgpack.packb(q.encode(self.params.k)))
        old = self.store.get(qid)
        grow = size - (old[2] if old is not None else 0)
        if old is None and len(self.store) >= self.params.max_queries:
            self.drop("query_store_full", sub_id=q.sub_id)
            return
        if self._store_bytes + grow > self.params.max_query_bytes:
            self.drop("query_store_bytes", sub_id=q.sub_id)
            return
        if old is None:
            self.stats["stored"] += 1
        self.store[qid] = (q, self.now + q.lease_s, size)
        self._store_bytes += grow

    def _unstore(self, qid: tuple[NodeId, str]) -> None:
        old = self.store.pop(qid, None)
        if old is not None:
            self._store_bytes -= old[2]

    # ---------------------------------------------------------------- events

    def on_publish(self, event: Event, event_id: MessageId) -> None:
        self.stats["published"] += 1
        self.deliver_local(event, event_id, hop=0, published_at=self.now)
        try:
            key = event_key(event, self.params.k, self.params.key_attr)
        except KeyError_:
            self.drop("bad_key", event_id=str(event_id), topic=event.topic)
            return
        if self.position is None:
            self.drop("no_position", event_id=str(event_id), topic=event.topic)
            return
        pub = LinePublish(self.position.y, key, event, self.now)
        self.is_duplicate(event_id)
        self._check(pub, event_id, hops=0)
        self.stats["publish_tx"] += 1
        self.broadcast(Message(PUBLISH, event_id, pub.encode(self.params.k), ttl=255))

    def _check(self, pub: LinePublish, event_id: MessageId, hops: int) -> None:
        """Test every stored query (the computation cost) and notify the matches."""
        self.stats["evaluations"] += len(self.store)
        if self.store:
            self.emit("counter", reason="dr_checked", event_id=str(event_id),
                      entries=len(self.store), hop=hops)
        by_sub: dict[tuple[NodeId, float, float], list[str]] = {}
        for q, until, _ in self.store.values():
            if q.lo <= pub.key <= q.hi and until > self.now and q.subscription.matches(pub.event):
                by_sub.setdefault((q.sub_node, q.x, q.y), []).append(q.sub_id)
        for (node, x, y), ids in sorted(by_sub.items()):
            self.stats["matches"] += len(ids)
            note = GeoNotify(node, x, y, tuple(sorted(ids))[:MAX_SUB_IDS], pub.event,
                             pub.published_at)
            self._route_notify(note, Message(NOTIFY, event_id, None, hop=hops,
                                             ttl=self.params.ttl))

    def _route_notify(self, note: GeoNotify, template: Message) -> None:
        if note.sub_node == self.node:
            self.deliver_local(note.event, template.id, hop=template.hop,
                               published_at=note.published_at)
            return
        if template.ttl < 1:
            self.drop("ttl_expired", template)
            return
        body = note.encode()
        self.stats["notify_tx"] += 1
        if note.sub_node in self.neighbors:
            self.send(note.sub_node, Message(NOTIFY, template.id, body, hop=template.hop,
                                             ttl=template.ttl))
            return
        pos = self.position
        if pos is None:
            self.drop("no_position", template)
            return
        here = math.hypot(pos.x - note.x, pos.y - note.y)
        best: tuple[float, NodeId] | None = None
        for node, info in self.neighbors.items():
            if info.position is None:
                continue
            d = math.hypot(info.position.x - note.x, info.position.y - note.y)
            if d < here and (best is None or (d, node) < best):
                best = (d, node)
        if best is None:
            self.drop("void", template, peer=note.sub_node)
            return
        self.send(best[1], Message(NOTIFY, template.id, body, hop=template.hop,
                                   ttl=template.ttl))

    # ---------------------------------------------------------------- frames

    def on_frame(self, sender: NodeId, message: Message) -> None:
        k = self.params.k
        try:
            if message.type == NOTIFY:
                self._route_notify(GeoNotify.decode(message.body), message.forwarded())
                return
            if message.type not in (SUBSCRIBE, PUBLISH):
                self.drop("unknown_type", message, peer=sender)
                return
            if message.id in self.dedup:
                self.drop("duplicate", message, peer=sender)
                return
            if message.type == SUBSCRIBE:
                q = LineQuery.decode(message.body, k)
                self.is_duplicate(message.id)
                if self._on_line(q.x, None):
                    self._apply_query(q)
                    self._rebroadcast(message.forwarded())
                return
            pub = LinePublish.decode(message.body, k)
        except b.BodyError:
            self.drop("malformed", message, peer=sender)
            return
        self.is_duplicate(message.id)
        self._check(pub, message.id, hops=message.hop + 1)
        if self._on_line(None, pub.y0):
            self._rebroadcast(message.forwarded())

    def state_sizes(self) -> dict[str, tuple[int, int]]:
        return {**super().state_sizes(), "queries": (len(self.store), self._store_bytes)}

    def status(self) -> dict[str, Any]:
        return {**super().status(), "stored_queries": len(self.store)}
