"""Which broker a subscription goes to next: GIANT's Function 6.1 and the Prim baseline.

Candidates are brokers an advertisement visited, each with its path length
and hop count from the publisher's broker (PHB). Function 6.1 as printed
compares the bare stored distances (the PHB, at 0, would always win and the
2-3-hop rule would never apply) and names no tie-breaks; the reading here
(docs/protocols/giant.md):

- the length of the path *through* a candidate c is ``c.distance +
  manhattan(c, self)`` and its hops ``c.hops + 1`` (Manhattan distance, in
  cells: ferries walk the 4-neighbour lattice);
- among the shortest, a path of 2 or 3 hops is preferred (§6.5.2's finding);
  among those the one whose longest hop is shortest, then 2 hops before 3,
  then the smaller cell; if none has 2 or 3 hops, the hop count nearest 2.5,
  fewer first, then the same tie-breaks.

The Prim baseline (§6.5.1's "Prime algorithm") attaches a subscriber to the
nearest broker already on the topic's tree (the PHB, or a broker that has
the subscription path): Prim's rule, applied when the subscriber joins.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from meshsub.core.grid import Cell, manhattan
from meshsub.protocols.giant.params import Tree


@dataclass(frozen=True, slots=True)
class Candidate:
    """A possible upstream broker, from an advertisement's sender record."""

    cell: Cell
    distance: int
    hops: int
    max_seg: int = 0
    on_tree: bool = False


@dataclass(frozen=True, slots=True)
class Choice:
    """The chosen upstream and what the path through it gives this broker."""

    upstream: Cell
    distance: int
    hops: int
    max_seg: int
    last_hop: int


def _through(c: Candidate, me: Cell) -> Choice:
    hop = manhattan(c.cell, me)
    return Choice(c.cell, c.distance + hop, c.hops + 1, max(c.max_seg, hop), hop)


def choose_upstream(candidates: Iterable[Candidate], me: Cell,
                    tree: Tree = Tree.GIANT) -> Choice | None:
    """The upstream for broker ``me``, or None when no candidate qualifies."""
    options = [_through(c, me) for c in candidates if c.cell != me
               and (tree is Tree.GIANT or c.on_tree)]
    if not options:
        return None
    if tree is Tree.PRIM:
        return min(options, key=lambda ch: (ch.last_hop, ch.hops, ch.upstream))
    shortest = min(ch.distance for ch in options)
    tied = [ch for ch in options if ch.distance == shortest]
    preferred = [ch for ch in tied if ch.hops in (2, 3)]
    if preferred:
        return min(preferred, key=lambda ch: (ch.max_seg, ch.hops, ch.upstream))
    return min(tied, key=lambda ch: (abs(ch.hops - 2.5), ch.hops, ch.max_seg, ch.upstream))

