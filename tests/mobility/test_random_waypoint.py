"""Random waypoint: steady-state start (Navidi & Camp 2004), area, determinism."""

from __future__ import annotations

import bisect
import math
import random
from collections.abc import Callable, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsim.mobility.geometry import Box
from meshsim.mobility.random_waypoint import (
    mean_inverse_speed,
    mean_trip_length,
    paused_probability,
    random_waypoint,
    residual_pause,
    stationary_speed,
)
from meshsim.mobility.trajectories import Track
from meshsim.scenario.model import RandomWaypoint

BOX = Box(0.0, 0.0, 1000.0, 1000.0)
PARAMS = RandomWaypoint(speed_min=1.0, speed_max=10.0, pause_min=0.0, pause_max=60.0)
NODES = 3000
LATE = 2500.0
KS_001 = 1.95  # two-sided Kolmogorov-Smirnov critical value at alpha = 0.001


def ks_two_sample(a: Sequence[float], b: Sequence[float]) -> float:
    a, b = sorted(a), sorted(b)
    i = j = 0
    d = 0.0
    while i < len(a) and j < len(b):
        if a[i] <= b[j]:
            i += 1
        else:
            j += 1
        d = max(d, abs(i / len(a) - j / len(b)))
    return d


def ks_one_sample(xs: Sequence[float], cdf: Callable[[float], float]) -> float:
    xs = sorted(xs)
    n = len(xs)
    return max(max(abs((i + 1) / n - cdf(x)), abs(i / n - cdf(x))) for i, x in enumerate(xs))


def segment_speed(track: Track, t: float) -> float:
    """The speed on the segment the node is on at time t (0 while paused)."""
    i = bisect.bisect_right(track.times, t)
    t0, t1 = track.times[i - 1], track.times[i]
    return math.hypot(track.xs[i] - track.xs[i - 1], track.ys[i] - track.ys[i - 1]) / (t1 - t0)


def tracks(params: RandomWaypoint, n: int = NODES, until: float = LATE + 100) -> list[Track]:
    return [random_waypoint(random.Random(f"rwp:{i}"), BOX, params,
                            BOX.uniform(random.Random(f"placed:{i}")), until)
            for i in range(n)]


def centre_distances(ts: list[Track], t: float) -> list[float]:
    cx, cy = BOX.centre
    return [math.hypot(x - cx, y - cy) for x, y in (tr.position(t) for tr in ts)]


@pytest.fixture(scope="module")
def steady() -> list[Track]:
    return tracks(PARAMS)


def test_mean_trip_length_matches_the_unit_square_and_monte_carlo() -> None:
    # The unit square's constant: (2 + sqrt 2 + 5 ln(1 + sqrt 2)) / 15.
    assert math.isclose(mean_trip_length(1.0, 1.0),
                        (2 + math.sqrt(2) + 5 * math.log(1 + math.sqrt(2))) / 15)
    rng = random.Random(5)
    n = 200_000
    mc = sum(math.hypot(rng.uniform(0, 300) - rng.uniform(0, 300),
                        rng.uniform(0, 100) - rng.uniform(0, 100)) for _ in range(n)) / n
    assert math.isclose(mean_trip_length(300.0, 100.0), mc, rel_tol=0.01)
    assert mean_trip_length(300.0, 100.0) == pytest.approx(mean_trip_length(100.0, 300.0))


def test_residual_pause_inverts_its_cdf() -> None:
    p1, p2 = 10.0, 50.0
    mean = (p1 + p2) / 2

    def cdf(r: float) -> float:  # (1/E[P]) * integral_0^r P(P > s) ds
        if r <= p1:
            return r / mean
        return (p1 + ((p2 - p1) ** 2 - (p2 - r) ** 2) / (2 * (p2 - p1))) / mean

    for u in (0.0, 0.1, 0.3, 1 / 3, 0.5, 0.9, 0.999):
        assert cdf(residual_pause(u, p1, p2)) == pytest.approx(u)
    assert residual_pause(0.5, 7.0, 7.0) == 3.5  # a fixed pause: residual uniform in [0, p]


def test_stationary_speed_has_density_proportional_to_one_over_v() -> None:
    assert stationary_speed(0.0, 1.0, 10.0) == 1.0
    assert stationary_speed(1.0, 1.0, 10.0) == pytest.approx(10.0)
    assert stationary_speed(0.5, 1.0, 10.0) == pytest.approx(math.sqrt(10.0))  # geometric mean
    assert mean_inverse_speed(2.0, 2.0) == 0.5
    with pytest.raises(ValueError, match="infinite"):
        mean_inverse_speed(0.0, 5.0)


