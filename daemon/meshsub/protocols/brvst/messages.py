"""BRVST's messages: types, fields and msgpack-able wire forms.

The paper describes its messages in prose only (§IV); names follow
docs/protocols/brvst.md. Two transports:

- *scoped floods* (ANNOUNCE, RESIGN): one-hop broadcasts that nodes inside
  the announced grid or zone (grown by a margin) re-broadcast once;
- *routed* messages in an ``Envelope``: addressed to the manager of a grid or
  zone (or to one node), carried hop by hop with GPSR towards the manager's
  announced position, or the area's centre while no manager is known.

Every ``from_wire`` raises ``ValueError`` (only) for anything malformed, so
the protocol turns it into a counted drop. Sizes are bounded on decode.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any

from meshsub.core import bodies
from meshsub.core.api import FIRST_PROTOCOL_TYPE, NODE_ID_MAX, MessageId, MsgKind
from meshsub.core.arv import ARV, ARVError
from meshsub.core.content import ContentError, Event, Subscription
from meshsub.core.georouting import GeoHeader, GeoRoutingError
from meshsub.core.values import Value, check_name, check_value
from meshsub.protocols.brvst.forest import Entry

ANNOUNCE = FIRST_PROTOCOL_TYPE
RESIGN = FIRST_PROTOCOL_TYPE + 1
SUBSCRIBE = FIRST_PROTOCOL_TYPE + 2
UNSUBSCRIBE = FIRST_PROTOCOL_TYPE + 3
LOCATE = FIRST_PROTOCOL_TYPE + 4
GRSV_UPDATE = FIRST_PROTOCOL_TYPE + 5
PUBLISH = FIRST_PROTOCOL_TYPE + 6
PUB_UP = FIRST_PROTOCOL_TYPE + 7
PUB_GRID = FIRST_PROTOCOL_TYPE + 8
PUB_ZONE = FIRST_PROTOCOL_TYPE + 9
DELIVER = FIRST_PROTOCOL_TYPE + 10
ZRSV_UPDATE = FIRST_PROTOCOL_TYPE + 11
PUB_ADVERT = FIRST_PROTOCOL_TYPE + 12
SUB_HISTORY = FIRST_PROTOCOL_TYPE + 13
SUB_QUERY = FIRST_PROTOCOL_TYPE + 14
STATE_XFER = FIRST_PROTOCOL_TYPE + 15

NAMES: dict[int, str] = {
    ANNOUNCE: "ANNOUNCE", RESIGN: "RESIGN", SUBSCRIBE: "SUBSCRIBE",
    UNSUBSCRIBE: "UNSUBSCRIBE", LOCATE: "LOCATE", GRSV_UPDATE: "GRSV_UPDATE",
    PUBLISH: "PUBLISH", PUB_UP: "PUB_UP", PUB_GRID: "PUB_GRID", PUB_ZONE: "PUB_ZONE",
    DELIVER: "DELIVER", ZRSV_UPDATE: "ZRSV_UPDATE", PUB_ADVERT: "PUB_ADVERT",
    SUB_HISTORY: "SUB_HISTORY", SUB_QUERY: "SUB_QUERY", STATE_XFER: "STATE_XFER",
}

KINDS: dict[int, MsgKind] = {
    ANNOUNCE: MsgKind.CONTROL,
    RESIGN: MsgKind.CONTROL,
    STATE_XFER: MsgKind.CONTROL,
    PUB_ADVERT: MsgKind.CONTROL,
    SUBSCRIBE: MsgKind.SUBSCRIPTION,
    UNSUBSCRIBE: MsgKind.SUBSCRIPTION,
    LOCATE: MsgKind.SUBSCRIPTION,
    GRSV_UPDATE: MsgKind.SUBSCRIPTION,
    ZRSV_UPDATE: MsgKind.SUBSCRIPTION,
    SUB_HISTORY: MsgKind.SUBSCRIPTION,
    SUB_QUERY: MsgKind.SUBSCRIPTION,
    PUBLISH: MsgKind.DATA,
    PUB_UP: MsgKind.DATA,
    PUB_GRID: MsgKind.DATA,
    PUB_ZONE: MsgKind.DATA,
    DELIVER: MsgKind.DATA,
}
FLOODED = frozenset({ANNOUNCE, RESIGN})
ROUTED = frozenset(KINDS) - FLOODED

MAX_RSV_ENTRIES = 1024
MAX_ENTRY_ATTRS = 64
MAX_SUB_ID = 256
MAX_LIST = 65536
_U32 = 0xFFFF_FFFF
_I32 = 2**31


class GrsvReason(enum.IntEnum):
    CHANGE = 0
    REFRESH = 1
    RESYNC = 2
    RESIGN = 3
    """The sender stops managing the grid (hand-over, lost conflict): forget its record."""


class ZrsvReason(enum.IntEnum):
    CHANGE = 0
    PERIODIC = 1
    UNWANTED = 2
    ADVERT_REPLY = 3
    QUERY = 4
    RESIGN = 5
    """The sender stops managing the zone: forget its summary."""


class Dest(enum.IntEnum):
    """What a routed message is addressed to."""

    NODE = 0
    GRID = 1
    ZONE = 2


# ------------------------------------------------------------------ the reader


class Fields:
    """Reads a wire list field by field, each checked by ``meshsub.core.bodies``."""

    __slots__ = ("_i", "_items", "_what")

    def __init__(self, obj: Any, count: int, what: str) -> None:
        self._items = bodies.fields(obj, count, what)
        self._i = 0
        self._what = what

    def _next(self) -> tuple[Any, str]:
        value = self._items[self._i]
        self._i += 1
        return value, f"{self._what} field {self._i}"

    # The three checks below run for every field of every routed frame (an envelope has
    # ten, at every hop): a well-formed plain int or float is taken at once, without
    # building the field's name for an error message; anything else goes through
    # ``bodies``, which accepts exactly what it accepted before or raises as before.

    def integer(self, lo: int = -_I32, hi: int = _I32) -> int:
        value = self._items[self._i]
        if type(value) is int and lo <= value <= hi:
            self._i += 1
            return value
        return bodies.integer(*self._next(), lo, hi)

    def node(self) -> int:
        value = self._items[self._i]
        if type(value) is int and 0 <= value <= NODE_ID_MAX:
            self._i += 1
            return value
        return bodies.node(*self._next())

    def counter(self) -> int:
        """An epoch or a version: 0 .. 2^32 - 1."""
        return self.integer(0, _U32)

    def opt_node(self) -> int | None:
        if self._items[self._i] is None:
            self._i += 1
            return None
        return self.node()

    def number(self) -> float:
        value = self._items[self._i]
        if type(value) is float and math.isfinite(value):
            self._i += 1
            return value
        return bodies.number(*self._next())

    def flag(self) -> bool:
        value, what = self._next()
        if not isinstance(value, bool):
            raise bodies.BodyError(f"{what}: expected true or false")
        return value

    def text(self, max_len: int = MAX_SUB_ID) -> str:
        return bodies.text(*self._next(), max_len)

    def blob(self, max_len: int) -> bytes:
        value, what = self._next()
        if not isinstance(value, bytes | bytearray) or len(value) > max_len:
            raise bodies.BodyError(f"{what}: expected at most {max_len} bytes")
        return bytes(value)

    def items(self, max_len: int = MAX_LIST) -> list[Any] | tuple[Any, ...]:
        return bodies.items(*self._next(), max_len)

    def message_id(self) -> MessageId:
        return bodies.message_id(*self._next())

    def event(self) -> Event:
        return bodies.event(*self._next())

    def subscription(self) -> Subscription:
        return bodies.subscription(*self._next())

    def raw(self) -> Any:
        return self._next()[0]


# ------------------------------------------------------------------ building blocks


def arv_to_wire(attr: int, v: ARV) -> list[Any]:
    return [attr, v.level, v.to_bytes()]


def entry_to_wire(entry: Entry) -> list[Any]:
    return [arv_to_wire(a, v) for a, v in entry]


def entry_from_wire(obj: Any) -> Entry:
    """Pairs (attribute, ARV) in strictly ascending attribute order, 1..64 of them."""
    if not isinstance(obj, list | tuple) or not 1 <= len(obj) <= MAX_ENTRY_ATTRS:
        raise ValueError(f"entry: expected 1..{MAX_ENTRY_ATTRS} ARVs")
    out: list[tuple[int, ARV]] = []
    for raw in obj:
        f = Fields(raw, 3, "ARV")
        attr, level, bitmap = f.integer(0, 0xFFFF), f.integer(0, 12), f.blob(512)
        if out and attr <= out[-1][0]:
            raise ValueError("entry: attributes must be strictly ascending")
        try:
            v = ARV.from_bytes(level, bitmap)
        except ARVError as exc:
            raise ValueError(f"entry: {exc}") from None
        if v.bits == 0:
            raise ValueError("entry: an ARV needs at least one segment")
        out.append((attr, v))
    return tuple(out)


def rsv_to_wire(entries: list[Entry] | tuple[Entry, ...]) -> list[Any]:
    return [entry_to_wire(e) for e in entries]


def rsv_from_wire(obj: Any) -> tuple[Entry, ...]:
    if not isinstance(obj, list | tuple) or len(obj) > MAX_RSV_ENTRIES:
        raise ValueError(f"representative set: expected at most {MAX_RSV_ENTRIES} entries")
    return tuple(entry_from_wire(e) for e in obj)


# ------------------------------------------------------------------ floods


@dataclass(frozen=True, slots=True)
class Announce:
    """A manager's periodic claim on its grid or zone (flooded inside it)."""

    level: int
    ax: int
    ay: int
    manager: int
    epoch: int
    pos: tuple[float, float]
    score: float
    inherited: bool
    """True if this manager took over its predecessor's state (members need not re-send)."""
    cfg: bytes

    def to_wire(self) -> list[Any]:
        return [self.level, self.ax, self.ay, self.manager, self.epoch, self.pos[0],
                self.pos[1], self.score, self.inherited, self.cfg]

    @classmethod
    def from_wire(cls, obj: Any) -> Announce:
        f = Fields(obj, 10, "ANNOUNCE")
        return cls(f.integer(1, 2), f.integer(), f.integer(), f.node(), f.integer(0, _U32),
                   (f.number(), f.number()), f.number(), f.flag(), f.blob(32))


