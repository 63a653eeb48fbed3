"""FrameCodec: round trips, sizes, segmentation and bounded reassembly."""

from __future__ import annotations

import random
from typing import Any

import pytest

from meshsub.core.api import Message, MessageId
from meshsub.wire import Decoded, FrameCodec, FrameError, KeyRing, seal
from meshsub.wire.frame import packb
from meshsub.wire.reassembly import CHUNK_CHARGE

KEYS = KeyRing.single(b"c" * 32, 1)
TX, RX = 0xA0000001, 0xB0000002


def pair(**kwargs: Any) -> tuple[FrameCodec, FrameCodec]:
    return FrameCodec(TX, 3, KEYS, **kwargs), FrameCodec(RX, 4, KEYS, **kwargs)


def msg(body: Any, seq: int = 1, **kwargs: Any) -> Message:
    return Message(33, MessageId(0xC0000003, 9, seq), body, **kwargs)


def reason_of(codec: FrameCodec, data: Any, now: float = 0.0) -> str:
    with pytest.raises(FrameError) as err:
        codec.decode(data, now)
    return err.value.reason


def deliver(rx: FrameCodec, frames: list[bytes], now: float = 0.0) -> Decoded:
    results = [rx.decode(f, now) for f in frames]
    assert all(r is None for r in results[:-1])
    done = results[-1]
    assert done is not None
    return done


# ------------------------------------------------------------------- round trip


def test_round_trip_whole_frame() -> None:
    tx, rx = pair()
    m = msg({"topic": "a/b", "attrs": {"t": 21.5, "ok": True}}, hop=3, ttl=9, reliable_id=44,
            flags=0x81)
    frames = tx.encode(4, m)
    assert len(frames) == 1
    got = rx.decode(frames[0], 1.0)
    assert got == Decoded(TX, 3, 4, m, len(frames[0]), 1)


def test_counters() -> None:
    tx, rx = pair()
    frames = tx.encode(1, msg("x"))
    rx.decode(frames[0], 0.0)
    with pytest.raises(FrameError):
        rx.decode(frames[0], 0.0)
    assert tx.counters["frames_out"] == 1 and tx.counters["messages_out"] == 1
    assert tx.counters["bytes_out"] == len(frames[0])
    assert rx.counters["frames_in"] == 2 and rx.counters["bytes_in"] == 2 * len(frames[0])
    assert rx.counters["messages_in"] == 1 and rx.counters["replay"] == 1
    status = rx.status()
    assert status["transmitters"] == 1 and status["current_key"] == 1


def test_sequence_numbers_increase_per_frame() -> None:
    tx, rx = pair(payload_size=300)
    first = tx.encode(1, msg("x"))
    many = tx.encode(1, msg(b"y" * 1000))
    last = tx.encode(1, msg("z"))
    assert len(many) > 2
    seqs = []
    for frame in [*first, *many, *last]:
        rx.decode(frame, 0.0)
        seqs.append(rx.replay.highest_seq(TX))
    assert seqs == list(range(1, len(seqs) + 1))


def test_minimum_overhead_is_documented_size() -> None:
    codec = FrameCodec(1, 1, KEYS)
    frame = codec.encode(1, Message(16, MessageId(1, 1, 1), None))[0]
    # prefix 3, array 1, ten one-byte ints, ttl 255 (2 bytes), nil reliable id, nil body, tag 16
    assert len(frame) == 3 + 1 + 10 + 2 + 1 + 1 + 16


# ----------------------------------------------------------------- segmentation


