"""Gauss-Markov mobility: speed and direction as first-order autoregressive processes.

B. Liang and Z. J. Haas, "Predictive distance-based mobility management for PCS
networks", INFOCOM 1999, in the discrete form of T. Camp, J. Boleng and V. Davies,
"A survey of mobility models for ad hoc network research", WCMC 2(5), 2002:

    s_n = alpha s_{n-1} + (1 - alpha) s_mean + sqrt(1 - alpha^2) e_s,   e_s ~ N(0, sigma_s^2)
    d_n = alpha d_{n-1} + (1 - alpha) d_mean + sqrt(1 - alpha^2) e_d,   e_d ~ N(0, sigma_d^2)
    x_n = x_{n-1} + s_{n-1} cos d_{n-1} dt,   y_n = y_{n-1} + s_{n-1} sin d_{n-1} dt

alpha = 1 keeps the first velocity (straight lines), alpha = 0 draws every step
afresh (memoryless); in between, successive speeds correlate with coefficient
alpha. The stationary law of each process is N(mean, sigma^2), and the start is
drawn from it, so the speeds need no warm-up.

Edges, as in Camp et al.: within ``edge_margin`` of a side the mean direction is
replaced by the direction towards the centre of the area, which steers the node
back. Because that only acts through (1 - alpha), a node can still reach a side;
there it is reflected (the direction mirrors, as ns-3's Gauss-Markov model does),
so it never leaves the area. Angles are mixed the short way round (350 and 10
degrees average to 0, not 180).
"""

from __future__ import annotations

import math
import random

from meshsim.mobility.geometry import Box, travel
from meshsim.mobility.trajectories import Track
from meshsim.scenario.model import GaussMarkov


def gauss_markov(rng: random.Random, box: Box, p: GaussMarkov, start: tuple[float, float],
                 until: float) -> Track:
    """One node's track from its placed ``start``, one point per ``time_step``."""
    node_mean = (math.radians(p.mean_direction) if p.mean_direction is not None
                 else rng.uniform(0.0, 2 * math.pi))
    sigma_d = math.radians(p.sigma_direction)
    keep = math.sqrt(1 - p.alpha * p.alpha)
    x, y = start
    track = Track(x, y)
    speed = rng.gauss(p.mean_speed, p.sigma_speed)
    direction = _wrap(rng.gauss(_mean_direction(box, p, node_mean, x, y), sigma_d))
    t = 0.0
    while t < until:
        end = travel(track, box, t, x, y, speed * math.cos(direction),
                     speed * math.sin(direction), p.time_step)
        t += p.time_step
        x, y = end.x, end.y
        if end.flips_x % 2:
            direction = math.pi - direction
        if end.flips_y % 2:
            direction = -direction
        mean = _mean_direction(box, p, node_mean, x, y)
        speed = p.alpha * speed + (1 - p.alpha) * p.mean_speed \
            + keep * rng.gauss(0.0, p.sigma_speed)
        mean = direction + _wrap(mean - direction)  # the short way round
        direction = _wrap(p.alpha * direction + (1 - p.alpha) * mean
                          + keep * rng.gauss(0.0, sigma_d))
    return track


def _mean_direction(box: Box, p: GaussMarkov, node_mean: float, x: float, y: float) -> float:
    m = p.edge_margin
    if x - box.x0 < m or box.x1 - x < m or y - box.y0 < m or box.y1 - y < m:
        cx, cy = box.centre
        return math.atan2(cy - y, cx - x)
    return node_mean


def _wrap(angle: float) -> float:
    """Into (-pi, pi]."""
    wrapped = math.remainder(angle, 2 * math.pi)
    return math.pi if wrapped == -math.pi else wrapped