@dataclass(frozen=True, slots=True)
class Resign:
    """A manager leaving its area; members elect at once unless a successor is named."""

    level: int
    ax: int
    ay: int
    manager: int
    epoch: int
    successor: int | None

    def to_wire(self) -> list[Any]:
        return [self.level, self.ax, self.ay, self.manager, self.epoch, self.successor]

    @classmethod
    def from_wire(cls, obj: Any) -> Resign:
        f = Fields(obj, 6, "RESIGN")
        return cls(f.integer(1, 2), f.integer(), f.integer(), f.node(), f.integer(0, _U32),
                   f.opt_node())


# ------------------------------------------------------------------ envelope


@dataclass(frozen=True, slots=True)
class Envelope:
    """Addressing of a routed message.

    ``dest`` is the node believed to be the addressee (``None`` while no
    manager is known) at ``target``; ``epoch`` is the sender's belief of the
    manager's epoch, so a relay that knows a newer manager re-targets the
    message to it (at most ``MAX_REDIRECTS`` times).
    """

    kind: Dest
    ax: int
    ay: int
    dest: int | None
    target: tuple[float, float]
    epoch: int
    redirects: int
    geo: GeoHeader
    payload: list[Any] | tuple[Any, ...]

    def to_wire(self) -> list[Any]:
        return [int(self.kind), self.ax, self.ay, self.dest, self.target[0], self.target[1],
                self.epoch, self.redirects, self.geo.to_wire(), list(self.payload)]

    def with_geo(self, geo: GeoHeader) -> Envelope:
        """This envelope with another routing header: ``dataclasses.replace(self, geo=geo)``
        built directly, as every relay does it for every hop it forwards."""
        return Envelope(self.kind, self.ax, self.ay, self.dest, self.target, self.epoch,
                        self.redirects, geo, self.payload)

    @classmethod
    def from_wire(cls, obj: Any) -> Envelope:
        f = Fields(obj, 10, "envelope")
        kind = Dest(f.integer(0, 2))
        ax, ay, dest = f.integer(), f.integer(), f.opt_node()
        target = (f.number(), f.number())
        epoch, redirects = f.integer(0, _U32), f.integer(0, 255)
        try:
            geo = GeoHeader.from_wire(f.raw())
        except GeoRoutingError as exc:
            raise ValueError(f"envelope routing header: {exc}") from None
        payload = f.items()
        if kind is Dest.NODE and dest is None:
            raise ValueError("envelope: a node-addressed message needs a destination")
        return cls(kind, ax, ay, dest, target, epoch, redirects, geo, payload)


