"""Semantic tags on the content model, their Bloom keys, and the hash test vectors.

Vectors: docs/protocols/tg.md ("Index"): SHA-256 double hashing, m = 2048, k = 7.
"""

from __future__ import annotations

import hashlib
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshsub.core.api import Deliver, LocalPublish, LocalSubscribe
from meshsub.core.bloom import BloomFilter, HashScheme, expected_fpr, key_mask, positions
from meshsub.core.content import ContentError, Event, Subscription
from meshsub.core.cover_set import uncovered
from meshsub.core.predicates import Op, Predicate
from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.core.tags import (
    PREFIX_KEY,
    TOPIC_KEY,
    Mode,
    Scope,
    conjunction,
    delivery_group,
    event_scope,
    event_tags,
    probe_keys,
    subscription_key,
    tag_event,
    tag_subscriptions,
)
from meshsub.protocols.flooding import Flooding

S = HashScheme.SHA256_DOUBLE
VECTORS = [  # key, h1, h2, positions (m = 2048, k = 7)
    ("traffic", 0x075F4AB854E2A33C, 0x8AC11C0758796AF5, [828, 1585, 294, 1051, 1808, 517, 1274]),
    ("weather", 0xE5E72BEB4E3C6926, 0xD3DC9E3E2EF7833B, [294, 1121, 1948, 727, 1554, 333, 1160]),
    ("fire", 0xDC9F28B12DD1818E, 0xE42FFC92ECB94039, [398, 455, 512, 569, 626, 683, 740]),
    ("accident", 0x5489EB1D2A028501, 0x6DE38986B21749ED, [1281, 1774, 219, 712, 1205, 1698, 143]),
    ("traffic\x1fweather", 0xA0B3542680E5C890, 0x3370CBA835594571,
     [144, 1537, 882, 227, 1620, 965, 310]),
    ("a\x1fb\x1fc", 0xE0DEE694AED26D32, 0x3B0D8B861C343F25, [1330, 1111, 892, 673, 454, 235, 16]),
]


@pytest.mark.parametrize(("key", "h1", "h2", "pos"), VECTORS)
def test_spec_hash_vectors(key: str, h1: int, h2: int, pos: list[int]) -> None:
    d = hashlib.sha256(key.encode()).digest()
    assert int.from_bytes(d[0:8], "big") == h1
    assert int.from_bytes(d[8:16], "big") | 1 == h2
    assert positions(key, 2048, 7, S) == pos
    assert len(set(pos)) == 7  # h2 odd, m a power of two: k distinct positions
    mask = key_mask(key, 2048, 7, S)
    assert mask == sum(1 << p for p in pos)


def test_spec_digest_m1024_and_shared_bit() -> None:
    assert hashlib.sha256(b"traffic").hexdigest() == (
        "075f4ab854e2a33c8ac11c0758796af4ae994ec4e37e36b6f11b503492c68289")
    assert positions("traffic", 1024, 7, S) == [828, 561, 294, 27, 784, 517, 250]
    assert set(positions("traffic", 2048, 7, S)) & set(positions("weather", 2048, 7, S)) == {294}


def test_thesis_false_positive_formula_on_the_toy_filter() -> None:
    """Liu §3.2's exact formula, m = 12, k = 2 (the Fig. 1 filter), n = 1..6."""
    want = [0.0255, 0.0864, 0.1654, 0.2515, 0.3377, 0.4199]
    assert [round(expected_fpr(12, 2, n), 4) for n in range(1, 7)] == want


def test_int_form_round_trips() -> None:
    bf = BloomFilter(2048, 7, S)
    bf.update(["traffic", "fire"])
    assert BloomFilter.from_int(bf.to_int(), 2048, 7, S) == bf
    with pytest.raises(ValueError):
        BloomFilter.from_int(1 << 2048, 2048, 7, S)


# ---------------------------------------------------------------- keys and probes


