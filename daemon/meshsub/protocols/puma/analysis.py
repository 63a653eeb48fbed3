"""Expected message costs of PUMA and paging in the thesis's set-up (Zheng 2008, §5.4, Table 5.1).

The thesis gives no cost formula; its simulator counted messages and its
text leaves the counting rules open (docs/protocols/puma.md). This module
states them and computes the costs they imply, with the same prediction and
tree code the protocol runs, so a simulation of the protocol can be checked
against them and the thesis's figures compared with each counting:

- one client starts in the centre cell of an ``l x l`` grid and subscribes
  there (its previous broker); it walks one cell per unit, uniformly among
  the neighbours that exist; events arrive every ``I_event`` units until the
  end of the run (12 units), each found instantly (backbone delay ignored);
- PUMA, per event: the hot tree's edges; if the client is not in a hot
  cell, the cold tree's edges; one base-station-to-client message; the
  client's one reply; and, with ``relay``, the reply's hops back to the
  previous broker. With ``direct`` (the protocol's behaviour) a client
  standing in the root's cell is handed the event without a tree.
  ``anchor = "fixed"``: trees start at the previous broker (the protocol);
  ``"last"``: at the cell of the client's last reply. With ``"last"``, no
  relay and no direct hand-over, the thesis's minima for I_event = 2 and 3
  come out (10 and 15.2);
- paging (``PagingModel``), per the literal rules of §5.4.1: a report costs
  one client message plus its relay hops; an event costs the hops to the
  last-reported cell, one message per other cell of the paging area, and one
  to the client (one message in all when the client is at the previous broker).

System cost = all messages / delivered events; client cost = client
messages / delivered events (§5.4.1's definitions).
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache

from meshsub.core.grid import Cell, manhattan
from meshsub.core.lattice import Boundary, Lattice, walk_distribution
from meshsub.protocols.puma.predict import delivery_tree, diamond_tree, split

THESIS_MIN_COST = {2: 10.0, 3: 15.2, 4: 24.2, 5: 31.4, 6: 45.2, 7: 52.6}
"""§5.4.2: PUMA's minimum average system message cost over th, by I_event."""
THESIS_BEST_TH = {2: 0.6, 3: 0.6, 4: 0.7, 5: 0.8, 6: 0.8, 7: 0.8}
THESIS_SHARE_OF_PAGING = {2: 0.20, 3: 0.29, 4: 0.45, 5: 0.57, 6: 0.81, 7: 0.91}
THESIS_ALD_COST = {2: 20.0, 7: 124.0}
"""§5.4.2: the cost at th = 100 % climbs from 20 (I_event = 2) to 124 (I_event = 7)."""
THESIS_CLIENT_ADVANTAGE = {2: 0.30, 3: 0.44, 4: 0.50, 5: 0.57, 6: 0.62, 7: 0.65}
TH_VALUES = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
DIST_VALUES = (2, 3, 4, 5, 6, 7, 8)


