"""Random walk with the semantics of ns-3's ``RandomWalk2dMobilityModel``.

Each walk draws a direction uniform in [0, 2 pi) and a speed uniform in
[speed_min, speed_max] and keeps them for ``walk_time`` seconds (ns-3 mode
"Time"), or for as long as covering ``walk_distance`` metres takes (mode
"Distance"); a node meeting a side of the area is reflected and walks on for the
rest of that time. The node starts where the scenario places it; the uniform
distribution is stationary for a reflected walk, so a random placement needs no
warm-up.
"""

from __future__ import annotations

import math
import random

from meshsim.mobility.geometry import Box, travel
from meshsim.mobility.trajectories import Track
from meshsim.scenario.model import RandomWalk


def random_walk(rng: random.Random, box: Box, p: RandomWalk, start: tuple[float, float],
                until: float) -> Track:
    """One node's track from its placed ``start`` until at least ``until``."""
    x, y = start
    track = Track(x, y)
    t = 0.0
    while t < until:
        direction = rng.uniform(0.0, 2 * math.pi)
        speed = rng.uniform(p.speed_min, p.speed_max)
        if p.walk_distance is not None:
            if speed <= 0:
                raise ValueError("a walk of fixed distance needs speed_min > 0")
            duration = p.walk_distance / speed
        elif p.walk_time is not None:
            duration = p.walk_time
        else:
            raise ValueError("random walk needs walk_time or walk_distance")
        end = travel(track, box, t, x, y, speed * math.cos(direction),
                     speed * math.sin(direction), duration)
        t += duration
        x, y = end.x, end.y
    return track
