"""Checkers for decoding protocol message bodies (msgpack lists) from untrusted peers.

Every decoder of a protocol body takes whatever msgpack produced and either
returns typed values or raises ``BodyError`` (a ``ValueError``) with a
one-line reason, which the protocol turns into a counted ``malformed`` drop.
These helpers make that one call per field, so decoders stay short and no
malformed input reaches the protocol as an exception of another type.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from meshsub.core.api import NODE_ID_MAX, MessageId
from meshsub.core.content import ContentError, Event, Subscription
from meshsub.core.grid import Cell

U32 = 0xFFFF_FFFF
U63 = (1 << 63) - 1
MAX_CELL = 1 << 20
"""Largest cell coordinate accepted (a million cells on a side is far beyond any grid)."""


T = TypeVar("T")


class BodyError(ValueError):
    """A message body that does not have the expected shape or values."""


class SharedDecode:
    """A decoder's last result, reused while the very same body object comes again.

    Why: the simulator hands one ``Message`` object to every receiver of a frame
    (``meshsim.des.engine``: a broadcast or a ``SendToMany`` reaches each receiver in
    turn with the sender's body), and each receiver decoded and validated that body
    again: a 500-node TG or ST run spent a tenth of its time re-decoding heartbeats
    and publications its neighbours had just decoded.

    Exact because a decoder is a pure function of the body's contents and returns
    an immutable value (frozen dataclasses of tuples, ``Event``), and a body is
    never changed once sent (``Message`` is a value; senders build bodies afresh with
    ``encode()``). The memo keeps a reference to the body, so no other object can
    take its identity while it is remembered (decoders compare equal, as bound
    methods do, when they are the same function). A frame decoded from bytes (the
    daemon) is a new object each time and is decoded as before; a body that fails
    to decode is not remembered, so every receiver raises and drops it as before.
    """

    __slots__ = ("_body", "_decode", "_value")

    def __init__(self) -> None:
        self._body: object = None
        self._decode: object = None
        self._value: object = None

    def __call__(self, decode: Callable[[Any], T], body: Any) -> T:
        if body is self._body and body is not None and decode == self._decode:
            return self._value  # type: ignore[return-value]
        value = decode(body)
        self._body, self._decode, self._value = body, decode, value
        return value


shared_decode = SharedDecode()
"""The process's one memo: receivers of one frame are handled one after another."""


def fields(body: Any, n: int, what: str) -> list[Any] | tuple[Any, ...]:
    """``body`` as a list of exactly ``n`` items."""
    if not isinstance(body, list | tuple) or len(body) != n:
        raise BodyError(f"{what}: expected a list of {n} fields")
    return body


def items(value: Any, what: str, max_items: int) -> list[Any] | tuple[Any, ...]:
    """A list of at most ``max_items`` items."""
    if not isinstance(value, list | tuple) or len(value) > max_items:
        raise BodyError(f"{what}: expected a list of at most {max_items} items")
    return value


def integer(value: Any, what: str, lo: int = 0, hi: int = U63) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise BodyError(f"{what}: expected an integer in {lo}..{hi}")
    return value


def number(value: Any, what: str, lo: float = -math.inf, hi: float = math.inf) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) \
            or not math.isfinite(value) or not lo <= value <= hi:
        raise BodyError(f"{what}: expected a finite number in [{lo}, {hi}]")
    return float(value)


def text(value: Any, what: str, max_len: int = 256) -> str:
    if not isinstance(value, str) or not value or len(value) > max_len:
        raise BodyError(f"{what}: expected a non-empty string of at most {max_len} characters")
    return value


def node(value: Any, what: str) -> int:
    return integer(value, what, 0, NODE_ID_MAX)


def cell(value: Any, what: str) -> Cell:
    """A non-negative ``[gx, gy]`` pair."""
    gx, gy = fields(value, 2, what)
    return Cell(integer(gx, what, 0, MAX_CELL), integer(gy, what, 0, MAX_CELL))


def message_id(value: Any, what: str) -> MessageId:
    origin, epoch, seq = fields(value, 3, what)
    return MessageId(node(origin, what), integer(epoch, what, 0, (1 << 64) - 1),
                     integer(seq, what, 0, (1 << 64) - 1))


def message_id_wire(mid: MessageId) -> list[int]:
    return [mid.origin, mid.epoch, mid.seq]


def event(value: Any, what: str) -> Event:
    try:
        return Event.from_wire(value)
    except (ContentError, TypeError) as exc:
        raise BodyError(f"{what}: {exc}") from None


def subscription(value: Any, what: str) -> Subscription:
    try:
        return Subscription.from_wire(value)
    except (ContentError, TypeError) as exc:
        raise BodyError(f"{what}: {exc}") from None
