"""PUMA's and paging's messages (Zheng 2008, §5.3-5.4): types, fields and wire forms.

Bodies are msgpack lists. ``decode`` classmethods raise ``BodyError`` (a
``ValueError``) for anything malformed; the protocol counts it as a drop.
Events keep their end-to-end id in ``Message.id`` on every hop (EVENT,
DELIVER, LOCAL, PAGE, PUBLISH), so drops and telemetry name the event.

Messages routed towards one cell (a client's previous broker, or the cell of
its last paging report) travel cell by cell over the 4-neighbour backbone in
a ``Routed`` envelope; the base station that takes a client's message onto
the backbone fills in the client and its own cell (a client's claims about
where it is are not trusted: it is where its base station is).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from meshsub.core import bodies as b
from meshsub.core.api import FIRST_PROTOCOL_TYPE, MessageId, MsgKind
from meshsub.core.content import Event, Subscription
from meshsub.core.grid import Cell, manhattan
from meshsub.core.lattice_tree import CellTree

BEACON = FIRST_PROTOCOL_TYPE
SUBSCRIBE = FIRST_PROTOCOL_TYPE + 1
PUBLISH = FIRST_PROTOCOL_TYPE + 2
SUB_PROPAGATE = FIRST_PROTOCOL_TYPE + 3
UNSUB_PROPAGATE = FIRST_PROTOCOL_TYPE + 4
EVENT = FIRST_PROTOCOL_TYPE + 5
DELIVER = FIRST_PROTOCOL_TYPE + 6
LOCAL = FIRST_PROTOCOL_TYPE + 7
REPLY = FIRST_PROTOCOL_TYPE + 8
HELLO = FIRST_PROTOCOL_TYPE + 9
REPORT = FIRST_PROTOCOL_TYPE + 10
REFRESH = FIRST_PROTOCOL_TYPE + 11
UNSUBSCRIBE = FIRST_PROTOCOL_TYPE + 12
PAGE = FIRST_PROTOCOL_TYPE + 13

ROUTED = frozenset({REPLY, HELLO, REPORT, REFRESH, UNSUBSCRIBE})
"""Types carried in a ``Routed`` envelope towards ``dest``."""

LAST_MILE = frozenset({DELIVER, LOCAL, REPLY, PAGE, REPORT, HELLO})
"""The messages a system cost counts (Zheng 2008, §5.4.1): the delivery below the previous
broker, the client's replies, hand-overs and reports with their relay, and pages; not the
backbone's subscription tree, nor BEACONs."""

KINDS: dict[int, MsgKind] = {
    BEACON: MsgKind.BEACON,
    SUBSCRIBE: MsgKind.SUBSCRIPTION,
    REFRESH: MsgKind.SUBSCRIPTION,
    UNSUBSCRIBE: MsgKind.SUBSCRIPTION,
    SUB_PROPAGATE: MsgKind.SUBSCRIPTION,
    UNSUB_PROPAGATE: MsgKind.SUBSCRIPTION,
    PUBLISH: MsgKind.DATA,
    EVENT: MsgKind.DATA,
    DELIVER: MsgKind.DATA,
    LOCAL: MsgKind.DATA,
    PAGE: MsgKind.DATA,
    REPLY: MsgKind.CONTROL,
    HELLO: MsgKind.CONTROL,
    REPORT: MsgKind.CONTROL,
}

MAX_TREE_CELLS = 2048
"""Cells in one delivery tree: (2 t_max + 1)**2 predicted cells plus the path to them."""
MAX_ID = 160
"""Longest subscription id on the network (client id prefix + the application's id)."""
U63 = b.U63


class Phase:
    """Delivery rounds of an event (§5.3.1): hot set, cold set, paging, then queued rounds.

    Every round sent after both prediction rounds failed (the fallback) has its
    own number from ``QUEUED`` up, so a client can tell a new round from a
    copy of one it already answered.
    """

    HOT = 0
    COLD = 1
    PAGE = 2
    QUEUED = 3
    LAST = 255


