"""Events, predicates, subscriptions: validation, matching semantics, covering, wire."""

from __future__ import annotations

import itertools

import msgpack
import pytest

from meshsub.core.content import ContentError, Event, Op, Predicate, Subscription, Value
from meshsub.core.syntax import format_predicate, parse_subscription
from meshsub.core.topics import filter_covers, topic_matches, validate_filter, validate_topic


def sub(text: str) -> Subscription:
    return parse_subscription(text)


# ------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("topic", "attrs", "message"),
    [
        ("", {}, "empty"),
        ("a/+", {}, "wildcard"),
        ("a/#", {}, "wildcard"),
        ("$SYS/x", {}, "reserves"),
        ("a\x00b", {}, "control"),
        ("x" * 257, {}, "limit"),
        ("t", {"1a": 1}, "attribute name"),
        ("t", {"a-b": 1}, "attribute name"),
        ("t", {"a" * 65: 1}, "longer"),
        ("t", {"v": float("nan")}, "finite"),
        ("t", {"v": float("-inf")}, "finite"),
        ("t", {"v": 2**63}, "64-bit"),
        ("t", {"v": None}, "not NoneType"),
        ("t", {"v": [1]}, "not list"),
        ("t", {"v": "x" * 1025}, "longer than 1024"),
        ("t", {f"a{i}": i for i in range(65)}, "more than 64"),
    ],
)
def test_bad_events_raise_content_error(topic: str, attrs: dict[str, object], message: str) -> None:
    with pytest.raises(ContentError, match=message):
        Event(topic, attrs)  # type: ignore[arg-type]


def test_event_is_immutable_hashable_and_type_aware() -> None:
    e = Event("a/b", {"z": 1, "a": "x"})
    assert list(e.attrs) == ["a", "z"]
    assert e == Event("a/b", {"a": "x", "z": 1})
    assert hash(e) == hash(Event("a/b", {"a": "x", "z": 1}))
    assert Event("t", {"v": 1}) != Event("t", {"v": 1.0})
    assert Event("t", {"v": 1}) != Event("t", {"v": True})
    assert Event("t", {"v": -0.0}).key == Event("t", {"v": 0.0}).key
    with pytest.raises(TypeError):
        e.attrs["a"] = 2  # type: ignore[index]
    assert len({e, Event("a/b", {"a": "x", "z": 1})}) == 1


def test_predicate_operand_checks() -> None:
    with pytest.raises(ContentError, match="booleans support only"):
        Predicate("x", Op.LT, value=True)
    with pytest.raises(ContentError, match="two numbers or two strings"):
        Predicate.between("x", 1, "b")
    with pytest.raises(ContentError, match="empty range"):
        Predicate.between("x", 2, 1)
    with pytest.raises(ContentError, match="empty range"):
        Predicate.between("x", 1, 1, True, False)
    with pytest.raises(ContentError, match="at least one member"):
        Predicate.one_of("x", [])
    with pytest.raises(ContentError, match="do not apply"):
        Predicate("x", Op.EQ, value=1, prefix="a")
    with pytest.raises(ContentError, match="needs a value"):
        Predicate("x", Op.GT)
    with pytest.raises(ContentError, match="more than 64 predicates"):
        Subscription("t", tuple(Predicate.compare(f"a{i}", "=", 1) for i in range(65)))


def test_in_members_are_canonical() -> None:
    p = Predicate.one_of("x", ["b", 2, True, "a", 2, 1.0, 1])
    assert p.members == (True, 1.0, 1, 2, "a", "b")
    assert p == Predicate.one_of("x", [1, 1.0, True, "a", "b", 2])
    assert p != Predicate.one_of("x", [1, True, "a", "b", 2])


# -------------------------------------------------------------------- matching


@pytest.mark.parametrize(
    ("text", "attrs", "expected"),
    [
        ("t temp<10", {"temp": 5}, True),  # thesis examples
        ("t price>10", {"price": 10.9}, True),
        ("t temp<25", {"temp": 23}, True),
        ("t x=1", {"x": 1.0}, True),  # ints and floats compare numerically
        ("t x=1", {"x": True}, False),  # bools are not numbers
        ("t x=true", {"x": 1}, False),
        ("t x!=5", {"x": "a"}, False),  # cross-type never matches, != included
        ("t x!=5", {}, False),  # absent never matches, != included
        ("t x!=5", {"x": 6}, True),
        ("t x<5", {"x": "4"}, False),
        ("t x<b", {"x": "abc"}, True),  # str order
        ("t x<b", {"x": 1}, False),
        ("t x?", {"x": False}, True),
        ("t x?", {"y": 1}, False),
        ("t x^=ab", {"x": "abc"}, True),
        ("t x^=ab", {"x": "a"}, False),
        ('t x^="1"', {"x": 12}, False),
        ("t x=[1,2)", {"x": 1}, True),
        ("t x=[1,2)", {"x": 2}, False),
        ("t x=(1,2]", {"x": 2.0}, True),
        ("t x=(1,2]", {"x": 1}, False),
        ("t x in {1, a, true}", {"x": 1.0}, True),
        ("t x in {1, a, true}", {"x": True}, True),
        ("t x in {1, a}", {"x": True}, False),
        ("t x in {1, a}", {"x": "1"}, False),
        ("t", {"anything": 1}, True),  # no predicates: topic alone
        ("t x>1 x<3 y=on", {"x": 2, "y": "on"}, True),
        ("t x>1 x<3 y=on", {"x": 2, "y": "off"}, False),
    ],
)
def test_matching_semantics(text: str, attrs: dict[str, Value], expected: bool) -> None:
    assert sub(text).matches(Event("t", attrs)) is expected


