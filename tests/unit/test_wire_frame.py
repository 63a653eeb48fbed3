"""Stateless frame parsing and verification: layout, and every refusal reason."""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from meshsub.core.api import Message, MessageId
from meshsub.wire import FrameError, KeyRing, decode_frame, seal
from meshsub.wire.frame import (
    FLAG_FRAGMENT,
    MIN_FRAME_BYTES,
    VERSION,
    encode_message,
    pack_body,
    packb,
)

KEYS = KeyRing({3: b"k" * 32, 4: b"j" * 32}, 3)
MSG = Message(20, MessageId(0xA1B2C3D4, 2, 77), {"topic": "t", "v": [1.5, None, b"\x00"]},
              hop=2, ttl=14, flags=5, reliable_id=9)
GOOD_LINK = [1, 0x11, 3, 1000]
GOOD_MSG = [20, 0, 0x22, 1, 5, 0, 16, None, "body"]


def reason(data: Any, keys: KeyRing = KEYS, **kwargs: Any) -> str:
    with pytest.raises(FrameError) as err:
        decode_frame(data, keys, **kwargs)
    return err.value.reason


def sealed(value: Any, *, fragment: bool = False) -> bytes:
    return seal(KEYS, packb(value), fragment=fragment)


def test_round_trip_and_layout() -> None:
    data = encode_message(KEYS, 1, 0x11, 3, 1000, MSG)
    assert data[0] == VERSION and data[1] == 0 and data[2] == 3
    assert data[-16:] == KEYS.tag(3, data[:-16])
    assert msgpack.unpackb(data[3:-16])[:4] == GOOD_LINK
    frame = decode_frame(data, KEYS)
    assert frame.message == MSG
    assert (frame.protocol_id, frame.transmitter, frame.transmitter_epoch) == (1, 0x11, 3)
    assert frame.transmitter_seq == 1000 and frame.key_id == 3 and frame.size == len(data)
    assert frame.fragment is None


def test_accepts_bytearray_and_memoryview() -> None:
    data = encode_message(KEYS, 1, 0x11, 3, 1000, MSG)
    assert decode_frame(bytearray(data), KEYS).message == MSG
    assert decode_frame(memoryview(data), KEYS).message == MSG


def test_fragment_frame() -> None:
    frame = decode_frame(sealed([*GOOD_LINK, 7, 1, 3, b"chunk"], fragment=True), KEYS)
    assert frame.message is None and frame.fragment is not None
    assert (frame.fragment.fragment_id, frame.fragment.index, frame.fragment.count) == (7, 1, 3)
    assert frame.fragment.chunk == b"chunk"


@pytest.mark.parametrize("data", [b"", b"\x01", b"\x01\x00\x03" + b"\x90" + b"\x00" * 15])
def test_truncated(data: bytes) -> None:
    assert len(data) < MIN_FRAME_BYTES
    assert reason(data) == "malformed"


def test_not_bytes() -> None:
    assert reason("text") == "malformed"
    assert reason(None) == "malformed"


def test_bad_version() -> None:
    data = seal(KEYS, packb([*GOOD_LINK, *GOOD_MSG]), version=2)
    assert reason(data) == "bad_version"


def test_unknown_flags() -> None:
    data = bytearray(sealed([*GOOD_LINK, *GOOD_MSG]))
    data[1] = 0x80
    assert reason(bytes(data)) == "malformed"


def test_unknown_key() -> None:
    data = seal(KEYS, packb([*GOOD_LINK, *GOOD_MSG]), key_id=4)
    assert reason(data, KeyRing.single(b"k" * 32, 3)) == "unknown_key"


def test_other_accepted_key_verifies() -> None:
    assert decode_frame(seal(KEYS, packb([*GOOD_LINK, *GOOD_MSG]), key_id=4), KEYS).key_id == 4


def test_bad_tag_for_every_flipped_bit_position() -> None:
    data = encode_message(KEYS, 1, 0x11, 3, 1000, MSG)
    for i in range(3, len(data)):  # header prefix bytes have their own reasons
        mutated = bytearray(data)
        mutated[i] ^= 0x40
        assert reason(bytes(mutated)) == "bad_tag", i


def test_wrong_key_is_bad_tag() -> None:
    other = KeyRing.single(b"x" * 32, 3)
    assert reason(encode_message(other, 1, 0x11, 3, 1000, MSG)) == "bad_tag"


def test_oversized_before_anything_else() -> None:
    assert reason(b"\x09" * 5000, max_size=4000) == "oversized"


@pytest.mark.parametrize(
    "value",
    [
        b"\xc1",  # never-used msgpack byte
        b"\x93\x01",  # array of 3 with one element: truncated inside
        b"\x01\x02",  # trailing data
        b"\xdd\xff\xff\xff\xff",  # array32 claiming 4 G elements
        b"\xdb\x7f\xff\xff\xff",  # str32 claiming 2 GiB
        b"\xc6\xff\xff\xff\xff",  # bin32 claiming 4 GiB
        b"\xdf\xff\xff\xff\xff",  # map32 claiming 4 G pairs
        b"\xc9\xff\xff\xff\xff\x05",  # ext32 claiming 4 GiB
        b"\x91" * 5000 + b"\x00",  # nesting deeper than the parser's stack
        b"\xa2\xff\xfe",  # invalid UTF-8 in a str
        b"\xd6\xff\x00\x00\x00\x00"[:5],  # truncated fixext
    ],
)
def test_bad_msgpack_behind_a_valid_tag(value: bytes) -> None:
    assert reason(seal(KEYS, value)) == "malformed"


