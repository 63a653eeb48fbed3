"""BRVST's forest and content mapping as properties (docs/protocols/brvst.md, properties 12-16
and the aggregation-completeness property 14): random insert/remove sequences keep the
invariants, and a publication that matches a subscription exactly always matches its
grid's and zone's summaries (no false negative through the hierarchy)."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import example, given, settings
from hypothesis import strategies as st

from meshsub.core.arv import Comparator
from meshsub.core.content import Event, Subscription
from meshsub.core.predicates import Op, Predicate
from meshsub.protocols.brvst.forest import Filter, Forest
from meshsub.protocols.brvst.params import BrvstParams
from meshsub.protocols.brvst.schema import Schema, SchemaError

SCHEMA = Schema.from_params(BrvstParams(attributes=tuple(f"a{i}" for i in range(5))))
NAMES = [s.name for s in SCHEMA.specs]


@st.composite
def sub_ranges(draw: st.DrawFn) -> dict[str, tuple[int, int]]:
    names = draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True))
    out = {}
    for n in names:
        a = draw(st.integers(0, 99))
        b = draw(st.integers(a, 99))
        out[n] = (a, b + 1)
    return out


def subscription(ranges: dict[str, tuple[int, int]]) -> Subscription:
    preds: list[Predicate] = []
    for name, (lo, hi) in ranges.items():
        preds.extend(SCHEMA.containment(name, lo, hi))
    return Subscription("t", tuple(preds))


def to_filter(fid: object, sub: Subscription) -> Filter:
    return Filter(fid, SCHEMA.arvs(SCHEMA.subscription_ranges(sub)))


@settings(max_examples=150, deadline=None)
@given(st.lists(sub_ranges(), min_size=1, max_size=25), st.data())
def test_forest_invariants_under_inserts_and_removes(subs: list[dict[str, tuple[int, int]]],
                                                     data: st.DataObject) -> None:
    forest = Forest()
    live: set[int] = set()
    for i, ranges in enumerate(subs):
        forest.insert(to_filter(i, subscription(ranges)))
        live.add(i)
        forest.check()  # 12 tree invariant, 13 partition, 15 reduction fixpoint
        if live and data.draw(st.booleans()):
            gone = data.draw(st.sampled_from(sorted(live)))
            forest.remove(gone)
            live.discard(gone)
            forest.check()  # 16 after Algorithm 2 too
        assert {f.id for f in forest.filters()} == live


@settings(max_examples=100, deadline=None)
@given(st.lists(sub_ranges(), min_size=1, max_size=12), sub_ranges(), st.data())
def test_insert_then_remove_keeps_the_represented_filters(
        subs: list[dict[str, tuple[int, int]]], extra: dict[str, tuple[int, int]],
        data: st.DataObject) -> None:
    forest = Forest()
    for i, ranges in enumerate(subs):
        forest.insert(to_filter(i, subscription(ranges)))
    before = {f.id: f for f in forest.filters()}
    forest.insert(to_filter("x", subscription(extra)))
    forest.remove("x")
    forest.check()
    assert {f.id: f for f in forest.filters()} == before


@st.composite
def events(draw: st.DrawFn) -> Event:
    attrs: dict[str, int | float | str] = {}
    for name in draw(st.lists(st.sampled_from(NAMES), max_size=5, unique=True)):
        a = draw(st.integers(-10, 110))
        b = draw(st.integers(a + 1, 120))
        attrs[name + "_lo"] = a
        attrs[name + "_hi"] = b if draw(st.booleans()) else b + 0.5
    if draw(st.booleans()):
        attrs["note"] = "x"
    return Event("t", attrs)


@settings(max_examples=400, deadline=None)
@given(st.lists(sub_ranges(), min_size=1, max_size=10), st.lists(sub_ranges(), max_size=10),
       events(), st.sampled_from([Comparator.SAFE, Comparator.EXACT]))
def test_no_false_negative_through_grid_and_zone(
        grid_a: list[dict[str, tuple[int, int]]], grid_b: list[dict[str, tuple[int, int]]],
        event: Event, mode: Comparator) -> None:
    """14: exact match => the subscription's root summary => its GRSV entry => the ZRSV."""
    zone = Forest()
    grids = []
    for g, subs in enumerate((grid_a, grid_b)):
        forest = Forest()
        members = [subscription(r) for r in subs]
        for i, s in enumerate(members):
            forest.insert(to_filter(i, s))
        grids.append((forest, members))
        for entry in forest.representative():
            zone.insert(Filter((g, entry), dict(entry)))
    zone.check()
    view = SCHEMA.view(event.attrs)
    zrsv = zone.representative()
    for forest, members in grids:
        rep = forest.representative()
        for i, s in enumerate(members):
            if not s.matches(event):
                continue
            tree = forest.trees[forest.index[i]]
            assert SCHEMA.matches(view, tree.summary, mode)
            assert any(SCHEMA.matches(view, dict(e), mode) for e in rep)
            assert any(SCHEMA.matches(view, dict(e), mode) for e in zrsv)


