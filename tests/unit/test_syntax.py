"""The text syntax: every construct, canonical output, and errors that name the column."""

from __future__ import annotations

import pytest

from meshsub.core.content import ContentError, Event, Op, Predicate, Subscription
from meshsub.core.syntax import (
    format_event,
    format_subscription,
    format_value,
    parse_event,
    parse_subscription,
)


def test_the_example_from_the_brief() -> None:
    s = parse_subscription("sensors/temp  value>=20 value<30 room=lab")
    assert s == Subscription(
        "sensors/temp",
        (
            Predicate.compare("value", ">=", 20),
            Predicate.compare("value", "<", 30),
            Predicate.compare("room", "=", "lab"),
        ),
    )
    assert format_subscription(s) == "sensors/temp room=lab value<30 value>=20"


@pytest.mark.parametrize(
    ("text", "predicate"),
    [
        ("x=1", Predicate("x", Op.EQ, value=1)),
        ("x==1", Predicate("x", Op.EQ, value=1)),
        ("x = 1", Predicate("x", Op.EQ, value=1)),
        ("x!=-2.5e3", Predicate("x", Op.NE, value=-2500.0)),
        ("x<1.", Predicate("x", Op.LT, value=1.0)),
        ("x<=.5", Predicate("x", Op.LE, value=0.5)),
        ("x>+7", Predicate("x", Op.GT, value=7)),
        ("x>=abc", Predicate("x", Op.GE, value="abc")),
        ('x="20"', Predicate("x", Op.EQ, value="20")),
        ('x="true"', Predicate("x", Op.EQ, value="true")),
        ("x=true", Predicate("x", Op.EQ, value=True)),
        ("x=false", Predicate("x", Op.EQ, value=False)),
        ("x=True", Predicate("x", Op.EQ, value="True")),
        ("x=1.2.3", Predicate("x", Op.EQ, value="1.2.3")),
        ("x=pi-01.local", Predicate("x", Op.EQ, value="pi-01.local")),
        (r'x="a\"b\\c\n\u00e9\U0001F600"', Predicate("x", Op.EQ, value='a"b\\c\né\U0001f600')),
        ("x=[20,30)", Predicate.between("x", 20, 30, True, False)),
        ("x=( 20 , 30 ]", Predicate.between("x", 20, 30, False, True)),
        ("x==[a,b]", Predicate.between("x", "a", "b")),
        ("x^=12", Predicate.starts_with("x", "12")),
        ('x^=""', Predicate.starts_with("x", "")),
        ("x in {a, 3, true}", Predicate.one_of("x", ["a", 3, True])),
        ("x in{1}", Predicate.one_of("x", [1])),
        ("x?", Predicate.present("x")),
        ("x ?", Predicate.present("x")),
    ],
)
def test_predicate_forms(text: str, predicate: Predicate) -> None:
    s = parse_subscription(f"t {text}")
    assert s.predicates == (predicate,)
    assert parse_subscription(format_subscription(s)) == s


def test_types_are_preserved() -> None:
    e = parse_event("t i=1 f=1.0 g=1e+16 b=true s=x n=-0 z=-0.0")
    assert [type(e.attrs[k]) for k in ("i", "f", "g", "b", "s", "n", "z")] == [
        int, float, float, bool, str, int, float,
    ]
    assert format_event(e) == "t b=true f=1.0 g=1e+16 i=1 n=0 s=x z=0.0"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("lab", "lab"),
        ("", '""'),
        ("20", '"20"'),
        ("1e5", '"1e5"'),
        ("true", '"true"'),
        ("inf", '"inf"'),
        ("-NaN", '"-NaN"'),
        ("a b", '"a b"'),
        ("a=b", '"a=b"'),
        ("tab\there", '"tab\\there"'),
        ("\x7f", '"\\u007f"'),
        ("é", "é"),
        (0.1, "0.1"),
        (1e-07, "1e-07"),
        (-3, "-3"),
        (False, "false"),
    ],
)
def test_value_formatting(value: str | float | bool, text: str) -> None:
    assert format_value(value) == text


def test_topics_may_need_quotes() -> None:
    e = Event("a b/c", {"x": 1})
    assert format_event(e) == '"a b/c" x=1'
    assert parse_event(format_event(e)) == e
    assert parse_event('"quoted" x=1').topic == "quoted"
    assert parse_event("a/b=c x=1").topic == "a/b=c"


@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        ("", 1, "expected a topic"),
        ("   ", 4, "expected a topic"),
        ("a/#/b", 1, "must be the last level"),
        ("t x", 4, "expected an operator"),
        ("t x=", 5, "expected a value"),
        ("t x<true", 3, "booleans"),
        ("t x=[3,1]", 3, "empty range"),
        ("t x=[1,b)", 3, "two numbers or two strings"),
        ("t x=[1 2]", 8, "expected ','"),
        ("t x=[1,2", 9, "expected ']' or ')'"),
        ('t x="abc', 5, "unterminated string"),
        (r't x="a\qb"', 7, "unknown escape"),
        (r't x="\u12"', 6, "4 hex digits"),
        (r't x="\ud800"', 3, "lone surrogate"),
        ("t 1x=3", 3, "bad attribute name"),
        ("t x=inf", 5, "not a finite number"),
        ("t x=-Infinity", 5, "not a finite number"),
        ("t x=1e999", 5, "out of range"),
        ("t x=9223372036854775808", 3, "64-bit"),
        ("t x in {}", 9, "expected a value"),
        ("t x in {1 2}", 11, "expected ',' or '}'"),
        ("t x in [1]", 8, "expected '{'"),
        ("t x^=[", 6, "expected a string prefix"),
        ("t x=1!y=2", 6, "unexpected '!'"),
        ('t x="a"y=2', 8, "expected whitespace"),
        ("t =3", 3, "expected an attribute name"),
    ],
)
def test_subscription_errors_name_the_column(text: str, column: int, fragment: str) -> None:
    with pytest.raises(ContentError) as info:
        parse_subscription(text)
    message = str(info.value)
    assert f"at column {column}:" in message, message
    assert fragment in message, message


@pytest.mark.parametrize(
    ("text", "column", "fragment"),
    [
        ("a/+ x=1", 1, "wildcard"),
        ("t x<1", 4, "expected '='"),
        ("t x=1 x=2", 7, "given twice"),
        ("t x=[1,2]", 5, "expected a value"),
        ("t x=" + "a" * 1025, 3, "longer than 1024"),
        ("t x", 4, "expected '='"),
    ],
)
def test_event_errors_name_the_column(text: str, column: int, fragment: str) -> None:
    with pytest.raises(ContentError) as info:
        parse_event(text)
    message = str(info.value)
    assert f"at column {column}:" in message, message
    assert fragment in message, message


def test_non_text_input_is_a_content_error() -> None:
    with pytest.raises(ContentError, match="must be a string"):
        parse_subscription(b"t x=1")  # type: ignore[arg-type]
    with pytest.raises(ContentError, match="longer than"):
        parse_event("t " + "x" * 70000)