@pytest.mark.parametrize("payload_size", [256, 600, 1200, 1500, 9000])
@pytest.mark.parametrize("size", [10, 200, 1150, 1300, 5000, 20000, 65000])
def test_segmented_sizes_round_trip(payload_size: int, size: int) -> None:
    tx, rx = pair(payload_size=payload_size)
    m = msg(bytes(random.Random(size).randbytes(size)))
    frames = tx.encode(2, m)
    assert all(len(f) <= payload_size for f in frames)
    if len(frames) > 1:
        assert max(len(f) for f in frames) == payload_size  # no byte wasted
        assert all(f[1] == 1 for f in frames)
    got = deliver(rx, frames)
    assert got.message == m and got.protocol_id == 2
    assert got.frames == len(frames) and got.frame_bytes == sum(len(f) for f in frames)
    assert len(rx.reassembly) == 0 and rx.reassembly.charged_bytes == 0


def test_out_of_order_fragments() -> None:
    tx, rx = pair()
    m = msg(list(range(3000)))
    frames = tx.encode(2, m)
    order = list(range(len(frames)))
    random.Random(1).shuffle(order)
    got = deliver(rx, [frames[i] for i in order])
    assert got.message == m


def test_interleaved_messages_from_two_transmitters() -> None:
    a = FrameCodec(1, 1, KEYS)
    b = FrameCodec(2, 1, KEYS)
    rx = FrameCodec(3, 1, KEYS)
    ma, mb = msg("a" * 4000, seq=1), msg("b" * 4000, seq=2)
    fa, fb = a.encode(1, ma), b.encode(1, mb)
    results = []
    for x, y in zip(fa, fb, strict=True):
        results += [rx.decode(x, 0.0), rx.decode(y, 0.0)]
    done = [r.message for r in results if r is not None]
    assert done == [ma, mb]


def test_duplicate_fragment_frame_is_a_replay() -> None:
    tx, rx = pair()
    frames = tx.encode(2, msg(b"q" * 3000))
    assert rx.decode(frames[0], 0.0) is None
    assert reason_of(rx, frames[0]) == "replay"
    assert deliver(rx, frames[1:]).message.body == b"q" * 3000


def fragment(link_seq: int, fid: int, index: int, count: int, chunk: bytes,
             proto: int = 2, tx: int = TX) -> bytes:
    return seal(KEYS, packb([proto, tx, 3, link_seq, fid, index, count, chunk]), fragment=True)


def section(body: Any) -> bytes:
    return packb([33, 0, 1, 1, 1, 0, 5, None, body])


def test_duplicate_fragment_index_in_a_new_frame() -> None:
    rx = FrameCodec(RX, 4, KEYS)
    assert rx.decode(fragment(1, 5, 0, 3, b"ab"), 0.0) is None
    assert reason_of(rx, fragment(2, 5, 0, 3, b"ab")) == "fragment_duplicate"


def test_inconsistent_fragments() -> None:
    rx = FrameCodec(RX, 4, KEYS)
    assert rx.decode(fragment(1, 5, 0, 3, b"ab"), 0.0) is None
    assert reason_of(rx, fragment(2, 5, 1, 4, b"ab")) == "fragment_invalid"
    assert reason_of(rx, fragment(3, 5, 1, 3, b"ab", proto=9)) == "fragment_invalid"


def test_reassembled_garbage_is_malformed() -> None:
    rx = FrameCodec(RX, 4, KEYS)
    assert rx.decode(fragment(1, 5, 0, 2, b"\x99\x01"), 0.0) is None
    assert reason_of(rx, fragment(2, 5, 1, 2, b"\x02")) == "malformed"
    assert len(rx.reassembly) == 0


def test_hand_made_fragments_reassemble() -> None:
    rx = FrameCodec(RX, 4, KEYS)
    data = section({"k": "v" * 50})
    assert rx.decode(fragment(1, 5, 1, 2, data[10:]), 0.0) is None
    got = rx.decode(fragment(2, 5, 0, 2, data[:10]), 0.0)
    assert got is not None and got.message.body == {"k": "v" * 50}


