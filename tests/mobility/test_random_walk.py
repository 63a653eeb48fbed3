"""Random walk (ns-3 RandomWalk2d semantics): walks of a time or a distance, reflection."""

from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsim.mobility.geometry import Box
from meshsim.mobility.random_walk import random_walk
from meshsim.scenario.model import RandomWalk

BOX = Box(0.0, 0.0, 200.0, 100.0)


def _legs(points: list[tuple[float, float, float]]) -> list[tuple[float, float]]:
    """(duration, length) of each segment."""
    return [(b[0] - a[0], math.hypot(b[1] - a[1], b[2] - a[2]))
            for a, b in itertools.pairwise(points)]


def test_walks_of_fixed_time_change_velocity_at_every_multiple() -> None:
    p = RandomWalk(speed_min=2.0, speed_max=4.0, walk_time=5.0)
    track = random_walk(random.Random(3), BOX, p, (100.0, 50.0), 60.0)
    times = list(track.times)
    for k in range(13):  # every walk boundary is a point (bounces add more)
        assert 5.0 * k in times
    assert track.last_t == 60.0
    rng = random.Random(3)  # the same draws: direction, then speed, per walk
    for k in range(12):
        direction, speed = rng.uniform(0, 2 * math.pi), rng.uniform(2.0, 4.0)
        t0, t1 = 5.0 * k, 5.0 * (k + 1)
        inside = [(t, x, y) for t, x, y in track.points() if t0 <= t <= t1]
        length = sum(leg for _, leg in _legs(inside))
        assert math.isclose(length, speed * 5.0, rel_tol=1e-9)
        if len(inside) == 2:  # no bounce: the drawn direction exactly
            (_, x0, y0), (_, x1, y1) = inside
            assert math.isclose(math.atan2(y1 - y0, x1 - x0) % (2 * math.pi), direction,
                                abs_tol=1e-9)


def test_walks_of_fixed_distance_last_distance_over_speed() -> None:
    p = RandomWalk(speed_min=1.0, speed_max=3.0, walk_time=None, walk_distance=20.0)
    track = random_walk(random.Random(9), BOX, p, (10.0, 10.0), 300.0)
    rng = random.Random(9)  # the same draws: direction, then speed, per walk
    boundaries = []
    t = 0.0
    while t < 300.0:
        rng.uniform(0, 2 * math.pi)
        t += 20.0 / rng.uniform(1.0, 3.0)
        boundaries.append(t)
    assert set(boundaries) <= set(track.times) and track.last_t == boundaries[-1]
    total = sum(leg for _, leg in _legs(list(track.points())))
    assert math.isclose(total, 20.0 * len(boundaries), rel_tol=1e-9)


def test_a_node_at_a_side_heading_out_bounces_back_in() -> None:
    # Start on the west side; whatever the draw, the node never leaves the area.
    track = random_walk(random.Random(0), BOX, RandomWalk(50.0, 50.0, 10.0), (0.0, 50.0), 100.0)
    assert all(BOX.contains(x, y) for _, x, y in track.points())


def test_distance_walks_need_a_positive_speed() -> None:
    with pytest.raises(ValueError, match="speed_min > 0"):
        random_walk(random.Random(0), BOX, RandomWalk(0.0, 0.0, None, 5.0), (1.0, 1.0), 10.0)


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10**6), fx=st.floats(0.0, 1.0), fy=st.floats(0.0, 1.0),
       vmin=st.floats(0.0, 30.0), spread=st.floats(0.0, 30.0),
       walk=st.one_of(st.tuples(st.floats(0.1, 50.0), st.none()),
                      st.tuples(st.none(), st.floats(0.5, 200.0))))
def test_walks_stay_in_the_area_and_are_deterministic(seed: int, fx: float, fy: float,
                                                      vmin: float, spread: float,
                                                      walk: tuple[float | None, float | None]
                                                      ) -> None:
    p = RandomWalk(max(vmin, 0.1), max(vmin, 0.1) + spread, *walk)
    start = (fx * BOX.width, fy * BOX.height)
    track = random_walk(random.Random(seed), BOX, p, start, 120.0)
    assert track.last_t >= 120.0 and track.position(0.0) == start
    assert all(BOX.contains(x, y) for _, x, y in track.points())
    assert track == random_walk(random.Random(seed), BOX, p, start, 120.0)
