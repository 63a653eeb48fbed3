"""Contact traces as a timeline a wall-clock driver can replay on the medium.

``[contacts]`` events (ONE connection format) come in file order and may be
redundant: real traces often log a contact from both sides, so an ``up`` can
arrive for a link that is already up, or a ``down`` for one that is not. The
simulator ignores those; ``contact_timeline`` drops them up front, so a driver
can apply every event it gets as an edit of the medium's map (link up: add the
pair, down: remove it) and ends up with the same links as the simulator at every
instant.
"""

from __future__ import annotations

from collections.abc import Iterable

from meshsim.scenario.model import Contact


def contact_timeline(contacts: Iterable[Contact]) -> list[Contact]:
    """Events sorted by time (file order among equal times), redundant ups and downs
    dropped. Pairs are unordered (``CONN 2 1 down`` ends ``CONN 1 2 up``); each event
    keeps its own a and b."""
    up: set[tuple[int, int]] = set()
    out = []
    for c in sorted(contacts, key=lambda c: c.t):
        pair = (c.a, c.b) if c.a < c.b else (c.b, c.a)
        if c.up == (pair in up):
            continue
        if c.up:
            up.add(pair)
        else:
            up.discard(pair)
        out.append(c)
    return out