def test_same_fragment_id_from_another_epoch_is_another_message() -> None:
    rx = FrameCodec(RX, 4, KEYS)
    data = section("x")
    assert rx.decode(fragment(1, 5, 0, 2, data[:3]), 0.0) is None
    other = seal(KEYS, packb([2, TX, 4, 1, 5, 1, 2, data[3:]]), fragment=True)
    assert rx.decode(other, 0.0) is None  # epoch 4, different key, stale epoch 3 left alone
    assert len(rx.reassembly) == 2


# ------------------------------------------------------------- missing fragments


def test_missing_fragment_times_out_on_expire() -> None:
    tx, rx = pair(reassembly_timeout=10.0)
    frames = tx.encode(2, msg(b"m" * 5000))
    for f in frames[:-1]:
        assert rx.decode(f, 100.0) is None
    assert rx.expire(109.9) == 0
    assert rx.expire(110.0) == 1
    assert rx.counters["reassembly_timeout"] == 1
    assert len(rx.reassembly) == 0 and rx.reassembly.charged_bytes == 0
    assert rx.decode(frames[-1], 111.0) is None  # a lone late fragment starts afresh
    assert rx.expire(200.0) == 1


def test_missing_fragment_times_out_lazily() -> None:
    tx, rx = pair(reassembly_timeout=10.0)
    first = tx.encode(2, msg(b"m" * 5000))
    second = tx.encode(2, msg(b"n" * 5000, seq=2))
    rx.decode(first[0], 0.0)
    got = deliver(rx, second, now=50.0)  # decoding anything expires the stale partial
    assert got.message.body == b"n" * 5000
    assert rx.counters["reassembly_timeout"] == 1


# ------------------------------------------------------------------ memory bounds


def test_max_concurrent_reassemblies_evicts_the_oldest() -> None:
    rx = FrameCodec(RX, 4, KEYS, max_reassemblies=3)
    senders = [FrameCodec(100 + i, 1, KEYS) for i in range(5)]
    pending = [s.encode(1, msg(b"p" * 3000, seq=i)) for i, s in enumerate(senders)]
    for frames in pending:
        rx.decode(frames[0], 0.0)
    assert len(rx.reassembly) == 3
    assert rx.counters["reassembly_overflow"] == 2
    for frames in pending[2:]:  # the newest three complete
        assert deliver(rx, frames[1:]).message.body == b"p" * 3000
    overflowed = rx.counters["reassembly_overflow"]
    for f in pending[0][1:]:  # evicted: the rest never completes, and starts a fresh partial
        assert rx.decode(f, 0.0) is None
    assert len(rx.reassembly) == 1 and rx.counters["reassembly_overflow"] == overflowed
    assert rx.expire(1e9) == 1


def test_max_reassembly_bytes_is_never_exceeded() -> None:
    limit = 2048 + 64 * CHUNK_CHARGE
    rx = FrameCodec(RX, 4, KEYS, max_message=2048, max_fragments=64,
                    max_reassembly_bytes=limit)
    for n in range(40):
        s = FrameCodec(100 + n, 1, KEYS, payload_size=256)
        frames = s.encode(1, msg(b"z" * 1900))
        for f in frames[:-1]:
            rx.decode(f, 0.0)
            assert rx.reassembly.charged_bytes <= limit
    assert rx.counters["reassembly_overflow"] > 0


def test_too_many_fragments_is_oversized() -> None:
    rx = FrameCodec(RX, 4, KEYS, max_fragments=4)
    assert reason_of(rx, fragment(1, 5, 0, 5, b"ab")) == "oversized"


def test_reassembled_message_above_max_message_is_oversized() -> None:
    rx = FrameCodec(RX, 4, KEYS, max_message=1000)
    assert rx.decode(fragment(1, 5, 0, 3, b"a" * 600), 0.0) is None
    assert reason_of(rx, fragment(2, 5, 1, 3, b"a" * 600)) == "oversized"
    assert len(rx.reassembly) == 0 and rx.reassembly.charged_bytes == 0