@pytest.mark.parametrize(
    ("topic_filter", "topic", "expected"),
    [
        ("a/b", "a/b", True),
        ("a/+", "a/b", True),
        ("a/+", "a", False),
        ("a/+", "a/b/c", False),
        ("a/#", "a", True),
        ("a/#", "a/b/c", True),
        ("#", "x/y", True),
        ("+/+", "/x", True),
        ("+", "/x", False),
        ("a/+/c", "a//c", True),
    ],
)
def test_topic_matching(topic_filter: str, topic: str, expected: bool) -> None:
    assert topic_matches(validate_filter(topic_filter), validate_topic(topic)) is expected


@pytest.mark.parametrize("bad", ["a/#/b", "a/b#", "a+/b", "", "$x/#"])
def test_bad_filters(bad: str) -> None:
    with pytest.raises(ContentError):
        validate_filter(bad)


@pytest.mark.parametrize(
    ("f2", "f1", "expected"),
    [
        ("#", "a/+/#", True),
        ("a/#", "a", True),
        ("a/#", "a/#", True),
        ("a", "a/#", False),
        ("a/+", "a/b", True),
        ("a/b", "a/+", False),
        ("+/b", "a/+", False),
        ("a/+/#", "a/#", False),
        ("a/+/#", "a/x/y", True),
        ("+/+", "a/#", False),
    ],
)
def test_filter_covering(f2: str, f1: str, expected: bool) -> None:
    assert filter_covers(f2, f1) is expected


# -------------------------------------------------------------------- covering

# Single-attribute covering (Zheng 2008's examples, S2 covers S1), plus its negatives.
TABLE = [
    ("", "x<10", True),  # ANY (no predicates) covers everything
    ("x<10", "x<10", True),
    ("x<10", "x<5", True),
    ("x<10", "x<=5", True),
    ("x<10", "x=5", True),
    ("x<10", "x<=10", False),
    ("x<10", "x=10", False),
    ("x<=10", "x<10", True),
    ("x<=10", "x<=10", True),
    ("x<=10", "x=10", True),
    ("x<=10", "x<=11", False),
    ("x>5", "x>10", True),  # thesis example
    ("x<25", "x<20", True),  # thesis example
    ("x>=5", "x=5", True),
    ("x>5", "x>=5", False),
    ("x=5", "x=5", True),
    ("x=5", "x=5.0", True),
    ("x=5", "x<=5", False),
    ("x!=5", "x=6", True),
    ("x!=5", "x=5", False),
    ("x!=5", "x!=5", True),
    ("x!=5", "x!=6", False),
    ("x!=5", "x<5", True),
    ("x!=5", "x<=4", True),
    ("x!=5", "x<=5", False),
    ("x!=5", "x>5", True),
    ("x!=5", "x>=6", True),
    ("x!=5", "x>=5", False),
    # cross-type: never claimed
    ("x!=5", "x=a", False),
    ("x!=5", "x=true", False),
    ("x<10", "x<b", False),
    # generalisations
    ("x=[0,10]", "x=(2,3)", True),
    ("x=[0,10)", "x=[0,10]", False),
    ("x>=0", "x=[0,10]", True),
    ("x in {1, 2, 3}", "x in {1, 3}", True),
    ("x in {1, 2}", "x in {1, 3}", False),
    ("x in {1, 2}", "x=[1,2]", False),
    ("x<3", "x in {1, 2}", True),
    ("x^=ab", "x^=abc", True),
    ("x^=abc", "x^=ab", False),
    ("x^=ab", "x=abz", True),
    ("x^=ab", 'x=["ab","ac")', True),
    ("x^=ab", 'x=["ab","ac"]', False),
    ("x>=aa", "x^=ab", True),
    ("x?", "x=1", True),
    ("x?", "y=1", False),
    ("x?", "x!=1", True),
    ("x!=true", "x=false", True),
    ("x=false", "x!=true x in {true, false}", True),
    ("x=5", "x>=5 x<=5", True),
    ("x!=5", "x>3 x<5", True),
    ("x>3", "x>5 y=1", True),
    ("x>3 y=1", "x>5", False),
]