def _cell_wire(cell: Cell) -> list[int]:
    return [cell[0], cell[1]]


def _opt_sub(value: Any, what: str) -> Subscription | None:
    return None if value is None else b.subscription(value, what)


# ------------------------------------------------------------------ one hop


@dataclass(frozen=True, slots=True)
class Beacon:
    """A base station announces itself and its cell to its one-hop neighbours."""

    cell: Cell

    def encode(self) -> list[Any]:
        return _cell_wire(self.cell)

    @classmethod
    def decode(cls, body: Any) -> Beacon:
        return cls(b.cell(body, "BEACON cell"))


@dataclass(frozen=True, slots=True)
class Subscribe:
    """Client -> the base station of its cell, which becomes its previous broker."""

    sub_id: str
    version: int
    filter: Subscription

    def encode(self) -> list[Any]:
        return [self.sub_id, self.version, self.filter.to_wire()]

    @classmethod
    def decode(cls, body: Any) -> Subscribe:
        sid, version, flt = b.fields(body, 3, "SUBSCRIBE")
        return cls(b.text(sid, "sub_id", MAX_ID), b.integer(version, "version"),
                   b.subscription(flt, "filter"))


@dataclass(frozen=True, slots=True)
class Publish:
    """Client -> its base station: an application's event (id in ``Message.id``)."""

    event: Event
    published_at: float

    def encode(self) -> list[Any]:
        return [self.event.to_wire(), self.published_at]

    @classmethod
    def decode(cls, body: Any) -> Publish:
        ev, at = b.fields(body, 2, "PUBLISH")
        return cls(b.event(ev, "event"), b.number(at, "published_at"))


# ------------------------------------------------------------------ backbone tree (SIENA)


@dataclass(frozen=True, slots=True)
class SubPropagate:
    """A subscription spreading over the broker tree, rooted at its previous broker (§5.2)."""

    net_id: str
    version: int
    filter: Subscription
    root: Cell
    lease_s: float

    def encode(self) -> list[Any]:
        return [self.net_id, self.version, self.filter.to_wire(), _cell_wire(self.root),
                self.lease_s]

    @classmethod
    def decode(cls, body: Any) -> SubPropagate:
        nid, version, flt, root, lease = b.fields(body, 5, "SUB_PROPAGATE")
        return cls(b.text(nid, "net_id", MAX_ID), b.integer(version, "version"),
                   b.subscription(flt, "filter"), b.cell(root, "root"),
                   b.number(lease, "lease_s", 0.0, 7 * 86400.0))


@dataclass(frozen=True, slots=True)
class UnsubPropagate:
    net_id: str
    version: int

    def encode(self) -> list[Any]:
        return [self.net_id, self.version]

    @classmethod
    def decode(cls, body: Any) -> UnsubPropagate:
        nid, version = b.fields(body, 2, "UNSUB_PROPAGATE")
        return cls(b.text(nid, "net_id", MAX_ID), b.integer(version, "version"))


@dataclass(frozen=True, slots=True)
class EventMsg:
    """An event travelling the broker tree towards subscribers' previous brokers."""

    event: Event
    published_at: float

    def encode(self) -> list[Any]:
        return [self.event.to_wire(), self.published_at]

    @classmethod
    def decode(cls, body: Any) -> EventMsg:
        ev, at = b.fields(body, 2, "EVENT")
        return cls(b.event(ev, "event"), b.number(at, "published_at"))


# ------------------------------------------------------------------ delivery trees


def encode_tree(tree: CellTree, at: Cell | None = None) -> list[list[int]]:
    """The subtree below ``at`` (default the root) as ``[[gx, gy, parent index], ...]``.

    Breadth-first, so a parent always precedes its children; the first entry
    is ``at`` with parent index -1. Flat, so decoding needs no recursion.
    """
    start = tree.root if at is None else at
    children = tree.children()
    out: list[list[int]] = [[start[0], start[1], -1]]
    index = 0
    while index < len(out):
        gx, gy, _p = out[index]
        for child in children.get(Cell(gx, gy), ()):
            out.append([child[0], child[1], index])
        index += 1
    return out


