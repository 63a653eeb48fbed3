"""The process-wide caches behind the simulator's speed (issue 19): exact, or not used.

``bodies.shared_decode`` lets the receivers of one frame share its decoded body;
``Subscription.key`` is packed once; the covering shapes (``core.cover_set``) and TG's
key masks are shared by every node. Each must give what the uncached code gives,
and ``tests/sim/test_records_unchanged.py`` checks whole runs against the records
written before them.
"""

from __future__ import annotations

from typing import Any

import msgpack
import pytest

from meshsub.core import bodies, cover_set
from meshsub.core.bloom import key_mask
from meshsub.core.content import Subscription
from meshsub.core.syntax import parse_subscription
from meshsub.protocols.tg import protocol as tg


class Counting:
    """A decoder that counts its calls and fails on a body that is not a list."""

    calls = 0

    @classmethod
    def decode(cls, body: Any) -> tuple[int, ...]:
        cls.calls += 1
        if not isinstance(body, list):
            raise bodies.BodyError("not a list")
        return tuple(body)


@pytest.fixture(autouse=True)
def fresh() -> None:
    Counting.calls = 0
    bodies.shared_decode.__init__()  # type: ignore[misc]


def test_the_same_body_object_is_decoded_once() -> None:
    body = [1, 2, 3]
    first = bodies.shared_decode(Counting.decode, body)
    again = bodies.shared_decode(Counting.decode, body)  # a new bound method, equal
    assert first == again == (1, 2, 3) and again is first
    assert Counting.calls == 1


def test_an_equal_but_other_body_is_decoded_again() -> None:
    bodies.shared_decode(Counting.decode, [1, 2])
    assert bodies.shared_decode(Counting.decode, [1, 2]) == (1, 2)
    assert Counting.calls == 2


def test_another_decoder_decodes_for_itself() -> None:
    body = [4]
    assert bodies.shared_decode(Counting.decode, body) == (4,)
    assert bodies.shared_decode(lambda b: ("other", *b), body) == ("other", 4)
    assert Counting.calls == 1


def test_a_failure_is_not_remembered() -> None:
    body = {"not": "a list"}
    for _ in range(2):
        with pytest.raises(bodies.BodyError):
            bodies.shared_decode(Counting.decode, body)
    assert Counting.calls == 2


def test_none_is_always_decoded() -> None:
    for _ in range(2):
        with pytest.raises(bodies.BodyError):
            bodies.shared_decode(Counting.decode, None)
    assert Counting.calls == 2


def test_the_subscription_key_is_the_packed_form_computed_once() -> None:
    sub = parse_subscription("tg abc=true def=true")
    key = sub.key
    assert key == bytes(msgpack.packb(sub.to_wire(), use_bin_type=True))
    assert sub.key is key
    assert Subscription.from_wire(sub.to_wire()).key == key  # equal subscriptions, equal keys


def test_shapes_by_key_equal_the_computed_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cover_set, "SHAPE_CACHE", 2)  # emptied and refilled on the way
    monkeypatch.setattr(cover_set, "_shapes", {})
    texts = ["tg a=true", "tg a=true b=true", "tg/# a=true", "tg x>3", "tg b=true c=true",
             "tg a=true"]
    subs = [parse_subscription(t) for t in texts]
    for sub in subs * 2:
        assert cover_set._shape(sub) == cover_set._compute_shape(sub)
    assert len(cover_set._shapes) <= 2
    table = {s.key: s for s in subs}
    pairwise = {k for k, s in table.items() if not any(  # the definition, n^2 covers tests
        ok != k and o.covers(s) and (not s.covers(o) or ok < k) for ok, o in table.items())}
    assert set(cover_set.uncovered(table)) == pairwise
    assert parse_subscription("tg a=true b=true").key not in pairwise


def test_tg_shared_masks_equal_key_mask() -> None:
    for key in ("abc", "abc&def", "qruhzjfj"):
        assert tg._shared_mask(key, 256, 4) == key_mask(key, 256, 4, tg.SCHEME)
