"""DIBS's messages (Pham and Tran 2012, §3.1-3.3) and their decoders.

The paper names the heartbeat (a node's VA, cluster and distance vector,
§3.1) and describes subscription, publication, notification and the query
handover on join; the fields beyond those are ours (docs/protocols/dibs.md,
"Messages"). Bodies are msgpack lists; every decoder checks every field with
``meshsub.core.bodies`` and raises ``BodyError``, which the protocol counts
as a ``malformed`` drop.

- HEARTBEAT ``[is_ref, va, cl, pred, slot, detached, dist, succ, hb_period]``,
  ``dist`` = ``[[ref, hops, via, ref_seq], ...]``, ``succ`` = ``[[node, slot], ...]``;
- ATTACH_REQ ``[reason, old_cl, old_va]`` / ATTACH_ACK ``[slot, va, cl]`` /
  ATTACH_NAK ``[reason]`` / DETACH ``[slot]``: the slot handshake;
- SUBSCRIBE ``[sub_node, sub_id, inj_node, inj_seq, lo, hi, sub_cl, sub_va,
  lease_s, subscription]``: a query travelling on tree edges (lease 0:
  unsubscribe); the query handover re-uses it;
- PUBLISH ``[target_cl, key, event, published_at]``: one of the m copies;
- NOTIFY ``[dst_cl, dst_va, sub_node, sub_ids, event, published_at,
  pub_hops, designated]``: designated node to subscriber.

A VA travels as ``[bits, bytes]`` (most significant bit first, zero-padded),
a key as ``ceil(k/8)`` big-endian bytes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from meshsub.core import bodies as b
from meshsub.core.api import FIRST_PROTOCOL_TYPE, MsgKind, NodeId
from meshsub.core.content import Event, Subscription
from meshsub.core.keyspace import key_decode, key_wire

HEARTBEAT = FIRST_PROTOCOL_TYPE
ATTACH_REQ = FIRST_PROTOCOL_TYPE + 1
ATTACH_ACK = FIRST_PROTOCOL_TYPE + 2
ATTACH_NAK = FIRST_PROTOCOL_TYPE + 3
DETACH = FIRST_PROTOCOL_TYPE + 4
SUBSCRIBE = FIRST_PROTOCOL_TYPE + 5
PUBLISH = FIRST_PROTOCOL_TYPE + 6
NOTIFY = FIRST_PROTOCOL_TYPE + 7
DIBS_KINDS: dict[int, MsgKind] = {
    HEARTBEAT: MsgKind.BEACON, ATTACH_REQ: MsgKind.CONTROL, ATTACH_ACK: MsgKind.CONTROL,
    ATTACH_NAK: MsgKind.CONTROL, DETACH: MsgKind.CONTROL, SUBSCRIBE: MsgKind.CONTROL,
    PUBLISH: MsgKind.DATA, NOTIFY: MsgKind.DATA,
}
MAX_WIRE_VA_BITS = 4096
MAX_DIST = 64
"""Distance-vector entries one heartbeat may carry."""
MAX_SUCC = 256
MAX_SUB_IDS = 64
MAX_SUB_ID = 128


class Reason(enum.IntEnum):
    """Why a node asks for a slot (§3.1 construction, §3.3.1 join, §3.3.2 repair, switch)."""

    INITIAL = 0
    REPAIR = 1
    SWITCH = 2


def va_wire(va: str | None) -> list[Any] | None:
    if va is None:
        return None
    n = len(va)
    value = int(va, 2) << (-n % 8) if n else 0
    return [n, value.to_bytes((n + 7) // 8, "big")]


def va_decode(value: Any, what: str) -> str | None:
    if value is None:
        return None
    n, raw = b.fields(value, 2, what)
    bits = b.integer(n, what, 0, MAX_WIRE_VA_BITS)
    if not isinstance(raw, bytes) or len(raw) != (bits + 7) // 8:
        raise b.BodyError(f"{what}: expected {(bits + 7) // 8} bytes")
    number = int.from_bytes(raw, "big")
    pad = -bits % 8
    if number & ((1 << pad) - 1):
        raise b.BodyError(f"{what}: padding bits must be zero")
    return format(number >> pad, f"0{bits}b") if bits else ""


def _opt_node(value: Any, what: str) -> NodeId | None:
    return None if value is None else b.node(value, what)


def _flag(value: Any, what: str) -> bool:
    if not isinstance(value, bool):
        raise b.BodyError(f"{what}: expected true or false")
    return value


@dataclass(frozen=True, slots=True)
class DistEntry:
    ref: NodeId
    hops: int
    via: NodeId | None
    seq: int


@dataclass(frozen=True, slots=True)
class Heartbeat:
    is_ref: bool
    va: str | None
    cl: NodeId | None
    pred: NodeId | None
    slot: int
    detached: bool
    dist: tuple[DistEntry, ...]
    succ: tuple[tuple[NodeId, int], ...]
    hb_period: float

    def dist_to(self, ref: NodeId) -> DistEntry | None:
        """The sender's distance-vector entry for reference ``ref``, if it lists one."""
        for d in self.dist:
            if d.ref == ref:
                return d
        return None

    def encode(self) -> list[Any]:
        return [self.is_ref, va_wire(self.va), self.cl, self.pred, self.slot, self.detached,
                [[d.ref, d.hops, d.via, d.seq] for d in self.dist],
                [[n, s] for n, s in self.succ], self.hb_period]

    @classmethod
    def decode(cls, body: Any) -> Heartbeat:
        is_ref, va, cl, pred, slot, detached, dist, succ, period = b.fields(body, 9, "HEARTBEAT")
        entries = []
        for item in b.items(dist, "dist", MAX_DIST):
            ref, hops, via, seq = b.fields(item, 4, "dist entry")
            entries.append(DistEntry(b.node(ref, "ref"), b.integer(hops, "hops", 0, 255),
                                     _opt_node(via, "via"), b.integer(seq, "ref_seq")))
        children = []
        for item in b.items(succ, "succ", MAX_SUCC):
            node, s = b.fields(item, 2, "succ entry")
            children.append((b.node(node, "succ node"), b.integer(s, "succ slot", 0, 4095)))
        return cls(_flag(is_ref, "is_ref"), va_decode(va, "va"), _opt_node(cl, "cl"),
                   _opt_node(pred, "pred"), b.integer(slot, "slot", 0, 4095),
                   _flag(detached, "detached"), tuple(entries), tuple(children),
                   b.number(period, "hb_period", 0.01, 3600.0))


