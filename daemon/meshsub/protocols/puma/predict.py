"""PUMA's location prediction and delivery planning (Zheng 2008, §5.3.1): ALD and HLD.

Given the client's last known cell and the time units since, the previous
broker predicts ``P^t`` (``meshsub.core.lattice``), ranks the cells, and
plans delivery trees over the 4-neighbour backbone
(``meshsub.core.lattice_tree.steiner_tree``):

- ALD delivers to every cell with positive probability in one tree;
- HLD first delivers to the *hot* set, the fewest top-ranked cells whose
  probability adds up to at least ``th``, and only if the client does not
  reply, to the *cold* rest.

Ranking: probability descending, ties by ascending cell (the thesis's ID
order ``x*l + y``). The thesis's prose says the hot mass "is larger than th"
while its Problem 5.2 writes ">= th"; ">=" is used. Probabilities are
compared after rounding to 12 decimals, so ties that are exact in the
mathematics stay ties in floating point (renormalised walks at the border
produce thirds). Problem 5.2 also counts the probability of every cell the
tree passes through; the algorithm the thesis gives (and this module) ranks
and selects target cells only, which is what its HLD description says.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass

from meshsub.core.grid import Cell
from meshsub.core.lattice import Lattice, walk_distribution
from meshsub.core.lattice_tree import CellTree, steiner_tree

_TIE_DIGITS = 12
_SLACK = 1e-12


def ranked(dist: Mapping[Cell, float]) -> list[tuple[Cell, float]]:
    """Cells with positive probability, most likely first, ties by cell."""
    return sorted(((c, p) for c, p in dist.items() if p > 0.0),
                  key=lambda cp: (-round(cp[1], _TIE_DIGITS), cp[0]))


@dataclass(frozen=True, slots=True)
class Split:
    """The hot and cold targets of one prediction, and the mass of each."""

    hot: tuple[Cell, ...]
    cold: tuple[Cell, ...]
    hot_mass: float
    total_mass: float


def split(dist: Mapping[Cell, float], th: float,
          usable: Callable[[Cell], bool] | None = None) -> Split:
    """HLD's hot set (minimal prefix with mass >= ``th`` of the usable mass) and the cold rest.

    ``usable`` filters cells that have no base station (outside the grid):
    their probability cannot be served, so ``th`` applies to what can.
    ``th = 1`` puts every usable cell in the hot set (ALD).
    """
    cells = [(c, p) for c, p in ranked(dist) if usable is None or usable(c)]
    total = sum(p for _c, p in cells)
    goal = th * total - _SLACK
    hot: list[Cell] = []
    mass = 0.0
    for c, p in cells:
        if hot and mass >= goal:
            break
        hot.append(c)
        mass += p
    cold = tuple(c for c, _p in cells[len(hot):])
    return Split(tuple(hot), cold, mass, total)


def predict(last_cell: Cell, t: int, lattice: Lattice) -> Mapping[Cell, float]:
    """``P^t`` from the last known cell (eqs. 5.1-5.4)."""
    return walk_distribution(last_cell, t, lattice)


def delivery_tree(root: Cell, targets: Iterable[Cell]) -> CellTree:
    """The ALD tree from the previous broker's cell to ``targets`` (Fig. 5.1)."""
    return steiner_tree(root, targets)


def diamond_tree(center: Cell, radius: int, contains: Callable[[Cell], bool]) -> CellTree:
    """Paging's flood (§5.4.1): every usable cell within ``radius`` of ``center``.

    A cell's parent is its neighbour one step closer to the centre, moving in
    x first, so the flood is a tree with one message per cell other than the
    centre (the breadth-first tree of the thesis's "broadcast to the base
    stations that may directly communicate with the client").
    """
    parent: dict[Cell, Cell] = {}
    for dx in range(-radius, radius + 1):
        span = radius - abs(dx)
        for dy in range(-span, span + 1):
            cell = Cell(center[0] + dx, center[1] + dy)
            if cell == center or not contains(cell):
                continue
            step = Cell(cell[0] - (dx > 0) + (dx < 0), cell[1]) if dx else \
                Cell(cell[0], cell[1] - (dy > 0) + (dy < 0))
            parent[cell] = step
    # cells whose path to the centre leaves the usable region are not reachable
    reachable = {c: p for c, p in parent.items() if _reaches(c, parent, center)}
    return CellTree(center, reachable)


def _reaches(cell: Cell, parent: Mapping[Cell, Cell], center: Cell) -> bool:
    while cell != center:
        nxt = parent.get(cell)
        if nxt is None:
            return False
        cell = nxt
    return True
