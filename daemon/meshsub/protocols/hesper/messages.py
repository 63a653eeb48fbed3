"""HESPER's messages (named in Zheng 2008, §4.2-4.3): types, fields and wire forms.

Every message between brokers travels in an *envelope* that names the cell it
is for (and the topic, so that any node of that cell can elect the topic's
broker and redirect the message to it), an optional destination node (a
known broker after a BROKER_UPDATE, or a client), a redirect counter and the
GPSR header of ``meshsub.core.georouting`` (multi-hop transport between
consecutive cell brokers). BEACON and STATE_TRANSFER are one-hop and
carry no envelope. ``decode_*`` raise ``ValueError`` for anything malformed;
the protocol turns that into a counted drop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from meshsub.core.api import FIRST_PROTOCOL_TYPE, MsgKind
from meshsub.core.content import ContentError, Event, Subscription
from meshsub.core.georouting import GeoHeader, GeoRoutingError
from meshsub.core.grid import Cell

SUBSCRIBE = FIRST_PROTOCOL_TYPE
REPLY = FIRST_PROTOCOL_TYPE + 1
CONFIRM = FIRST_PROTOCOL_TYPE + 2
EVENT = FIRST_PROTOCOL_TYPE + 3
UNSUBSCRIBE = FIRST_PROTOCOL_TYPE + 4
STATE_TRANSFER = FIRST_PROTOCOL_TYPE + 5
BROKER_UPDATE = FIRST_PROTOCOL_TYPE + 6
BEACON = FIRST_PROTOCOL_TYPE + 7

KINDS: dict[int, MsgKind] = {
    SUBSCRIBE: MsgKind.SUBSCRIPTION,
    REPLY: MsgKind.SUBSCRIPTION,
    CONFIRM: MsgKind.SUBSCRIPTION,
    UNSUBSCRIBE: MsgKind.SUBSCRIPTION,
    EVENT: MsgKind.DATA,
    STATE_TRANSFER: MsgKind.CONTROL,
    BROKER_UPDATE: MsgKind.CONTROL,
    BEACON: MsgKind.BEACON,
}
ENVELOPED = frozenset({SUBSCRIBE, REPLY, CONFIRM, EVENT, UNSUBSCRIBE, BROKER_UPDATE})

KIND_PHB = "PHB"
KIND_JOINED = "JOINED_EXISTING"

_U32 = 0xFFFF_FFFF

Target = tuple[int, int, int]
"""Where a broker sends matching events: ``(0, gx, gy)`` a neighbour cell's broker,
``(1, node, 0)`` a local client."""


def cell_target(cell: Cell | tuple[int, int]) -> Target:
    return (0, int(cell[0]), int(cell[1]))


def client_target(node: int) -> Target:
    return (1, int(node), 0)


# ----------------------------------------------------------------- checkers


def _list(v: Any, n: int | None, what: str) -> list[Any] | tuple[Any, ...]:
    if not isinstance(v, list | tuple) or (n is not None and len(v) != n):
        raise ValueError(f"{what}: expected a list of {n if n is not None else 'any'} items")
    return v


def _int(v: Any, what: str, lo: int = -(2**31), hi: int = 2**31) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
        raise ValueError(f"{what}: expected an integer in {lo}..{hi}")
    return v


def _num(v: Any, what: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
        raise ValueError(f"{what}: expected a finite number")
    return float(v)


def _str(v: Any, what: str, max_len: int = 256) -> str:
    if not isinstance(v, str) or not v or len(v) > max_len:
        raise ValueError(f"{what}: expected a non-empty string")
    return v


def _bool(v: Any, what: str) -> bool:
    if not isinstance(v, bool):
        raise ValueError(f"{what}: expected true or false")
    return v


def _node(v: Any, what: str) -> int:
    return _int(v, what, 0, _U32)


def _opt_node(v: Any, what: str) -> int | None:
    return None if v is None else _node(v, what)


def _cell(v: Any, what: str) -> Cell:
    gx, gy = _list(v, 2, what)
    return Cell(_int(gx, what), _int(gy, what))


def _cells(v: Any, what: str) -> list[Cell]:
    return [_cell(c, what) for c in _list(v, None, what)]


def _target(v: Any, what: str) -> Target:
    k, a, b = _list(v, 3, what)
    kind = _int(k, what, 0, 1)
    return (kind, _int(a, what, -(2**31), _U32), _int(b, what))


def _sub(v: Any, what: str) -> Subscription:
    try:
        return Subscription.from_wire(v)
    except (ContentError, TypeError) as exc:
        raise ValueError(f"{what}: {exc}") from None


def _event(v: Any, what: str) -> Event:
    try:
        return Event.from_wire(v)
    except (ContentError, TypeError) as exc:
        raise ValueError(f"{what}: {exc}") from None


# ----------------------------------------------------------------- envelope


STAGE_BROKER = 0
"""Envelope stage: on the way to the topic's broker of ``cell`` (GPSR towards its hash
point, or towards a broker announced by BROKER_UPDATE)."""
STAGE_SKIP = 1
"""SUBSCRIBE only: ``cell`` was found empty; on the way towards the region, taken over by
the first node whose own cell is at least as close to the region as ``cell``."""
STAGE_PROBE = 2
"""``STAGE_PROBE + i``: looking for any node of ``cell`` at probe point ``i`` (a point
every node of one part of the cell is within TR/2 of); the last one failing proves the
cell empty. See ``meshsub.core.grid.probe_points``."""
STAGE_MAX = 255
HOPS_MAX = 0xFFFF
"""Largest hop count a REPLY reports (the wire's hop field, meshsub.wire.frame.HOP_MAX)."""


MAX_LEGS = 64
"""Most further destinations one envelope may carry (``Envelope.also``)."""


@dataclass(frozen=True, slots=True)
class Leg:
    """One further destination cell of an envelope, with its own stage and GPSR state."""

    cell: Cell
    stage: int
    geo: GeoHeader

    def to_wire(self) -> list[Any]:
        return [self.cell[0], self.cell[1], self.stage, self.geo.to_wire()]

    @classmethod
    def from_wire(cls, v: Any) -> Leg:
        gx, gy, stage, geo = _list(v, 4, "leg")
        try:
            header = GeoHeader.from_wire(geo)
        except GeoRoutingError as exc:
            raise ValueError(f"leg routing header: {exc}") from None
        return cls(Cell(_int(gx, "leg cell"), _int(gy, "leg cell")),
                   _int(stage, "leg stage", 0, STAGE_MAX), header)


@dataclass(frozen=True, slots=True)
class Envelope:
    """Addressing of a broker-to-broker (or broker-to-client) message.

    ``also`` lists further destination cells of the same message (an EVENT a broker
    sends over several legs round a void at once); each relay splits the list by next
    hop, so the legs share the radio hops they have in common.
    """

    cell: Cell
    topic: str
    dest: int | None
    redirects: int
    geo: GeoHeader
    payload: list[Any] | tuple[Any, ...]
    stage: int = STAGE_BROKER
    also: tuple[Leg, ...] = ()

    def to_wire(self) -> list[Any]:
        return [self.cell[0], self.cell[1], self.topic, self.dest, self.redirects,
                self.geo.to_wire(), list(self.payload), self.stage,
                [leg.to_wire() for leg in self.also]]

    @classmethod
    def from_wire(cls, body: Any) -> Envelope:
        """Nine fields; seven or eight (an older node's frame: no stage, no further legs)
        are read as stage 0 and no further legs."""
        items = _list(body, None, "envelope")
        if len(items) == 7:
            items = [*items, STAGE_BROKER]
        if len(items) == 8:
            items = [*items, []]
        gx, gy, topic, dest, redirects, geo, payload, stage, also = _list(items, 9, "envelope")
        try:
            header = GeoHeader.from_wire(geo)
        except GeoRoutingError as exc:
            raise ValueError(f"envelope routing header: {exc}") from None
        legs = _list(also, None, "legs")
        if len(legs) > MAX_LEGS:
            raise ValueError(f"envelope: more than {MAX_LEGS} further legs")
        return cls(Cell(_int(gx, "cell"), _int(gy, "cell")), _str(topic, "topic"),
                   _opt_node(dest, "dest"), _int(redirects, "redirects", 0, 255), header,
                   _list(payload, None, "payload"), _int(stage, "stage", 0, STAGE_MAX),
                   tuple(Leg.from_wire(leg) for leg in legs))


# ------------------------------------------------------------------ payloads


@dataclass(frozen=True, slots=True)
class Subscribe:
    sub_id: str
    filter: Subscription
    client: int
    """The subscribing node (the SHB's local downstream)."""
    origin_shb: int | None
    variant: str
    hop_count: int
    route_record: tuple[Cell, ...]
    seq: int
    """Refresh counter: (sub_id, seq) identifies one issue of the subscription."""
    refresh: bool

    def to_wire(self) -> list[Any]:
        return [self.sub_id, self.filter.to_wire(), self.client, self.origin_shb, self.variant,
                self.hop_count, [list(c) for c in self.route_record], self.seq, self.refresh]

    @classmethod
    def from_wire(cls, v: Any) -> Subscribe:
        sid, flt, client, shb, variant, hops, route, seq, refresh = _list(v, 9, "SUBSCRIBE")
        if variant not in ("I", "II"):
            raise ValueError("SUBSCRIBE variant must be I or II")
        return cls(_str(sid, "sub_id"), _sub(flt, "filter"), _node(client, "client"),
                   _opt_node(shb, "origin_shb"), variant, _int(hops, "hop_count", 0, 4096),
                   tuple(_cells(route, "route_record")), _int(seq, "seq", 0, 2**31),
                   _bool(refresh, "refresh"))


@dataclass(frozen=True, slots=True)
class Reply:
    sub_id: str
    replier: int
    replier_cell: Cell
    kind: str
    new_links: int
    total_hops: int
    route_record: tuple[Cell, ...]
    index: int
    """Position in ``route_record`` of the broker this copy is heading for."""
    seq: int
    sub_hops: int = 0
    """Radio hops the answered SUBSCRIBE copy took from its client to the replier: with
    the REPLY's own hops, the round trip the SHB's reply window is sized from."""

    def to_wire(self) -> list[Any]:
        return [self.sub_id, self.replier, list(self.replier_cell), self.kind, self.new_links,
                self.total_hops, [list(c) for c in self.route_record], self.index, self.seq,
                self.sub_hops]

    @classmethod
    def from_wire(cls, v: Any) -> Reply:
        """Ten fields; nine (an older node's REPLY, without ``sub_hops``) read as 0 hops."""
        items = _list(v, None, "REPLY")
        if len(items) == 9:
            items = [*items, 0]
        sid, rep, rcell, kind, new, total, route, index, seq, hops = _list(items, 10, "REPLY")
        if kind not in (KIND_PHB, KIND_JOINED):
            raise ValueError("REPLY kind must be PHB or JOINED_EXISTING")
        cells = tuple(_cells(route, "route_record"))
        idx = _int(index, "index", 0, max(0, len(cells) - 1))
        return cls(_str(sid, "sub_id"), _node(rep, "replier"), _cell(rcell, "replier_cell"),
                   kind, _int(new, "new_links", 0, 4096), _int(total, "total_hops", 0, 8192),
                   cells, idx, _int(seq, "seq", 0, 2**31), _int(hops, "sub_hops", 0, HOPS_MAX))


@dataclass(frozen=True, slots=True)
class Confirm:
    sub_id: str
    route_record: tuple[Cell, ...]
    replier_cell: Cell
    index: int
    """Position in ``route_record`` of the broker this copy is heading for; ``len`` = replier."""
    filter: Subscription

    def to_wire(self) -> list[Any]:
        return [self.sub_id, [list(c) for c in self.route_record], list(self.replier_cell),
                self.index, self.filter.to_wire()]

    @classmethod
    def from_wire(cls, v: Any) -> Confirm:
        sid, route, rcell, index, flt = _list(v, 5, "CONFIRM")
        cells = tuple(_cells(route, "route_record"))
        return cls(_str(sid, "sub_id"), cells, _cell(rcell, "replier_cell"),
                   _int(index, "index", 0, len(cells)), _sub(flt, "filter"))


@dataclass(frozen=True, slots=True)
class EventMsg:
    event: Event
    region: Cell
    publisher: int
    published_at: float
    to_client: bool

    def to_wire(self) -> list[Any]:
        return [self.event.to_wire(), list(self.region), self.publisher, self.published_at,
                self.to_client]

    @classmethod
    def from_wire(cls, v: Any) -> EventMsg:
        ev, region, pub, at, to_client = _list(v, 5, "EVENT")
        return cls(_event(ev, "event"), _cell(region, "region"), _node(pub, "publisher"),
                   _num(at, "published_at"), _bool(to_client, "to_client"))


@dataclass(frozen=True, slots=True)
class Unsubscribe:
    sub_id: str
    filter: Subscription
    sender: Target
    """The downstream pointer to remove: the sending cell's broker or the client."""

    def to_wire(self) -> list[Any]:
        return [self.sub_id, self.filter.to_wire(), list(self.sender)]

    @classmethod
    def from_wire(cls, v: Any) -> Unsubscribe:
        sid, flt, sender = _list(v, 3, "UNSUBSCRIBE")
        return cls(_str(sid, "sub_id"), _sub(flt, "filter"), _target(sender, "sender"))


@dataclass(frozen=True, slots=True)
class BrokerUpdate:
    cell: Cell
    old_broker: int
    new_broker: int
    new_pos: tuple[float, float]
    epoch: int

    def to_wire(self) -> list[Any]:
        return [list(self.cell), self.old_broker, self.new_broker, self.new_pos[0],
                self.new_pos[1], self.epoch]

    @classmethod
    def from_wire(cls, v: Any) -> BrokerUpdate:
        cell, old, new, x, y, epoch = _list(v, 6, "BROKER_UPDATE")
        return cls(_cell(cell, "cell"), _node(old, "old_broker"), _node(new, "new_broker"),
                   (_num(x, "x"), _num(y, "y")), _int(epoch, "epoch", 0, 2**63))


@dataclass(frozen=True, slots=True)
class StateTransfer:
    topic: str
    cell: Cell
    entries: tuple[Any, ...]
    """Serialised routing entries (``meshsub.protocols.hesper.state``)."""
    epoch: int

    def to_wire(self) -> list[Any]:
        return [self.topic, list(self.cell), list(self.entries), self.epoch]

    @classmethod
    def from_wire(cls, v: Any) -> StateTransfer:
        topic, cell, entries, epoch = _list(v, 4, "STATE_TRANSFER")
        return cls(_str(topic, "topic"), _cell(cell, "cell"),
                   tuple(_list(entries, None, "entries")), _int(epoch, "epoch", 0, 2**63))


@dataclass(frozen=True, slots=True)
class Beacon:
    """Intra-cell beacon: position, cell, energy, retiring flag and broker claims."""

    pos: tuple[float, float]
    cell: Cell
    energy: float
    retiring: bool
    claims: tuple[str, ...]

    def to_wire(self) -> list[Any]:
        return [self.pos[0], self.pos[1], list(self.cell), self.energy, self.retiring,
                list(self.claims)]

    @classmethod
    def from_wire(cls, v: Any) -> Beacon:
        x, y, cell, energy, retiring, claims = _list(v, 6, "BEACON")
        e = _num(energy, "energy")
        if not 0.0 <= e <= 1.0:
            raise ValueError("BEACON energy must be a fraction")
        return cls((_num(x, "x"), _num(y, "y")), _cell(cell, "cell"), e,
                   _bool(retiring, "retiring"),
                   tuple(_str(t, "claim") for t in _list(claims, None, "claims")))
