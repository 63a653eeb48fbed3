"""Grid cells, distances, neighbours and border hysteresis (Zheng 2008, §4.2, §5.2)."""

from __future__ import annotations

import math
import random

import pytest

from meshsub.core.grid import (
    Bounds,
    Cell,
    CellTracker,
    Grid,
    GridError,
    chebyshev,
    manhattan,
    probe_points,
)


def hesper_grid(tr: float = 70.0) -> Grid:
    return Grid.for_radio_range(tr, 1000.0, 1000.0)


def test_hesper_grid_geometry() -> None:
    g70, g100 = hesper_grid(70.0), hesper_grid(100.0)
    assert g70.cell_size == pytest.approx(49.50, abs=0.005) and (g70.cols, g70.rows) == (21, 21)
    assert g100.cell_size == pytest.approx(70.71, abs=0.005) and (g100.cols, g100.rows) == (15, 15)
    assert 4000 / len(g70) == pytest.approx(9.07, abs=0.01)
    assert 8000 / len(g100) == pytest.approx(35.6, abs=0.05)
    # Two nodes anywhere in one cell are within TR of each other.
    assert math.hypot(g70.cell_size, g70.cell_size) <= 70.0 + 1e-9
    assert (Grid.covering(100.0, 50.0, 10.0).cols, Grid.covering(100.0, 50.0, 10.0).rows) == (10, 5)


def test_worked_example_cells() -> None:
    g = hesper_grid(70.0)
    assert g.cell_of(512, 497) == Cell(10, 10)
    assert g.cell_of(812, 640) == Cell(16, 12)
    assert chebyshev((16, 12), (10, 10)) == 6 and manhattan((16, 12), (10, 10)) == 8


def test_floor_formula_and_borders() -> None:
    g = Grid(100.0, -50.0, 10.0, 4, 3)
    assert g.raw_cell(100.0, -50.0) == Cell(0, 0)
    assert g.cell_of(109.999, -40.001) == Cell(0, 0)
    assert g.cell_of(110.0, -40.0) == Cell(1, 1)  # cells own their west/south borders
    assert g.cell_of(140.0, -20.0) == Cell(3, 2)  # the far corner belongs to the last cell
    assert g.raw_cell(99.0, -51.0) == Cell(-1, -1)
    assert g.locate(99.0, 0.0) is None and g.locate(math.nan, 0.0) is None
    with pytest.raises(GridError):
        g.cell_of(141.0, 0.0)


def test_bounds_centre_and_index() -> None:
    g = Grid(0.0, 0.0, 10.0, 4, 3)
    assert g.bounds((2, 1)) == Bounds(20.0, 10.0, 30.0, 20.0)
    assert g.centre((2, 1)) == (25.0, 15.0)
    assert g.area == Bounds(0.0, 0.0, 40.0, 30.0)
    assert [g.cell_at(g.index(c)) for c in g.cells()] == list(g.cells())
    assert sorted(g.index(c) for c in g.cells()) == list(range(12))
    square = Grid(0.0, 0.0, 1.0, 5, 5)
    assert square.index((3, 2)) == 3 * 5 + 2  # PUMA's x*l + y
    with pytest.raises(GridError):
        g.bounds((4, 0))
    with pytest.raises(GridError):
        g.cell_at(12)
    b = Bounds(0.0, 0.0, 10.0, 10.0)
    assert b.distance_outside(5, 5) == 0 and b.distance_outside(13, 14) == 5.0
    assert b.contains(10.5, 5, margin=1) and not b.contains(10.5, 5)


def test_neighbours() -> None:
    g = Grid(0.0, 0.0, 1.0, 3, 3)
    assert len(g.neighbours((1, 1))) == 8 and len(g.neighbours((0, 0))) == 3
    assert len(g.neighbours((1, 0))) == 5
    assert g.neighbours((1, 1), diagonal=False) == [Cell(2, 1), Cell(1, 2), Cell(0, 1), Cell(1, 0)]
    assert all(chebyshev((1, 1), c) == 1 for c in g.neighbours((1, 1)))
    assert all(manhattan((1, 1), c) == 1 for c in g.neighbours((1, 1), diagonal=False))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"origin_x": math.inf, "origin_y": 0.0, "cell_size": 1.0, "cols": 1, "rows": 1},
        {"origin_x": 0.0, "origin_y": 0.0, "cell_size": 0.0, "cols": 1, "rows": 1},
        {"origin_x": 0.0, "origin_y": 0.0, "cell_size": 1.0, "cols": 0, "rows": 1},
        {"origin_x": 0.0, "origin_y": 0.0, "cell_size": 1.0, "cols": 2, "rows": 1.5},
        {"origin_x": 0.0, "origin_y": 0.0, "cell_size": True, "cols": 2, "rows": 1},
    ],
)
def test_bad_grid_parameters(kwargs: dict[str, object]) -> None:
    with pytest.raises(GridError):
        Grid(**kwargs)  # type: ignore[arg-type]