@dataclass(frozen=True, slots=True)
class AttachReq:
    reason: Reason
    old_cl: NodeId | None
    old_va: str | None

    def encode(self) -> list[Any]:
        return [int(self.reason), self.old_cl, va_wire(self.old_va)]

    @classmethod
    def decode(cls, body: Any) -> AttachReq:
        reason, old_cl, old_va = b.fields(body, 3, "ATTACH_REQ")
        return cls(Reason(b.integer(reason, "reason", 0, len(Reason) - 1)),
                   _opt_node(old_cl, "old_cl"), va_decode(old_va, "old_va"))


@dataclass(frozen=True, slots=True)
class AttachAck:
    slot: int
    va: str
    cl: NodeId

    def encode(self) -> list[Any]:
        return [self.slot, va_wire(self.va), self.cl]

    @classmethod
    def decode(cls, body: Any) -> AttachAck:
        slot, va, cl = b.fields(body, 3, "ATTACH_ACK")
        parent = va_decode(va, "va")
        if parent is None:
            raise b.BodyError("ATTACH_ACK: the parent has a VA")
        return cls(b.integer(slot, "slot", 0, 4095), parent, b.node(cl, "cl"))


@dataclass(frozen=True, slots=True)
class Query:
    """A query as SUBSCRIBE carries it and a node stores it (§3.2)."""

    sub_node: NodeId
    sub_id: str
    inj_node: NodeId
    inj_seq: int
    lo: int
    hi: int
    sub_cl: NodeId
    sub_va: str
    lease_s: float
    subscription: Subscription

    @property
    def query_id(self) -> tuple[NodeId, str]:
        return self.sub_node, self.sub_id

    def encode(self, k: int) -> list[Any]:
        return [self.sub_node, self.sub_id, self.inj_node, self.inj_seq, key_wire(self.lo, k),
                key_wire(self.hi, k), self.sub_cl, va_wire(self.sub_va), self.lease_s,
                self.subscription.to_wire()]

    @classmethod
    def decode(cls, body: Any, k: int) -> Query:
        (sub_node, sub_id, inj_node, inj_seq, lo, hi, sub_cl, sub_va, lease,
         sub) = b.fields(body, 10, "SUBSCRIBE")
        va = va_decode(sub_va, "sub_va")
        if va is None:
            raise b.BodyError("SUBSCRIBE: the subscriber has a VA")
        low, high = key_decode(lo, k, "lo"), key_decode(hi, k, "hi")
        if low > high:
            raise b.BodyError("SUBSCRIBE: lo > hi")
        return cls(b.node(sub_node, "sub_node"), b.text(sub_id, "sub_id", MAX_SUB_ID),
                   b.node(inj_node, "inj_node"), b.integer(inj_seq, "inj_seq"), low, high,
                   b.node(sub_cl, "sub_cl"), va, b.number(lease, "lease_s", 0.0, 86400.0),
                   b.subscription(sub, "subscription"))


