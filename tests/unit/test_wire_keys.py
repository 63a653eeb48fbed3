"""KeyRing: validation, configuration helpers, rotation across two codecs."""

from __future__ import annotations

from typing import Any

import pytest

from meshsub.core.api import Message, MessageId
from meshsub.wire import FrameCodec, FrameError, KeyRing

K1 = bytes(range(32))
K2 = bytes(range(100, 132))


def test_single_and_properties() -> None:
    ring = KeyRing.single(K1, 7)
    assert ring.current == 7
    assert ring.key_ids == frozenset({7})
    assert ring.accepts(7) and not ring.accepts(8)


@pytest.mark.parametrize(
    ("keys", "current", "message"),
    [
        ({1: b"short"}, 1, "at least 16"),
        ({256: K1}, 256, "outside"),
        ({-1: K1}, -1, "outside"),
        ({1: K1}, 2, "not in the key ring"),
        ({1: "text"}, 1, "not bytes"),
        ({True: K1}, True, "not an integer"),
    ],
)
def test_bad_rings_are_refused(keys: dict[Any, Any], current: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KeyRing(keys, current)


def test_from_hex() -> None:
    ring = KeyRing.from_hex({"1": K1.hex(), 2: K2.hex()}, "2")
    assert ring.current == 2
    assert ring.tag(1, b"x") == KeyRing.single(K1, 1).tag(1, b"x")


@pytest.mark.parametrize(
    ("keys", "current", "message"),
    [
        ({"1": "zz" * 16}, 1, "not valid hex"),
        ({"one": K1.hex()}, 1, "not an integer"),
        ({"1": 5}, 1, "not a hex string"),
        ({"1": K1.hex()}, "x", "not an integer"),
    ],
)
def test_from_hex_errors(keys: dict[Any, Any], current: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KeyRing.from_hex(keys, current)  # type: ignore[arg-type]


def test_repr_hides_key_material() -> None:
    assert K1.hex() not in repr(KeyRing.single(K1, 1))
    assert "current=1" in repr(KeyRing.single(K1, 1))


def test_tags_differ_by_key_and_data() -> None:
    ring = KeyRing({1: K1, 2: K2}, 1)
    assert len(ring.tag(1, b"abc")) == 16
    assert ring.tag(1, b"abc") != ring.tag(2, b"abc")
    assert ring.tag(1, b"abc") != ring.tag(1, b"abd")
    assert ring.verify(1, b"abc", ring.tag(1, b"abc"))
    assert not ring.verify(2, b"abc", ring.tag(1, b"abc"))


def _msg(seq: int) -> Message:
    return Message(20, MessageId(1, 1, seq), {"n": seq})


def test_rotation_accepts_two_keys_at_once() -> None:
    old = KeyRing.single(K1, 1)
    sender = FrameCodec(1, 1, old)
    receiver = FrameCodec(2, 1, old.with_key(2, K2))  # step 1: receiver accepts both
    assert receiver.decode(sender.encode(1, _msg(1))[0], 0.0) is not None
    sender.keys = sender.keys.with_key(2, K2).with_current(2)  # step 2: sender switches
    frame = sender.encode(1, _msg(2))[0]
    assert frame[2] == 2  # key id byte
    assert receiver.decode(frame, 0.0) is not None
    receiver.keys = receiver.keys.with_current(2).without_key(1)  # step 3: old key withdrawn
    sender.keys = sender.keys.with_current(1)
    with pytest.raises(FrameError) as err:
        receiver.decode(sender.encode(1, _msg(3))[0], 0.0)
    assert err.value.reason == "unknown_key"
    assert receiver.counters["unknown_key"] == 1


def test_without_current_key_is_refused() -> None:
    with pytest.raises(ValueError, match="not in the key ring"):
        KeyRing({1: K1, 2: K2}, 1).without_key(1)


@pytest.mark.parametrize("key_len", [16, 32, 63, 64, 65, 200])
def test_tag_is_truncated_hmac_sha256(key_len: int) -> None:
    import hmac

    key = bytes((7 * i + key_len) & 0xFF for i in range(key_len))
    ring = KeyRing.single(key, 1)
    for data in [b"", b"a", bytes(range(256)) * 5]:
        assert ring.tag(1, data) == hmac.digest(key, data, "sha256")[:16]
        assert ring.tag(1, memoryview(data)) == ring.tag(1, data)  # pads are not consumed
