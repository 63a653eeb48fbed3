"""Properties of the content model: covering soundness, canonical forms, the matcher index.

Values are drawn from small pools around a few constants so that events land
on, just inside and just outside the bounds that subscriptions use: that is
where an unsound covering rule or an off-by-one in the index would show.
"""

from __future__ import annotations

import contextlib
import math
import random
from typing import Any

import msgpack
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from meshsub.core.content import ContentError, Event, Op, Predicate, Subscription, Value
from meshsub.core.index import MatcherIndex
from meshsub.core.syntax import format_event, format_subscription, parse_event, parse_subscription
from meshsub.core.topics import filter_covers, topic_matches

NAMES = ["a", "b", "c"]
NUMBERS: list[Value] = [-2, -1, 0, 1, 2, 3, -1.5, 0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
STRINGS: list[Value] = ["", "a", "aa", "ab", "b", "ba", "bb", "a\U0010ffff", "b\U0010ffff"]
BOOLS: list[Value] = [True, False]
POOL: list[Value] = NUMBERS + STRINGS + BOOLS
NEAR: list[Value] = [-1, 0.25, 1.25, 1.75, 2.25, 3.5, "aaa", "aab", "aZ", "a\x00", "abc", "c"]

small_values = st.sampled_from(POOL)
ordered_values = st.sampled_from(NUMBERS + STRINGS)
names = st.sampled_from(NAMES)
levels = st.sampled_from(["x", "y", ""])


@st.composite
def predicates(draw: st.DrawFn) -> Predicate:
    attr = draw(names)
    op = draw(st.sampled_from(list(Op)))
    if op in (Op.EQ, Op.NE):
        return Predicate(attr, op, value=draw(small_values))
    if op in (Op.LT, Op.LE, Op.GT, Op.GE):
        return Predicate(attr, op, value=draw(ordered_values))
    if op is Op.RANGE:
        pool = draw(st.sampled_from([NUMBERS, STRINGS]))
        lo, hi = sorted(draw(st.lists(st.sampled_from(pool), min_size=2, max_size=2)))
        lo_closed, hi_closed = draw(st.booleans()), draw(st.booleans())
        if lo == hi:
            lo_closed = hi_closed = True
        return Predicate(attr, op, lo=lo, hi=hi, lo_closed=lo_closed, hi_closed=hi_closed)
    if op is Op.PREFIX:
        return Predicate(attr, op, prefix=str(draw(st.sampled_from(STRINGS))))
    if op is Op.IN:
        members = draw(st.lists(small_values, min_size=1, max_size=4))
        return Predicate(attr, op, members=tuple(members))
    return Predicate(attr, op)


topics = st.lists(levels, min_size=1, max_size=3).map("/".join).filter(bool)


@st.composite
def topic_filters(draw: st.DrawFn) -> str:
    parts = draw(st.lists(st.sampled_from(["x", "y", "", "+"]), min_size=1, max_size=3))
    if draw(st.booleans()):
        parts.append("#")
    text = "/".join(parts)
    assume(text)
    return text


subscriptions = st.builds(
    Subscription, topic_filters(), st.lists(predicates(), max_size=4).map(tuple)
)
events = st.builds(
    Event, topics, st.dictionaries(names, small_values, max_size=3)
)


def _constants(*subs: Subscription) -> list[Value]:
    """Every operand the subscriptions mention, so events can sit exactly on bounds."""
    out: list[Value] = []
    for sub in subs:
        for p in sub.predicates:
            out.extend(v for v in (p.value, p.lo, p.hi, p.prefix) if v is not None)
            out.extend(p.members)
    return out


def near_events(subs: tuple[Subscription, ...], rnd: random.Random, n: int) -> list[Event]:
    """``n`` events whose topics and values sit on and around the subscriptions' constants.

    Drawn with a hypothesis-seeded ``Random`` rather than ``data.draw``: many
    events per example at a fraction of the cost, still reproducible.
    """
    pool = POOL + NEAR + _constants(*subs)
    topic_choices = [t for s in subs for t in _instances(s.topic)] + ["x", "y/x", "x/y/x"]
    out = []
    for _ in range(n):
        attrs = {name: rnd.choice(pool) for name in NAMES if rnd.random() < 0.7}
        out.append(Event(rnd.choice(topic_choices), attrs))
    return out


def _instances(topic_filter: str) -> list[str]:
    """Concrete topics that a filter matches (a few of them)."""
    out = []
    for fill in ("x", "y", ""):
        levels_ = [fill if lv == "+" else lv for lv in topic_filter.split("/")]
        if levels_[-1] == "#":
            out.append("/".join(levels_[:-1]) or "x")
            out.append("/".join([*levels_[:-1], fill, "x"]))
        else:
            out.append("/".join(levels_))
    return [t for t in out if t]


# ------------------------------------------------------------------ covering


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(subscriptions, subscriptions, st.randoms(use_true_random=False))
def test_covering_is_sound(s1: Subscription, s2: Subscription, rnd: random.Random) -> None:
    if not s2.covers(s1):
        return
    for event in near_events((s1, s2), rnd, 60):
        if s1.matches(event):
            assert s2.matches(event), (format_subscription(s1), format_subscription(s2), event)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(predicates(), min_size=1, max_size=3), predicates())