@pytest.mark.parametrize(("s2", "s1", "expected"), TABLE)
def test_covering_table(s2: str, s1: str, expected: bool) -> None:
    assert sub(f"t {s2}").covers(sub(f"t {s1}")) is expected


def test_covering_needs_topic_coverage() -> None:
    assert sub("a/+ x>1").covers(sub("a/b x>2"))
    assert not sub("a/b x>1").covers(sub("a/+ x>2"))


def test_unsatisfiable_is_covered_by_anything() -> None:
    empty = sub("a x<1 x>2")
    assert not empty.satisfiable()
    assert sub("b y=1").covers(empty)
    assert sub('a x<""').satisfiable() is False


def test_transitivity_examples() -> None:
    a, b, c = sub("t/# x>0"), sub("t/+ x>1"), sub("t/u x=[2,3] y=1")
    assert a.covers(b) and b.covers(c) and a.covers(c)
    assert not c.covers(b) and not b.covers(a)


def _predicate_zoo() -> list[Predicate]:
    numbers: list[Value] = [0, 1, 1.5, 2]
    strings: list[Value] = ["", "a", "ab", "b"]
    values = [*numbers, *strings, True, False]
    zoo = [Predicate("a", op, value=v) for v in values for op in (Op.EQ, Op.NE)]
    zoo += [Predicate("a", op, value=v) for v in numbers + strings
            for op in (Op.LT, Op.LE, Op.GT, Op.GE)]
    for pool in (numbers, strings):
        for lo, hi in itertools.combinations_with_replacement(pool, 2):
            for lc, hc in itertools.product((True, False), repeat=2):
                if lo != hi or (lc and hc):
                    zoo.append(Predicate.between("a", lo, hi, lc, hc))
    zoo += [Predicate.starts_with("a", s) for s in strings]  # type: ignore[arg-type]
    zoo += [Predicate.one_of("a", m) for k in (1, 2) for m in itertools.combinations(values, k)]
    zoo.append(Predicate.present("a"))
    return zoo


def test_single_predicate_covering_is_sound_exhaustively() -> None:
    """Every pair from a zoo of 168 predicates, checked against values on and off the bounds."""
    zoo = _predicate_zoo()
    probes: list[Value] = [0, 1, 1.5, 2, "", "a", "ab", "b", True, False, -1, 0.5, 1.25, 1.75,
                           3, "aa", "aab", "aZ", "a\x00", "abc", "b\U0010ffff", "ba", "c", "A"]
    claimed = 0
    for p1, p2 in itertools.product(zoo, zoo):
        if Subscription("t", (p2,)).covers(Subscription("t", (p1,))):
            claimed += 1
            bad = [v for v in probes if p1.holds(v) and not p2.holds(v)]
            assert not bad, (format_predicate(p2), format_predicate(p1), bad)
    assert claimed > 1500  # the test is only worth something if coverage is often claimed


# ------------------------------------------------------------------------ wire


def test_wire_forms_are_compact_and_canonical() -> None:
    s = sub("a/+ b=[1,2.5) a in {z, 1, true} c? d^=x")
    assert s.to_wire() == [
        "a/+",
        ["a", 8, [True, 1, "z"]],
        ["b", 6, 1, 2.5, 1],
        ["c", 9],
        ["d", 7, "x"],
    ]
    assert s.key == msgpack.packb(s.to_wire())
    assert Event("t", {"b": 1, "a": "x"}).to_wire() == ["t", "a", "x", "b", 1]
    assert Event.from_wire(("t", "b", 1, "a", "x")) == Event("t", {"a": "x", "b": 1})


@pytest.mark.parametrize(
    "wire",
    [
        None, 3, "t", [], [1], ["t", "a"], ["t", "a", None], ["t", 1, 2], ["t", "a", 1, "a", 2],
        ["t+", "a", 1], ["t", "a", b"x"], ["t", "a", float("nan")], [b"t"],
    ],
)
def test_bad_event_wire(wire: object) -> None:
    with pytest.raises(ContentError):
        Event.from_wire(wire)


@pytest.mark.parametrize(
    "wire",
    [
        None, [], [3], ["a/#/b"], ["t", None], ["t", []], ["t", ["x"]], ["t", ["x", 42]],
        ["t", ["x", 0]], ["t", ["x", 0, 1, 2]], ["t", ["x", 6, 2, 1, 3]], ["t", ["x", 6, 1, 2, 9]],
        ["t", ["x", 8, []]], ["t", ["x", 8, "ab"]], ["t", ["x", 7, 5]], ["t", ["x", 2, True]],
        ["t", ["x", True, 1]], ["t", ["1x", 0, 1]], ["t", ["x", 9, 1]], ["t", {"x": 1}],
    ],
)
def test_bad_subscription_wire(wire: object) -> None:
    with pytest.raises(ContentError):
        Subscription.from_wire(wire)
