"""Semantic tags on the core's content model, and the Bloom keys that index them.

Liu (2011, §3.2, §3.6) describes events and subscriptions by *attributes*,
opaque strings: a subscription is one attribute, a disjunction or a
conjunction of them, and a publication asserts its attributes. Here an
attribute is a **tag**: an event attribute whose value is ``true``
(``news traffic=true weather=true``), and a subscription asks for it with the
predicate ``traffic=true``. So the core's exact matcher decides delivery, and
the tree-group protocol's Bloom index only has to route without false
negatives:

- a subscription's **key** is its tags, sorted and joined with U+001F
  (Liu §3.6: "order them ... and add the concatenation"; the separator keeps
  ``("ab","c")`` apart from ``("a","bc")``); one tag is the single form;
- an event's **probe keys** are the joined keys of every non-empty subset of
  its tags (``2^n - 1`` of them, §3.6), so a subscription whose tags the event
  all has finds its key among them;
- a subscription without tags is keyed by its topic filter (the exact topic,
  or the literal levels before its first wildcard), and an event also probes
  its topic and every prefix of it, so topic-only subscriptions route too;
- an event with more than ``MAX_PUB_TAGS`` tags has no probe set (``None``): it
  passes every filter. A subscription with more than ``MAX_SUB_TAGS`` tags is
  keyed by its first ``MAX_SUB_TAGS`` (any event matching it has more tags than
  that, so it passes every filter anyway).

The core has no disjunction across attributes, so an OR subscription
``{a or b or c}`` is **one core subscription per tag** (``or_subscriptions``),
with ids ``group|a``, ``group|b``, ``group|c`` (``meshsub.core.disjunction``,
which also turns any disjunction of subscriptions into members).
``Protocol.deliver_local`` delivers an event once per group, named by the group,
so the application gets it once however many of its tags match; each member is
still matched exactly. A conjunctive subscription is one core subscription with one
``tag=true`` predicate per tag. The thesis's *disjunctive publication* (an
event asserting "at least one of") has no counterpart: a core event is a set
of facts, i.e. always conjunctive, which is also what the thesis's
simulation publishes.

An event's **scope** (§3.4: local events stay in the publisher's group,
global ones go network-wide) is the reserved attribute ``_scope``:
``"local"`` or ``"global"`` (the default when absent); ``"@origin"`` or
``"@origin:tg"``, the scenarios' spelling of the publisher's groups, is local
too. It is part of the event, so a subscription may also filter on it.
"""

from __future__ import annotations

import enum
import itertools
from collections.abc import Iterable

from meshsub.core.content import ContentError, Event, Subscription
from meshsub.core.disjunction import OR_SEP, member_id
from meshsub.core.disjunction import delivery_group as delivery_group  # re-exported
from meshsub.core.predicates import Op, Predicate
from meshsub.core.topics import is_wildcard, validate_filter, validate_topic
from meshsub.core.values import check_name

TAG_SEP = "\x1f"
"""Joins the sorted tags of a conjunction (never part of a tag: tags are identifiers)."""
TOPIC_KEY = "\x1et"
PREFIX_KEY = "\x1ep"
"""Prefixes of the topic keys: control characters no tag or topic can contain."""
MAX_PUB_TAGS = 8
"""Most tags whose subsets an event probes (2^8 - 1 = 255 probe keys)."""
MAX_SUB_TAGS = 8
SCOPE_ATTR = "_scope"
ORIGIN_SCOPE = "@origin"
"""The scenarios' and the evaluation's name for "the publisher's groups": local, too."""


class Scope(enum.StrEnum):
    LOCAL = "local"
    GLOBAL = "global"


class Mode(enum.StrEnum):
    """The thesis's subscription forms (§3.6)."""

    SINGLE = "single"
    OR = "or"
    AND = "and"


def event_tags(event: Event) -> tuple[str, ...]:
    """The event's tags: its attributes whose value is ``true``, sorted."""
    return tuple(name for name, value in event.attrs.items() if value is True)


def _is_tag_predicate(p: Predicate) -> bool:
    return p.op is Op.EQ and p.value is True


def subscription_tags(sub: Subscription) -> tuple[str, ...]:
    """The tags a subscription requires (its ``name=true`` predicates), sorted."""
    return tuple(sorted({p.attr for p in sub.predicates if _is_tag_predicate(p)}))