def test_single_attribute_covering_is_sound(conds: list[Predicate], target: Predicate) -> None:
    """Both subscriptions constrain one attribute: covering claims are most frequent here."""
    s1 = Subscription("x", tuple(Predicate.from_wire(["a", *p.to_wire()[1:]]) for p in conds))
    s2 = Subscription("x", (Predicate.from_wire(["a", *target.to_wire()[1:]]),))
    if not s2.covers(s1):
        return
    for value in POOL + NEAR + _constants(s1, s2):
        event = Event("x", {"a": value})
        if s1.matches(event):
            assert s2.matches(event), (format_subscription(s1), format_subscription(s2), value)


@settings(max_examples=200, deadline=None)
@given(subscriptions, st.lists(predicates(), max_size=3))
def test_more_specific_is_covered(s2: Subscription, extra: list[Predicate]) -> None:
    s1 = Subscription(s2.topic, s2.predicates + tuple(extra))
    assert s2.covers(s1)
    assert s2.covers(s2)


@settings(max_examples=200, deadline=None)
@given(subscriptions, subscriptions, subscriptions, st.randoms(use_true_random=False))
def test_covering_chains_stay_sound(
    a: Subscription, b: Subscription, c: Subscription, rnd: random.Random
) -> None:
    """If a ⊇ b ⊇ c is claimed, a must match every event c matches (transitivity)."""
    if not (a.covers(b) and b.covers(c)):
        return
    for event in near_events((a, b, c), rnd, 40):
        if c.matches(event):
            assert a.matches(event)


@settings(max_examples=300, deadline=None)
@given(topic_filters(), topic_filters(), st.data())
def test_filter_covering_is_sound(f1: str, f2: str, data: st.DataObject) -> None:
    if filter_covers(f2, f1):
        for topic in [*_instances(f1), data.draw(topics)]:
            if topic_matches(f1, topic):
                assert topic_matches(f2, topic)


# ------------------------------------------------------------ canonical forms

wide_values = st.one_of(
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
    st.booleans(),
    small_values,
).filter(lambda v: not isinstance(v, str) or _encodable(v))


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


wide_events = st.builds(
    Event,
    st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=12).filter(
        lambda t: "+" not in t and "#" not in t and not t.startswith("$")
    ),
    st.dictionaries(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True), wide_values,
                    max_size=5),
)


@st.composite
def wide_predicates(draw: st.DrawFn) -> Predicate:
    """Predicates over the full value space (floats, long ints, any text)."""
    p = draw(predicates())
    v = draw(wide_values)
    if p.op in (Op.EQ, Op.NE):
        return Predicate(p.attr, p.op, value=v)
    if p.op in (Op.LT, Op.GT) and not isinstance(v, bool):
        return Predicate(p.attr, p.op, value=v)
    if p.op is Op.PREFIX and isinstance(v, str):
        return Predicate(p.attr, Op.PREFIX, prefix=v)
    if p.op is Op.IN:
        return Predicate(p.attr, Op.IN, members=(v, *p.members))
    return p


wide_subscriptions = st.builds(
    Subscription, topic_filters(), st.lists(wide_predicates(), max_size=4).map(tuple)
)


@settings(max_examples=200, deadline=None)
@given(wide_subscriptions)
def test_subscription_text_round_trips(sub: Subscription) -> None:
    text = format_subscription(sub)
    again = parse_subscription(text)
    assert again == sub
    assert again.key == sub.key
    assert format_subscription(again) == text


@settings(max_examples=200, deadline=None)
@given(wide_events)
def test_event_text_round_trips(event: Event) -> None:
    text = format_event(event)
    again = parse_event(text)
    assert again == event
    assert again.key == event.key
    for name, value in event.attrs.items():
        assert type(again.attrs[name]) is type(value)