def test_positions_at_start_have_the_stationary_distribution(steady: list[Track]) -> None:
    bound = KS_001 * math.sqrt(2 / NODES)
    d = ks_two_sample(centre_distances(steady, 0.0), centre_distances(steady, LATE))
    assert d < bound
    # Control: the classic start (uniform placement) is visibly not stationary, so the
    # statistic above can fail. The stationary density is higher in the middle.
    classic = tracks(RandomWaypoint(1.0, 10.0, 0.0, 60.0, steady_state=False))
    start, late = centre_distances(classic, 0.0), centre_distances(classic, LATE)
    assert ks_two_sample(start, late) > 3 * bound
    assert sum(late) / NODES < 0.9 * sum(start) / NODES


def test_share_of_paused_nodes_is_stationary(steady: list[Track]) -> None:
    p = paused_probability(BOX, PARAMS)
    assert 0.15 < p < 0.22
    four_sigma = 4 * math.sqrt(p * (1 - p) / NODES)
    for t in (0.0, LATE):
        paused = sum(1 for tr in steady if segment_speed(tr, t) == 0.0) / NODES
        assert abs(paused - p) < four_sigma, t


def test_speeds_at_start_follow_the_steady_state_density(steady: list[Track]) -> None:
    def log_cdf(v: float) -> float:
        return math.log(v / PARAMS.speed_min) / math.log(PARAMS.speed_max / PARAMS.speed_min)

    def uniform_cdf(v: float) -> float:
        return (v - PARAMS.speed_min) / (PARAMS.speed_max - PARAMS.speed_min)

    for t in (0.0, LATE):
        speeds = [v for v in (segment_speed(tr, t) for tr in steady) if v > 0]
        bound = KS_001 / math.sqrt(len(speeds))
        assert ks_one_sample(speeds, log_cdf) < bound, t
        assert ks_one_sample(speeds, uniform_cdf) > 3 * bound, t  # not the trip speeds


def test_trips_after_the_first_draw_uniform_speeds(steady: list[Track]) -> None:
    speeds = []
    for tr in steady[:500]:
        for i in range(2, len(tr) - 1):
            v = segment_speed(tr, (tr.times[i] + tr.times[i + 1]) / 2)
            if v > 0:
                speeds.append(v)
    assert ks_one_sample(speeds, lambda v: (v - 1.0) / 9.0) < KS_001 / math.sqrt(len(speeds))


def test_same_seed_same_track_and_another_seed_another() -> None:
    a = random_waypoint(random.Random("x"), BOX, PARAMS, (0.0, 0.0), 500.0)
    b = random_waypoint(random.Random("x"), BOX, PARAMS, (0.0, 0.0), 500.0)
    c = random_waypoint(random.Random("y"), BOX, PARAMS, (0.0, 0.0), 500.0)
    assert a == b and a != c


def test_classic_start_begins_at_the_placement_and_refuses_nothing_at_speed_zero() -> None:
    track = random_waypoint(random.Random(1), BOX, RandomWaypoint(0.0, 2.0, steady_state=False),
                            (10.0, 20.0), 100.0)
    assert track.position(0.0) == (10.0, 20.0) and track.last_t >= 100.0
    with pytest.raises(ValueError, match="speed_min > 0"):
        random_waypoint(random.Random(1), BOX, RandomWaypoint(0.0, 2.0), (0.0, 0.0), 10.0)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), w=st.floats(1.0, 5000.0), h=st.floats(1.0, 5000.0),
       vmin=st.floats(0.1, 20.0), spread=st.floats(0.0, 20.0), pause=st.floats(0.0, 100.0),
       steady_state=st.booleans())
def test_tracks_stay_in_the_area_and_cover_the_run(seed: int, w: float, h: float, vmin: float,
                                                   spread: float, pause: float,
                                                   steady_state: bool) -> None:
    box = Box(0.0, 0.0, w, h)
    p = RandomWaypoint(vmin, vmin + spread, pause / 2, pause, steady_state)
    track = random_waypoint(random.Random(seed), box, p, (w / 2, h / 2), 600.0)
    assert track.last_t >= 600.0
    assert all(box.contains(x, y) for _, x, y in track.points())
    for i in range(1, len(track)):
        v = segment_speed(track, (track.times[i - 1] + track.times[i]) / 2)
        assert v == 0.0 or p.speed_min * (1 - 1e-9) <= v <= p.speed_max * (1 + 1e-9)
