"""MatcherIndex: every operator and topic shape against Subscription.matches."""

from __future__ import annotations

import random

import pytest

from meshsub.core.content import Event, Subscription, Value
from meshsub.core.index import MatcherIndex
from meshsub.core.syntax import parse_event, parse_subscription

SUBS = {
    "eq": "t x=1",
    "eq_float": "t x=1.0",
    "eq_bool": "t x=true",
    "ne": "t x!=1",
    "ne_str": "t x!=a",
    "lt": "t x<2",
    "le": "t x<=2",
    "gt": "t x>2",
    "ge": "t x>=2",
    "range": "t x=(1,3]",
    "srange": "t x=[a,b)",
    "prefix": "t x^=ab",
    "prefix_empty": 't x^=""',
    "in": "t x in {1, b, false}",
    "exists": "t x?",
    "both": "t x=1 x in {1, 2}",
    "two_attrs": "t x>=1 y=on",
    "bare": "t",
    "plus": "+ x=1",
    "hash": "t/# x?",
    "root_hash": "#",
    "deep": "t/+/z x<5",
}

EVENTS = [
    "t x=1", "t x=1.0", "t x=true", "t x=false", "t x=2", "t x=2.5", "t x=3", "t x=0",
    "t x=a", "t x=ab", "t x=abc", "t x=b", "t x=\"\"", "t y=on", "t x=1 y=on", "t x=5 y=off",
    "t", "t/u x=1", "t/u/z x=4", "t/u/z x=9", "u x=1", "t/ x=1",
]


def _index(subs: dict[str, str]) -> tuple[MatcherIndex, dict[str, Subscription]]:
    index = MatcherIndex()
    parsed = {k: parse_subscription(v) for k, v in subs.items()}
    for k, s in parsed.items():
        index.add(k, s)
    return index, parsed


@pytest.mark.parametrize("text", EVENTS)
def test_every_operator_matches_like_the_scan(text: str) -> None:
    index, parsed = _index(SUBS)
    event = parse_event(text)
    assert index.match(event) == {k for k, s in parsed.items() if s.matches(event)}


def test_some_expected_answers() -> None:
    index, _ = _index(SUBS)
    assert index.match(parse_event("t x=1")) == {
        "eq", "eq_float", "lt", "le", "in", "exists", "both", "bare", "plus", "hash",
        "root_hash",
    }
    assert index.match(parse_event("t x=true")) == {
        "eq_bool", "exists", "bare", "hash", "root_hash",
    }
    assert index.match(parse_event("t x=abc")) == {
        "ne_str", "srange", "prefix", "prefix_empty", "exists", "bare", "hash", "root_hash",
    }
    assert index.match(parse_event("t/u x=abc")) == {"hash", "root_hash"}
    assert index.match(parse_event("other")) == {"root_hash"}
    assert index.match(parse_event("other x=1")) == {"plus", "root_hash"}


def test_replace_remove_and_pruning() -> None:
    index = MatcherIndex()
    index.add("a", parse_subscription("t/+ x>1"))
    index.add("a", parse_subscription("t/u x<1"))  # replaces
    assert len(index) == 1 and "a" in index
    assert index.match(parse_event("t/u x=2")) == set()
    assert index.match(parse_event("t/u x=0")) == {"a"}
    assert not index._trie.children  # the wildcard bucket went away with the old subscription
    assert index.remove("a") and not index.remove("a")
    assert len(index) == 0 and not index._exact and "a" not in index


def test_thresholds_stay_sorted_across_interleaved_changes() -> None:
    rnd = random.Random(7)
    index = MatcherIndex()
    model: dict[str, Subscription] = {}
    for step in range(400):
        sub_id = f"s{rnd.randrange(40)}"
        if rnd.random() < 0.3:
            index.remove(sub_id)
            model.pop(sub_id, None)
        else:
            lo = rnd.choice([0, 1, 1.5, 2, 3])
            text = rnd.choice([f"t x>{lo}", f"t x<={lo}", f"t x=[{lo},{lo + 1})", f"t x!={lo}"])
            model[sub_id] = parse_subscription(text)
            index.add(sub_id, model[sub_id])
        value: Value = rnd.choice([0, 0.5, 1, 1.5, 2, 2.5, 3, 4])
        event = Event("t", {"x": value})
        assert index.match(event) == {k for k, s in model.items() if s.matches(event)}, step


def test_rejects_non_subscriptions() -> None:
    with pytest.raises(TypeError):
        MatcherIndex().add("a", "t x=1")  # type: ignore[arg-type]