@settings(max_examples=200, deadline=None)
@given(wide_subscriptions)
def test_subscription_wire_round_trips(sub: Subscription) -> None:
    packed = msgpack.packb(sub.to_wire(), use_bin_type=True)
    again = Subscription.from_wire(msgpack.unpackb(packed, raw=False))
    assert again == sub and again.key == sub.key == packed
    assert hash(again) == hash(sub)


@settings(max_examples=200, deadline=None)
@given(wide_events)
def test_event_wire_round_trips(event: Event) -> None:
    packed = msgpack.packb(event.to_wire(), use_bin_type=True)
    again = Event.from_wire(msgpack.unpackb(packed, raw=False))
    assert again == event and again.key == event.key == packed
    assert hash(again) == hash(event)


@settings(max_examples=200, deadline=None)
@given(st.lists(predicates(), max_size=5), st.randoms())
def test_predicate_order_does_not_matter(preds: list[Predicate], rnd: Any) -> None:
    shuffled = list(preds)
    rnd.shuffle(shuffled)
    a = Subscription("x/+", tuple(preds))
    b = Subscription("x/+", tuple(shuffled + preds[:1]))
    assert a == b and a.key == b.key


anything = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.binary(max_size=8)
    | small_values,
    lambda inner: st.lists(inner, max_size=6) | st.dictionaries(st.text(max_size=4), inner,
                                                                   max_size=3),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(anything)
def test_from_wire_raises_only_content_error(obj: Any) -> None:
    for cls in (Event, Subscription):
        with contextlib.suppress(ContentError):
            cls.from_wire(obj)


@settings(max_examples=150, deadline=None)
@given(wide_subscriptions, wide_events, st.data())
def test_mutated_wire_raises_only_content_error(
    sub: Subscription, event: Event, data: st.DataObject
) -> None:
    for cls, wire in ((Subscription, sub.to_wire()), (Event, event.to_wire())):
        mutated = _mutate(wire, data)
        with contextlib.suppress(ContentError):
            cls.from_wire(mutated)


def _mutate(obj: Any, data: st.DataObject) -> Any:
    if isinstance(obj, list) and obj and data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(obj) - 1))
        return [*obj[:i], _mutate(obj[i], data), *obj[i + 1 :]]
    return data.draw(anything)


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=' ab=!<>^?,{}[]()"\\+-.e1/#in\x00\ud800', max_size=30))
def test_parsers_raise_only_content_error(text: str) -> None:
    for parse in (parse_subscription, parse_event):
        try:
            parse(text)
        except ContentError as exc:
            assert " at column " in str(exc)


@settings(max_examples=100, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_float_text_is_exact(x: float) -> None:
    event = parse_event(format_event(Event("t", {"v": x})))
    got = event.attrs["v"]
    assert isinstance(got, float) and got == x
    assert math.copysign(1, got) == math.copysign(1, x + 0.0)


# ------------------------------------------------------------------ the index

ops = st.lists(
    st.tuples(st.sampled_from(["add", "add", "add", "remove"]), st.integers(0, 11), subscriptions),
    max_size=25,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops, st.lists(events, min_size=1, max_size=8), st.randoms(use_true_random=False))
def test_index_equals_linear_scan(
    steps: list[tuple[str, int, Subscription]], evs: list[Event], rnd: random.Random
) -> None:
    index = MatcherIndex()
    model: dict[str, Subscription] = {}
    for action, n, sub in steps:
        sub_id = f"s{n}"
        if action == "add":
            index.add(sub_id, sub)
            model[sub_id] = sub
        else:
            assert index.remove(sub_id) == (sub_id in model)
            model.pop(sub_id, None)
        assert len(index) == len(model)
    near = near_events(tuple(model.values()), rnd, 30)
    for event in evs + near:
        expected = {sid for sid, s in model.items() if s.matches(event)}
        assert index.match(event) == expected, (event, {k: format_subscription(v)
                                                        for k, v in model.items()})
    for sub_id in list(model):
        assert index.remove(sub_id)
    assert len(index) == 0 and not index._exact and not index._trie.children


def test_bad_values_are_rejected() -> None:
    for bad in (float("nan"), float("inf"), 2**64, None, b"x", [1], "\ud800"):
        with pytest.raises(ContentError):
            Event("t", {"v": bad})  # type: ignore[dict-item]
