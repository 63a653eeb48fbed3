"""Local planarisation of a unit-disk graph: Gabriel graph and relative neighbourhood graph.

GPSR's perimeter mode walks faces with the right-hand rule, which only works
on a planar graph (Karp & Kung 2000). Both subgraphs are computed by each
node from its one-hop neighbours' positions alone, and two neighbours always
agree on their shared edge, because every witness of an edge lies within
radio range of both ends.

Tie rules (they matter on lattice deployments, where nodes are co-circular):

- Gabriel graph (GG): edge uv is dropped when some other node w lies in the
  *closed* disk with diameter uv (``|uw|^2 + |vw|^2 <= |uv|^2``). The closed
  disk keeps GG planar for the four corners of a square (both diagonals go).
- Relative neighbourhood graph (RNG): uv is dropped when some w is strictly
  closer to both ends (``max(|uw|, |vw|) < |uv|``). The open lune keeps the
  three sides of an equilateral triangle, so RNG stays connected.
- A node at exactly the same position as u or v is never a witness: it would
  otherwise cut both co-located nodes off from v.

With these rules RNG is a subgraph of GG, both contain a minimum spanning
tree of the unit-disk graph (so they are connected when it is), and the
nearest node to any point has an unobstructed view of it (no edge crosses
the segment between them), which is what makes GPSR's home node exact.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping

from meshsub.core.grid import Point


class Planarization(enum.StrEnum):
    GABRIEL = "gabriel"
    RNG = "rng"


def _d2(a: Point, b: Point) -> float:
    dx = a[0] - b[0]
    dy = a[1] - b[1]
    return dx * dx + dy * dy


def planar_neighbors(
    self_pos: Point,
    neighbors: Mapping[int, Point],
    method: Planarization = Planarization.GABRIEL,
) -> list[int]:
    """The neighbours that keep their edge to this node in the planar subgraph.

    Returned nearest first. Cost: a witness of edge uv is always closer to u
    than v is, so each edge is tested only against nearer neighbours and the
    scan stops at the first witness; in dense graphs almost every edge is cut
    by one of its first few candidates.
    """
    ordered = sorted(
        ((_d2(self_pos, pos), node, pos) for node, pos in neighbors.items()),
        key=lambda item: (item[0], item[1]),
    )
    gabriel = method is Planarization.GABRIEL
    keep: list[int] = []
    for i, (duv, v, vpos) in enumerate(ordered):
        if vpos == self_pos:
            keep.append(v)  # co-located: a zero-length edge has no witness
            continue
        witnessed = False
        # A witness is never farther from u than v (a Gabriel witness at the
        # same distance would sit on v itself), so only nearer nodes are tried.
        for j in range(i):
            duw, _w, wpos = ordered[j]
            if wpos in (self_pos, vpos):
                continue
            dvw = _d2(vpos, wpos)
            if (duw + dvw <= duv) if gabriel else (max(duw, dvw) < duv):
                witnessed = True
                break
        if not witnessed:
            keep.append(v)
    return keep


class PlanarCache:
    """A node's planar neighbour list, recomputed only when its view changes.

    Protocols call ``next_hop(..., planar=cache.get(pos, neighbors))``: the
    check costs one pass over the neighbour table, the planarisation runs
    only after a neighbour or this node moved, came or went.
    """

    def __init__(self, method: Planarization = Planarization.GABRIEL) -> None:
        self.method = method
        self._key: tuple[Point, frozenset[tuple[int, Point]]] | None = None
        self._value: list[int] = []
        self.recomputed = 0

    def get(self, self_pos: Point, neighbors: Mapping[int, Point]) -> list[int]:
        key = (self_pos, frozenset(neighbors.items()))
        if key != self._key:
            self._value = planar_neighbors(self_pos, neighbors, self.method)
            self._key = key
            self.recomputed += 1
        return self._value


def planarize(
    positions: Mapping[int, Point],
    adjacency: Mapping[int, set[int] | frozenset[int]],
    method: Planarization = Planarization.GABRIEL,
) -> dict[int, set[int]]:
    """The planar subgraph of a whole graph, each node deciding locally (as nodes do)."""
    out: dict[int, set[int]] = {}
    for node, nbrs in adjacency.items():
        view = {n: positions[n] for n in nbrs}
        out[node] = set(planar_neighbors(positions[node], view, method))
    return out


def unit_disk_graph(positions: Mapping[int, Point], radius: float) -> dict[int, set[int]]:
    """Adjacency of the unit-disk graph (an edge iff distance <= ``radius``).

    Buckets nodes into cells of side ``radius`` so the cost is proportional to
    nodes times neighbours, not nodes squared (usable at 8000 nodes).
    """
    if not (math.isfinite(radius) and radius > 0):
        raise ValueError(f"radius must be a positive finite number, got {radius!r}")
    buckets: dict[tuple[int, int], list[int]] = {}
    for node, (x, y) in positions.items():
        buckets.setdefault((math.floor(x / radius), math.floor(y / radius)), []).append(node)
    r2 = radius * radius
    adjacency: dict[int, set[int]] = {node: set() for node in positions}
    for (bx, by), members in buckets.items():
        for ox in (-1, 0, 1):
            for oy in (-1, 0, 1):
                others = buckets.get((bx + ox, by + oy))
                if not others:
                    continue
                for u in members:
                    upos = positions[u]
                    for v in others:
                        if u < v and _d2(upos, positions[v]) <= r2:
                            adjacency[u].add(v)
                            adjacency[v].add(u)
    return adjacency


def _orient(a: Point, b: Point, c: Point) -> float:
    return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])


def segments_cross(a: Point, b: Point, c: Point, d: Point) -> bool:
    """True if segments ab and cd cross at a single interior point of both.

    Segments that only touch (a shared endpoint, an endpoint on the other
    segment) or overlap collinearly do not cross: that is the planarity test.
    """
    o1 = _orient(a, b, c)
    o2 = _orient(a, b, d)
    o3 = _orient(c, d, a)
    o4 = _orient(c, d, b)
    return o1 * o2 < 0 and o3 * o4 < 0


def segment_intersection(a: Point, b: Point, c: Point, d: Point) -> tuple[float, float] | None:
    """Parameters ``(t, s)`` of the intersection ``a + t(b - a) = c + s(d - c)``, or ``None``.

    ``None`` for parallel or collinear segments and when the lines meet
    outside either segment (``t`` or ``s`` outside [0, 1]).
    """
    rx, ry = b[0] - a[0], b[1] - a[1]
    sx, sy = d[0] - c[0], d[1] - c[1]
    denom = rx * sy - ry * sx
    if denom == 0:
        return None
    qx, qy = c[0] - a[0], c[1] - a[1]
    t = (qx * sy - qy * sx) / denom
    s = (qx * ry - qy * rx) / denom
    if not (0.0 <= t <= 1.0 and 0.0 <= s <= 1.0):
        return None
    return t, s
