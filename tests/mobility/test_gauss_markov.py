"""Gauss-Markov: alpha = 1 straight, alpha = 0 memoryless, AR(1) in between, edges."""

from __future__ import annotations

import math
import random
import statistics

from hypothesis import given, settings
from hypothesis import strategies as st

from meshsim.mobility.gauss_markov import gauss_markov
from meshsim.mobility.geometry import Box
from meshsim.mobility.trajectories import Track
from meshsim.scenario.model import GaussMarkov

HUGE = Box(0.0, 0.0, 1e7, 1e7)  # no side within reach: the pure process
CENTRE = HUGE.centre
STEPS = 5000


def _steps(track: Track, dt: float, n: int) -> list[tuple[float, float]]:
    """(speed, heading) of each time step (one segment each when nothing is hit)."""
    out = []
    for k in range(n):
        (x0, y0), (x1, y1) = track.position(k * dt), track.position((k + 1) * dt)
        out.append((math.hypot(x1 - x0, y1 - y0) / dt, math.atan2(y1 - y0, x1 - x0)))
    return out


def _lag1(xs: list[float]) -> float:
    return statistics.correlation(xs[:-1], xs[1:])


def _params(alpha: float, **kw: float) -> GaussMarkov:
    base: dict[str, float] = dict(mean_speed=10.0, sigma_speed=2.0, sigma_direction=20.0,
                                  mean_direction=90.0, time_step=0.5, edge_margin=0.0)
    base.update(kw)
    return GaussMarkov(alpha=alpha, **base)


def test_alpha_one_moves_in_a_straight_line_at_constant_speed() -> None:
    track = gauss_markov(random.Random(4), HUGE, _params(1.0), CENTRE, 200.0)
    steps = _steps(track, 0.5, 400)
    speeds, headings = [s for s, _ in steps], [h for _, h in steps]
    assert max(speeds) - min(speeds) < 1e-6
    assert max(headings) - min(headings) < 1e-9
    assert speeds[0] != 10.0  # the start was drawn (stationary law), not the mean


def test_alpha_zero_is_memoryless_around_the_means() -> None:
    track = gauss_markov(random.Random(5), HUGE, _params(0.0), CENTRE, STEPS * 0.5)
    steps = _steps(track, 0.5, STEPS)
    speeds = [s for s, _ in steps]
    headings = [math.degrees(h) for _, h in steps]
    bound = 4 / math.sqrt(STEPS)
    assert abs(_lag1(speeds)) < bound and abs(_lag1(headings)) < bound
    assert abs(statistics.fmean(speeds) - 10.0) < 4 * 2.0 / math.sqrt(STEPS)
    assert abs(statistics.fmean(headings) - 90.0) < 4 * 20.0 / math.sqrt(STEPS)
    assert abs(statistics.stdev(speeds) / 2.0 - 1) < 0.06
    assert abs(statistics.stdev(headings) / 20.0 - 1) < 0.06  # 90 +- 4.5 sigma: no wrap


def test_in_between_speeds_are_ar1_with_the_stationary_spread() -> None:
    track = gauss_markov(random.Random(6), HUGE, _params(0.8), CENTRE, STEPS * 0.5)
    speeds = [s for s, _ in _steps(track, 0.5, STEPS)]
    assert abs(_lag1(speeds) - 0.8) < 0.05
    assert abs(statistics.stdev(speeds) / 2.0 - 1) < 0.15  # sigma^2 is the stationary variance


def test_each_node_draws_its_own_mean_direction_when_none_is_given() -> None:
    p = _params(0.0, sigma_direction=1.0)
    p = GaussMarkov(p.alpha, p.mean_speed, p.sigma_speed, p.sigma_direction, None, 0.5, 0.0)
    means = []
    for seed in range(3):
        steps = _steps(gauss_markov(random.Random(seed), HUGE, p, CENTRE, 50.0), 0.5, 100)
        means.append(statistics.fmean(math.degrees(h) for _, h in steps))
    assert max(means) - min(means) > 5


def test_the_edge_margin_steers_nodes_back_towards_the_centre() -> None:
    box = Box(0.0, 0.0, 200.0, 200.0)

    def share_near_east(margin: float) -> float:
        near = total = 0
        for seed in range(10):
            p = GaussMarkov(alpha=0.75, mean_speed=5.0, sigma_speed=1.0, sigma_direction=20.0,
                            mean_direction=0.0, time_step=1.0, edge_margin=margin)
            track = gauss_markov(random.Random(seed), box, p, (100.0, 100.0), 1000.0)
            for k in range(100, 1000):
                total += 1
                near += track.position(k + 0.5)[0] > 180.0
        return near / total

    # Mean direction east: without the margin nodes press against the east side for ever.
    assert share_near_east(0.0) > 0.95
    assert share_near_east(20.0) < 0.6


@settings(max_examples=50, deadline=None)
@given(seed=st.integers(0, 10**6), w=st.floats(5.0, 500.0), h=st.floats(5.0, 500.0),
       alpha=st.floats(0.0, 1.0), speed=st.floats(0.0, 40.0), sigma=st.floats(0.0, 20.0),
       sigma_d=st.floats(0.0, 180.0), step=st.floats(0.1, 10.0), fm=st.floats(0.0, 0.45))
def test_nodes_stay_in_the_area(seed: int, w: float, h: float, alpha: float, speed: float,
                                sigma: float, sigma_d: float, step: float, fm: float) -> None:
    box = Box(0.0, 0.0, w, h)
    p = GaussMarkov(alpha, speed, sigma, sigma_d, None, step, fm * min(w, h))
    track = gauss_markov(random.Random(seed), box, p, (w / 3, h / 3), 100.0)
    assert track.last_t >= 100.0
    assert all(box.contains(x, y) for _, x, y in track.points())
    assert track == gauss_markov(random.Random(seed), box, p, (w / 3, h / 3), 100.0)
