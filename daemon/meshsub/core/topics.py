"""Topics and topic filters with MQTT rules, so that MQTT users meet no surprises.

A topic is ``/``-separated levels (empty levels allowed, as in MQTT). A filter
may use ``+`` (exactly one level) and ``#`` (any number of levels, including
none, so ``a/#`` matches ``a``); each must fill a whole level and ``#`` must be
last. Topics starting with ``$`` are the broker's in MQTT and are rejected here,
which keeps wildcard semantics free of the ``$`` exception.
"""

from __future__ import annotations

import re

from meshsub.core.values import MAX_TOPIC_BYTES, ContentError

_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")
"""C0 and C1 control characters (one regex search instead of a loop per character:
every received event's topic passes here)."""


def _check_text(text: object, what: str) -> str:
    if not isinstance(text, str):
        raise ContentError(f"{what} must be a string, not {type(text).__name__}")
    plain = str.__str__(text)
    if not plain:
        raise ContentError(f"{what} is empty")
    try:
        size = len(plain.encode("utf-8"))
    except UnicodeEncodeError:
        raise ContentError(f"{what} is not valid Unicode (lone surrogate)") from None
    if size > MAX_TOPIC_BYTES:
        raise ContentError(f"{what} is {size} bytes of UTF-8; the limit is {MAX_TOPIC_BYTES}")
    if plain.startswith("$"):
        raise ContentError(f"{what} {plain!r} starts with '$', which MQTT reserves for brokers")
    control = _CONTROL.search(plain)
    if control is not None:
        raise ContentError(
            f"{what} {plain!r} contains control character U+{ord(control.group()):04X}")
    return plain


def validate_topic(topic: object) -> str:
    """Return ``topic`` as a plain ``str`` or raise ``ContentError`` (no wildcards allowed)."""
    plain = _check_text(topic, "topic")
    if "+" in plain or "#" in plain:
        raise ContentError(f"topic {plain!r} contains a wildcard ('+' or '#'); events need a topic")
    return plain


def validate_filter(topic_filter: object) -> str:
    """Return ``topic_filter`` as a plain ``str`` or raise ``ContentError``."""
    plain = _check_text(topic_filter, "topic filter")
    levels = plain.split("/")
    for i, level in enumerate(levels):
        if ("+" in level or "#" in level) and len(level) != 1:
            raise ContentError(
                f"topic filter {plain!r}: a wildcard must fill a whole level, not {level!r}"
            )
        if level == "#" and i != len(levels) - 1:
            raise ContentError(f"topic filter {plain!r}: '#' must be the last level")
    return plain


def is_wildcard(topic_filter: str) -> bool:
    """True if a (validated) filter contains ``+`` or ``#``."""
    return "+" in topic_filter or "#" in topic_filter


def topic_matches(topic_filter: str, topic: str) -> bool:
    """True if the (validated) filter matches the (validated) topic."""
    if not is_wildcard(topic_filter):
        return topic_filter == topic
    flevels = topic_filter.split("/")
    tlevels = topic.split("/")
    for i, level in enumerate(flevels):
        if level == "#":
            return True
        if i >= len(tlevels):
            return False
        if level != "+" and level != tlevels[i]:
            return False
    return len(flevels) == len(tlevels)


def filter_covers(f2: str, f1: str) -> bool:
    """True if every topic that ``f1`` matches is also matched by ``f2`` (exact, not heuristic)."""
    l2 = f2.split("/")
    l1 = f1.split("/")
    for i, level2 in enumerate(l2):
        if level2 == "#":
            return True
        if i >= len(l1):
            return False
        level1 = l1[i]
        if level1 == "#":
            return False
        if level2 == "+":
            continue
        if level1 != level2:
            return False
    return len(l1) == len(l2)