def tag_key(tags: Iterable[str]) -> str:
    """The Bloom key of a conjunction of tags: sorted, joined with U+001F."""
    return TAG_SEP.join(sorted(set(tags)))


def _topic_prefix_levels(topic_filter: str) -> list[str]:
    """The literal levels of a filter before its first wildcard."""
    out: list[str] = []
    for level in topic_filter.split("/"):
        if level in ("+", "#"):
            break
        out.append(level)
    return out


def subscription_key(sub: Subscription) -> str:
    """The one Bloom key a subscription inserts (see the module docstring)."""
    tags = subscription_tags(sub)
    if tags:
        return tag_key(tags[:MAX_SUB_TAGS])
    if not is_wildcard(sub.topic):
        return TOPIC_KEY + sub.topic
    return PREFIX_KEY + "/".join(_topic_prefix_levels(sub.topic))


def probe_keys(event: Event) -> frozenset[str] | None:
    """Every key a matching subscription may have inserted; ``None``: probe everything.

    No false negatives: if ``sub.matches(event)`` then ``subscription_key(sub)``
    is in the result (or the result is ``None``).
    """
    tags = event_tags(event)
    if len(tags) > MAX_PUB_TAGS:
        return None
    out = {TAG_SEP.join(c) for n in range(1, len(tags) + 1)
           for c in itertools.combinations(tags, n)}
    out.add(TOPIC_KEY + event.topic)
    levels = event.topic.split("/")
    out.update(PREFIX_KEY + "/".join(levels[:i]) for i in range(len(levels) + 1))
    return frozenset(out)


def event_scope(event: Event) -> Scope:
    """``local`` only if the event says so; anything else is a global event.

    ``"@origin"`` and ``"@origin:PREFIX"`` (the scenarios' "the publisher's own groups",
    docs/scenarios.md) are local too: the same meaning, in the evaluation's words.
    """
    value = event.attrs.get(SCOPE_ATTR)
    if value == Scope.LOCAL.value or (isinstance(value, str) and (
            value == ORIGIN_SCOPE or value.startswith(ORIGIN_SCOPE + ":"))):
        return Scope.LOCAL
    return Scope.GLOBAL


# ------------------------------------------------------------------ building


def _tags(tags: Iterable[str]) -> list[str]:
    out = sorted({check_name(t) for t in tags})
    if not out:
        raise ContentError("at least one tag is needed")
    if SCOPE_ATTR in out:
        raise ContentError(f"{SCOPE_ATTR!r} is the scope attribute, not a tag")
    return out


def tag_event(topic: str, tags: Iterable[str], scope: Scope = Scope.GLOBAL) -> Event:
    """An event asserting ``tags`` (the thesis's conjunctive publication)."""
    attrs: dict[str, str | bool] = dict.fromkeys(_tags(tags), True)
    if scope is Scope.LOCAL:
        attrs[SCOPE_ATTR] = Scope.LOCAL.value
    return Event(validate_topic(topic), attrs)


def conjunction(topic_filter: str, tags: Iterable[str]) -> Subscription:
    """One core subscription requiring every tag (single and AND forms)."""
    return Subscription(validate_filter(topic_filter),
                        tuple(Predicate.compare(t, Op.EQ, True) for t in _tags(tags)))


def or_member_id(group: str, tag: str) -> str:
    return member_id(group, tag)


def tag_subscriptions(sub_id: str, topic_filter: str, mode: Mode,
                      tags: Iterable[str]) -> list[tuple[str, Subscription]]:
    """The core subscriptions (id, subscription) of one thesis-style subscription.

    SINGLE and AND give one; OR gives one per tag, ids ``sub_id|tag``.
    """
    if OR_SEP in sub_id:
        raise ContentError(f"subscription id {sub_id!r} must not contain {OR_SEP!r}")
    names = _tags(tags)
    if mode is Mode.SINGLE and len(names) != 1:
        raise ContentError("a single-attribute subscription has exactly one tag")
    if mode is Mode.OR:
        return [(or_member_id(sub_id, t), conjunction(topic_filter, [t])) for t in names]
    return [(sub_id, conjunction(topic_filter, names))]