@dataclass(frozen=True, slots=True)
class DeliveryTree:
    """A decoded delivery tree: ``cells[0]`` is where it starts, ``parents[i] < i``."""

    cells: tuple[Cell, ...]
    parents: tuple[int, ...]

    @classmethod
    def decode(cls, value: Any) -> DeliveryTree:
        raw = b.items(value, "tree", MAX_TREE_CELLS)
        if not raw:
            raise b.BodyError("tree: empty")
        cells: list[Cell] = []
        parents: list[int] = []
        seen: set[Cell] = set()
        for i, entry in enumerate(raw):
            gx, gy, parent = b.fields(entry, 3, "tree cell")
            cell = Cell(b.integer(gx, "tree cell", 0, b.MAX_CELL),
                        b.integer(gy, "tree cell", 0, b.MAX_CELL))
            p = b.integer(parent, "tree parent", -1, max(-1, i - 1))
            if (p == -1) != (i == 0):
                raise b.BodyError("tree: only the first cell has no parent")
            if p >= 0 and manhattan(cells[p], cell) != 1:
                raise b.BodyError("tree: a child must be a 4-neighbour of its parent")
            if cell in seen:
                raise b.BodyError("tree: a cell appears twice")
            seen.add(cell)
            cells.append(cell)
            parents.append(p)
        return cls(tuple(cells), tuple(parents))

    @property
    def start(self) -> Cell:
        return self.cells[0]

    def child_subtrees(self) -> dict[Cell, list[list[int]]]:
        """For each child of the start cell, its subtree re-encoded to start there."""
        kids: dict[int, list[int]] = {}
        for i, p in enumerate(self.parents):
            if p >= 0:
                kids.setdefault(p, []).append(i)
        out: dict[Cell, list[list[int]]] = {}
        for child in kids.get(0, []):
            order = [child]
            new_index = {child: 0}
            encoded = [[self.cells[child][0], self.cells[child][1], -1]]
            k = 0
            while k < len(order):
                for grand in kids.get(order[k], []):
                    new_index[grand] = len(order)
                    order.append(grand)
                    encoded.append([self.cells[grand][0], self.cells[grand][1],
                                    new_index[self.parents[grand]]])
                k += 1
            out[self.cells[child]] = encoded
        return out

    def depth(self) -> int:
        depth = [0] * len(self.cells)
        for i, p in enumerate(self.parents):
            if p >= 0:
                depth[i] = depth[p] + 1
        return max(depth)


@dataclass(frozen=True, slots=True)
class Deliver:
    """An event for ``client`` going down a delivery tree of base stations (§5.3.1).

    ``tree`` starts at the receiving base station's cell; every base station
    hands the event to the client if it is there, then passes each child its
    subtree. ``root``/``root_node`` name the previous broker, which the
    client's reply goes back to.
    """

    client: int
    root_node: int
    root: Cell
    phase: int
    published_at: float
    event: Event
    tree: DeliveryTree

    def encode_with(self, tree_wire: list[list[int]]) -> list[Any]:
        return [self.client, self.root_node, _cell_wire(self.root), self.phase,
                self.published_at, self.event.to_wire(), tree_wire]

    @classmethod
    def decode(cls, body: Any) -> Deliver:
        client, rnode, root, phase, at, ev, tree = b.fields(body, 7, "DELIVER")
        ph = b.integer(phase, "phase", 0, Phase.LAST)
        return cls(b.node(client, "client"), b.node(rnode, "root_node"), b.cell(root, "root"),
                   ph, b.number(at, "published_at"), b.event(ev, "event"),
                   DeliveryTree.decode(tree))


