"""Tracks, trajectories and the mobility log (write -> scripted replay gives the same)."""

from __future__ import annotations

import io
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsim.mobility.log import format_waypoint, write_log
from meshsim.mobility.trajectories import Track, Trajectories
from meshsim.scenario.model import Waypoint
from meshsim.scenario.traces import parse_waypoints


def test_track_interpolates_and_holds_its_ends() -> None:
    track = Track(0.0, 0.0)
    track.add(10.0, 100.0, 0.0)
    track.add(20.0, 100.0, 50.0)
    assert track.position(-1.0) == (0.0, 0.0)
    assert track.position(2.5) == (25.0, 0.0)
    assert track.position(15.0) == (100.0, 25.0)
    assert track.position(99.0) == (100.0, 50.0)
    assert track.last_t == 20.0 and track.end == (100.0, 50.0) and len(track) == 3


def test_track_point_at_the_same_time_replaces_and_earlier_is_refused() -> None:
    track = Track(1.0, 1.0)
    track.add(0.0, 5.0, 5.0)
    assert list(track.points()) == [(0.0, 5.0, 5.0)]
    track.add(3.0, 6.0, 6.0)
    with pytest.raises(ValueError, match="before the last one"):
        track.add(2.0, 0.0, 0.0)


def test_trajectories_cover_every_node_and_scripted_semantics_hold() -> None:
    start = {1: (0.0, 0.0), 2: (10.0, 10.0), 3: (5.0, 5.0)}
    traj = Trajectories.from_waypoints(
        [Waypoint(4.0, 1, 40.0, 0.0), Waypoint(0.0, 2, 20.0, 10.0), Waypoint(2.0, 2, 20.0, 30.0),
         Waypoint(2.0, 2, 20.0, 20.0)], start)
    assert traj.nodes == (1, 2, 3)
    assert traj.position(1, 1.0) == (10.0, 0.0)       # moves from its placed start
    assert traj.position(2, 0.0) == (20.0, 10.0)      # a t = 0 waypoint replaces the start
    assert traj.position(2, 5.0) == (20.0, 20.0)      # the later of two equal times wins
    assert traj.position(3, 7.0) == (5.0, 5.0)        # no waypoints: static
    assert traj.moving() == (1, 2) and traj.last_t == 4.0
    assert traj.positions(1.0) == {1: (10.0, 0.0), 2: (20.0, 15.0), 3: (5.0, 5.0)}


def test_tracks_must_start_at_zero() -> None:
    track = Track(0.0, 0.0, t0=1.0)
    with pytest.raises(ValueError, match=r"starts at t=1\.0"):
        Trajectories({1: track})


def test_waypoints_come_ordered_by_time_then_node() -> None:
    a, b = Track(0.0, 0.0), Track(1.0, 1.0)
    a.add(2.0, 1.0, 0.0)
    b.add(1.0, 2.0, 2.0)
    b.add(2.0, 3.0, 3.0)
    got = [(w.t, w.node) for w in Trajectories({7: b, 3: a}).waypoints()]
    assert got == [(0.0, 3), (0.0, 7), (1.0, 7), (2.0, 3), (2.0, 7)]


def test_log_lines_read_back_as_the_same_doubles() -> None:
    w = Waypoint(0.1 + 0.2, 4, 1 / 3, 1e-17)
    (back,) = parse_waypoints([format_waypoint(w)], "log")
    assert back == w


_coord = st.floats(0.0, 1000.0, allow_nan=False)


@st.composite
def _trajectories(draw: st.DrawFn) -> Trajectories:
    tracks = {}
    for node in draw(st.sets(st.integers(0, 50), min_size=1, max_size=5)):
        track = Track(draw(_coord), draw(_coord))
        t = 0.0
        for _ in range(draw(st.integers(0, 6))):
            t += draw(st.floats(1e-6, 100.0))
            track.add(t, draw(_coord), draw(_coord))
        tracks[node] = track
    return Trajectories(tracks)


@settings(max_examples=60, deadline=None)
@given(_trajectories(), st.lists(st.floats(0.0, 700.0), max_size=20))
def test_log_round_trip_replays_the_same_positions(traj: Trajectories,
                                                   times: list[float]) -> None:
    out = io.StringIO()
    n = write_log(traj, out, header="a header\nover two lines")
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["# a header", "# over two lines"] and len(lines) == n + 2
    # The replay starts every node somewhere else: the log's t = 0 points must win.
    start = {node: (-1.0, -1.0) for node in traj.nodes}
    replay = Trajectories.from_waypoints(parse_waypoints(lines, "log"), start)
    assert replay == traj
    for t in times:
        assert replay.positions(t) == traj.positions(t)


@settings(max_examples=60, deadline=None)
@given(_trajectories(), st.floats(0.0, 700.0))
def test_positions_lie_on_the_segment_between_points(traj: Trajectories, t: float) -> None:
    for node in traj.nodes:
        track = traj.track(node)
        x, y = track.position(t)
        pts = list(track.points())
        before = [p for p in pts if p[0] <= t]
        after = [p for p in pts if p[0] > t]
        if not before or not after:
            continue
        (t0, x0, y0), (t1, x1, y1) = before[-1], after[0]
        assert min(x0, x1) - 1e-9 <= x <= max(x0, x1) + 1e-9
        assert min(y0, y1) - 1e-9 <= y <= max(y0, y1) + 1e-9
        # Constant speed along the segment: the distance covered is proportional to time.
        covered = math.hypot(x - x0, y - y0)
        assert math.isclose(covered, math.hypot(x1 - x0, y1 - y0) * (t - t0) / (t1 - t0),
                            rel_tol=1e-9, abs_tol=1e-6)
