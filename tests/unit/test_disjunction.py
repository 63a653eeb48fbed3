"""Disjunctions (``a | b``): the text syntax, their members, and one delivery per group."""

from __future__ import annotations

import pytest

from meshsub.core.api import Deliver, LocalPublish, LocalSubscribe, LocalUnsubscribe
from meshsub.core.content import ContentError
from meshsub.core.disjunction import delivery_group, member_ids, members
from meshsub.core.syntax import (
    MAX_ALTERNATIVES,
    format_alternatives,
    parse_alternatives,
    parse_event,
    parse_subscription,
)
from meshsub.protocols.flooding import Flooding


def test_alternatives_parse_and_format_round_trip() -> None:
    alts = parse_alternatives('news traffic=true | news weather=true  |  sport/# x>=2 y="a | b"')
    assert [a.topic for a in alts] == ["news", "news", "sport/#"]
    assert alts[2].matches(parse_event('sport/ski x=3 y="a | b"'))
    assert parse_alternatives(format_alternatives(alts)) == alts
    assert parse_alternatives("news a=true") == (parse_subscription("news a=true"),)


@pytest.mark.parametrize(("text", "message"), [
    ("news a=true |", "expected a topic"),
    ("news a=true | news a=true", "given twice"),
    (" | ".join(f"t{i}" for i in range(MAX_ALTERNATIVES + 1)), "at most"),
    ("news a=true|b=true", "column"),
])
def test_bad_disjunctions_are_one_line_errors(text: str, message: str) -> None:
    with pytest.raises(ContentError, match=message) as err:
        parse_alternatives(text)
    assert "\n" not in str(err.value)


def test_a_disjunction_is_not_one_subscription() -> None:
    with pytest.raises(ContentError, match="disjunction"):
        parse_subscription("news a=true | news b=true")


def test_members_keep_a_plain_id_and_number_alternatives() -> None:
    one = parse_alternatives("news a=true")
    two = parse_alternatives("news a=true | news b=true")
    assert [m for m, _ in members("app/x", one)] == ["app/x"] == member_ids("app/x", 1)
    assert [m for m, _ in members("app/x", two)] == ["app/x|0", "app/x|1"]
    assert member_ids("app/x", 2) == ["app/x|0", "app/x|1"]
    assert {delivery_group(m) for m, _ in members("app/x", two)} == {"app/x"}
    with pytest.raises(ContentError):
        members("a|b", two)
    with pytest.raises(ContentError):
        members("a", ())


def test_a_disjunction_is_delivered_once_under_its_own_id() -> None:
    proto = Flooding(1)
    for member, sub in members("g", parse_alternatives("news a=true | news b=true | other")):
        proto.handle(LocalSubscribe(0.0, member, sub))
    both = proto.handle(LocalPublish(1.0, parse_event("news a=true b=true"),
                                     proto.new_message_id()))
    assert [a.sub_id for a in both if isinstance(a, Deliver)] == ["g"]
    neither = proto.handle(LocalPublish(2.0, parse_event("news c=true"), proto.new_message_id()))
    assert [a for a in neither if isinstance(a, Deliver)] == []
    for member in member_ids("g", 3):
        proto.handle(LocalUnsubscribe(3.0, member))
    assert proto.subscriptions == {}