@dataclass(frozen=True, slots=True)
class Local:
    """Base station -> client in its cell: the event (id in ``Message.id``)."""

    root_node: int
    root: Cell
    phase: int
    published_at: float
    event: Event
    reply: bool
    """PUMA clients answer with one REPLY; paging clients never do."""

    def encode(self) -> list[Any]:
        return [self.root_node, _cell_wire(self.root), self.phase, self.published_at,
                self.event.to_wire(), self.reply]

    @classmethod
    def decode(cls, body: Any) -> Local:
        rnode, root, phase, at, ev, reply = b.fields(body, 6, "LOCAL")
        if not isinstance(reply, bool):
            raise b.BodyError("LOCAL reply: expected true or false")
        return cls(b.node(rnode, "root_node"), b.cell(root, "root"),
                   b.integer(phase, "phase", 0, Phase.LAST), b.number(at, "published_at"),
                   b.event(ev, "event"), reply)


@dataclass(frozen=True, slots=True)
class Page:
    """Paging: previous broker -> the base station of the last report's cell (§5.4.1)."""

    dest: Cell
    client: int
    root_node: int
    root: Cell
    radius: int
    published_at: float
    event: Event

    def encode(self) -> list[Any]:
        return [_cell_wire(self.dest), self.client, self.root_node, _cell_wire(self.root),
                self.radius, self.published_at, self.event.to_wire()]

    @classmethod
    def decode(cls, body: Any) -> Page:
        dest, client, rnode, root, radius, at, ev = b.fields(body, 7, "PAGE")
        return cls(b.cell(dest, "dest"), b.node(client, "client"), b.node(rnode, "root_node"),
                   b.cell(root, "root"), b.integer(radius, "radius", 0, 64),
                   b.number(at, "published_at"), b.event(ev, "event"))


# ------------------------------------------------------------------ towards the previous broker


@dataclass(frozen=True, slots=True)
class Routed:
    """A client's message travelling to ``dest`` (its previous broker's cell).

    ``inner`` depends on the type: REPLY ``[event_id]``, HELLO ``[]``, REPORT
    ``[]``, REFRESH ``[sub_id, version, filter]``, UNSUBSCRIBE ``[sub_id, version]``.
    """

    dest: Cell
    client: int
    cell: Cell
    """Where the client is: the cell of the base station that took the message."""
    base: int
    """That base station (where replies and queued events can reach the client)."""
    inner: tuple[Any, ...]

    def encode(self) -> list[Any]:
        return [_cell_wire(self.dest), self.client, _cell_wire(self.cell), self.base,
                list(self.inner)]

    @classmethod
    def decode(cls, body: Any) -> Routed:
        dest, client, cell, base, inner = b.fields(body, 5, "routed")
        return cls(b.cell(dest, "dest"), b.node(client, "client"), b.cell(cell, "cell"),
                   b.node(base, "base"), tuple(b.items(inner, "inner", 3)))


def reply_inner(event_id: MessageId) -> tuple[Any, ...]:
    return (b.message_id_wire(event_id),)


def decode_reply(inner: tuple[Any, ...]) -> MessageId:
    (mid,) = b.fields(inner, 1, "REPLY")
    return b.message_id(mid, "event_id")


def refresh_inner(sub_id: str, version: int, flt: Subscription) -> tuple[Any, ...]:
    return (sub_id, version, flt.to_wire())


def decode_refresh(inner: tuple[Any, ...]) -> tuple[str, int, Subscription]:
    sid, version, flt = b.fields(inner, 3, "REFRESH")
    return b.text(sid, "sub_id", MAX_ID), b.integer(version, "version"), \
        b.subscription(flt, "filter")


def unsubscribe_inner(sub_id: str, version: int) -> tuple[Any, ...]:
    return (sub_id, version)


def decode_unsubscribe(inner: tuple[Any, ...]) -> tuple[str, int]:
    sid, version = b.fields(inner, 2, "UNSUBSCRIBE")
    return b.text(sid, "sub_id", MAX_ID), b.integer(version, "version")


def decode_empty(inner: tuple[Any, ...], what: str) -> None:
    b.fields(inner, 0, what)

