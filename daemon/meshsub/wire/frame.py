"""The frame format: build authenticated frames, and parse-and-verify one frame.

Layout (docs/wire.md has it byte by byte)::

    version:u8  frame_flags:u8  key_id:u8  msgpack-array  tag:16

The three prefix bytes are fixed so that a receiver finds the key and checks
the tag *before* any msgpack parsing: an unauthenticated sender can reach
nothing but a length check, three byte compares and one HMAC. The array is

    whole frame  (13): [protocol_id, transmitter, tx_epoch, tx_seq,
                        type, flags, origin, origin_epoch, seq, hop, ttl, reliable_id, body]
    fragment     (8):  [protocol_id, transmitter, tx_epoch, tx_seq,
                        fragment_id, index, count, chunk]

and the chunks of a segmented message, joined, are the *message section*
``[type, flags, origin, origin_epoch, seq, hop, ttl, reliable_id, body]``.
msgpack integers are variable length, so small values cost one byte.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from hmac import compare_digest
from typing import Any, Final

import msgpack

from meshsub.core.api import NODE_ID_MAX, Message, MessageId, NodeId
from meshsub.wire.errors import FrameError
from meshsub.wire.keys import TAG_BYTES, KeyRing

VERSION: Final = 1
FLAG_FRAGMENT: Final = 0x01
KNOWN_FLAGS: Final = FLAG_FRAGMENT
PREFIX_BYTES: Final = 3
MIN_FRAME_BYTES: Final = PREFIX_BYTES + 1 + TAG_BYTES
"""Prefix, the smallest msgpack value, tag: anything shorter is truncated."""

WHOLE_FIELDS: Final = 13
FRAGMENT_FIELDS: Final = 8
SECTION_FIELDS: Final = 9

U8: Final = 0xFF
U16: Final = 0xFFFF
U32: Final = 0xFFFF_FFFF
U64: Final = 0xFFFF_FFFF_FFFF_FFFF

PROTOCOL_ID_MAX: Final = U8
TYPE_MAX: Final = U16
FLAGS_MAX: Final = U32
EPOCH_MAX: Final = U64
SEQ_MAX: Final = U64
HOP_MAX: Final = U16
TTL_MAX: Final = U16
"""Hop count and TTL are msgpack uints like every header field: up to 127 they take one
byte, up to 255 two, up to 65535 three. They were capped at 255 until a walk round a
void on a 1 km field took about 400 hops (docs/wire.md, "Format changes"); a frame whose
hop and TTL are at most 255 is byte for byte what it was."""
RELIABLE_ID_MAX: Final = U32
FRAGMENT_ID_MAX: Final = U32
FRAGMENT_COUNT_MAX: Final = U16


@dataclass(frozen=True, slots=True)
class Fragment:
    """One piece of a segmented message section."""

    fragment_id: int
    index: int
    count: int
    chunk: bytes


@dataclass(frozen=True, slots=True)
class Frame:
    """A verified frame: the link header plus either a message or a fragment."""

    key_id: int
    protocol_id: int
    transmitter: NodeId
    transmitter_epoch: int
    transmitter_seq: int
    message: Message | None
    fragment: Fragment | None
    size: int


# ---------------------------------------------------------------------- encoding


def packb(value: Any) -> bytes:
    """``msgpack.packb`` with bin types, typed (msgpack ships no stubs)."""
    packed: bytes = msgpack.packb(value, use_bin_type=True)
    return packed


def pack_body(body: Any) -> bytes:
    """msgpack of a message body; ``FrameError('unencodable')`` if it cannot be."""
    try:
        return packb(body)
    except Exception as exc:  # TypeError, OverflowError, ValueError (recursion), ...
        raise FrameError("unencodable", f"body: {type(exc).__name__}: {exc}") from None


def message_fields(message: Message) -> list[int | None]:
    """The message header fields in wire order, range-checked."""
    mid = message.id
    return [
        _out("type", message.type, TYPE_MAX),
        _out("flags", message.flags, FLAGS_MAX),
        _out("origin", mid.origin, NODE_ID_MAX),
        _out("origin epoch", mid.epoch, EPOCH_MAX),
        _out("seq", mid.seq, SEQ_MAX),
        _out("hop", message.hop, HOP_MAX),
        _out("ttl", message.ttl, TTL_MAX),
        None
        if message.reliable_id is None
        else _out("reliable_id", message.reliable_id, RELIABLE_ID_MAX),
    ]


def link_fields(protocol_id: int, transmitter: NodeId, epoch: int, seq: int) -> list[int]:
    """The per-frame (per-hop) header fields in wire order, range-checked."""
    return [
        _out("protocol_id", protocol_id, PROTOCOL_ID_MAX),
        _out("transmitter", transmitter, NODE_ID_MAX),
        _out("transmitter epoch", epoch, EPOCH_MAX),
        _out("transmitter seq", seq, SEQ_MAX),
    ]


def fragment_fields(fragment_id: int, index: int, count: int) -> list[int]:
    """The fragment header fields in wire order, range-checked."""
    return [
        _out("fragment id", fragment_id, FRAGMENT_ID_MAX),
        _out("fragment index", index, FRAGMENT_COUNT_MAX),
        _out("fragment count", count, FRAGMENT_COUNT_MAX),
    ]


def pack_elements(values: list[Any]) -> bytes:
    """The msgpack encodings of ``values`` concatenated: an array without its header.

    Lets the codec pack a body and the header fields once and assemble the
    size check, the whole frame and the message section from the same bytes.
    """
    if len(values) > 15:
        raise ValueError("pack_elements packs at most 15 values")
    return packb(values)[1:]


def array(size: int, *elements: bytes) -> bytes:
    """A msgpack fixarray of ``size`` already-packed elements."""
    return bytes((0x90 | size,)) + b"".join(elements)


def seal(
    keys: KeyRing,
    payload: bytes,
    *,
    fragment: bool = False,
    key_id: int | None = None,
    version: int = VERSION,
) -> bytes:
    """Prefix and authenticate a packed array (also used by tests and the fuzzer)."""
    kid = keys.current if key_id is None else key_id
    head = bytes((version, FLAG_FRAGMENT if fragment else 0, kid)) + payload
    return head + keys.tag(kid, head)


def encode_message(
    keys: KeyRing, protocol_id: int, transmitter: NodeId, epoch: int, seq: int, message: Message
) -> bytes:
    """One whole frame for ``message`` (no size limit: the codec enforces those)."""
    link = pack_elements(link_fields(protocol_id, transmitter, epoch, seq))
    fields = pack_elements(message_fields(message))
    return seal(keys, array(WHOLE_FIELDS, link, fields, pack_body(message.body)))


def _out(name: str, value: Any, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= maximum:
        raise FrameError("unencodable", f"{name} {value!r} is not an integer in 0..{maximum}")
    return value


# ---------------------------------------------------------------------- decoding


def decode_frame(
    data: bytes | bytearray | memoryview, keys: KeyRing, *, max_size: int | None = None
) -> Frame:
    """Parse and verify one frame; raises only ``FrameError``.

    Stateless: replay, own-frame and reassembly checks belong to ``FrameCodec``.
    """
    key_id, flags, fields, size = verify_and_unpack(data, keys, max_size)
    if flags & FLAG_FRAGMENT:
        return fragment_frame(fields, key_id, size)
    return _whole_frame(fields, key_id, size)


def verify_and_unpack(
    data: bytes | bytearray | memoryview, keys: KeyRing, max_size: int | None
) -> tuple[int, int, list[Any], int]:
    """Check the prefix, verify the tag, then unpack: (key id, frame flags, fields, size).

    Nothing of the payload is parsed before the tag verified. Raises only
    ``FrameError``.
    """
    if type(data) is not bytes:
        if isinstance(data, memoryview):
            data = data.tobytes()
        elif not isinstance(data, bytes | bytearray):
            raise FrameError("malformed", f"frame is {type(data).__name__}, not bytes")
    size = len(data)
    if max_size is not None and size > max_size:
        raise FrameError("oversized", f"frame of {size} bytes, limit {max_size}")
    if size < MIN_FRAME_BYTES:
        raise FrameError("malformed", f"truncated frame of {size} bytes")
    version, flags, key_id = data[0], data[1], data[2]
    if version != VERSION:
        raise FrameError("bad_version", f"version {version}, expected {VERSION}")
    if flags & ~KNOWN_FLAGS:
        raise FrameError("malformed", f"unknown frame flags 0x{flags:02x}")
    if not keys.accepts(key_id):
        raise FrameError("unknown_key", f"key id {key_id}")
    view = memoryview(data)
    end = size - TAG_BYTES
    if not compare_digest(keys.tag(key_id, view[:end]), view[end:]):
        raise FrameError("bad_tag", f"key id {key_id}")
    return key_id, flags, unpack_array(view[PREFIX_BYTES:end]), size


def unpack_array(payload: memoryview | bytes) -> list[Any]:
    """Unpack one msgpack array with every length bounded by the input's size.

    ``unpackb`` bounds every string, binary, array, map and extension length
    by the input's size by default (msgpack >= 1.0), which is the bound wanted.
    """
    try:
        value = msgpack.unpackb(payload, strict_map_key=False)
    except Exception as exc:  # ExtraData, FormatError, StackError, UnicodeDecodeError, ...
        raise FrameError("malformed", f"msgpack: {type(exc).__name__}") from None
    if not isinstance(value, list):
        raise FrameError("malformed", f"expected an array, got {type(value).__name__}")
    return value


def parse_section(fields: list[Any]) -> Message:
    """A ``Message`` from the 9 fields of a message section; ``malformed`` otherwise."""
    if len(fields) != SECTION_FIELDS:
        raise FrameError("malformed", f"message section of {len(fields)} fields")
    return _message(fields)


def _whole_frame(fields: list[Any], key_id: int, size: int) -> Frame:
    if len(fields) != WHOLE_FIELDS:
        raise FrameError("malformed", f"frame of {len(fields)} fields, expected {WHOLE_FIELDS}")
    protocol_id, transmitter, epoch, seq = _link(fields)
    return Frame(key_id, protocol_id, transmitter, epoch, seq, _message(fields[4:]), None, size)


def fragment_frame(fields: list[Any], key_id: int, size: int) -> Frame:
    if len(fields) != FRAGMENT_FIELDS:
        raise FrameError(
            "malformed", f"fragment of {len(fields)} fields, expected {FRAGMENT_FIELDS}"
        )
    protocol_id, transmitter, epoch, seq = _link(fields)
    fragment_id = _in("fragment id", fields[4], FRAGMENT_ID_MAX)
    index = _in("fragment index", fields[5], FRAGMENT_COUNT_MAX)
    count = _in("fragment count", fields[6], FRAGMENT_COUNT_MAX)
    chunk = fields[7]
    if not isinstance(chunk, bytes):
        raise FrameError("malformed", f"fragment chunk is {type(chunk).__name__}, not bin")
    if count < 2 or index >= count or not chunk:
        raise FrameError("fragment_invalid", f"index {index} of {count}, {len(chunk)} bytes")
    fragment = Fragment(fragment_id, index, count, chunk)
    return Frame(key_id, protocol_id, transmitter, epoch, seq, None, fragment, size)


def _link(fields: list[Any]) -> tuple[int, int, int, int]:
    return (
        _in("protocol_id", fields[0], PROTOCOL_ID_MAX),
        _in("transmitter", fields[1], NODE_ID_MAX),
        _in("transmitter epoch", fields[2], EPOCH_MAX),
        _in("transmitter seq", fields[3], SEQ_MAX),
    )


def _slot_setters(cls: type, names: tuple[str, ...]) -> list[Callable[[Any, Any], None]] | None:
    """The slot setters of a frozen slotted dataclass whose fields are exactly ``names``.

    A frozen dataclass's ``__init__`` goes through ``object.__setattr__`` per
    field, which made building the ``Message`` and ``MessageId`` of a received
    frame a third of its decoding; setting the slots directly is three times
    faster. ``None`` (the callers then use the class itself) unless the
    fields are exactly ``names`` in order and there is no ``__post_init__``;
    the objects compare equal to, and hash like, the class's own (a property
    test checks ``whole_message`` against the field-by-field parse).
    """
    if [f.name for f in dataclasses.fields(cls)] != list(names) \
            or hasattr(cls, "__post_init__") or "__slots__" not in vars(cls):
        return None
    return [vars(cls)[name].__set__ for name in names]


def _message_builder() -> Callable[[int, int, int, int, Any, int, int, int, int | None],
                                   Message]:
    """A function that builds a received ``Message`` and its ``MessageId`` in one call."""
    id_setters = _slot_setters(MessageId, ("origin", "epoch", "seq"))
    setters = _slot_setters(Message, ("type", "id", "body", "hop", "ttl", "flags",
                                      "reliable_id"))
    if id_setters is None or setters is None:
        def construct(mtype: int, origin: int, epoch: int, seq: int, body: Any, hop: int,
                      ttl: int, flags: int, rid: int | None) -> Message:
            return Message(mtype, MessageId(origin, epoch, seq), body, hop, ttl, flags, rid)
        return construct
    set_origin, set_epoch, set_seq = id_setters
    set_type, set_id, set_body, set_hop, set_ttl, set_flags, set_rid = setters
    new = object.__new__

    def build(mtype: int, origin: int, epoch: int, seq: int, body: Any, hop: int, ttl: int,
              flags: int, rid: int | None) -> Message:
        mid = new(MessageId)
        set_origin(mid, origin)
        set_epoch(mid, epoch)
        set_seq(mid, seq)
        message = new(Message)
        set_type(message, mtype)
        set_id(message, mid)
        set_body(message, body)
        set_hop(message, hop)
        set_ttl(message, ttl)
        set_flags(message, flags)
        set_rid(message, rid)
        return message
    return build


_build_message = _message_builder()


def whole_message(fields: list[Any]) -> tuple[int, int, int, int, Message]:
    """(protocol id, transmitter, its epoch, its seq, message) of a whole frame's 13 fields.

    The common case (every header field a plain int in range) is checked in
    one expression; anything else goes through the field-by-field checks,
    which name the bad field.
    """
    if len(fields) == WHOLE_FIELDS:
        pid, tx, tx_epoch, tx_seq, mtype, flags, origin, epoch, seq, hop, ttl, rid, body \
            = fields
        if (type(pid) is int and type(tx) is int and type(tx_epoch) is int
                and type(tx_seq) is int and type(mtype) is int and type(flags) is int
                and type(origin) is int and type(epoch) is int and type(seq) is int
                and type(hop) is int and type(ttl) is int
                and (rid is None or (type(rid) is int and 0 <= rid <= RELIABLE_ID_MAX))
                and 0 <= pid <= PROTOCOL_ID_MAX and 0 <= tx <= NODE_ID_MAX
                and 0 <= tx_epoch <= EPOCH_MAX and 0 <= tx_seq <= SEQ_MAX
                and 0 <= mtype <= TYPE_MAX and 0 <= flags <= FLAGS_MAX
                and 0 <= origin <= NODE_ID_MAX and 0 <= epoch <= EPOCH_MAX
                and 0 <= seq <= SEQ_MAX and 0 <= hop <= HOP_MAX and 0 <= ttl <= TTL_MAX):
            message = _build_message(mtype, origin, epoch, seq, body, hop, ttl, flags, rid)
            return pid, tx, tx_epoch, tx_seq, message
    frame = _whole_frame(fields, 0, 0)
    assert frame.message is not None  # _whole_frame raises rather than return less
    return (frame.protocol_id, frame.transmitter, frame.transmitter_epoch,
            frame.transmitter_seq, frame.message)


def _message(fields: list[Any]) -> Message:
    """Fields ``type .. body`` (9 of them) into a ``Message``."""
    reliable = fields[7]
    return Message(
        type=_in("type", fields[0], TYPE_MAX),
        id=MessageId(
            _in("origin", fields[2], NODE_ID_MAX),
            _in("origin epoch", fields[3], EPOCH_MAX),
            _in("seq", fields[4], SEQ_MAX),
        ),
        body=fields[8],
        hop=_in("hop", fields[5], HOP_MAX),
        ttl=_in("ttl", fields[6], TTL_MAX),
        flags=_in("flags", fields[1], FLAGS_MAX),
        reliable_id=None if reliable is None else _in("reliable_id", reliable, RELIABLE_ID_MAX),
    )


def _in(name: str, value: Any, maximum: int) -> int:
    if type(value) is not int or not 0 <= value <= maximum:
        raise FrameError("malformed", f"{name} is not an integer in 0..{maximum}")
    return value
