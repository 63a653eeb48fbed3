"""Properties of the wire layer: round trips, and "only FrameError" for any input."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshsub.core.api import Message, MessageId
from meshsub.wire import Decoded, FrameCodec, FrameError, KeyRing, ReplayWindow, seal
from meshsub.wire.errors import DECODE_REASONS
from meshsub.wire.frame import HOP_MAX, TTL_MAX, _whole_frame, packb, whole_message

KEYS = KeyRing.single(b"p" * 32, 1)
SETTINGS = settings(max_examples=200, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False),
    st.text(max_size=40),
    st.binary(max_size=300),
)
bodies = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=8),
        st.dictionaries(st.one_of(st.text(max_size=10), st.integers(-1000, 1000)), children,
                        max_size=8),
    ),
    max_leaves=60,
)
u32 = st.integers(0, 2**32 - 1)
u64 = st.integers(0, 2**64 - 1)
messages = st.builds(
    Message,
    type=st.integers(0, 2**16 - 1),
    id=st.builds(MessageId, u32, u64, u64),
    body=bodies,
    hop=st.integers(0, 2**16 - 1),
    ttl=st.integers(0, 2**16 - 1),
    flags=u32,
    reliable_id=st.none() | u32,
)


@SETTINGS
@given(message=messages, protocol_id=st.integers(0, 255),
       payload_size=st.sampled_from([256, 400, 1200]), node=u32, epoch=u64)
def test_decode_encode_round_trip(message: Message, protocol_id: int, payload_size: int,
                                  node: int, epoch: int) -> None:
    tx = FrameCodec(node, epoch, KEYS, payload_size=payload_size)
    rx = FrameCodec(node ^ 1, 0, KEYS, payload_size=payload_size)
    frames = tx.encode(protocol_id, message)
    assert all(len(f) <= payload_size for f in frames)
    results = [rx.decode(f, 0.0) for f in frames]
    assert results[:-1] == [None] * (len(frames) - 1)
    assert results[-1] == Decoded(node, epoch, protocol_id, message,
                                  sum(len(f) for f in frames), len(frames))


def only_frame_errors(codec: FrameCodec, data: bytes) -> None:
    """Decode must raise FrameError with a documented reason, or return a valid result."""
    try:
        result = codec.decode(data, 0.0)
    except FrameError as err:
        assert err.reason in DECODE_REASONS
        return
    if result is not None:
        assert isinstance(result.message, Message)
        assert 0 <= result.message.ttl <= TTL_MAX and 0 <= result.message.hop <= HOP_MAX


@SETTINGS
@given(data=st.binary(max_size=2000))
def test_arbitrary_bytes(data: bytes) -> None:
    only_frame_errors(FrameCodec(1, 1, KEYS), data)


@SETTINGS
@given(data=st.binary(max_size=500), fragment=st.booleans())
def test_arbitrary_bytes_behind_a_valid_tag(data: bytes, fragment: bool) -> None:
    only_frame_errors(FrameCodec(1, 1, KEYS), seal(KEYS, data, fragment=fragment))


msgpack_values = st.recursive(
    scalars,
    lambda children: st.one_of(st.lists(children, max_size=16),
                               st.dictionaries(scalars.filter(lambda v: not isinstance(v, float)),
                                               children, max_size=6)),
    max_leaves=40,
)


@SETTINGS
@given(value=msgpack_values, fragment=st.booleans())
def test_random_msgpack_structures_behind_a_valid_tag(value: Any, fragment: bool) -> None:
    only_frame_errors(FrameCodec(1, 1, KEYS), seal(KEYS, packb(value), fragment=fragment))


@SETTINGS
@given(
    fields=st.lists(st.one_of(scalars, st.lists(scalars, max_size=3)), min_size=8, max_size=13),
    fragment=st.booleans(),
)
def test_random_header_arrays_behind_a_valid_tag(fields: list[Any], fragment: bool) -> None:
    only_frame_errors(FrameCodec(1, 1, KEYS), seal(KEYS, packb(fields), fragment=fragment))


@settings(SETTINGS, max_examples=100)
@given(
    message=messages,
    cuts=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
    mode=st.sampled_from(["flip", "truncate", "splice", "reseal"]),
)
def test_mutated_valid_frames(message: Message, cuts: list[tuple[int, int]], mode: str) -> None:
    frames = FrameCodec(2, 1, KEYS, payload_size=400).encode(7, message)
    rx = FrameCodec(1, 1, KEYS, payload_size=400)
    for frame in frames:
        data = bytearray(frame)
        for position, value in cuts:
            i = position % len(data)
            if mode == "truncate":
                data = data[:i]
                if not data:
                    break
            elif mode == "splice":
                data[i:i] = bytes([value]) * (value % 7)
            else:
                data[i] ^= value or 1
        if mode == "reseal":  # re-authenticate the mutated body so the parser sees it
            body = bytes(data[3:-16]) if len(data) > 19 else bytes(data)
            data = bytearray(seal(KEYS, body, fragment=bool(frame[1])))
        only_frame_errors(rx, bytes(data))


@SETTINGS
@given(ops=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3), st.integers(0, 300)),
                    max_size=200))
def test_replay_window_matches_a_reference_model(ops: list[tuple[int, int, int]]) -> None:
    window = ReplayWindow(64, max_transmitters=8)
    newest: dict[int, tuple[int, int]] = {}  # node -> (epoch, top)
    seen: set[tuple[int, int, int]] = set()
    for node, epoch, seq in ops:
        expected = True
        if node in newest:
            top_epoch, top = newest[node]
            if epoch < top_epoch:
                expected = False
            elif epoch == top_epoch:
                expected = (node, epoch, seq) not in seen and seq > top - 64
        accepted = window.check(node, epoch, seq) is None
        assert accepted == expected
        if accepted:
            window.accept(node, epoch, seq)
            seen.add((node, epoch, seq))
            top_epoch, top = newest.get(node, (epoch, seq))
            newest[node] = (epoch, seq) if epoch > top_epoch else (epoch, max(top, seq))


field_values = st.one_of(st.integers(-5, 2**64 + 5), st.none(), st.booleans(),
                         st.text(max_size=3), st.floats(allow_nan=False))


@SETTINGS
@given(message=messages, protocol_id=st.integers(0, 255), node=u32, epoch=u64,
       max_message=st.sampled_from([64, 200, 65536]))
def test_fast_encode_is_the_general_encode(message: Message, protocol_id: int, node: int,
                                           epoch: int, max_message: int) -> None:
    """The one-``packb`` path makes the same bytes (or the same error) as the general one."""
    fast = FrameCodec(node, epoch, KEYS, max_message=max_message)
    general = FrameCodec(node, epoch, KEYS, max_message=max_message)
    try:
        expected = general._encode_general(protocol_id, message)
    except FrameError as err:
        try:
            fast.encode(protocol_id, message)
        except FrameError as again:
            assert again.reason == err.reason
        else:
            raise AssertionError("the fast path accepted what the general one refused")
        return
    assert fast.encode(protocol_id, message) == expected
    assert fast.counters == general.counters


@SETTINGS
@given(fields=st.lists(field_values, min_size=13, max_size=13))
def test_fast_whole_frame_parse_is_the_field_by_field_parse(fields: list[Any]) -> None:
    """``whole_message`` accepts exactly what ``_whole_frame`` accepts, with the same result."""
    try:
        frame = _whole_frame(fields, 1, 100)
    except FrameError as err:
        try:
            whole_message(fields)
        except FrameError as again:
            assert again.reason == err.reason
        else:
            raise AssertionError("the fast parse accepted what the checks refuse") from None
        return
    assert whole_message(fields) == (frame.protocol_id, frame.transmitter,
                                     frame.transmitter_epoch, frame.transmitter_seq,
                                     frame.message)