def test_bad_constructors() -> None:
    with pytest.raises(GridError):
        Grid.covering(0.0, 10.0, 1.0)
    with pytest.raises(GridError):
        Grid.for_radio_range(-70.0, 10.0, 10.0)


def test_tracker_hysteresis_keeps_cell_on_jitter() -> None:
    g = Grid(0.0, 0.0, 50.0, 4, 4)
    t = CellTracker(g, margin=5.0)
    assert t.update(48.0, 20.0) == Cell(0, 0)
    for x in (50.5, 49.5, 53.0, 54.9, 51.0, 55.0):
        assert t.update(x, 20.0) == Cell(0, 0)  # within 5 m of its cell
    assert t.update(55.1, 20.0) == Cell(1, 0)  # beyond the margin: switch
    assert t.update(46.0, 20.0) == Cell(1, 0)  # and the margin applies the other way
    assert t.update(44.9, 20.0) == Cell(0, 0)
    assert t.update(180.0, 180.0) == Cell(3, 3)  # a far jump switches at once
    assert t.changes == 4


def test_tracker_at_the_area_edge() -> None:
    g = Grid(0.0, 0.0, 50.0, 2, 2)
    t = CellTracker(g, margin=5.0)
    assert t.update(-3.0, 10.0) == Cell(0, 0)  # just outside the area: nearest edge cell
    assert t.update(-20.0, 10.0) is None  # well outside: no cell
    assert t.cell is None
    assert t.update(10.0, 10.0) == Cell(0, 0)
    t.reset()
    assert t.cell is None
    with pytest.raises(GridError):
        CellTracker(g, margin=25.0)
    with pytest.raises(GridError):
        CellTracker(g, margin=-1.0)
    with pytest.raises(GridError):
        t.update(math.inf, 0.0)


@pytest.mark.parametrize(("side", "reach", "k"), [(100 / math.sqrt(2), 100.0, 1),
                                                  (80.0, 60.0, 2), (49.0, 70.0, 1),
                                                  (49.6, 70.0, 2), (300.0, 50.0, 9)])
def test_probe_points_put_every_point_of_the_cell_within_half_the_reach(
        side: float, reach: float, k: int) -> None:
    g = Grid(10.0, 20.0, side, 4, 3)
    b = g.bounds((2, 1))
    probes = probe_points(b, reach)
    assert len(probes) == k * k
    assert all(b.contains(x, y) for x, y in probes)
    if k == 1:
        assert probes[0] == pytest.approx(b.centre)
    rng = random.Random(3)
    corners = [(b.x_min, b.y_min), (b.x_max, b.y_max), (b.x_min, b.y_max), (b.x_max, b.y_min)]
    for x, y in corners + [(rng.uniform(b.x_min, b.x_max), rng.uniform(b.y_min, b.y_max))
                           for _ in range(2000)]:
        assert min(math.dist((x, y), q) for q in probes) <= reach / 2 + 1e-9
    with pytest.raises(GridError):
        probe_points(b, 0.0)


def test_a_cell_overhanging_the_area_is_clipped_to_it() -> None:
    g = Grid.for_radio_range(70.0, 1000.0, 1000.0)  # 21 x 21 cells of 49.5 m: 1039.5 m
    area = Bounds(0.0, 0.0, 1000.0, 1000.0)
    edge = g.clipped((20, 3), area)
    assert edge.x_min == pytest.approx(990.0, abs=0.1) and edge.x_max == 1000.0
    assert (edge.y_min, edge.y_max) == (g.bounds((20, 3)).y_min, g.bounds((20, 3)).y_max)
    assert g.clipped((3, 3), area) == g.bounds((3, 3))
    (probe,) = probe_points(edge, 70.0)
    assert area.contains(*probe)
