"""Reference point group mobility (RPGM).

X. Hong, M. Gerla, G. Pei and C.-C. Chiang, "A group mobility model for ad hoc
wireless networks", MSWiM 1999. Each group has a logical centre, the reference
point, that moves by steady-state random waypoint (the group's motion vector);
each member's position is the reference point plus its own random motion vector,
whose length is uniform in [0, radius] and direction uniform in [0, 2 pi), drawn
afresh every ``member_step`` seconds. Between draws the member's offset changes
linearly, so the member is always within ``radius`` of the reference point (a
straight line between two points of a disc stays in it) and its track stays
piecewise linear: its points are those of the reference point and its own draws.

The reference point moves in the area shrunk by ``radius`` on every side, so every
member stays inside the area. Members start about the reference point: the
placement of group members is not used.
"""

from __future__ import annotations

import heapq
import math
import random
from collections.abc import Callable, Iterator

from meshsim.mobility.geometry import Box
from meshsim.mobility.random_waypoint import random_waypoint
from meshsim.mobility.trajectories import Track
from meshsim.scenario.model import GroupMobility, RandomWaypoint


def reference_track(rng: random.Random, box: Box, p: GroupMobility, until: float) -> Track:
    """A group's reference point: steady-state random waypoint in the shrunk area."""
    motion = RandomWaypoint(p.speed_min, p.speed_max, p.pause_min, p.pause_max,
                            steady_state=True)
    inner = box.inset(p.radius)
    return random_waypoint(rng, inner, motion, inner.centre, until)


def member_track(rng: random.Random, box: Box, p: GroupMobility, reference: Track,
                 until: float) -> Track:
    """A member: the reference point plus a random motion vector redrawn every step."""
    steps = max(1, math.ceil(until / p.member_step))
    offsets = [_motion_vector(rng, p.radius) for _ in range(steps + 1)]

    def offset(t: float) -> tuple[float, float]:
        if t >= steps * p.member_step:
            return offsets[steps]
        k = min(int(t // p.member_step), steps - 1)
        frac = min(max((t - k * p.member_step) / p.member_step, 0.0), 1.0)
        (x0, y0), (x1, y1) = offsets[k], offsets[k + 1]
        return x0 + (x1 - x0) * frac, y0 + (y1 - y0) * frac

    times = _merged_times(reference, p.member_step, steps)
    track = Track(*_at(box, reference, offset, next(times)))
    for t in times:
        track.add(t, *_at(box, reference, offset, t))
    return track


def _at(box: Box, reference: Track, offset: Callable[[float], tuple[float, float]],
        t: float) -> tuple[float, float]:
    (rx, ry), (ox, oy) = reference.position(t), offset(t)
    return box.clamp(rx + ox, ry + oy)


def _motion_vector(rng: random.Random, radius: float) -> tuple[float, float]:
    length = rng.uniform(0.0, radius)
    angle = rng.uniform(0.0, 2 * math.pi)
    return length * math.cos(angle), length * math.sin(angle)


def _merged_times(reference: Track, step: float, steps: int) -> Iterator[float]:
    """0, every member step up to ``steps * step``, and the reference's own points."""
    last = -1.0
    for t in heapq.merge((k * step for k in range(steps + 1)), reference.times):
        if t > last:
            last = t
            yield t
