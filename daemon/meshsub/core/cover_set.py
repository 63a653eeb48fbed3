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


TopicTags = tuple[str, frozenset[str]]
Shape = tuple[TopicTags, tuple[TopicTags, ...]]
"""A pure conjunction's (topic, tags), and the (topic, tags) of its proper tag subsets."""
SHAPE_CACHE = 16384
_shapes: dict[bytes, Shape | None] = {}
"""``_shape`` by ``Subscription.key``: equal keys are equal subscriptions, so a hit is
exact. Keyed by the packed bytes (cached on the subscription, hashed once) rather
than the subscription itself: hashing and comparing subscriptions field by field was
most of a 500-node ST run's covering time. Full: emptied and refilled."""


def _shape(sub: Subscription) -> Shape | None:
    """A pure tag conjunction's ``Shape``; None for any other subscription."""
    key = sub.key
    try:
        return _shapes[key]
    except KeyError:
        pass
    if len(_shapes) >= SHAPE_CACHE:
        _shapes.clear()
    shape = _shapes[key] = _compute_shape(sub)
    return shape


def _compute_shape(sub: Subscription) -> Shape | None:
    if is_wildcard(sub.topic):
        return None
    tags = subscription_tags(sub)
    if len(tags) != len(sub.predicates) or len(tags) > MAX_SUBSET_TAGS:
        return None
    topic = sub.topic
    subsets = tuple((topic, frozenset(c)) for n in range(len(tags))
                    for c in itertools.combinations(tags, n))
    return (topic, frozenset(tags)), subsets


def uncovered(subs: Mapping[bytes, Subscription]) -> dict[bytes, Subscription]:
    """The members of ``subs`` (keyed by ``Subscription.key``) that no other member covers."""
    shapes = {key: _shape(sub) for key, sub in subs.items()}
    present = {sh[0] for sh in shapes.values() if sh is not None}
    general = [(key, sub) for key, sub in subs.items() if shapes[key] is None]

    def beats(ckey: bytes, coverer: Subscription, key: bytes, sub: Subscription) -> bool:
        return ckey != key and coverer.covers(sub) and (not sub.covers(coverer) or ckey < key)

    out: dict[bytes, Subscription] = {}
    for key, sub in subs.items():
        sh = shapes[key]
        if sh is not None:
            if not present.isdisjoint(sh[1]):  # a proper subset of its tags is present
                continue
            if general and any(beats(gk, g, key, sub) for gk, g in general):
                continue
        elif any(beats(ok, other, key, sub) for ok, other in subs.items()):
            continue
        out[key] = sub
    return out
