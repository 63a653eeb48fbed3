"""Hash a key to a point: where a topic's broker lives inside a cell.

HESPER picks, for each (cell, topic), the node of the cell closest to a point
obtained by hashing the topic, so topics spread over a cell's nodes without
coordination (Zheng 2008, §4.2). The thesis gives ``x <- H^i(topic)``,
``y <- H^j(topic)`` with i != j and no H; we fix H = SHA-256,
i = 1, j = 2 and maps the first 8 bytes of each digest to a fractional offset
in the cell, so the point has the same relative place in every cell.

``hash_point`` is the general form for other protocols (GHT-style rendezvous,
BRVST zones): any key into any rectangle, on mmh3.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping

import mmh3

from meshsub.core.grid import Bounds, Cell, Grid, Point

_TWO_64 = float(2**64)


def iterated_sha256(data: bytes, times: int) -> bytes:
    """``H^times(data)`` with H = SHA-256 (``times`` >= 1)."""
    if times < 1:
        raise ValueError(f"hash iterations must be >= 1, got {times}")
    digest = data
    for _ in range(times):
        digest = hashlib.sha256(digest).digest()
    return digest


def _fraction(digest: bytes) -> float:
    """The first 8 bytes, big-endian, as a fraction in [0, 1)."""
    return int.from_bytes(digest[:8], "big") / _TWO_64


def topic_offset(topic: str, i: int = 1, j: int = 2) -> Point:
    """The thesis's (u_x, u_y) in [0, 1)^2: fractions of ``H^i(topic)`` and ``H^j(topic)``.

    With the defaults (i = 1, j = 2), "temperature" gives (0.699534, 0.539625).
    """
    if i == j:
        raise ValueError("the thesis requires two different hash iteration counts i != j")
    data = topic.encode("utf-8")
    return _fraction(iterated_sha256(data, i)), _fraction(iterated_sha256(data, j))


def broker_point(grid: Grid, cell: Cell | tuple[int, int], topic: str) -> Point:
    """Where ``topic``'s broker sits in ``cell``: ``x0 + (gx + u_x) s``, ``y0 + (gy + u_y) s``."""
    b = grid.bounds(cell)
    u_x, u_y = topic_offset(topic)
    return b.x_min + u_x * grid.cell_size, b.y_min + u_y * grid.cell_size


def hash_point(key: bytes | str, bounds: Bounds, seed: int = 0) -> Point:
    """A uniform pseudo-random point of ``bounds`` determined by ``key`` (mmh3 x64 128-bit).

    The two 64-bit halves of ``mmh3.hash64`` give the x and y fractions. A
    ``str`` key is hashed as UTF-8.
    """
    bounds.validate()
    data = key.encode("utf-8") if isinstance(key, str) else bytes(key)
    h1, h2 = mmh3.hash64(data, seed=seed, x64arch=True, signed=False)
    return (
        bounds.x_min + (h1 / _TWO_64) * bounds.width,
        bounds.y_min + (h2 / _TWO_64) * bounds.height,
    )


def closest_node(candidates: Mapping[int, Point], point: Point) -> int | None:
    """The candidate nearest to ``point`` (ties go to the smaller node id); ``None`` if empty.

    Every node holding the same candidate view computes the same answer,
    which is what makes a hash election deterministic.
    """
    best: int | None = None
    best_d2 = math.inf
    px, py = point
    for node, (x, y) in candidates.items():
        d2 = (x - px) ** 2 + (y - py) ** 2
        if d2 < best_d2 or (d2 == best_d2 and best is not None and node < best):
            best, best_d2 = node, d2
    return best