@pytest.mark.parametrize(
    "value",
    [
        5,
        "string",
        {"a": 1},
        [],
        [*GOOD_LINK, *GOOD_MSG, "extra"],
        [*GOOD_LINK, *GOOD_MSG[:-1]],
        GOOD_MSG,
    ],
)
def test_wrong_shape(value: Any) -> None:
    assert reason(sealed(value)) == "malformed"


BAD_INTS = [-1, True, 1.0, "1", None, b"1", [1], 2**64 - 1]


@pytest.mark.parametrize("position", range(12))
@pytest.mark.parametrize("bad", BAD_INTS)
def test_wrong_header_field_types(position: int, bad: Any) -> None:
    fields: list[Any] = [*GOOD_LINK, *GOOD_MSG]
    if position == 11 and bad is None:
        return  # reliable_id may be nil
    if bad == 2**64 - 1 and position in (2, 3, 7, 8):
        return  # epochs and sequences are uint64
    fields[position] = bad
    assert reason(sealed(fields)) == "malformed"


def test_hop_and_ttl_beyond_one_byte_round_trip() -> None:
    """A walk round a void can take more than 255 hops (docs/wire.md, "Format changes"):
    hop and TTL are 16-bit, and a frame with both at most 255 is unchanged."""
    long = Message(20, MessageId(1, 1, 1), None, hop=400, ttl=624)
    assert decode_frame(encode_message(KEYS, 1, 0x11, 3, 1000, long), KEYS).message == long
    short = encode_message(KEYS, 1, 0x11, 3, 1000, MSG)
    assert msgpack.unpackb(short[3:-16])[9:11] == [MSG.hop, MSG.ttl]
    for position in (9, 10):  # past 16 bits: malformed, never a wrapped value
        fields: list[Any] = [*GOOD_LINK, *GOOD_MSG]
        fields[position] = 2**16
        assert reason(sealed(fields)) == "malformed"


def test_map_with_unhashable_key_in_body() -> None:
    # a map whose key is an array: valid msgpack, impossible as a Python dict
    body = b"\x81\x91\x01\x02"
    data = seal(KEYS, b"\x9d" + packb([*GOOD_LINK, *GOOD_MSG[:-1]])[1:] + body)
    assert reason(data) == "malformed"


def test_body_may_be_any_msgpack_value() -> None:
    for body in [None, 0, -5, 2**63, 1.25, "é", b"\xff", [], {}, {1: {"x": [None]}},
                 msgpack.ExtType(5, b"ab")]:
        frame = decode_frame(sealed([*GOOD_LINK, *GOOD_MSG[:-1], body]), KEYS)
        assert frame.message is not None and frame.message.body == body


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ([*GOOD_LINK, 7, 3, 3, b"c"], "fragment_invalid"),  # index == count
        ([*GOOD_LINK, 7, 0, 1, b"c"], "fragment_invalid"),  # a single fragment
        ([*GOOD_LINK, 7, 0, 0, b"c"], "fragment_invalid"),
        ([*GOOD_LINK, 7, 0, 3, b""], "fragment_invalid"),  # empty chunk
        ([*GOOD_LINK, 7, 0, 3, "c"], "malformed"),  # str, not bin
        ([*GOOD_LINK, 7, 0, 70000, b"c"], "malformed"),  # count above uint16
        ([*GOOD_LINK, -7, 0, 3, b"c"], "malformed"),
        ([*GOOD_LINK, 7, 0, 3], "malformed"),
        ([*GOOD_LINK, *GOOD_MSG], "malformed"),  # whole-message fields under the flag
    ],
)
def test_bad_fragments(fields: list[Any], expected: str) -> None:
    assert reason(sealed(fields, fragment=True)) == expected


def test_fragment_fields_without_the_flag() -> None:
    assert reason(sealed([*GOOD_LINK, 7, 0, 3, b"c"])) == "malformed"


def test_pack_body_refuses_the_unpackable() -> None:
    with pytest.raises(FrameError) as err:
        pack_body(object())
    assert err.value.reason == "unencodable"
    with pytest.raises(FrameError):
        pack_body(2**70)
    deep: Any = []
    for _ in range(3000):
        deep = [deep]
    with pytest.raises(FrameError):
        pack_body(deep)


@pytest.mark.parametrize(
    "message",
    [
        Message(2**16, MessageId(1, 1, 1), None),
        Message(-1, MessageId(1, 1, 1), None),
        Message(20, MessageId(2**32, 1, 1), None),
        Message(20, MessageId(1, -1, 1), None),
        Message(20, MessageId(1, 1, 2**64), None),
        Message(20, MessageId(1, 1, 1), None, hop=2**16),
        Message(20, MessageId(1, 1, 1), None, ttl=2**16),
        Message(20, MessageId(1, 1, 1), None, ttl=-1),
        Message(20, MessageId(1, 1, 1), None, flags=True),
        Message(20, MessageId(1, 1, 1), None, reliable_id=2**32),
    ],
)
def test_out_of_range_header_fields_are_unencodable(message: Message) -> None:
    with pytest.raises(FrameError) as err:
        encode_message(KEYS, 1, 0x11, 3, 1000, message)
    assert err.value.reason == "unencodable"


def test_flag_constant() -> None:
    assert sealed([*GOOD_LINK, 7, 0, 3, b"c"], fragment=True)[1] == FLAG_FRAGMENT


def test_protocol_hop_budgets_stop_at_the_wire_hop_field() -> None:
    """core and protocols do not import wire: their copies of the limit must agree."""
    from meshsub.core.region import MAX_HOPS_LIMIT
    from meshsub.protocols.hesper.messages import HOPS_MAX
    from meshsub.wire.frame import HOP_MAX, TTL_MAX

    assert MAX_HOPS_LIMIT == HOP_MAX == TTL_MAX == HOPS_MAX == 2**16 - 1
