"""GIANT's evaluation set-ups (Zheng 2008, §6.5.1) as a model: ferries and delay per tree.

The thesis's simulator is not described beyond its inputs, so this module
states the model used (docs/protocols/giant.md) and computes it with the
same RecruitFerry, hit-probability and upstream-choice code the protocol
runs:

- every sender of a hop (the PHB, or a broker that received the item) sees
  a ferry arrive every ``interval`` units from time 0 and applies
  RecruitFerry with the hop's Prob, stopping at the first refusal
  (``recruit_trace``); the hop costs the ferries recruited, and its delay is
  the moment the recruited ferries reach the target;
- a path's ferries add up over its hops and so do its delays;
- group 2 (§6.5.1): paths of 1-8 hops from (0, 0) to (12, 12), equally long
  hops, Prob = DR^(1/hops) on each;
- group 3: the PHB and the subscribers' brokers (SHBs) at random cells; the
  GIANT tree attaches SHBs in increasing distance from the PHB, each choosing
  its upstream by Function 6.1 among the brokers already attached; the Prim
  tree is the minimum spanning tree; each edge's Prob is the largest
  DR_s^(1/h_s) of the subscribers s below it (h_s: s's depth).
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from meshsub.core.grid import Cell, manhattan
from meshsub.core.lattice import hit_probability
from meshsub.core.lattice_tree import CellTree, prim_tree, tree_from_parents
from meshsub.protocols.giant.params import Tree
from meshsub.protocols.giant.recruit import HitFn, per_hop_prob, recruit_trace
from meshsub.protocols.giant.upstream import Candidate, choose_upstream

THESIS_FIG_6_12 = {2: (31, 26, 27, 28, 30, 40), 8: (18, 16, 18, 20, 24, 24)}
"""Ferries for DR 0.9 over 1, 2, 3, 4, 6, 8 hops, by arrival interval (§6.5.2)."""
THESIS_FIG_6_13 = {2: (130, 110, 105, 104, 108, 120), 8: (165, 146, 147, 152, 168, 200)}
"""Delay (units) for DR 0.9 over 1, 2, 3, 4, 6, 8 hops, by arrival interval (§6.5.2)."""
GROUP2_HOPS = (1, 2, 3, 4, 6, 8)


def hop_offsets(hops: int, target: int = 12) -> list[tuple[int, int]]:
    """Group 2's path from (0, 0) to (target, target) in ``hops`` equally long hops.

    Hops of an odd Manhattan length alternate (a+1, a) and (a, a+1) so that
    they still add up to the target (8 hops of 3 cells: (2, 1), (1, 2), ...).
    """
    if (2 * target) % hops:
        raise ValueError(f"{hops} hops do not split {2 * target} cells evenly")
    length = 2 * target // hops
    half, odd = divmod(length, 2)
    if not odd:
        return [(half, half)] * hops
    return [(half + 1, half) if k % 2 == 0 else (half, half + 1) for k in range(hops)]


@dataclass(frozen=True, slots=True)
class PathCost:
    ferries: int
    delay: int


def path_cost(offsets: Sequence[tuple[int, int]], dr: float, interval: int,
              hit: HitFn = hit_probability) -> PathCost:
    """Ferries and delay of one multi-hop path, each hop with Prob = DR^(1/hops)."""
    prob = per_hop_prob(dr, len(offsets))
    ferries = delay = 0
    for i, j in offsets:
        trace = recruit_trace(abs(i), abs(j), prob, interval, hit)
        ferries += trace.ferries
        delay += trace.delay
    return PathCost(ferries, delay)


def giant_tree(phb: Cell, shbs: Sequence[Cell], tree: Tree = Tree.GIANT) -> CellTree:
    """The tree GIANT's subscriptions build when SHBs join nearest first (group 3)."""
    if tree is Tree.PRIM:
        return prim_tree(phb, shbs)
    attached: dict[Cell, Candidate] = {phb: Candidate(phb, 0, 0, 0, True)}
    parent: dict[Cell, Cell] = {}
    for shb in sorted(set(shbs) - {phb}, key=lambda c: (manhattan(c, phb), c)):
        choice = choose_upstream(attached.values(), shb, Tree.GIANT)
        assert choice is not None  # the PHB is always a candidate
        parent[shb] = choice.upstream
        attached[shb] = Candidate(shb, choice.distance, choice.hops, choice.max_seg, True)
    return tree_from_parents(phb, parent)


@dataclass(frozen=True, slots=True)
class TreeCost:
    ferries: int
    """Recruitments summed over the tree's edges (each hop its own ferries)."""
    distinct_ferries: int
    """Ferries a sender recruits for all its next hops at once: per sender the largest
    count among its edges (one passing ferry carries copies for several next hops)."""
    mean_delay: float
    max_delay: int
    mean_depth: float


def tree_cost(tree: CellTree, dr: Mapping[Cell, float], interval: int,
              hit: HitFn = hit_probability) -> TreeCost:
    """Ferries and delays of one delivery tree; ``dr`` maps each subscriber's cell to its DR."""
    depth = {c: tree.depth(c) for c in tree.cells}
    below: dict[Cell, list[Cell]] = {c: [] for c in tree.cells}
    for s in dr:
        for c in tree.path_to_root(s)[:-1]:  # every edge (c -> parent) on s's path
            below[c].append(s)
    hop_delay: dict[Cell, int] = {}
    per_sender: dict[Cell, int] = {}
    ferries = 0
    for child, par in tree.parent.items():
        served = below[child]
        if not served:
            hop_delay[child] = 0
            continue
        prob = max(per_hop_prob(dr[s], depth[s]) for s in served)
        trace = recruit_trace(abs(child[0] - par[0]), abs(child[1] - par[1]), prob,
                              interval, hit)
        ferries += trace.ferries
        per_sender[par] = max(per_sender.get(par, 0), trace.ferries)
        hop_delay[child] = trace.delay
    delays = [sum(hop_delay[c] for c in tree.path_to_root(s)[:-1]) for s in dr]
    return TreeCost(ferries, sum(per_sender.values()),
                    sum(delays) / len(delays) if delays else 0.0,
                    max(delays, default=0), sum(depth[s] for s in dr) / max(1, len(dr)))


def placement(side: int, subscribers: int, rng: random.Random
              ) -> tuple[Cell, dict[Cell, float]]:
    """Group 3: a PHB and ``subscribers`` SHBs on distinct random cells, each with a random DR."""
    cells = rng.sample([Cell(x, y) for x in range(side) for y in range(side)], subscribers + 1)
    return cells[0], {c: rng.choice((0.5, 0.6, 0.7, 0.8, 0.9)) for c in cells[1:]}
