"""B-SUB message types and bodies (msgpack lists inside the meshsub frame).

A UDP layout of its own is replaced by meshsub's framing,
which already authenticates, numbers and segments; the bodies keep the
paper's fields. Every decoder raises ``ValueError`` with a one-line reason, which the
protocol turns into a counted ``malformed`` drop.

- IDENT ``[session, roles, degree, digest]``: starts a contact session.
- DESIGNATE ``[session, new_role]``: "become a broker" (1) / "a user" (0).
- ROLE ``[session, broker]``: the designated node's answer, the role it will
  have (it may refuse: hold-down, pinned role), so that the user counts it
  truthfully (``election.py``).
- FILTER ``[session, encoded]``: a TCBF/BF as ``meshsub.core.tcbf.encode_filter`` makes it.
- OFFER ``[offer, [[origin, epoch, seq, mode], ...]]``: the messages the sender
  means to send, in its order.
- REQUEST ``[offer, [[origin, epoch, seq], ...]]``: the offered ids the receiver
  lacks; only those travel as DATA, so a node that already holds (or was
  delivered) a message never receives it again, and a broker that already holds
  a message is never "given" it, which would delete the sender's copy.
- DATA ``[mode, event, published_at, remaining_s, told]``: one message; ``told``
  lists nodes known to hold it, so nobody sends it to them again.
"""

from __future__ import annotations

import enum
import math
import struct
import zlib
from dataclasses import dataclass
from typing import Any

from meshsub.core.api import FIRST_PROTOCOL_TYPE, NODE_ID_MAX, MessageId
from meshsub.core.content import ContentError, Event
from meshsub.core.tcbf import HASH_ID_MMH3_SEEDS, FilterKind

IDENT = FIRST_PROTOCOL_TYPE
DESIGNATE = FIRST_PROTOCOL_TYPE + 1
FILTER = FIRST_PROTOCOL_TYPE + 2
DATA = FIRST_PROTOCOL_TYPE + 3
OFFER = FIRST_PROTOCOL_TYPE + 4
REQUEST = FIRST_PROTOCOL_TYPE + 5
ROLE = FIRST_PROTOCOL_TYPE + 6
STORED = FIRST_PROTOCOL_TYPE + 15
"""Type of the entries B-SUB keeps in its SCF buffer (never sent)."""

MAX_TOLD = 1024
MAX_OFFER = 256
"""Most ids in one OFFER or REQUEST (each side chunks to ``OFFER_CHUNK``)."""
OFFER_CHUNK = 48
"""Ids per OFFER, so that one fits a 1200-byte frame."""
U32 = 0xFFFF_FFFF


class Role(enum.IntFlag):
    """Role bits of IDENT: producer, consumer, broker (Zhao and Wu 2010, §V-A)."""

    NONE = 0
    PRODUCER = 1
    CONSUMER = 2
    BROKER = 4


class Mode(enum.IntEnum):
    """How a DATA travels: direct delivery, producer copy or broker handoff (§V-D)."""

    DIRECT = 0
    """To an interested node; the sender keeps its copy, no copy is counted."""
    COPY = 1
    """A producer's copy to a broker (counts towards C)."""
    HANDOFF = 2
    """Broker to broker; the sender deletes its copy on ACK (custody moves)."""


def params_digest(m: int, k: int, initial: int, c_max: int) -> int:
    """Nodes with different m, k, I or hash scheme must not merge each other's filters."""
    return zlib.crc32(struct.pack(">HBBBB", m, k, initial, HASH_ID_MMH3_SEEDS, c_max))


def filters_sent(sender: Role, receiver: Role) -> frozenset[FilterKind]:
    """Which FILTERs ``sender`` sends to ``receiver`` (Zhao and Wu 2010, §V-C).

    Both ends compute this from the roles exchanged in IDENT, so each knows
    which filters to wait for before it decides.
    """
    out = set()
    if Role.CONSUMER in sender:
        if Role.BROKER in receiver:
            out.add(FilterKind.GENUINE)
        elif Role.PRODUCER in receiver:
            out.add(FilterKind.INTEREST_BF)
    if Role.BROKER in sender:
        if Role.BROKER in receiver:
            out.add(FilterKind.RELAY)
        elif Role.PRODUCER in receiver:
            out.add(FilterKind.RELAY_BF)
    return frozenset(out)


def _uint(value: Any, name: str, limit: int = U32) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= limit:
        raise ValueError(f"{name} must be an integer in 0..{limit}")
    return value


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number")
    return float(value)


def _list(body: Any, n: int, what: str) -> list[Any] | tuple[Any, ...]:
    if not isinstance(body, list | tuple) or len(body) != n:
        raise ValueError(f"{what} body is a list of {n} fields")
    return body


