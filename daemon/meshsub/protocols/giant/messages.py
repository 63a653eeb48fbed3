"""GIANT's messages (Zheng 2008, §6.3): the thesis's tuples, plus the contact layer.

The thesis's Event ``<ID, Sender_ID, Receiver_ID, Topic, Value>`` and
Subscription ``<ID, Sender_ID, Receiver_ID, Flag, Filter>`` travel between
brokers on ferries as *bundles*; the Advertisement ``<ID, Topic, Sender>``
carries, on a ferry, the list of sender records of every broker it visited
since the publisher's broker (PHB). Broker ids are cells (§6.2). Additions
the thesis lacks are marked in the field docs. ``decode`` raises
``BodyError`` (a ``ValueError``) for anything malformed.

Contact layer (§6.4's "upon finding a broker/ferry nearby" on a real radio):
each side sends HELLO when the other appears; then bundles, advertisements
and their per-hop ACKs (the core's reliable send) flow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from meshsub.core import bodies as b
from meshsub.core.api import FIRST_PROTOCOL_TYPE, MessageId, MsgKind
from meshsub.core.content import Event, Subscription
from meshsub.core.grid import Cell

HELLO = FIRST_PROTOCOL_TYPE
BUNDLE = FIRST_PROTOCOL_TYPE + 1
ADV = FIRST_PROTOCOL_TYPE + 2

KINDS: dict[int, MsgKind] = {HELLO: MsgKind.BEACON, BUNDLE: MsgKind.DATA,
                             ADV: MsgKind.SUBSCRIPTION}

MAX_ADV_IDS = 256
MAX_PATH = 64
MAX_ID = 160
MAX_TOPIC = 256


class Kind:
    """What a bundle carries (the thesis's Flag, extended by events)."""

    EVENT = 0
    SUB = 1
    UNSUB = 2
    ALL = frozenset({EVENT, SUB, UNSUB})


def _cell_wire(cell: Cell) -> list[int]:
    return [cell[0], cell[1]]


@dataclass(frozen=True, slots=True)
class Hello:
    """Contact start: who I am, where, and (a ferry) which advertisements I carry."""

    ferry: bool
    cell: Cell | None
    advs: tuple[MessageId, ...]

    def encode(self) -> list[Any]:
        return [self.ferry, None if self.cell is None else _cell_wire(self.cell),
                [b.message_id_wire(a) for a in self.advs]]

    @classmethod
    def decode(cls, body: Any) -> Hello:
        ferry, cell, advs = b.fields(body, 3, "HELLO")
        if not isinstance(ferry, bool):
            raise b.BodyError("HELLO role: expected true or false")
        return cls(ferry, None if cell is None else b.cell(cell, "cell"),
                   tuple(b.message_id(a, "adv id") for a in b.items(advs, "advs", MAX_ADV_IDS)))


@dataclass(frozen=True, slots=True)
class SenderRecord:
    """A visited broker (the thesis's Sender): its path length and hops from the PHB.

    ``max_seg`` (the longest hop on that path) and ``on_tree`` (the broker
    already has the topic's subscription path, for the Prim baseline) are
    additions.
    """

    cell: Cell
    distance: int
    hops: int
    max_seg: int
    on_tree: bool

    def encode(self) -> list[Any]:
        return [self.cell[0], self.cell[1], self.distance, self.hops, self.max_seg, self.on_tree]

    @classmethod
    def decode(cls, value: Any) -> SenderRecord:
        x, y, dist, hops, seg, on_tree = b.fields(value, 6, "sender")
        if not isinstance(on_tree, bool):
            raise b.BodyError("sender on_tree: expected true or false")
        return cls(b.cell([x, y], "sender cell"), b.integer(dist, "distance", 0, 1 << 24),
                   b.integer(hops, "hopcount", 0, MAX_PATH), b.integer(seg, "max_seg", 0, 1 << 24),
                   on_tree)


@dataclass(frozen=True, slots=True)
class Adv:
    """An advertisement: ``Message.id`` is its ID, unique per PHB (§6.3)."""

    topic: str
    phb: Cell
    senders: tuple[SenderRecord, ...]
    remaining_s: float
    """Lifetime left (addition): no synchronised clocks are needed."""

    def encode(self) -> list[Any]:
        return [self.topic, _cell_wire(self.phb), [s.encode() for s in self.senders],
                self.remaining_s]

    @classmethod
    def decode(cls, body: Any, max_senders: int = MAX_PATH) -> Adv:
        topic, phb, senders, remaining = b.fields(body, 4, "ADV")
        return cls(b.text(topic, "topic", MAX_TOPIC), b.cell(phb, "phb"),
                   tuple(SenderRecord.decode(s) for s in b.items(senders, "senders",
                                                                  max_senders)),
                   b.number(remaining, "remaining_s", 0.0, 366 * 86400.0))


@dataclass(frozen=True, slots=True)
class EventItem:
    """The thesis's Event minus the per-hop ids (those are the bundle's)."""

    event_id: MessageId
    """ID = (PHB, sequence): here the publisher's end-to-end message id."""
    phb: Cell
    topic: str
    """The advertised topic the event was routed under."""
    event: Event
    published_at: float

    def encode(self) -> list[Any]:
        return [b.message_id_wire(self.event_id), _cell_wire(self.phb), self.topic,
                self.event.to_wire(), self.published_at]

    @classmethod
    def decode(cls, value: Any) -> EventItem:
        mid, phb, topic, ev, at = b.fields(value, 5, "EVENT item")
        return cls(b.message_id(mid, "event id"), b.cell(phb, "phb"),
                   b.text(topic, "topic", MAX_TOPIC), b.event(ev, "event"),
                   b.number(at, "published_at"))


@dataclass(frozen=True, slots=True)
class SubItem:
    """A subscription (Flag = 1) or unsubscription (``filter`` None) for one tree.

    Additions: ``version`` (an UNSUB cannot be undone by an older SUB), ``DR``
    and ``hops_total`` (the subscriber's end-to-end target and path length, from
    which every hop's Prob = DR^(1/hops_total)), ``lease_s``, and ``path``
    (the brokers the subscription passed, so a loop is refused).
    """

    sub_id: str
    version: int
    phb: Cell
    topic: str
    filter: Subscription | None
    DR: float
    hops_total: int
    lease_s: float
    path: tuple[Cell, ...]

    def encode(self) -> list[Any]:
        return [self.sub_id, self.version, _cell_wire(self.phb), self.topic,
                None if self.filter is None else self.filter.to_wire(), self.DR,
                self.hops_total, self.lease_s, [_cell_wire(c) for c in self.path]]

    @classmethod
    def decode(cls, value: Any) -> SubItem:
        sid, version, phb, topic, flt, dr, hops, lease, path = b.fields(value, 9, "SUB item")
        return cls(b.text(sid, "sub_id", MAX_ID), b.integer(version, "version"),
                   b.cell(phb, "phb"), b.text(topic, "topic", MAX_TOPIC),
                   None if flt is None else b.subscription(flt, "filter"),
                   b.number(dr, "DR", 0.0, 1.0), b.integer(hops, "hops_total", 1, MAX_PATH),
                   b.number(lease, "lease_s", 0.0, 30 * 86400.0),
                   tuple(b.cell(c, "path") for c in b.items(path, "path", MAX_PATH)))


@dataclass(frozen=True, slots=True)
class Bundle:
    """One item on its way from ``sender`` to ``receiver`` (the thesis's Sender/Receiver_ID)."""

    kind: int
    receiver: Cell
    sender: Cell
    prob: float
    """The per-hop target in force (addition, for the ferry's drop order)."""
    remaining_s: float
    item: EventItem | SubItem

    def encode(self) -> list[Any]:
        return [self.kind, _cell_wire(self.receiver), _cell_wire(self.sender), self.prob,
                self.remaining_s, self.item.encode()]

    @classmethod
    def decode(cls, body: Any) -> Bundle:
        kind, receiver, sender, prob, remaining, item = b.fields(body, 6, "BUNDLE")
        k = b.integer(kind, "kind", 0, 2)
        decoded: EventItem | SubItem = EventItem.decode(item) if k == Kind.EVENT \
            else SubItem.decode(item)
        if isinstance(decoded, SubItem) and (decoded.filter is None) != (k == Kind.UNSUB):
            raise b.BodyError("BUNDLE: a SUB carries a filter, an UNSUB none")
        return cls(k, b.cell(receiver, "receiver"), b.cell(sender, "sender"),
                   b.number(prob, "prob", 0.0, 1.0), b.number(remaining, "remaining_s", 0.0,
                                                              30 * 86400.0), decoded)
