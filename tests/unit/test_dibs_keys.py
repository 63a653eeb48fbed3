"""Keys and query intervals from meshsub content (docs/protocols/dibs.md, "Keys")."""

from __future__ import annotations

import hashlib

import pytest

from meshsub.core.content import Event, Subscription
from meshsub.core.predicates import Op, Predicate
from meshsub.protocols.dibs.keys import (
    KeyError_,
    event_key,
    format_key,
    parse_key,
    query_interval,
    topic_key,
)


def test_hex_keys_order_like_their_numbers() -> None:
    keys = [0, 1, 255, 2**63, 2**64 - 1]
    texts = [format_key(x, 64) for x in keys]
    assert texts == sorted(texts) and all(len(t) == 16 for t in texts)
    assert [parse_key(t, 64) for t in texts] == keys
    assert parse_key("ABCDEF0123456789", 64) is None and parse_key("0" * 15, 64) is None


def test_event_keys() -> None:
    assert event_key(Event("t", {"key": "00000000000000ff"}), 64, "key") == 255
    digest = hashlib.sha256(b"t").digest()
    assert topic_key("t", 64) == int.from_bytes(digest[:8], "big")
    assert event_key(Event("t"), 64, "key") == topic_key("t", 64)
    assert event_key(Event("t", {"key": 7}), 64, "key") == 7
    for bad in (-1, "7", 2.5, True):
        with pytest.raises(KeyError_):
            event_key(Event("t", {"key": bad}), 64, "key")
    with pytest.raises(KeyError_):
        event_key(Event("t", {"key": 300}), 8, "key")


def test_query_intervals() -> None:
    lo, hi = format_key(10, 64), format_key(20, 64)
    rng = Subscription("t", (Predicate.between("key", lo, hi),))
    assert query_interval(rng, 64, "key") == (10, 20)
    ge = Subscription("t", (Predicate.compare("key", Op.GT, lo),
                            Predicate.compare("key", Op.LE, hi)))
    assert query_interval(ge, 64, "key") == (11, 20)
    assert query_interval(Subscription("t"), 64, "key") == (0, 2**64 - 1)
    eq = Subscription("t", (Predicate.compare("key", Op.EQ, hi),))
    assert query_interval(eq, 64, "key") == (20, 20)
    assert query_interval(Subscription("t", (Predicate.compare("key", Op.EQ, 3),)), 64,
                          "key") == (3, 3)
    assert query_interval(Subscription("t", (Predicate.compare("key", Op.EQ, "x"),)), 64,
                          "key") is None
    assert query_interval(Subscription("t", (Predicate.between("key", 5, 9),)), 64,
                          "key") == (5, 9)
    empty = Subscription("t", (Predicate.compare("key", Op.GT, hi),
                               Predicate.compare("key", Op.LT, lo)))
    assert query_interval(empty, 64, "key") is None
