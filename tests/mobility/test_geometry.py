"""Reflecting straight-line travel inside the area."""

from __future__ import annotations

import itertools
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsim.mobility.geometry import Box, travel
from meshsim.mobility.trajectories import Track


def test_a_bounce_off_the_east_side_by_hand() -> None:
    box = Box(0.0, 0.0, 100.0, 50.0)
    track = Track(90.0, 10.0)
    # 5 m/s east and 1 m/s north for 4 s: the east side at t = 2 (x = 100, y = 12),
    # then back west for 2 s: x = 90, y = 14.
    end = travel(track, box, 0.0, 90.0, 10.0, 5.0, 1.0, 4.0)
    assert list(track.points()) == [(0.0, 90.0, 10.0), (2.0, 100.0, 12.0), (4.0, 90.0, 14.0)]
    assert (end.vx, end.vy, end.flips_x, end.flips_y) == (-5.0, 1.0, 1, 0)


def test_a_corner_flips_both_components() -> None:
    box = Box(0.0, 0.0, 10.0, 10.0)
    track = Track(5.0, 5.0)
    end = travel(track, box, 0.0, 5.0, 5.0, 1.0, 1.0, 8.0)
    assert (5.0, 10.0, 10.0) in list(track.points())
    assert (end.x, end.y, end.vx, end.vy) == (7.0, 7.0, -1.0, -1.0)
    assert (end.flips_x, end.flips_y) == (1, 1)


def test_standing_still_adds_only_the_end_point() -> None:
    track = Track(3.0, 4.0)
    end = travel(track, Box(0, 0, 10, 10), 0.0, 3.0, 4.0, 0.0, 0.0, 5.0)
    assert list(track.points()) == [(0.0, 3.0, 4.0), (5.0, 3.0, 4.0)]
    assert (end.x, end.y) == (3.0, 4.0)


def test_an_empty_box_is_refused() -> None:
    with pytest.raises(ValueError, match="empty box"):
        Box(0.0, 0.0, 0.0, 10.0)


@settings(max_examples=200, deadline=None)
@given(w=st.floats(1.0, 1000.0), h=st.floats(1.0, 1000.0), fx=st.floats(0.0, 1.0),
       fy=st.floats(0.0, 1.0), speed=st.floats(0.0, 200.0), angle=st.floats(0.0, 2 * math.pi),
       duration=st.floats(1e-3, 100.0))
def test_travel_stays_in_the_box_and_keeps_its_speed(w: float, h: float, fx: float, fy: float,
                                                    speed: float, angle: float,
                                                    duration: float) -> None:
    box = Box(0.0, 0.0, w, h)
    x, y = fx * w, fy * h
    track = Track(x, y)
    travel(track, box, 0.0, x, y, speed * math.cos(angle), speed * math.sin(angle), duration)
    pts = list(track.points())
    assert pts[-1][0] == duration
    assert all(box.contains(px, py) for _, px, py in pts)
    assert all(b[0] > a[0] for a, b in itertools.pairwise(pts))
    length = sum(math.hypot(b[1] - a[1], b[2] - a[2]) for a, b in itertools.pairwise(pts))
    assert math.isclose(length, speed * duration, rel_tol=1e-6, abs_tol=1e-6)
    # Between points the speed is the same everywhere.
    for a, b in itertools.pairwise(pts):
        leg = math.hypot(b[1] - a[1], b[2] - a[2])
        assert math.isclose(leg, speed * (b[0] - a[0]), rel_tol=1e-6, abs_tol=1e-6)
