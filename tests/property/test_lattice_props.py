"""Properties of the lattice walk and the lattice trees (core/lattice.py, core/lattice_tree.py)."""

from __future__ import annotations

import itertools
import math

from hypothesis import given, settings
from hypothesis import strategies as st

from meshsub.core.grid import Cell, manhattan
from meshsub.core.lattice import (
    Boundary,
    Lattice,
    first_passage,
    hit_probability,
    hit_probability_dp,
    walk_distribution,
)
from meshsub.core.lattice_tree import prim_edges, prim_tree, steiner_tree

SETTINGS = settings(max_examples=60, deadline=None)
bounded = st.builds(Lattice, st.integers(1, 7), st.integers(1, 7),
                    st.sampled_from([Boundary.RENORMALISE, Boundary.REFLECT, Boundary.STAY]))


@SETTINGS
@given(bounded, st.data(), st.integers(0, 20))
def test_probabilities_sum_to_one(lattice: Lattice, data: st.DataObject, t: int) -> None:
    start = Cell(data.draw(st.integers(0, lattice.cols - 1)),
                 data.draw(st.integers(0, lattice.rows - 1)))
    d = walk_distribution(start, t, lattice)
    assert abs(math.fsum(d.values()) - 1.0) < 1e-12
    assert all(lattice.contains(c) and p > 0 for c, p in d.items())


@SETTINGS
@given(st.integers(0, 14), st.integers(-8, 8), st.integers(-8, 8))
def test_infinite_walk_is_symmetric(t: int, i: int, j: int) -> None:
    d = walk_distribution(Cell(0, 0), t)
    p = d.get(Cell(i, j), 0.0)
    for a, b in ((j, i), (-i, j), (i, -j), (-j, -i)):
        assert d.get(Cell(a, b), 0.0) == p
    assert abs(math.fsum(d.values()) - 1.0) < 1e-12


@SETTINGS
@given(bounded, st.data(), st.integers(0, 12))
def test_bounded_walk_is_symmetric_under_the_grid_mirror(lattice: Lattice, data: st.DataObject,
                                                       t: int) -> None:
    x = data.draw(st.integers(0, lattice.cols - 1))
    y = data.draw(st.integers(0, lattice.rows - 1))
    d = walk_distribution(Cell(x, y), t, lattice)
    mirrored = walk_distribution(Cell(lattice.cols - 1 - x, y), t, lattice)
    for c, p in d.items():
        assert abs(mirrored.get(Cell(lattice.cols - 1 - c[0], c[1]), 0.0) - p) < 1e-12


@SETTINGS
@given(st.integers(-6, 6), st.integers(-6, 6), st.integers(0, 30))
def test_closed_form_equals_the_dynamic_programme_on_a_large_region(i: int, j: int,
                                                                    t: int) -> None:
    """Theorem 6.1 (renewal, infinite lattice) = absorbing DP on a region the walk cannot leave.

    A walk of ``t`` steps from the centre of a (2t + 3)-wide region never
    reaches its edge, so with any edge rule the region behaves as infinite.
    """
    side = 2 * t + 3
    centre = Cell(t + 1, t + 1)
    region = Lattice(side, side, Boundary.REFLECT)
    target = Cell(centre[0] + i, centre[1] + j)
    if not region.contains(target):
        return
    closed = hit_probability(i, j, t)
    assert abs(hit_probability_dp(centre, target, t, region) - closed) < 1e-12
    assert abs(hit_probability_dp(Cell(0, 0), Cell(i, j), t) - closed) < 1e-12


@SETTINGS
@given(st.integers(0, 8), st.integers(0, 8), st.integers(0, 120))
def test_hit_probability_is_monotone_and_parity_bound(i: int, j: int, t: int) -> None:
    p = hit_probability(i, j, t)
    assert 0.0 <= p <= hit_probability(i, j, t + 1) <= 1.0
    if t < i + j:
        assert p == 0.0
    if (t - i - j) % 2:
        assert first_passage(i, j, t) == 0.0
        assert t == 0 or hit_probability(i, j, t) == hit_probability(i, j, t - 1)


@settings(max_examples=25, deadline=None)
@given(bounded, st.data(), st.integers(0, 40))
def test_bounded_hits_are_monotone_and_reach_one(lattice: Lattice, data: st.DataObject,
                                                t: int) -> None:
    a = Cell(data.draw(st.integers(0, lattice.cols - 1)),
             data.draw(st.integers(0, lattice.rows - 1)))
    b = Cell(data.draw(st.integers(0, lattice.cols - 1)),
             data.draw(st.integers(0, lattice.rows - 1)))
    p = hit_probability_dp(a, b, t, lattice)
    assert 0.0 <= p <= hit_probability_dp(a, b, t + 1, lattice) <= 1.0
    if manhattan(a, b) > t:
        assert p == 0.0
    # a finite connected region is recurrent: the walk gets there eventually
    assert hit_probability_dp(a, b, 1500, lattice) > 0.99


cells = st.builds(Cell, st.integers(0, 12), st.integers(0, 12))


@SETTINGS
@given(cells, st.lists(cells, max_size=25))
def test_steiner_tree_is_a_tree_of_grid_edges_spanning_the_terminals(
        root: Cell, terminals: list[Cell]) -> None:
    tree = steiner_tree(root, terminals)
    assert tree.root == root
    assert set(terminals) <= tree.cells
    for child, parent in tree.parent.items():
        assert manhattan(child, parent) == 1  # one backbone hop
        assert tree.path_to_root(child)[-1] == root  # no cycle: every cell reaches the root
    leaves = tree.cells - set(tree.parent.values()) - {root}
    assert leaves <= set(terminals)  # no dangling Steiner point
    distinct = set(terminals) - {root}
    mst_weight = sum(w for _u, _v, w in prim_edges(root, distinct))
    assert len(distinct) <= tree.edge_count <= mst_weight


def _kruskal_weight(nodes: list[Cell]) -> int:
    parent = {n: n for n in nodes}

    def find(x: Cell) -> Cell:
        while parent[x] != x:
            x = parent[x]
        return x
    total = 0
    for a, b in sorted(itertools.combinations(nodes, 2), key=lambda e: manhattan(*e)):
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[ra] = rb
            total += manhattan(a, b)
    return total


@SETTINGS
@given(cells, st.lists(cells, max_size=15))
def test_prim_builds_a_minimum_spanning_tree(root: Cell, nodes: list[Cell]) -> None:
    tree = prim_tree(root, nodes)
    everyone = sorted(set(nodes) | {root})
    assert tree.cells == set(everyone)
    weight = sum(manhattan(c, p) for c, p in tree.parent.items())
    assert weight == _kruskal_weight(everyone)
    for cell in tree.parent:
        assert tree.path_to_root(cell)[-1] == root
