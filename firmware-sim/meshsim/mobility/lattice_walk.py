"""The lattice walk: a node moves cell to cell on a square lattice, one cell per time unit.

The mobility model of PUMA's clients and GIANT's ferries (Zheng 2008, §5.2 and
§6.2): in each time unit the node goes to one of its four axis neighbours,
each with probability 1/4, at constant speed (one cell per unit). The thesis
ignores edge effects; on a bounded lattice a step that would leave it is
either turned around (``reflect``: the opposite neighbour, which always
exists) or drawn again among the neighbours that exist (``resample``, the
renormalised walk). ``glide`` crosses from cell centre to cell centre during
the unit; ``teleport`` stays at the centre and jumps when the unit ends (a
point 1 ns before the jump keeps the track piecewise linear).
"""

from __future__ import annotations

import random

from meshsim.mobility.trajectories import Track
from meshsim.scenario.model import LatticeWalk

STEPS = ((1, 0), (-1, 0), (0, 1), (0, -1))
JUMP_S = 1e-9
"""How long a teleport takes in the track (so that the track stays a function of t)."""


def cell_of(p: LatticeWalk, x: float, y: float) -> tuple[int, int]:
    """The lattice cell holding (x, y), clamped onto the lattice."""
    i = int((x - p.origin_x) // p.cell_m)
    j = int((y - p.origin_y) // p.cell_m)
    return min(max(i, 0), p.columns - 1), min(max(j, 0), p.rows - 1)


def centre(p: LatticeWalk, cell: tuple[int, int]) -> tuple[float, float]:
    return (p.origin_x + (cell[0] + 0.5) * p.cell_m, p.origin_y + (cell[1] + 0.5) * p.cell_m)


def _inside(p: LatticeWalk, i: int, j: int) -> bool:
    return 0 <= i < p.columns and 0 <= j < p.rows


def step(p: LatticeWalk, rng: random.Random, cell: tuple[int, int]) -> tuple[int, int]:
    """The next cell: one of four directions, uniformly, with the border rule."""
    i, j = cell
    if p.border == "resample":
        options = [(i + di, j + dj) for di, dj in STEPS if _inside(p, i + di, j + dj)]
        return options[rng.randrange(len(options))]
    di, dj = STEPS[rng.randrange(4)]
    if not _inside(p, i + di, j + dj):
        di, dj = -di, -dj  # reflected: the opposite neighbour (a lattice of >= 2 cells)
        if not _inside(p, i + di, j + dj):  # a one-cell-wide lattice: no move that way
            return i, j
    return i + di, j + dj


def lattice_walk(rng: random.Random, p: LatticeWalk, start: tuple[float, float],
                 until: float) -> Track:
    """A node's walk from the centre of the cell holding ``start`` until ``until``."""
    cell = cell_of(p, *start)
    x, y = centre(p, cell)
    track = Track(x, y)
    t = 0.0
    while t < until:
        nxt = step(p, rng, cell)
        t_next = t + p.step_s
        nx, ny = centre(p, nxt)
        if p.motion == "teleport":
            track.add(t_next - JUMP_S, x, y)
        track.add(t_next, nx, ny)
        cell, x, y, t = nxt, nx, ny, t_next
    return track
