"""Broker election per (cell, topic): the node of the cell closest to the topic's hash point.

Spec 004 §4.3.2 DECISION (rotation-aware): the broker is the closest
*eligible* member (alive, remaining energy >= ``E_rot``, not retiring), by
Euclidean distance, ties to the smaller node id; if no member is eligible,
the member with the most remaining energy (ties again to the smaller id).
Every node of a cell holding the same membership view computes the same
broker (§4.8 item 1); beacons carry energy and the retiring flag so that the
views agree, and broker claims settle the rest (``Claim.beats``).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from meshsub.core.grid import Point


@dataclass(frozen=True, slots=True)
class Member:
    """What a node knows of one member of its cell (itself included)."""

    pos: Point
    energy: float = 1.0
    """Remaining energy as a fraction of the initial energy."""
    retiring: bool = False
    last_heard: float = 0.0

    def eligible(self, e_rot: float) -> bool:
        return not self.retiring and self.energy >= e_rot


def _d2(a: Point, b: Point) -> float:
    return (a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2


def elect(members: Mapping[int, Member], point: Point, e_rot: float) -> int | None:
    """The broker among ``members`` for the hash ``point``; ``None`` for an empty cell."""
    best: int | None = None
    best_key: tuple[float, int] = (math.inf, 0)
    for node, m in members.items():
        if not m.eligible(e_rot):
            continue
        key = (_d2(m.pos, point), node)
        if key < best_key:
            best, best_key = node, key
    if best is not None:
        return best
    fallback: tuple[float, int] | None = None
    for node, m in members.items():
        key2 = (-m.energy, node)
        if fallback is None or key2 < fallback:
            fallback = key2
    return None if fallback is None else fallback[1]


def claim_rank(member: Member, node: int, point: Point, e_rot: float) -> tuple[int, float, int]:
    """Order of two conflicting broker claims: eligible first, then nearer, then smaller id.

    Used when two nodes of a cell both act as broker for a topic because
    their membership views differed (on a real radio they can): the smaller rank wins
    and the loser hands its state over.
    """
    return (0 if member.eligible(e_rot) else 1, _d2(member.pos, point), node)