# ------------------------------------------------------------------ payloads


@dataclass(frozen=True, slots=True)
class Pub:
    """A publication as it travels: its id (the application's event id), event and birth."""

    event_id: MessageId
    event: Event
    published_at: float

    def to_wire(self) -> list[Any]:
        return [bodies.message_id_wire(self.event_id), self.event.to_wire(), self.published_at]

    @classmethod
    def from_wire(cls, obj: Any) -> Pub:
        f = Fields(obj, 3, "publication")
        return cls(f.message_id(), f.event(), f.number())


@dataclass(frozen=True, slots=True)
class SubscribeMsg:
    sub_id: str
    subscription: Subscription
    subscriber: int
    pos: tuple[float, float]
    refresh: bool
    want_history: bool

    def to_wire(self) -> list[Any]:
        return [self.sub_id, self.subscription.to_wire(), self.subscriber, self.pos[0],
                self.pos[1], self.refresh, self.want_history]

    @classmethod
    def from_wire(cls, obj: Any) -> SubscribeMsg:
        f = Fields(obj, 7, "SUBSCRIBE")
        return cls(f.text(), f.subscription(), f.node(), (f.number(), f.number()),
                   f.flag(), f.flag())


@dataclass(frozen=True, slots=True)
class UnsubscribeMsg:
    sub_id: str
    subscriber: int

    def to_wire(self) -> list[Any]:
        return [self.sub_id, self.subscriber]

    @classmethod
    def from_wire(cls, obj: Any) -> UnsubscribeMsg:
        f = Fields(obj, 2, "UNSUBSCRIBE")
        return cls(f.text(), f.node())


