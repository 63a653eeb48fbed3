"""Random waypoint, started in its steady state.

A node picks a destination uniformly in the area and a speed uniformly in
[speed_min, speed_max], travels there in a straight line, pauses for a time
uniform in [pause_min, pause_max], and repeats. Started from uniform positions the
model is *not* in its steady state: the stationary node density peaks in the
middle of the area and slow trips are over-represented in time, so metrics drift
for hundreds of seconds (up to 40 % over 900 s, Yoon, Liu & Noble, INFOCOM 2003).

``steady_state = true`` draws the start from the stationary distribution instead,
following W. Navidi and T. Camp, "Stationary distributions for the random waypoint
mobility model", IEEE Trans. Mobile Computing 3(1), 2004 (the same algorithm as
ns-3's ``SteadyStateRandomWaypointMobilityModel``):

1. The node is paused with probability E[P] / (E[P] + E[L] E[1/V]): the share of
   time a cycle spends paused. E[P] = (pause_min + pause_max) / 2, E[L] is the mean
   distance between two uniform points of the rectangle (``mean_trip_length``) and
   E[1/V] = ln(v_max / v_min) / (v_max - v_min) for uniform speeds.
2. A paused node sits at its last destination, uniform in the area, for the
   *residual* pause time R, whose CDF is (1/E[P]) * integral_0^r P(P > s) ds
   (renewal theory; inverted in ``residual_pause``).
3. A moving node is on a trip whose end points (P1, P2) are drawn with density
   proportional to |P1 - P2| (longer trips take more of the time; done by
   rejection), at a point uniform along it, heading for P2, at a speed with density
   proportional to 1/v on [v_min, v_max] (time spent at speed v is proportional to
   1/v): v = v_min^(1-u) v_max^u.

E[1/V] is infinite when v_min = 0, so no stationary distribution exists then (the
average speed decays for ever): steady state needs ``speed_min > 0``.
"""

from __future__ import annotations

import math
import random

from meshsim.mobility.geometry import Box
from meshsim.mobility.trajectories import Track
from meshsim.scenario.model import RandomWaypoint


def mean_trip_length(width: float, height: float) -> float:
    """E[L]: mean distance between two independent uniform points of a width x height
    rectangle (the closed form Navidi & Camp use; 0.5214 for the unit square)."""
    a, b = width, height
    d = math.hypot(a, b)
    return (a**3 / b**2 + b**3 / a**2 + d * (3 - a**2 / b**2 - b**2 / a**2)) / 15 \
        + (b**2 / a * math.log((a + d) / b) + a**2 / b * math.log((b + d) / a)) / 6


def mean_inverse_speed(v_min: float, v_max: float) -> float:
    """E[1/V] for V uniform on [v_min, v_max] (v_min > 0)."""
    if v_min <= 0:
        raise ValueError("E[1/V] is infinite for speed_min = 0")
    if v_max == v_min:
        return 1.0 / v_min
    return math.log(v_max / v_min) / (v_max - v_min)


def paused_probability(box: Box, p: RandomWaypoint) -> float:
    """The stationary probability that a node is paused (step 1)."""
    mean_pause = (p.pause_min + p.pause_max) / 2
    if mean_pause == 0:
        return 0.0
    travel = mean_trip_length(box.width, box.height) * mean_inverse_speed(p.speed_min,
                                                                         p.speed_max)
    return mean_pause / (mean_pause + travel)


def residual_pause(u: float, pause_min: float, pause_max: float) -> float:
    """Inverse CDF of the residual pause time R at u in [0, 1) (step 2).

    For P uniform on [p1, p2]: F(r) = 2r / (p1 + p2) for r <= p1, and
    p2 - r = sqrt((1 - u)(p2^2 - p1^2)) above it.
    """
    p1, p2 = pause_min, pause_max
    if u < 2 * p1 / (p1 + p2):
        return u * (p1 + p2) / 2
    return p2 - math.sqrt((1 - u) * (p2 * p2 - p1 * p1))


def stationary_speed(u: float, v_min: float, v_max: float) -> float:
    """Inverse CDF of the density proportional to 1/v on [v_min, v_max] (step 3)."""
    return float(v_min ** (1 - u) * v_max**u)


def random_waypoint(rng: random.Random, box: Box, p: RandomWaypoint,
                    start: tuple[float, float], until: float) -> Track:
    """One node's track from t = 0 until at least ``until``.

    ``start`` is the placed position, used only without ``steady_state``.
    """
    if p.steady_state:
        track, t = _steady_state_start(rng, box, p)
    else:
        track, t = Track(*start), 0.0
    while t < until:
        x, y = track.end
        dx, dy = box.uniform(rng)
        t += math.hypot(dx - x, dy - y) / _trip_speed(rng, p)
        track.add(t, dx, dy)
        t = _pause(rng, p, track, t)
    return track


def _steady_state_start(rng: random.Random, box: Box, p: RandomWaypoint
                        ) -> tuple[Track, float]:
    if p.speed_min <= 0:
        raise ValueError("steady-state random waypoint needs speed_min > 0")
    if rng.random() < paused_probability(box, p):
        track = Track(*box.uniform(rng))
        t = residual_pause(rng.random(), p.pause_min, p.pause_max)
        track.add(t, *track.end)
        return track, t
    diagonal = math.hypot(box.width, box.height)
    while True:
        x1, y1 = box.uniform(rng)
        x2, y2 = box.uniform(rng)
        if rng.random() < math.hypot(x2 - x1, y2 - y1) / diagonal:
            break
    w = rng.random()
    x, y = box.clamp(x1 + w * (x2 - x1), y1 + w * (y2 - y1))
    speed = stationary_speed(rng.random(), p.speed_min, p.speed_max)
    track = Track(x, y)
    t = math.hypot(x2 - x, y2 - y) / speed
    track.add(t, x2, y2)
    return track, _pause(rng, p, track, t)


def _trip_speed(rng: random.Random, p: RandomWaypoint) -> float:
    while True:  # speed_min = 0 (allowed without steady state) must not give 0
        v = rng.uniform(p.speed_min, p.speed_max)
        if v > 0:
            return v


def _pause(rng: random.Random, p: RandomWaypoint, track: Track, t: float) -> float:
    if p.pause_max > 0:
        t += rng.uniform(p.pause_min, p.pause_max)
        track.add(t, *track.end)
    return t
