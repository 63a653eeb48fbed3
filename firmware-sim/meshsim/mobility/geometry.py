"""The rectangle models move in, and straight-line travel that reflects off its sides.

Random walk and Gauss-Markov pick a velocity and keep it for a while; a node that
meets a side of the area bounces off it like a billiard ball (the velocity
component across the side flips) and travels on for the rest of the time, as
ns-3's ``RandomWalk2dMobilityModel`` does. Each bounce becomes a track point, so the
path stays piecewise linear and inside the area.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from meshsim.mobility.trajectories import Track


@dataclass(frozen=True, slots=True)
class Box:
    """An axis-aligned rectangle [x0, x1] x [y0, y1] with positive width and height."""

    x0: float
    y0: float
    x1: float
    y1: float

    def __post_init__(self) -> None:
        if not (self.x1 > self.x0 and self.y1 > self.y0):
            raise ValueError(f"empty box {self}")

    @property
    def width(self) -> float:
        return self.x1 - self.x0

    @property
    def height(self) -> float:
        return self.y1 - self.y0

    @property
    def centre(self) -> tuple[float, float]:
        return (self.x0 + self.x1) / 2, (self.y0 + self.y1) / 2

    def contains(self, x: float, y: float, tol: float = 0.0) -> bool:
        return (self.x0 - tol <= x <= self.x1 + tol) and (self.y0 - tol <= y <= self.y1 + tol)

    def clamp(self, x: float, y: float) -> tuple[float, float]:
        """Undo rounding that put a computed point a hair outside."""
        return min(max(x, self.x0), self.x1), min(max(y, self.y0), self.y1)

    def inset(self, margin: float) -> Box:
        return Box(self.x0 + margin, self.y0 + margin, self.x1 - margin, self.y1 - margin)

    def uniform(self, rng: random.Random) -> tuple[float, float]:
        return rng.uniform(self.x0, self.x1), rng.uniform(self.y0, self.y1)


@dataclass(frozen=True, slots=True)
class Bounce:
    """Where a reflecting travel ended: position, velocity, and which sides it hit."""

    x: float
    y: float
    vx: float
    vy: float
    flips_x: int
    flips_y: int


def travel(track: Track, box: Box, t: float, x: float, y: float, vx: float, vy: float,
           duration: float) -> Bounce:
    """Move from (x, y) at time t with velocity (vx, vy) for ``duration`` inside ``box``.

    Adds a track point at every bounce and at the end (time t + duration).
    """
    end = t + duration
    flips_x = flips_y = 0
    while True:
        tx = _time_to_side(x, vx, box.x0, box.x1)
        ty = _time_to_side(y, vy, box.y0, box.y1)
        hit = min(tx, ty)
        if t + hit >= end:
            rest = end - t
            x, y = box.clamp(x + vx * rest, y + vy * rest)
            track.add(end, x, y)
            return Bounce(x, y, vx, vy, flips_x, flips_y)
        t += hit
        x, y = box.clamp(x + vx * hit, y + vy * hit)
        if tx <= ty:  # both at once: a corner
            x = box.x1 if vx > 0 else box.x0
            vx = -vx
            flips_x += 1
        if ty <= tx:
            y = box.y1 if vy > 0 else box.y0
            vy = -vy
            flips_y += 1
        track.add(t, x, y)


def _time_to_side(pos: float, v: float, lo: float, hi: float) -> float:
    if v > 0:
        return max(0.0, (hi - pos) / v)
    if v < 0:
        return max(0.0, (lo - pos) / v)
    return math.inf