def test_keys_of_the_three_subscription_forms() -> None:
    """Liu §3.6: single, OR (one key each), AND (the sorted concatenation)."""
    single = tag_subscriptions("s", "news", Mode.SINGLE, ["traffic"])
    assert [subscription_key(s) for _, s in single] == ["traffic"]
    ors = tag_subscriptions("s", "news", Mode.OR, ["c", "a", "b"])
    assert [(i, subscription_key(s)) for i, s in ors] == [("s|a", "a"), ("s|b", "b"),
                                                          ("s|c", "c")]
    ands = tag_subscriptions("s", "news", Mode.AND, ["b", "a", "c"])
    assert [(i, subscription_key(s)) for i, s in ands] == [("s", "a\x1fb\x1fc")]


@pytest.mark.parametrize("n", [1, 2, 3, 4])
def test_conjunctive_publication_probes_every_subset(n: int) -> None:
    tags = ["a", "b", "c", "d"][:n]
    probes = probe_keys(tag_event("news", tags))
    assert probes is not None
    tag_probes = {p for p in probes if not p.startswith("\x1e")}
    assert len(tag_probes) == 2 ** n - 1  # 1, 3, 7, 15


def test_worked_multi_attribute_example() -> None:
    """§3.6 worked through: S1 = OR{traffic, weather}, S2 = AND{weather, traffic}."""
    s1 = [s for _, s in tag_subscriptions("s1", "news", Mode.OR, ["traffic", "weather"])]
    (_, s2), = tag_subscriptions("s2", "news", Mode.AND, ["weather", "traffic"])
    p = tag_event("news", ["weather", "traffic", "accident"])
    probes = probe_keys(p)
    assert probes is not None
    assert {k for k in probes if "\x1e" not in k} == {
        "accident", "traffic", "weather", "accident\x1ftraffic", "accident\x1fweather",
        "traffic\x1fweather", "accident\x1ftraffic\x1fweather"}
    assert all(subscription_key(s) in probes for s in [*s1, s2])
    assert any(s.matches(p) for s in s1) and s2.matches(p)
    q = tag_event("news", ["traffic", "fire"])  # matches S1 (traffic), not S2
    assert any(s.matches(q) for s in s1) and not s2.matches(q)


def test_topic_keys_for_subscriptions_without_tags() -> None:
    assert subscription_key(parse_subscription("a/b")) == TOPIC_KEY + "a/b"
    assert subscription_key(parse_subscription("a/b/# x>1")) == PREFIX_KEY + "a/b"
    assert subscription_key(parse_subscription("a/+/c")) == PREFIX_KEY + "a"
    assert subscription_key(parse_subscription("#")) == PREFIX_KEY
    probes = probe_keys(parse_event("a/b/c x=2"))
    assert probes is not None and {TOPIC_KEY + "a/b/c", PREFIX_KEY, PREFIX_KEY + "a",
                                   PREFIX_KEY + "a/b", PREFIX_KEY + "a/b/c"} <= probes


def test_too_many_tags_probe_everything() -> None:
    many = tag_event("t", [f"x{i}" for i in range(9)])
    assert probe_keys(many) is None
    big = conjunction("t", [f"x{i}" for i in range(10)])
    assert subscription_key(big) == "\x1f".join(sorted(f"x{i}" for i in range(10))[:8])


def test_scope_and_validation() -> None:
    assert event_scope(tag_event("t", ["a"], Scope.LOCAL)) is Scope.LOCAL
    assert event_scope(tag_event("t", ["a"])) is Scope.GLOBAL
    for origin in ("@origin", "@origin:tg"):
        assert event_scope(Event("t", {"a": True, "_scope": origin})) is Scope.LOCAL
    for other in ("@originx", "stations", "global", 1):
        assert event_scope(Event("t", {"a": True, "_scope": other})) is Scope.GLOBAL
    assert event_tags(tag_event("t", ["b", "a"], Scope.LOCAL)) == ("a", "b")
    assert event_tags(parse_event("t a=true b=1 c=false")) == ("a",)
    for bad in ([], ["_scope"], ["not a name"]):
        with pytest.raises(ContentError):
            tag_event("t", bad)
    with pytest.raises(ContentError):
        tag_subscriptions("a|b", "t", Mode.OR, ["x"])
    with pytest.raises(ContentError):
        tag_subscriptions("s", "t", Mode.SINGLE, ["x", "y"])
    assert delivery_group("g|x") == "g" and delivery_group("plain") == "plain"