@dataclass(frozen=True, slots=True)
class Setup:
    """Table 5.1: region side, run length, and the walk's edge rule."""

    side: int = 25
    duration: int = 12
    boundary: Boundary = Boundary.RENORMALISE

    @property
    def centre(self) -> Cell:
        return Cell(self.side // 2, self.side // 2)

    @property
    def lattice(self) -> Lattice:
        return Lattice(self.side, self.side, self.boundary)

    def inside(self, cell: Cell) -> bool:
        return 0 <= cell[0] < self.side and 0 <= cell[1] < self.side

    def event_times(self, interval: int) -> list[int]:
        return list(range(interval, self.duration + 1, interval))


@dataclass(frozen=True, slots=True)
class Costs:
    system: float
    client: float
    events: float
    """Delivered events per run (the denominator)."""


@lru_cache(maxsize=65536)
def _trees(setup: Setup, root: Cell, last: Cell, t: int, th: float
           ) -> tuple[frozenset[Cell], frozenset[Cell], int, int]:
    """(hot cells, the hot tree's cells, hot-tree edges, cold-tree edges) for one prediction."""
    dist = walk_distribution(last, t, setup.lattice)
    s = split(dist, th, setup.inside)
    hot_tree = delivery_tree(root, s.hot)
    cold_edges = delivery_tree(root, s.cold).edge_count if s.cold else 0
    return frozenset(s.hot), frozenset(hot_tree.cells), hot_tree.edge_count, cold_edges


def puma_event_cost(setup: Setup, last: Cell, now: Cell, t: int, th: float, *,
                    anchor: str = "fixed", relay: bool = True, direct: bool = True,
                    tree_reach: bool = False) -> int:
    """System messages for one event to a client last seen at ``last``, now at ``now``.

    ``direct``: a client in the root's own cell is handed the event without a
    tree (the protocol does; the thesis's counting evidently did not).
    ``tree_reach``: a client on any cell of the hot tree, a path cell between
    hot cells included, gets the event in the hot round, as the protocol's
    base stations hand it to a client present wherever the tree passes; without
    it (§5.3.1's wording) the cold round is counted whenever the client is
    outside the hot set.
    """
    root = setup.centre if anchor == "fixed" else last
    if direct and now == root:
        return 2
    hot, hot_tree, hot_edges, cold_edges = _trees(setup, root, last, t, th)
    reached = hot_tree if tree_reach else hot
    cost = hot_edges + (0 if now in reached else cold_edges) + 2
    if relay:
        cost += manhattan(now, setup.centre)
    return cost


def puma_expected(setup: Setup, interval: int, th: float, *, anchor: str = "fixed",
                  relay: bool = True, direct: bool = True, tree_reach: bool = False) -> Costs:
    """Exact expectation (no sampling) of PUMA's costs per delivered event.

    The client's cell at each event is a distribution; the cost of an event
    depends on the cell of the previous reply (the last known cell) and the
    current one, so the expectation runs over pairs of consecutive cells.
    Under the model every event is delivered and the client sends one reply.
    """
    times = setup.event_times(interval)
    if not times:
        return Costs(0.0, 0.0, 0.0)
    total = 0.0
    last_dist: Mapping[Cell, float] = {setup.centre: 1.0}
    for k, _at in enumerate(times):
        gap = interval
        cost_k = 0.0
        for last, p_last in last_dist.items():
            step = walk_distribution(last, gap, setup.lattice)
            for now, p_now in step.items():
                cost_k += p_last * p_now * puma_event_cost(setup, last, now, gap, th,
                                                           anchor=anchor, relay=relay,
                                                           direct=direct,
                                                           tree_reach=tree_reach)
        total += cost_k
        last_dist = walk_distribution(setup.centre, interval * (k + 1), setup.lattice)
    n = len(times)
    return Costs(total / n, 1.0, float(n))


class PagingModel:
    """Monte Carlo of the literal paging rules (the state is a path, not a cell)."""

    def __init__(self, setup: Setup, dist: int, at_least: bool = True) -> None:
        self.setup, self.dist, self.at_least = setup, dist, at_least
        self.radius = dist - 1 if at_least else dist
        self._area: dict[Cell, int] = {}

    def _area_size(self, cell: Cell) -> int:
        size = self._area.get(cell)
        if size is None:
            size = len(diamond_tree(cell, self.radius, self.setup.inside).cells)
            self._area[cell] = size
        return size

    def _moves(self, cell: Cell) -> list[Cell]:
        return [Cell(cell[0] + dx, cell[1] + dy) for dx, dy in ((1, 0), (0, 1), (-1, 0), (0, -1))
                if self.setup.inside(Cell(cell[0] + dx, cell[1] + dy))]

    def run(self, interval: int, rng: random.Random) -> tuple[int, int, int]:
        """One run: (system messages, client messages, delivered events)."""
        setup = self.setup
        root = here = last = setup.centre
        system = client = events = 0
        times = set(setup.event_times(interval))
        for unit in range(1, setup.duration + 1):
            here = rng.choice(self._moves(here))
            moved = manhattan(here, last)
            if moved >= self.dist if self.at_least else moved > self.dist:
                last = here
                client += 1
                system += 1 + manhattan(here, root)
            if unit in times:
                events += 1
                if here == root:  # associated with the previous broker: handed over directly
                    system += 1
                else:
                    system += manhattan(root, last) + self._area_size(last) - 1 + 1
        return system, client, events

    def costs(self, interval: int, runs: int, seed: int = 1) -> Costs:
        rng = random.Random(seed)
        system = client = events = 0
        for _ in range(runs):
            s, c, e = self.run(interval, rng)
            system, client, events = system + s, client + c, events + e
        return Costs(system / events, client / events, events / runs)
