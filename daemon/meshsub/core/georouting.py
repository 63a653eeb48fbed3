"""Geographic routing over one-hop neighbours: GPSR (Karp & Kung 2000), sans-I/O.

``next_hop`` is one forwarding decision. Everything the decision needs from
earlier hops travels in the packet as a ``GeoHeader`` (msgpack-able through
``to_wire``/``from_wire``), so a node keeps no per-packet state.

- Greedy mode: forward to the neighbour closest to the target, if it is
  closer than this node.
- Perimeter mode, at a local minimum: walk faces of the planarised neighbour
  graph (Gabriel or RNG, ``meshsub.core.planar``) with the right-hand rule.
  The header carries Lp (where perimeter mode began), Lf (where the packet
  entered the current face, on the segment Lp -> target), e0 (the first edge
  taken on the current face) and the previous hop's position. The packet
  returns to greedy mode at the first node closer to the target than Lp.
- Home: a packet that is about to take e0 again has toured the whole face
  around the target without finding a closer node. The node holding it is
  the node closest to the target of all reachable nodes (the GHT home-node
  rule), and ``next_hop`` returns ``None`` with mode ``HOME``.

Two DECISIONs go beyond the GPSR paper:

- Face change. GPSR changes face whenever the next edge crosses Lp -> target
  closer to the target than Lf. On a non-convex face such a crossing can be
  one where the segment *enters* the current face, and leaving the face there
  breaks the invariant that the rest of the segment lies ahead in the current
  face (the weakness of GPSR's rule that Frey & Stojmenovic, MobiCom 2006,
  discuss). Here the packet changes face only where the segment leaves the
  face across the edge; at an entering crossing it only moves Lf forward.
  (On Gabriel/RNG graphs face changes turn out to be rare: none occurred in
  about 10^4 random routes, so both rules route alike in practice.)
- Co-located nodes (same configured coordinates) have no direction from each
  other, so the face walk leaves them out and treats them as one vertex; a
  tour that began at a co-located twin ends at this node.

With these rules, on a connected graph with consistent neighbour views, every
route ends at the node closest to the target (tests/property check it,
including lattice deployments with co-linear and co-located nodes).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from meshsub.core.grid import Point
from meshsub.core.planar import Planarization, planar_neighbors, segment_intersection

NodeId = int
_NODE_MAX = 0xFFFF_FFFF
_TAU = 2.0 * math.pi


class GeoRoutingError(ValueError):
    """Bad routing input: a position or target that is not a finite point."""


class GeoHeaderError(GeoRoutingError):
    """A routing header that is malformed (bad shape, type or value)."""


class GeoMode(enum.IntEnum):
    GREEDY = 0
    PERIMETER = 1
    HOME = 2
    """The packet is at the node closest to its target: deliver here."""


@dataclass(frozen=True, slots=True)
class GeoHeader:
    """The GPSR state a packet carries; the default is a fresh greedy-mode packet."""

    mode: GeoMode = GeoMode.GREEDY
    lp: Point | None = None
    """Position where the packet entered perimeter mode."""
    lf: Point | None = None
    """Point on Lp -> target where the packet entered the current face."""
    e0: tuple[NodeId, NodeId] | None = None
    """First edge (from, to) traversed on the current face."""
    prev: Point | None = None
    """Position of the node that sent the packet (the incoming edge, perimeter mode)."""

    def __post_init__(self) -> None:
        if not isinstance(self.mode, GeoMode):
            try:
                object.__setattr__(self, "mode", GeoMode(self.mode))
            except ValueError:
                raise GeoHeaderError(f"unknown routing mode {self.mode!r}") from None
        if self.mode is GeoMode.PERIMETER and (
            self.lp is None or self.lf is None or self.e0 is None or self.prev is None
        ):
            raise GeoHeaderError("a perimeter-mode header needs lp, lf, e0 and prev")

    def to_wire(self) -> list[Any]:
        """A compact msgpack-able list: ``[mode]``, or for perimeter mode
        ``[mode, lp_x, lp_y, lf_x, lf_y, e0_from, e0_to, prev_x, prev_y]``."""
        if self.mode is not GeoMode.PERIMETER:
            return [int(self.mode)]
        assert self.lp and self.lf and self.e0 and self.prev  # guaranteed by __post_init__
        return [
            int(self.mode),
            self.lp[0], self.lp[1],
            self.lf[0], self.lf[1],
            self.e0[0], self.e0[1],
            self.prev[0], self.prev[1],
        ]  # fmt: skip

    @classmethod
    def from_wire(cls, obj: Any) -> GeoHeader:
        """Inverse of ``to_wire``; raises ``GeoHeaderError`` for anything malformed."""
        if not isinstance(obj, list | tuple) or not obj:
            raise GeoHeaderError(f"routing header must be a non-empty list, got {obj!r:.60}")
        mode_raw = obj[0]
        if isinstance(mode_raw, bool) or not isinstance(mode_raw, int):
            raise GeoHeaderError(f"routing mode must be an integer, got {mode_raw!r:.20}")
        try:
            mode = GeoMode(mode_raw)
        except ValueError:
            raise GeoHeaderError(f"unknown routing mode {mode_raw}") from None
        if mode is not GeoMode.PERIMETER:
            if len(obj) != 1:
                raise GeoHeaderError(f"{mode.name} header has {len(obj)} fields, expected 1")
            return cls(mode)
        if len(obj) != 9:
            raise GeoHeaderError(f"PERIMETER header has {len(obj)} fields, expected 9")
        coords = [obj[i] for i in (1, 2, 3, 4, 7, 8)]
        for value in coords:
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise GeoHeaderError(f"coordinate must be a number, got {value!r:.20}")
            if not math.isfinite(value):
                raise GeoHeaderError("coordinate must be finite")
        for value in (obj[5], obj[6]):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _NODE_MAX:
                raise GeoHeaderError(f"edge end must be a node id (uint32), got {value!r:.20}")
        return cls(
            GeoMode.PERIMETER,
            lp=(float(obj[1]), float(obj[2])),
            lf=(float(obj[3]), float(obj[4])),
            e0=(int(obj[5]), int(obj[6])),
            prev=(float(obj[7]), float(obj[8])),
        )


def _d2(a: Point, b: Point) -> float:
    dx = a[0] - b[0]
    dy = a[1] - b[1]
    return dx * dx + dy * dy


def _angle(origin: Point, p: Point) -> float:
    return math.atan2(p[1] - origin[1], p[0] - origin[0])


def _next_ccw(
    self_pos: Point, reference: float, planar: list[NodeId], neighbors: Mapping[NodeId, Point]
) -> NodeId:
    """The planar neighbour first reached turning counter-clockwise from angle ``reference``.

    A neighbour exactly at ``reference`` comes last (a full turn), so the
    incoming edge is taken back only at a dead end. Ties go to the nearer,
    then the smaller id, to stay deterministic on degenerate inputs.
    """
    best: NodeId | None = None
    best_key = (math.inf, math.inf, 0)
    for n in planar:
        pos = neighbors[n]
        delta = (_angle(self_pos, pos) - reference) % _TAU
        if delta <= 1e-12:
            delta = _TAU
        key = (delta, _d2(self_pos, pos), n)
        if key < best_key:
            best, best_key = n, key
    if best is None:  # callers pass a non-empty list of finite positions
        raise GeoRoutingError("no planar neighbour with a usable position")
    return best


def _closer_neighbor(
    self_pos: Point, neighbors: Mapping[NodeId, Point], target: Point
) -> NodeId | None:
    """The neighbour closest to ``target`` if strictly closer than this node."""
    best: NodeId | None = None
    best_d2 = _d2(self_pos, target)
    for n, pos in neighbors.items():
        d2 = _d2(pos, target)
        if d2 < best_d2 or (d2 == best_d2 and best is not None and n < best):
            best, best_d2 = n, d2
    return best


def _face_neighbors(
    self_pos: Point,
    neighbors: Mapping[NodeId, Point],
    planar: list[NodeId] | None,
    planarization: Planarization,
) -> list[NodeId]:
    """Planar neighbours for the face walk, without nodes at this very position.

    Co-located nodes have no direction from here; the face walk treats them
    as one vertex (each keeps its own edges), which keeps the angular order
    well defined.
    """
    if planar is None:
        planar = planar_neighbors(self_pos, neighbors, planarization)
    return [n for n in planar if neighbors[n] != self_pos and _finite(neighbors[n])]


def _finite(p: Point) -> bool:
    return math.isfinite(p[0]) and math.isfinite(p[1])


def next_hop(
    self_id: NodeId,
    self_pos: Point,
    neighbors: Mapping[NodeId, Point],
    target: Point,
    header: GeoHeader | None = None,
    *,
    dest: NodeId | None = None,
    planarization: Planarization = Planarization.GABRIEL,
    planar: list[NodeId] | None = None,
    radio_range: float | None = None,
    left_hand: bool = False,
) -> tuple[NodeId | None, GeoHeader]:
    """One GPSR forwarding decision: ``(next node or None, header to send with it)``.

    ``None`` means this node is where the packet ends: it is the node closest
    to ``target`` among the nodes reachable (mode ``HOME``), or it is ``dest``.
    ``dest`` names a destination node whose position is ``target``; it is
    handed over directly once it is a neighbour. ``planar`` may pass this
    node's planar neighbour ids when the caller caches them (they depend only
    on the neighbour table); otherwise they are computed when needed.

    ``radio_range`` (optional, unit-disk assumption) skips the home tour when
    it cannot find anything: at a local minimum within ``radio_range / 2`` of
    the target, any closer node would be within range, hence a neighbour, so
    this node is the closest and the packet ends here at once.

    ``left_hand`` walks faces by the left-hand rule instead: the same algorithm on
    the mirror image of the plane (x -> -x), so every guarantee carries over. A
    packet going back from B to A round a void with the left hand takes the side
    that one going from A to B with the right hand took; protocols whose replies
    retrace a path broker by broker use it so that the way back is not the other,
    possibly far longer, way round (every node must use the same hand for a packet).

    Cost: greedy mode is linear in the neighbour count; perimeter mode adds
    the local planarisation (near-linear in dense graphs).
    """
    if left_hand:
        nxt, out = next_hop(
            self_id, _mirror(self_pos), {n: _mirror(p) for n, p in neighbors.items()},
            _mirror(target), None if header is None else _mirror_header(header),
            dest=dest, planarization=planarization, planar=planar, radio_range=radio_range,
        )  # fmt: skip
        return nxt, _mirror_header(out)
    if not (_finite(self_pos) and _finite(target)):
        raise GeoRoutingError(f"position {self_pos} and target {target} must be finite")
    if radio_range is not None and not (math.isfinite(radio_range) and radio_range > 0):
        raise GeoRoutingError(f"radio_range must be a positive number, got {radio_range!r}")
    if header is None:
        header = GeoHeader()
    if header.mode is GeoMode.HOME or dest == self_id:
        return None, GeoHeader(GeoMode.HOME)
    if dest is not None and dest in neighbors:
        return dest, GeoHeader()
    d_self = _d2(self_pos, target)
    if d_self == 0.0:
        return None, GeoHeader(GeoMode.HOME)
    if header.mode is GeoMode.PERIMETER:
        assert header.lp is not None
        if d_self >= _d2(header.lp, target):
            planar = _face_neighbors(self_pos, neighbors, planar, planarization)
            return _perimeter_step(self_id, self_pos, neighbors, target, header, planar)
        # Closer than where perimeter mode began: back to greedy.
    closer = _closer_neighbor(self_pos, neighbors, target)
    if closer is not None:
        return closer, GeoHeader()
    if radio_range is not None and 4.0 * d_self <= radio_range * radio_range:
        return None, GeoHeader(GeoMode.HOME)
    planar = _face_neighbors(self_pos, neighbors, planar, planarization)
    if not planar:
        return None, GeoHeader(GeoMode.HOME)  # isolated: nothing else is reachable
    first = _next_ccw(self_pos, _angle(self_pos, target), planar, neighbors)
    return first, GeoHeader(
        GeoMode.PERIMETER, lp=self_pos, lf=self_pos, e0=(self_id, first), prev=self_pos
    )


def _mirror(p: Point) -> Point:
    return (-p[0], p[1])


def _mirror_header(h: GeoHeader) -> GeoHeader:
    """The header of the mirror image (planar neighbour sets do not change: Gabriel and
    RNG depend on distances only)."""
    if h.mode is not GeoMode.PERIMETER:
        return h
    assert h.lp and h.lf and h.prev
    return GeoHeader(h.mode, lp=_mirror(h.lp), lf=_mirror(h.lf), e0=h.e0, prev=_mirror(h.prev))


def _perimeter_step(
    self_id: NodeId,
    self_pos: Point,
    neighbors: Mapping[NodeId, Point],
    target: Point,
    header: GeoHeader,
    planar: list[NodeId],
) -> tuple[NodeId | None, GeoHeader]:
    """Right-hand rule on the current face, with the face-change and tour-end rules."""
    assert header.lp is not None and header.lf is not None and header.prev is not None
    if not planar:
        return None, GeoHeader(GeoMode.HOME)
    lp, lf, e0 = header.lp, header.lf, header.e0
    nxt = _next_ccw(self_pos, _angle(self_pos, header.prev), planar, neighbors)
    changed_face = False
    seg_dx, seg_dy = target[0] - lp[0], target[1] - lp[1]
    for _ in range(len(planar) + 1):
        npos = neighbors[nxt]
        hit = segment_intersection(self_pos, npos, lp, target)
        if hit is None or hit[0] >= 1.0:
            break  # no crossing, or only at the far node (which is itself closer)
        s = hit[1]
        cross_pt = (lp[0] + s * seg_dx, lp[1] + s * seg_dy)
        if _d2(cross_pt, target) >= _d2(lf, target):
            break
        lf = cross_pt
        edge_x, edge_y = npos[0] - self_pos[0], npos[1] - self_pos[1]
        if edge_x * seg_dy - edge_y * seg_dx <= 0:
            break  # the segment enters this face here: keep walking it
        # The segment leaves the face across this edge: take the face beyond it.
        nxt = _next_ccw(self_pos, _angle(self_pos, npos), planar, neighbors)
        e0 = (self_id, nxt)
        changed_face = True
    if (
        not changed_face
        and e0 is not None
        and nxt == e0[1]
        and (
            e0[0] == self_id or neighbors.get(e0[0]) == self_pos  # a co-located twin began it
        )
    ):
        return None, GeoHeader(GeoMode.HOME)  # toured the whole face: closest node
    return nxt, GeoHeader(GeoMode.PERIMETER, lp=lp, lf=lf, e0=e0, prev=self_pos)


@dataclass(slots=True)
class RouteResult:
    """Outcome of ``route``: the node sequence and how it ended."""

    path: list[NodeId]
    home: bool
    """True if the packet reached a node that declared itself home (or ``dest``)."""
    looped: bool = False
    """True if a (node, header) state repeated: the route would never end."""
    perimeter_hops: int = 0
    headers: list[GeoHeader] = field(default_factory=list)

    @property
    def hops(self) -> int:
        return len(self.path) - 1

    @property
    def end(self) -> NodeId:
        return self.path[-1]


def route(
    source: NodeId,
    target: Point,
    positions: Mapping[NodeId, Point],
    adjacency: Mapping[NodeId, set[NodeId] | frozenset[NodeId]],
    *,
    max_hops: int,
    dest: NodeId | None = None,
    planarization: Planarization = Planarization.GABRIEL,
    planar_cache: dict[NodeId, list[NodeId]] | None = None,
    radio_range: float | None = None,
    left_hand: bool = False,
) -> RouteResult:
    """Drive ``next_hop`` hop by hop over a static graph (simulation, tests, benchmarks).

    ``planar_cache`` lets repeated routes on the same graph share each node's
    planar neighbour list; ``radio_range`` and ``left_hand`` are passed on.
    """
    cache = planar_cache if planar_cache is not None else {}
    node = source
    header = GeoHeader()
    result = RouteResult(path=[source], home=False)
    seen: set[tuple[NodeId, tuple[Any, ...]]] = set()
    for _ in range(max_hops + 1):
        state = (node, tuple(header.to_wire()))
        if state in seen:
            result.looped = True
            return result
        seen.add(state)
        view = {n: positions[n] for n in adjacency[node]}
        planar = cache.get(node)
        if planar is None:
            planar = planar_neighbors(positions[node], view, planarization)
            cache[node] = planar
        nxt, header = next_hop(
            node, positions[node], view, target, header,
            dest=dest, planarization=planarization, planar=planar,
            radio_range=radio_range, left_hand=left_hand,
        )  # fmt: skip
        if nxt is None:
            result.home = True
            return result
        if len(result.path) - 1 >= max_hops:
            return result  # hop budget spent (result.home stays False)
        if header.mode is GeoMode.PERIMETER:
            result.perimeter_hops += 1
        result.path.append(nxt)
        result.headers.append(header)
        node = nxt
    return result