tag = st.sampled_from(["a", "b", "c", "d", "e"])
levels = st.lists(st.sampled_from(["x", "y", ""]), min_size=1, max_size=3)


@st.composite
def subscriptions(draw: st.DrawFn) -> Subscription:
    lv = draw(levels)
    if draw(st.booleans()):
        lv = [*lv[:draw(st.integers(0, len(lv)))], draw(st.sampled_from(["#", "+"]))]
        if lv[-1] == "+" and draw(st.booleans()):
            lv.append("x")
    preds = [Predicate.compare(t, Op.EQ, True) for t in draw(st.sets(tag, max_size=3))]
    if draw(st.booleans()):
        preds.append(Predicate.compare("v", Op.GT, draw(st.integers(0, 3))))
    return Subscription("/".join(lv) or "x", tuple(preds))


@st.composite
def events(draw: st.DrawFn) -> Event:
    attrs: dict[str, bool | int] = dict.fromkeys(draw(st.sets(tag, max_size=5)), True)
    attrs.update(dict.fromkeys(draw(st.sets(tag, max_size=2)), False))
    attrs["v"] = draw(st.integers(0, 4))
    return Event("/".join(draw(levels)) or "x", attrs)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(subscriptions(), events())
def test_no_false_negative_lemma(sub: Subscription, event: Event) -> None:
    """No false negatives: an exact match implies a probe is the subscription's key."""
    if sub.matches(event):
        probes = probe_keys(event)
        assert probes is None or subscription_key(sub) in probes


def test_no_false_negative_lemma_on_1e5_random_pairs() -> None:
    """At least 10^5 cases: 250 x 400 seeded thesis-style subscription/event pairs."""
    rnd = random.Random(2011)
    pool = [f"i{n}" for n in range(12)]
    subs = [conjunction("t", rnd.sample(pool, rnd.randint(1, 4))) for _ in range(250)]
    evs = [tag_event("t", rnd.sample(pool, rnd.randint(1, 6))) for _ in range(400)]
    matched = 0
    for event in evs:
        probes = probe_keys(event)
        assert probes is not None
        for sub in subs:
            if sub.matches(event):
                matched += 1
                assert subscription_key(sub) in probes
    assert matched > 1000


@settings(max_examples=120, deadline=None)
@given(st.lists(subscriptions(), max_size=10))
def test_uncovered_keeps_exactly_the_maximal_subscriptions(subs: list[Subscription]) -> None:
    table = {s.key: s for s in subs}
    kept = uncovered(table)
    for key, s in table.items():
        if key in kept:  # nothing else kept covers it (ties: the smaller key stays)
            assert not any(ok != key and o.covers(s) and (not s.covers(o) or ok < key)
                           for ok, o in kept.items())
        else:  # something kept covers it
            assert any(o.covers(s) for o in kept.values())


def test_uncovered_tag_subsets() -> None:
    a = conjunction("news", ["a"])
    ab = conjunction("news", ["a", "b"])
    bc = conjunction("news", ["b", "c"])
    other_topic = conjunction("sport", ["a", "b"])
    table = {s.key: s for s in (a, ab, bc, other_topic)}
    assert set(uncovered(table).values()) == {a, bc, other_topic}
    everything = parse_subscription("#")
    assert list(uncovered({**table, everything.key: everything}).values()) == [everything]


def test_or_members_are_delivered_once_per_group() -> None:
    """An OR subscription is one core subscription per tag; the application gets an event
    once, under its own id (the group), not a member's."""
    proto = Flooding(1)
    for sid, sub in tag_subscriptions("g", "news", Mode.OR, ["a", "b", "c"]):
        proto.handle(LocalSubscribe(0.0, sid, sub))
    proto.handle(LocalSubscribe(0.0, "h", conjunction("news", ["a"])))
    out = proto.handle(LocalPublish(1.0, tag_event("news", ["a", "b"]), proto.new_message_id()))
    got = sorted(a.sub_id for a in out if isinstance(a, Deliver))
    assert got == ["g", "h"]