@dataclass(frozen=True, slots=True)
class Locate:
    """A subscriber's new position, so that deliveries find it (one message for all its subs)."""

    subscriber: int
    pos: tuple[float, float]

    def to_wire(self) -> list[Any]:
        return [self.subscriber, self.pos[0], self.pos[1]]

    @classmethod
    def from_wire(cls, obj: Any) -> Locate:
        f = Fields(obj, 3, "LOCATE")
        return cls(f.node(), (f.number(), f.number()))


@dataclass(frozen=True, slots=True)
class Sender:
    """The manager that sent a summary or publication, so the receiver can answer it."""

    node: int
    pos: tuple[float, float]
    epoch: int

    def to_wire(self) -> list[Any]:
        return [self.node, self.pos[0], self.pos[1], self.epoch]

    @classmethod
    def from_wire(cls, obj: Any) -> Sender:
        f = Fields(obj, 4, "sender")
        return cls(f.node(), (f.number(), f.number()), f.integer(0, _U32))


@dataclass(frozen=True, slots=True)
class SummaryUpdate:
    """GRSV_UPDATE (a grid's set, to its zone manager) or ZRSV_UPDATE (a zone's, to zones).

    Summaries are kept per (area, manager): a partitioned grid or zone has one manager per
    part. ``predecessor`` names the manager whose state this one took over (hand-over or a
    lost conflict), whose summary the receiver can therefore forget at once.
    """

    ax: int
    ay: int
    sender: Sender
    version: int
    reason: int
    entries: tuple[Entry, ...]
    cfg: bytes
    predecessor: int | None = None

    def to_wire(self) -> list[Any]:
        return [self.ax, self.ay, self.sender.to_wire(), self.version, self.reason,
                rsv_to_wire(self.entries), self.cfg, self.predecessor]

    @classmethod
    def from_wire(cls, obj: Any) -> SummaryUpdate:
        f = Fields(obj, 8, "summary update")
        return cls(f.integer(), f.integer(), Sender.from_wire(f.raw()), f.integer(0, _U32),
                   f.integer(0, 5), rsv_from_wire(f.raw()), f.blob(32), f.opt_node())


@dataclass(frozen=True, slots=True)
class PubUp:
    """PUBLISH (publisher -> its grid manager: ``origin`` unused) or PUB_UP (grid -> zone)."""

    pub: Pub
    origin_grid: tuple[int, int]

    def to_wire(self) -> list[Any]:
        return [self.pub.to_wire(), self.origin_grid[0], self.origin_grid[1]]

    @classmethod
    def from_wire(cls, obj: Any) -> PubUp:
        f = Fields(obj, 3, "PUB_UP")
        return cls(Pub.from_wire(f.raw()), (f.integer(), f.integer()))


@dataclass(frozen=True, slots=True)
class PubDown:
    """PUB_GRID (zone manager -> a grid) or PUB_ZONE (zone manager -> a zone)."""

    pub: Pub
    origin_zone: tuple[int, int]
    origin_grid: tuple[int, int]
    from_cache: bool
    for_sub: tuple[int, str] | None
    """A replay for one new subscription (SUB_HISTORY): only that one is checked."""
    sender: Sender

    def to_wire(self) -> list[Any]:
        return [self.pub.to_wire(), self.origin_zone[0], self.origin_zone[1],
                self.origin_grid[0], self.origin_grid[1], self.from_cache,
                None if self.for_sub is None else list(self.for_sub), self.sender.to_wire()]

    @classmethod
    def from_wire(cls, obj: Any) -> PubDown:
        f = Fields(obj, 8, "PUB_GRID/PUB_ZONE")
        pub = Pub.from_wire(f.raw())
        oz, og = (f.integer(), f.integer()), (f.integer(), f.integer())
        from_cache = f.flag()
        raw = f.raw()
        for_sub: tuple[int, str] | None = None
        if raw is not None:
            g = Fields(raw, 2, "for_sub")
            for_sub = (g.node(), g.text())
        return cls(pub, oz, og, from_cache, for_sub, Sender.from_wire(f.raw()))


