"""Trees over lattice cells: Prim's MST on Manhattan distances, and a rectilinear Steiner tree.

Two protocols need them. PUMA delivers an event over the backbone of
4-neighbour base stations to every cell a client may be in; the cheapest
such tree is a rectilinear Steiner minimum tree (NP-hard, Zheng 2008,
Problem 5.1), approximated by the ALD algorithm (Fig. 5.1): a minimum
spanning tree of the terminals' Manhattan-distance closure, each of its edges
replaced by a grid path, cycles removed. GIANT's baseline delivery tree is
Prim's minimum spanning tree over the publisher's and subscribers' brokers
(§6.5.1), whose edges are ferry hops rather than grid paths.

Both are deterministic, so that every base station given the same inputs
builds the same tree, and so that the thesis's worked numbers are test
vectors:

- Prim starts at the root and adds, at each step, the pair (tree cell u, new
  cell v) with the smallest (distance, u, v) in lexicographic order; cells
  compare as (x, y), which orders them as the thesis's ID ``x*l + y``.
- ALD's Fig. 5.1 step 1 prints the edge weight as ``|x1-y1| + |x2-y2|``; it is
  the Manhattan distance ``|x1-x2| + |y1-y2|``, and the root belongs to the
  auxiliary graph even when it has probability 0 (it must, at odd t).
- Step 3 does not say which grid path replaces an MST edge. Of the two
  L-shaped paths (x first, or y first) the one adding fewer new grid edges is
  taken, x first on a tie; the union is then reduced to a tree by a
  breadth-first search from the root, and leaves that are not terminals are
  pruned.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from meshsub.core.grid import Cell, manhattan

Metric = Callable[[Cell, Cell], int]
Edge = tuple[Cell, Cell]


class TreeError(ValueError):
    """Bad tree input (no root, cells that are not integer pairs)."""


def _cell(value: Cell | tuple[int, int]) -> Cell:
    if len(value) != 2 or not all(isinstance(v, int) and not isinstance(v, bool)
                                  for v in value):
        raise TreeError(f"a cell is a pair of integers, got {value!r}")
    return Cell(value[0], value[1])


@dataclass(frozen=True, slots=True)
class CellTree:
    """A tree rooted at ``root``: ``parent`` maps every other cell to its parent."""

    root: Cell
    parent: Mapping[Cell, Cell]

    @property
    def cells(self) -> frozenset[Cell]:
        return frozenset(self.parent) | {self.root}

    @property
    def edge_count(self) -> int:
        return len(self.parent)

    def children(self) -> dict[Cell, list[Cell]]:
        """Every cell's children, each list sorted (a deterministic walk of the tree)."""
        out: dict[Cell, list[Cell]] = {c: [] for c in self.cells}
        for child, par in self.parent.items():
            out[par].append(child)
        for kids in out.values():
            kids.sort()
        return out

    def depth(self, cell: Cell) -> int:
        """Edges from the root to ``cell``."""
        d = 0
        while cell != self.root:
            cell = self.parent[cell]
            d += 1
        return d

    def path_to_root(self, cell: Cell) -> list[Cell]:
        out = [cell]
        while cell != self.root:
            cell = self.parent[cell]
            out.append(cell)
        return out


def prim_edges(root: Cell | tuple[int, int], nodes: Iterable[Cell | tuple[int, int]],
               metric: Metric = manhattan) -> list[tuple[Cell, Cell, int]]:
    """Prim's minimum spanning tree over ``{root} | nodes``, as (u, v, weight) in addition order.

    ``u`` is already in the tree when ``v`` joins. O(n**2), which suits the
    few hundred cells of a prediction or the brokers of a region.
    """
    start = _cell(root)
    rest = sorted({_cell(n) for n in nodes} - {start})
    best: dict[Cell, tuple[int, Cell]] = {v: (metric(start, v), start) for v in rest}
    out: list[tuple[Cell, Cell, int]] = []
    while best:
        v = min(best, key=lambda c: (best[c][0], best[c][1], c))
        weight, u = best.pop(v)
        out.append((u, v, weight))
        for w, (old, old_u) in best.items():
            d = metric(v, w)
            if (d, v) < (old, old_u):
                best[w] = (d, v)
    return out


