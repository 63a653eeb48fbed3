"""The subscriptions of a set that no other one covers, fast for tag conjunctions.

A node that forwards subscriptions (a subscription tree, a broker overlay)
need not forward one that another forwarded one covers: every event the
covered one matches, the covering one matches too (``Subscription.covers``,
sound). Checking every pair costs n^2 covering tests, too slow for the
thousand subscriptions of a network-wide tree. Most of them are tag
conjunctions on one topic (``meshsub.core.tags``), and there ``{a}`` covers
``{a, b}``: a subset of the tags covers. So:

- a *pure* subscription (an exact topic, only ``tag=true`` predicates, at most
  ``MAX_SUBSET_TAGS`` of them) is covered by a pure one on the same topic whose
  tags are a proper subset: its subsets are looked up, not the whole set;
- every other subscription is compared with all, by ``covers``.

Of two subscriptions that cover each other, the one with the smaller key stays.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping

from meshsub.core.content import Subscription
from meshsub.core.tags import subscription_tags
from meshsub.core.topics import is_wildcard

MAX_SUBSET_TAGS = 8


def _pure_tags(sub: Subscription) -> frozenset[str] | None:
    """The tags of a pure tag conjunction, or None for any other subscription."""
    if is_wildcard(sub.topic):
        return None
    tags = subscription_tags(sub)
    if len(tags) != len(sub.predicates) or len(tags) > MAX_SUBSET_TAGS:
        return None
    return frozenset(tags)


def uncovered(subs: Mapping[bytes, Subscription]) -> dict[bytes, Subscription]:
    """The members of ``subs`` (keyed by ``Subscription.key``) that no other member covers."""
    pure: dict[str, set[frozenset[str]]] = {}
    tags_of: dict[bytes, frozenset[str]] = {}
    general: list[tuple[bytes, Subscription]] = []
    for key, sub in subs.items():
        tags = _pure_tags(sub)
        if tags is None:
            general.append((key, sub))
        else:
            tags_of[key] = tags
            pure.setdefault(sub.topic, set()).add(tags)

    def beats(ckey: bytes, coverer: Subscription, key: bytes, sub: Subscription) -> bool:
        return ckey != key and coverer.covers(sub) and (not sub.covers(coverer) or ckey < key)

    out: dict[bytes, Subscription] = {}
    for key, sub in subs.items():
        tags = tags_of.get(key)
        if tags is not None:
            present = pure[sub.topic]
            if any(frozenset(c) in present for n in range(len(tags))
                   for c in itertools.combinations(sorted(tags), n)):
                continue
            if any(beats(gk, g, key, sub) for gk, g in general):
                continue
        elif any(beats(ok, other, key, sub) for ok, other in subs.items()):
            continue
        out[key] = sub
    return out