@dataclass(frozen=True, slots=True)
class DeliverMsg:
    pub: Pub
    sub_ids: tuple[str, ...]

    def to_wire(self) -> list[Any]:
        return [self.pub.to_wire(), list(self.sub_ids)]

    @classmethod
    def from_wire(cls, obj: Any) -> DeliverMsg:
        f = Fields(obj, 2, "DELIVER")
        pub = Pub.from_wire(f.raw())
        raw = f.items(1024)
        if not raw:
            raise ValueError("DELIVER: no subscription")
        return cls(pub, tuple(Fields([s], 1, "sub_id").text() for s in raw))


@dataclass(frozen=True, slots=True)
class Advert:
    """PUB_ADVERT: a publication's schema attributes (no data) for zones without its match."""

    origin_zone: tuple[int, int]
    sender: Sender
    pub_id: MessageId
    attrs: tuple[tuple[str, Value], ...]
    """The event's ``x_lo``/``x_hi`` attributes, from which the receiver builds the P-ARVs."""

    def to_wire(self) -> list[Any]:
        return [self.origin_zone[0], self.origin_zone[1], self.sender.to_wire(),
                bodies.message_id_wire(self.pub_id), [[n, v] for n, v in self.attrs]]

    @classmethod
    def from_wire(cls, obj: Any) -> Advert:
        f = Fields(obj, 5, "PUB_ADVERT")
        oz = (f.integer(), f.integer())
        sender, pub_id = Sender.from_wire(f.raw()), f.message_id()
        pairs: list[tuple[str, Value]] = []
        for raw in f.items(128):
            g = Fields(raw, 2, "advert attribute")
            try:
                pairs.append((check_name(g.raw()), check_value(g.raw())))
            except ContentError as exc:
                raise ValueError(f"PUB_ADVERT: {exc}") from None
        return cls(oz, sender, pub_id, tuple(pairs))


@dataclass(frozen=True, slots=True)
class SubHistory:
    """A grid manager asks its zone's cache for publications matching a new subscription."""

    grid: tuple[int, int]
    sender: Sender
    sub_key: tuple[int, str]
    subscription: Subscription

    def to_wire(self) -> list[Any]:
        return [self.grid[0], self.grid[1], self.sender.to_wire(), list(self.sub_key),
                self.subscription.to_wire()]

    @classmethod
    def from_wire(cls, obj: Any) -> SubHistory:
        f = Fields(obj, 5, "SUB_HISTORY")
        grid = (f.integer(), f.integer())
        sender = Sender.from_wire(f.raw())
        g = Fields(f.raw(), 2, "sub key")
        key = (g.node(), g.text())
        return cls(grid, sender, key, f.subscription())


@dataclass(frozen=True, slots=True)
class SubQuery:
    """A zone's unmatched representative entries, asking zones nearby for cached publications."""

    origin_zone: tuple[int, int]
    sender: Sender
    entries: tuple[Entry, ...]

    def to_wire(self) -> list[Any]:
        return [self.origin_zone[0], self.origin_zone[1], self.sender.to_wire(),
                rsv_to_wire(self.entries)]

    @classmethod
    def from_wire(cls, obj: Any) -> SubQuery:
        f = Fields(obj, 4, "SUB_QUERY")
        oz = (f.integer(), f.integer())
        return cls(oz, Sender.from_wire(f.raw()), rsv_from_wire(f.raw()))


@dataclass(frozen=True, slots=True)
class StateXfer:
    """A manager's state handed to its successor (the blob's layout is the role's)."""

    level: int
    ax: int
    ay: int
    epoch: int
    manager: int
    """The manager handing over (the successor names it as its predecessor)."""
    blob: list[Any] | tuple[Any, ...]

    def to_wire(self) -> list[Any]:
        return [self.level, self.ax, self.ay, self.epoch, self.manager, list(self.blob)]

    @classmethod
    def from_wire(cls, obj: Any) -> StateXfer:
        f = Fields(obj, 6, "STATE_XFER")
        return cls(f.integer(1, 2), f.integer(), f.integer(), f.integer(0, _U32), f.node(),
                   f.items())