def prim_tree(root: Cell | tuple[int, int], nodes: Iterable[Cell | tuple[int, int]],
              metric: Metric = manhattan) -> CellTree:
    """Prim's MST as a rooted tree whose edges join the nodes directly (GIANT's baseline)."""
    start = _cell(root)
    parent = {v: u for u, v, _w in prim_edges(start, nodes, metric)}
    return CellTree(start, MappingProxyType(parent))


def _l_path(u: Cell, v: Cell, x_first: bool) -> list[Edge]:
    """The grid edges of the L-shaped path from u to v (each edge as a sorted pair)."""
    points = [u]
    corner = Cell(v.gx, u.gy) if x_first else Cell(u.gx, v.gy)
    for a, b in ((u, corner), (corner, v)):
        x, y = a
        while (x, y) != (b.gx, b.gy):
            x += (b.gx > x) - (b.gx < x)
            y += (b.gy > y) - (b.gy < y)
            points.append(Cell(x, y))
    return [(min(p, q), max(p, q)) for p, q in itertools.pairwise(points)]


def steiner_tree(root: Cell | tuple[int, int],
                 terminals: Iterable[Cell | tuple[int, int]]) -> CellTree:
    """An approximate rectilinear Steiner tree over grid edges (Zheng 2008, Fig. 5.1, ALD).

    Spans ``root`` and every terminal using 4-neighbour grid edges (one
    backbone hop each). The tree's edge count is at most the Manhattan MST's
    weight and at least the number of terminals other than the root.
    """
    start = _cell(root)
    goals = {_cell(t) for t in terminals} | {start}
    edges: set[Edge] = set()
    for u, v, _w in prim_edges(start, goals):
        options = [_l_path(u, v, True), _l_path(u, v, False)]
        new = [sum(1 for e in path if e not in edges) for path in options]
        edges.update(options[0] if new[0] <= new[1] else options[1])
    return _prune(start, _bfs_tree(start, edges), goals)


def _bfs_tree(root: Cell, edges: Iterable[Edge]) -> dict[Cell, Cell]:
    """A breadth-first spanning tree of the union of paths (removes any cycle)."""
    adjacent: dict[Cell, list[Cell]] = {}
    for a, b in edges:
        adjacent.setdefault(a, []).append(b)
        adjacent.setdefault(b, []).append(a)
    parent: dict[Cell, Cell] = {}
    seen = {root}
    queue = deque([root])
    while queue:
        cell = queue.popleft()
        for nxt in sorted(adjacent.get(cell, ())):
            if nxt not in seen:
                seen.add(nxt)
                parent[nxt] = cell
                queue.append(nxt)
    return parent


def _prune(root: Cell, parent: dict[Cell, Cell], keep: set[Cell]) -> CellTree:
    """Remove leaves that are not terminals, until every leaf is one."""
    kids: dict[Cell, int] = {}
    for par in parent.values():
        kids[par] = kids.get(par, 0) + 1
    leaves = [c for c in parent if c not in kids and c not in keep]
    while leaves:
        leaf = leaves.pop()
        par = parent.pop(leaf)
        kids[par] -= 1
        if kids[par] == 0 and par not in keep and par in parent:
            leaves.append(par)
    return CellTree(root, MappingProxyType(parent))


def tree_from_parents(root: Cell, parent: Mapping[Cell, Cell]) -> CellTree:
    """A ``CellTree`` from a parent map; ``TreeError`` unless every cell reaches ``root``."""
    for cell in parent:
        seen: set[Cell] = set()
        c = cell
        while c != root:
            if c in seen or c not in parent:
                raise TreeError(f"cell {tuple(cell)} does not lead to the root {tuple(root)}")
            seen.add(c)
            c = parent[c]
    return CellTree(root, MappingProxyType(dict(parent)))
