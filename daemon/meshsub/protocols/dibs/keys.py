"""From meshsub's content model to DIBS keys and query intervals (Pham and Tran 2012, §2).

The paper's data domain is ``{0,1}^k``: an event is one k-bit key, a query a
closed key interval; applications map their values into it. meshsub's
integers are signed 64-bit, too narrow for the paper's ``k = 64``, so a key
travels in content as a **fixed-width lowercase hexadecimal string** of
``k/4`` digits in the attribute ``key_attr`` (or, for keys below ``2^63``, as
a plain integer: numeric workload generators): for strings of equal width,
lexicographic order is numeric order, so a subscription's ordinary string
comparisons (``key >= "..."``, ranges, equality) on that attribute select
exactly a key interval, and the designated node's exact match (the
subscription's own predicates) agrees with the interval.

- An event with the attribute uses its value; one without it gets the first
  ``k`` bits of SHA-256 of its topic (the paper's §2 "type-based" keys).
- A subscription's interval is the intersection of its constraints on the
  attribute that name well-formed keys; a subscription without one is the
  whole key space (it may match events of any key), which is correct but
  stored at every node of its cluster (docs/protocols/dibs.md, "Keys").
"""

from __future__ import annotations

import hashlib
import re

from meshsub.core.content import Event, Subscription
from meshsub.core.predicates import Op
from meshsub.protocols.dibs.va import Interval

_HEX = re.compile(r"[0-9a-f]+\Z")


class KeyError_(ValueError):
    """An event whose key attribute is not a well-formed key."""


def format_key(key: int, k: int) -> str:
    """The content form of ``key``: ``k/4`` lowercase hexadecimal digits."""
    return format(key, f"0{k // 4}x")


def parse_key(text: object, k: int) -> int | None:
    """``text`` as a key if it is exactly ``k/4`` lowercase hex digits, else ``None``.

    A non-negative integer below ``2^k`` (and below ``2^63``, content's limit)
    is also a key: numeric workloads reach the lower part of a wide key space.
    """
    if isinstance(text, int) and not isinstance(text, bool):
        return text if 0 <= text < 1 << k else None
    if not isinstance(text, str) or len(text) != k // 4 or not _HEX.match(text):
        return None
    return int(text, 16)


def topic_key(topic: str, k: int) -> int:
    """The first ``k`` bits of SHA-256 of the topic (``k`` <= 256)."""
    digest = int.from_bytes(hashlib.sha256(topic.encode("utf-8")).digest(), "big")
    return digest >> (256 - k)


def event_key(event: Event, k: int, attr: str) -> int:
    """The event's key; ``KeyError_`` if it carries ``attr`` in another form."""
    value = event.attrs.get(attr)
    if value is None:
        return topic_key(event.topic, k)
    key = parse_key(value, k)
    if key is None:
        raise KeyError_(f"{attr}={value!r} is not {k // 4} lowercase hex digits")
    return key


def query_interval(sub: Subscription, k: int, attr: str) -> Interval | None:
    """The key interval a subscription can match; ``None`` when it is empty."""
    lo, hi = 0, (1 << k) - 1
    for p in sub.predicates:
        if p.attr != attr:
            continue
        if p.op is Op.EQ:
            key = parse_key(p.value, k)
            if key is None:
                return None  # no well-formed key equals it
            lo, hi = max(lo, key), min(hi, key)
        elif p.op in (Op.GE, Op.GT, Op.LE, Op.LT):
            key = parse_key(p.value, k)
            if key is None:
                continue  # a bound outside the key form: keep the wider interval (sound)
            if p.op is Op.GE:
                lo = max(lo, key)
            elif p.op is Op.GT:
                lo = max(lo, key + 1)
            elif p.op is Op.LE:
                hi = min(hi, key)
            else:
                hi = min(hi, key - 1)
        elif p.op is Op.RANGE:
            a, b = parse_key(p.lo, k), parse_key(p.hi, k)
            if a is not None:
                lo = max(lo, a if p.lo_closed else a + 1)
            if b is not None:
                hi = min(hi, b if p.hi_closed else b - 1)
        elif p.op is Op.IN:
            keys = [parse_key(v, k) for v in p.members]
            good = [x for x in keys if x is not None]
            if not good:
                return None
            lo, hi = max(lo, min(good)), min(hi, max(good))
    return (lo, hi) if lo <= hi else None
