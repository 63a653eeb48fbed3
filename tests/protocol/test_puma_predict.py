"""PUMA's prediction and planning (Zheng 2008, §5.3.1): the worked example as test vectors."""

from __future__ import annotations

import pytest

from meshsub.core.grid import Cell
from meshsub.core.lattice import Boundary, Lattice, walk_distribution
from meshsub.protocols.puma.analysis import Setup, puma_event_cost, puma_expected
from meshsub.protocols.puma.predict import delivery_tree, diamond_tree, ranked, split

ROOT = Cell(12, 12)  # l = 25, k = 12: the centre cell, ID 312
GRID = Lattice(25, 25, Boundary.RENORMALISE)


def hot(t: int, th: float) -> tuple[Cell, ...]:
    return split(walk_distribution(ROOT, t, GRID), th).hot


def test_worked_example_th_60_percent() -> None:
    """t = 2 after the last reply from the root: a 4-cell hot set, trees of 5 and 9 edges."""
    s = split(walk_distribution(ROOT, 2, GRID), 0.6)
    assert s.hot == (Cell(12, 12), Cell(11, 11), Cell(11, 13), Cell(13, 11))
    assert s.hot_mass == 0.625
    assert delivery_tree(ROOT, s.hot).edge_count == 5
    assert len(s.cold) == 5
    assert delivery_tree(ROOT, s.cold).edge_count == 9


def test_worked_example_ald() -> None:
    cells = hot(2, 1.0)
    assert len(cells) == 9
    assert delivery_tree(ROOT, cells).edge_count == 12  # optimal here (parity argument)


# t \ th: 0.4 0.5 0.6 0.7 0.8 0.9 1.0 (minimal prefix with mass >= th, ties by cell)
HOT_SIZES = {
    1: [2, 2, 3, 3, 4, 4, 4],
    2: [3, 3, 4, 5, 6, 8, 9],
    3: [3, 4, 5, 7, 10, 12, 16],
    4: [4, 5, 7, 8, 11, 16, 25],
    5: [5, 7, 9, 11, 13, 19, 36],
    6: [6, 7, 9, 13, 17, 21, 49],
    7: [7, 9, 11, 14, 19, 26, 64],
}
THS = (0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


@pytest.mark.parametrize("t", sorted(HOT_SIZES))
def test_hot_set_sizes(t: int) -> None:
    assert [len(hot(t, th)) for th in THS] == HOT_SIZES[t]


@pytest.mark.parametrize("t,edges", [(3, {0.6: 6, 0.7: 9, 0.8: 15, 1.0: 24}),
                                     (4, {0.6: 9, 0.7: 10, 0.8: 18, 1.0: 40})])
def test_tree_sizes(t: int, edges: dict[float, int]) -> None:
    for th, n in edges.items():
        assert delivery_tree(ROOT, hot(t, th)).edge_count == n


def test_hot_set_is_minimal() -> None:
    for t in range(1, 8):
        d = walk_distribution(ROOT, t, GRID)
        for th in THS:
            s = split(d, th)
            assert s.hot_mass >= th - 1e-12
            assert s.hot_mass - d[s.hot[-1]] < th - 1e-12  # one fewer would not do
            assert set(s.hot) | set(s.cold) == set(d)


def test_ties_rank_by_cell() -> None:
    order = [c for c, _p in ranked(walk_distribution(ROOT, 2, GRID))]
    assert order[1:5] == [Cell(11, 11), Cell(11, 13), Cell(13, 11), Cell(13, 13)]


def test_unusable_cells_do_not_count_towards_th() -> None:
    corner = Cell(0, 0)
    d = walk_distribution(corner, 1)  # infinite: half the mass falls off the grid
    s = split(d, 1.0, lambda c: c[0] >= 0 and c[1] >= 0)
    assert set(s.hot) == {Cell(1, 0), Cell(0, 1)} and s.total_mass == 0.5


def test_paging_area_is_a_tree_over_the_diamond() -> None:
    tree = diamond_tree(Cell(5, 5), 2, lambda c: True)
    assert len(tree.cells) == 13 and tree.edge_count == 12
    edge = diamond_tree(Cell(0, 0), 1, lambda c: c[0] >= 0 and c[1] >= 0)
    assert edge.cells == {Cell(0, 0), Cell(1, 0), Cell(0, 1)}


def test_cost_model_counts_the_worked_example() -> None:
    s = Setup()
    # hot hit: 5 edges + BS->client + reply + relay of 2 hops back to the centre
    assert puma_event_cost(s, ROOT, Cell(11, 11), 2, 0.6) == 5 + 2 + 2
    # cold: 5 + 9 edges, the client at (10, 12) two hops away
    assert puma_event_cost(s, ROOT, Cell(10, 12), 2, 0.6) == 5 + 9 + 2 + 2
    assert puma_event_cost(s, ROOT, Cell(10, 12), 2, 0.6, relay=False) == 16


def test_cost_model_with_the_hot_tree_reaching_a_client_on_its_path() -> None:
    """Last seen at (15, 12), t = 2, th = 50 %: the hot cells (14, 11), (14, 13), (15, 12)
    hang on a 5-edge tree from the centre through (13, 12), where the client may be (two
    steps west, 1/16). The protocol's station there hands it the event in the hot round;
    counted by the hot set alone, the 11-edge cold tree follows."""
    s = Setup()
    last, now = Cell(15, 12), Cell(13, 12)
    assert puma_event_cost(s, last, now, 2, 0.5) == 5 + 11 + 2 + 1
    assert puma_event_cost(s, last, now, 2, 0.5, tree_reach=True) == 5 + 2 + 1
    assert puma_event_cost(s, last, Cell(17, 12), 2, 0.5, tree_reach=True) == \
        puma_event_cost(s, last, Cell(17, 12), 2, 0.5)  # off the tree: both rounds either way
    reach = puma_expected(s, 3, 0.5, tree_reach=True).system
    assert reach < puma_expected(s, 3, 0.5).system
    assert puma_expected(s, 3, 1.0, tree_reach=True).system == puma_expected(s, 3, 1.0).system


def test_expected_cost_at_i_event_two() -> None:
    """Only one event-interval family is checked here (the full table is bench/puma_model.py).

    With trees rooted at the last reply's cell, no relay and no direct
    hand-over counted, the minimum over th at I_event = 2 is the thesis's 10
    (§5.4.2).
    """
    s = Setup()
    costs = {th: puma_expected(s, 2, th, anchor="last", relay=False, direct=False).system
             for th in THS}
    assert min(costs.values()) == pytest.approx(10.0, abs=0.05)
    assert costs[1.0] == pytest.approx(14.0, abs=1e-9)  # 12 edges + 2, every event