@dataclass(frozen=True, slots=True)
class Publish:
    target_cl: NodeId
    key: int
    event: Event
    published_at: float

    def encode(self, k: int) -> list[Any]:
        return [self.target_cl, key_wire(self.key, k), self.event.to_wire(), self.published_at]

    @classmethod
    def decode(cls, body: Any, k: int) -> Publish:
        cl, key, event, at = b.fields(body, 4, "PUBLISH")
        return cls(b.node(cl, "target_cl"), key_decode(key, k, "key"), b.event(event, "event"),
                   b.number(at, "published_at"))


@dataclass(frozen=True, slots=True)
class Notify:
    dst_cl: NodeId
    dst_va: str
    sub_node: NodeId
    sub_ids: tuple[str, ...]
    event: Event
    published_at: float
    pub_hops: int
    designated: NodeId

    def encode(self) -> list[Any]:
        return [self.dst_cl, va_wire(self.dst_va), self.sub_node, list(self.sub_ids),
                self.event.to_wire(), self.published_at, self.pub_hops, self.designated]

    @classmethod
    def decode(cls, body: Any) -> Notify:
        cl, va, sub, ids, event, at, hops, designated = b.fields(body, 8, "NOTIFY")
        dst = va_decode(va, "dst_va")
        if dst is None:
            raise b.BodyError("NOTIFY: the destination has a VA")
        return cls(b.node(cl, "dst_cl"), dst, b.node(sub, "sub_node"),
                   tuple(b.text(i, "sub_id", MAX_SUB_ID)
                         for i in b.items(ids, "sub_ids", MAX_SUB_IDS)),
                   b.event(event, "event"), b.number(at, "published_at"),
                   b.integer(hops, "pub_hops", 0, 1 << 16), b.node(designated, "designated"))


def decode_slot(body: Any, what: str) -> int:
    """DETACH's body: the slot given up."""
    (slot,) = b.fields(body, 1, what)
    return b.integer(slot, "slot", 0, 4095)


def decode_reason(body: Any) -> str:
    (reason,) = b.fields(body, 1, "ATTACH_NAK")
    return b.text(reason, "reason", 64)