@dataclass(frozen=True, slots=True)
class Ident:
    session: int
    roles: Role
    degree: int
    digest: int

    def encode(self) -> list[int]:
        return [self.session, int(self.roles), self.degree, self.digest]

    @classmethod
    def decode(cls, body: Any) -> Ident:
        session, roles, degree, digest = _list(body, 4, "IDENT")
        return cls(_uint(session, "session"), Role(_uint(roles, "roles", 7)),
                   _uint(degree, "degree", 0xFFFF), _uint(digest, "digest"))


@dataclass(frozen=True, slots=True)
class Designate:
    session: int
    broker: bool

    def encode(self) -> list[int]:
        return [self.session, int(self.broker)]

    @classmethod
    def decode(cls, body: Any) -> Designate:
        session, role = _list(body, 2, "DESIGNATE")
        return cls(_uint(session, "session"), bool(_uint(role, "new_role", 1)))


@dataclass(frozen=True, slots=True)
class RoleMsg:
    session: int
    broker: bool

    def encode(self) -> list[int]:
        return [self.session, int(self.broker)]

    @classmethod
    def decode(cls, body: Any) -> RoleMsg:
        session, role = _list(body, 2, "ROLE")
        return cls(_uint(session, "session"), bool(_uint(role, "broker", 1)))


@dataclass(frozen=True, slots=True)
class FilterMsg:
    session: int
    encoded: bytes

    def encode(self) -> list[Any]:
        return [self.session, self.encoded]

    @classmethod
    def decode(cls, body: Any) -> FilterMsg:
        session, encoded = _list(body, 2, "FILTER")
        if not isinstance(encoded, bytes | bytearray):
            raise ValueError("FILTER carries the encoded filter as bytes")
        return cls(_uint(session, "session"), bytes(encoded))


@dataclass(frozen=True, slots=True)
class Data:
    mode: Mode
    event: Event
    published_at: float
    remaining_s: float
    told: tuple[int, ...]

    def encode(self) -> list[Any]:
        return [int(self.mode), self.event.to_wire(), self.published_at, self.remaining_s,
                list(self.told)]

    @classmethod
    def decode(cls, body: Any) -> Data:
        mode, wire, published_at, remaining, told = _list(body, 5, "DATA")
        try:
            m = Mode(_uint(mode, "mode", 2))
        except ValueError as exc:
            raise ValueError(str(exc)) from None
        try:
            event = Event.from_wire(wire)
        except (ContentError, TypeError) as exc:
            raise ValueError(f"bad event: {exc}") from None
        if not isinstance(told, list | tuple) or len(told) > MAX_TOLD:
            raise ValueError(f"told is a list of at most {MAX_TOLD} node ids")
        nodes = tuple(_uint(n, "told node", NODE_ID_MAX) for n in told)
        return cls(m, event, _number(published_at, "published_at"),
                   _number(remaining, "remaining_s"), nodes)


def _mid(obj: Any, extra: int) -> tuple[MessageId, list[Any]]:
    if not isinstance(obj, list | tuple) or len(obj) != 3 + extra:
        raise ValueError(f"an offered id is a list of {3 + extra} integers")
    mid = MessageId(_uint(obj[0], "origin", NODE_ID_MAX), _uint(obj[1], "epoch"),
                    _uint(obj[2], "seq"))
    return mid, list(obj[3:])


@dataclass(frozen=True, slots=True)
class Offer:
    """Messages the sender will send if asked, each with the mode it would use."""

    offer: int
    items: tuple[tuple[MessageId, Mode], ...]

    def encode(self) -> list[Any]:
        return [self.offer, [[m.origin, m.epoch, m.seq, int(mode)] for m, mode in self.items]]

    @classmethod
    def decode(cls, body: Any) -> Offer:
        offer, raw = _list(body, 2, "OFFER")
        if not isinstance(raw, list | tuple) or len(raw) > MAX_OFFER:
            raise ValueError(f"OFFER lists at most {MAX_OFFER} ids")
        items = []
        for obj in raw:
            mid, (mode,) = _mid(obj, 1)
            items.append((mid, Mode(_uint(mode, "mode", 2))))
        return cls(_uint(offer, "offer"), tuple(items))


@dataclass(frozen=True, slots=True)
class Request:
    """The ids of one OFFER that the receiver wants (it lacks them)."""

    offer: int
    ids: tuple[MessageId, ...]

    def encode(self) -> list[Any]:
        return [self.offer, [[m.origin, m.epoch, m.seq] for m in self.ids]]

    @classmethod
    def decode(cls, body: Any) -> Request:
        offer, raw = _list(body, 2, "REQUEST")
        if not isinstance(raw, list | tuple) or len(raw) > MAX_OFFER:
            raise ValueError(f"REQUEST lists at most {MAX_OFFER} ids")
        return cls(_uint(offer, "offer"), tuple(_mid(obj, 0)[0] for obj in raw))