def test_encode_oversized_message() -> None:
    tx = FrameCodec(TX, 1, KEYS, max_message=4096)
    with pytest.raises(FrameError) as err:
        tx.encode(1, msg(b"o" * 5000))
    assert err.value.reason == "oversized"
    assert tx.counters["frames_out"] == 0
    assert len(tx.encode(1, msg(b"o" * 4000))) == 4


def test_encode_needing_too_many_fragments_is_oversized() -> None:
    tx = FrameCodec(TX, 1, KEYS, payload_size=256, max_fragments=3)
    with pytest.raises(FrameError) as err:
        tx.encode(1, msg(b"o" * 1000))
    assert err.value.reason == "oversized"


def test_decode_oversized_frame() -> None:
    rx = FrameCodec(RX, 4, KEYS, max_message=1000)
    assert reason_of(rx, b"\x01" * (rx.max_frame + 1)) == "oversized"


def test_encode_errors_do_not_use_a_sequence_number() -> None:
    tx, rx = pair()
    with pytest.raises(FrameError) as err:
        tx.encode(1, msg(object()))
    assert err.value.reason == "unencodable"
    with pytest.raises(FrameError):
        tx.encode(256, msg(1))
    rx.decode(tx.encode(1, msg(1))[0], 0.0)
    assert rx.replay.highest_seq(TX) == 1


@pytest.mark.parametrize(
    "kwargs",
    [
        {"payload_size": 255},
        {"payload_size": 70000},
        {"max_message": 0},
        {"max_fragments": 1},
        {"max_fragments": 70000},
        {"max_reassemblies": 0},
        {"max_reassembly_bytes": 1000},
        {"reassembly_timeout": 0.0},
        {"replay_window": 0},
    ],
)
def test_bad_configuration(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        FrameCodec(1, 1, KEYS, **kwargs)


def test_bad_node_or_epoch() -> None:
    with pytest.raises(FrameError):
        FrameCodec(2**32, 1, KEYS)
    with pytest.raises(FrameError):
        FrameCodec(1, -1, KEYS)


def test_every_decode_refusal_is_counted() -> None:
    _, rx = pair()
    for data in [b"", b"\x00" * 40, "str", b"\x02" + b"\x00" * 40]:
        with pytest.raises(FrameError):
            rx.decode(data, 0.0)  # type: ignore[arg-type]
    drops = sum(v for k, v in rx.counters.items() if k not in {"frames_in", "bytes_in"})
    assert drops == rx.counters["frames_in"] == 4


def test_frame_sizes_are_the_sizes_encode_gives_with_the_same_effects() -> None:
    """``frame_sizes`` (the simulator's sizing, no frame built) against ``encode`` on
    twin codecs: whole frames and fragments, every msgpack width of the transmitter,
    sequence and header fields, with and without a reliable id; sequence numbers,
    fragment ids and counters stay equal."""
    rng = random.Random(16)
    for _ in range(400):
        node = rng.choice([1, 200, 70_000])
        size = rng.choice([256, 1200])
        enc, sz = (FrameCodec(node, 3, KEYS, payload_size=size) for _ in range(2))
        enc._seq = sz._seq = rng.choice([0, 120, 250, 65_000])
        for _ in range(4):
            body = [rng.random(), "x" * rng.choice([1, 50, 300, 3000]),
                    list(range(rng.randint(0, 40)))]
            message = Message(rng.choice([16, 17, 200]),
                              MessageId(rng.randint(0, 70_000), rng.randint(0, 300),
                                        rng.randint(0, 1 << 20)), body,
                              hop=rng.randint(0, 200), ttl=rng.randint(1, 255),
                              reliable_id=rng.choice([None, 5, 1 << 20]))
            expected = [len(frame) for frame in enc.encode(1, message)]
            assert sz.frame_sizes(1, message, len(packb([body])) - 1) == expected
            assert (sz._seq, sz._fragment_id, sz.counters) == (
                enc._seq, enc._fragment_id, enc.counters)