lows = st.sampled_from([Op.GE, Op.GT, Op.EQ, Op.LE, Op.NE])
highs = st.sampled_from([Op.LE, Op.LT, Op.EQ, Op.GE, Op.NE])
numbers = st.integers(-20, 120) | st.floats(-20, 120, allow_nan=False)


@st.composite
def free_subscriptions(draw: st.DrawFn) -> Subscription:
    """Any predicates on x_lo / x_hi, not only the containment pair."""
    preds: list[Predicate] = []
    for name in draw(st.lists(st.sampled_from(NAMES), min_size=1, max_size=3, unique=True)):
        if draw(st.booleans()):
            preds.append(Predicate.compare(name + "_lo", draw(lows), draw(numbers)))
        if draw(st.booleans()):
            preds.append(Predicate.compare(name + "_hi", draw(highs), draw(numbers)))
        if draw(st.booleans()):
            lo = draw(numbers)
            preds.append(Predicate.between(name + "_lo", lo, lo + draw(st.integers(0, 50))))
        if draw(st.booleans()):
            preds.append(Predicate.one_of(name + "_hi", draw(st.lists(numbers, min_size=1,
                                                                      max_size=3))))
        if not preds:
            preds.append(Predicate.present(name + "_lo"))
    return Subscription("t", tuple(preds))


@settings(max_examples=600, deadline=None)
@given(free_subscriptions(), events(), st.sampled_from(list(Comparator)))
@example(Subscription("t", (Predicate.compare("a0_lo", Op.GE, 100),)),  # only the top edge
         Event("t", {"a0_lo": 100, "a0_hi": 101.5}), Comparator.SAFE)
def test_summaries_cover_every_event_the_subscription_accepts(
        sub: Subscription, event: Event, mode: Comparator) -> None:
    """The ARVs of any subscription (any predicates) match every event it matches exactly:
    safe and exact always; the paper comparator whenever the event's vectors are as fine."""
    try:
        ranges = SCHEMA.subscription_ranges(sub)
    except SchemaError as exc:
        assert exc.reason == "empty_range"
        assert not sub.matches(event) or _degenerate(event)
        return
    if not sub.matches(event):
        return
    view = SCHEMA.view(event.attrs)
    arvs = SCHEMA.arvs(ranges)
    if mode is Comparator.PAPER and any(view.arvs[a].level < v.level for a, v in arvs.items()):
        return
    assert SCHEMA.matches(view, arvs, mode)


def _degenerate(event: Event) -> bool:
    """Events that fail the content convention (x_lo >= x_hi) are refused before matching."""
    try:
        SCHEMA.publication_ranges(event.attrs)
    except SchemaError:
        return True
    return False


def test_schema_parses_entries_and_defaults() -> None:
    s = Schema.from_params(BrvstParams(attributes=("age", "temp:-40:60:0.5", "p:0:1:0.001:10")))
    age, temp, p = s.specs
    assert (age.domain.L, age.domain.U, age.domain.q, age.domain.Lmax) == (0, 100, 1, 9)
    assert (temp.domain.L, temp.domain.q, temp.domain.Lmax) == (-40, Fraction(1, 2), 10)
    assert (p.domain.q, p.domain.Lmax) == (Fraction(1, 1000), 10)
    assert s.alpha == Fraction(9, 10)
