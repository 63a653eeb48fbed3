"""GPSR next-hop decisions on small hand-drawn graphs, and the routing header."""

from __future__ import annotations

import math
from typing import Any

import msgpack
import pytest

from meshsub.core.georouting import (
    GeoHeader,
    GeoHeaderError,
    GeoMode,
    GeoRoutingError,
    next_hop,
    route,
)
from meshsub.core.planar import Planarization, unit_disk_graph

# A "C" around a void: greedy from 0 gets stuck at node 2 (both its neighbours
# are farther from node 9), and perimeter mode walks the arc 3..8 (range 13 m).
#
#              5 ---- 6
#            /          \
#          4              7
#          |               \
#          3                8
#        / |                |
#   0 - 1 - 2      (void)   9
VOID = {
    0: (0.0, 0.0),
    1: (10.0, 0.0),
    2: (20.0, 0.0),
    3: (12.0, 9.0),
    4: (14.0, 20.0),
    5: (24.0, 28.0),
    6: (36.0, 28.0),
    7: (46.0, 20.0),
    8: (50.0, 9.0),
    9: (50.0, 0.0),
}
RANGE = 13.0


def view(
    node: int, positions: dict[int, tuple[float, float]], radius: float = RANGE
) -> dict[int, tuple[float, float]]:
    adj = unit_disk_graph(positions, radius)
    return {n: positions[n] for n in adj[node]}


def test_void_graph_is_as_drawn() -> None:
    adj = unit_disk_graph(VOID, RANGE)
    drawn = {(0, 1), (1, 2), (1, 3), (2, 3), (3, 4), (4, 5), (5, 6), (6, 7), (7, 8), (8, 9)}
    assert {frozenset(e) for e in drawn} == {frozenset((u, v)) for u in adj for v in adj[u]}


def test_greedy_picks_the_neighbour_closest_to_the_target() -> None:
    nxt, header = next_hop(1, VOID[1], view(1, VOID), VOID[9])
    assert nxt == 2 and header == GeoHeader()


def test_local_minimum_enters_perimeter_mode() -> None:
    nxt, header = next_hop(2, VOID[2], view(2, VOID), VOID[9])
    assert nxt == 3  # first edge counter-clockwise from the line to the target
    assert header.mode is GeoMode.PERIMETER
    assert header.lp == header.lf == VOID[2] and header.e0 == (2, 3) and header.prev == VOID[2]
    # Node 3 continues with the right-hand rule: next counter-clockwise from 2 is 4.
    nxt, header = next_hop(3, VOID[3], view(3, VOID), VOID[9], header)
    assert nxt == 4 and header.mode is GeoMode.PERIMETER and header.e0 == (2, 3)


@pytest.mark.parametrize("method", list(Planarization))
def test_perimeter_recovers_from_the_void(method: Planarization) -> None:
    adj = unit_disk_graph(VOID, RANGE)
    result = route(0, VOID[9], VOID, adj, max_hops=40, dest=9, planarization=method)
    # The RNG drops the triangle's long side 2-3, so the walk goes 2 -> 1 -> 3.
    detour = [1] if method is Planarization.RNG else []
    assert result.path == [0, 1, 2, *detour, 3, 4, 5, 6, 7, 8, 9] and result.home
    greedy, perimeter = GeoMode.GREEDY, GeoMode.PERIMETER
    # Perimeter from 2 until node 7, the first node closer to 9 than 2 is.
    perimeter_hops = [perimeter] * (5 + len(detour))
    assert [h.mode for h in result.headers] == [greedy] * 2 + perimeter_hops + [greedy] * 2


def test_home_node_after_a_full_face_tour() -> None:
    """A point near node 9 but on no node: the packet tours the outer face and stops at 9."""
    adj = unit_disk_graph(VOID, RANGE)
    target = (47.0, -3.0)
    result = route(0, target, VOID, adj, max_hops=60)
    assert result.home and result.end == 9
    tour = [1, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert result.path[-18:] == [9, 8, 7, 6, 5, 4, 3, *tour]
    assert not result.looped
    # The decision at 9 itself, arriving from 8 at the end of the tour:
    last = result.headers[-1]
    assert last.mode is GeoMode.PERIMETER and last.e0 == (9, 8) and last.lp == VOID[9]
    nxt, header = next_hop(9, VOID[9], view(9, VOID), target, last)
    assert nxt is None and header.mode is GeoMode.HOME
    # Knowing the radio range, node 9 (4.2 m from the target, range 13 m) can
    # tell at once that no other node is closer: no tour.
    short = route(0, target, VOID, adj, max_hops=60, radio_range=RANGE)
    assert short.home and short.path == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    # Too far from the target for that proof: node 2 is the closest node to
    # (27.5, 0), but 7.5 m away (> 13 m / 2), so the tour still runs.
    far = route(0, (27.5, 0.0), VOID, adj, max_hops=60, radio_range=RANGE)
    assert far.home and far.end == 2 and far.perimeter_hops > 0
    with pytest.raises(GeoRoutingError):
        next_hop(2, VOID[2], view(2, VOID), target, radio_range=-1.0)


# One node u in perimeter mode, arriving from p; its next edge by the
# right-hand rule is u -> a, which crosses the line Lp -> target at (5, 0).
U = (-7.0, 0.0)
U_NBRS = {1: (-14.0, -7.0), 2: (10.0, 0.0), 3: (-7.0, 12.0)}  # p, a, b


def perimeter_header(lp: tuple[float, float]) -> GeoHeader:
    return GeoHeader(GeoMode.PERIMETER, lp=lp, lf=lp, e0=(50, 51), prev=U_NBRS[1])


def test_face_change_where_the_segment_leaves_the_face() -> None:
    # Lp = (5, -2) -> target (5, 10) crosses u -> a from the face's side: change face.
    nxt, header = next_hop(0, U, U_NBRS, (5.0, 10.0), perimeter_header((5.0, -2.0)))
    assert nxt == 3  # the edge after u -> a, counter-clockwise about u
    assert header.e0 == (0, 3) and header.lf == (5.0, 0.0) and header.lp == (5.0, -2.0)
    assert header.prev == U and header.mode is GeoMode.PERIMETER


def test_no_face_change_where_the_segment_enters_the_face() -> None:
    # Lp = (5, 10) -> target (5, -2) crosses u -> a into the current face: only Lf moves.
    nxt, header = next_hop(0, U, U_NBRS, (5.0, -2.0), perimeter_header((5.0, 10.0)))
    assert nxt == 2 and header.e0 == (50, 51) and header.lf == (5.0, 0.0)


def test_crossing_farther_than_lf_is_ignored() -> None:
    start = perimeter_header((5.0, -2.0))
    header = GeoHeader(GeoMode.PERIMETER, lp=start.lp, lf=(5.0, 3.0), e0=(50, 51), prev=U_NBRS[1])
    nxt, out = next_hop(0, U, U_NBRS, (5.0, 10.0), header)
    assert nxt == 2 and out.lf == (5.0, 3.0) and out.e0 == (50, 51)


def test_dest_and_degenerate_cases() -> None:
    nbrs = {2: (10.0, 0.0), 3: (0.0, 10.0)}
    assert next_hop(1, (0.0, 0.0), nbrs, (10.0, 0.0), dest=2) == (2, GeoHeader())
    assert next_hop(2, (10.0, 0.0), {}, (10.0, 0.0), dest=2)[0] is None
    # The target is exactly here.
    nxt, header = next_hop(1, (5.0, 5.0), nbrs, (5.0, 5.0))
    assert nxt is None and header.mode is GeoMode.HOME
    # Isolated node: it is the closest reachable node.
    nxt, header = next_hop(1, (0.0, 0.0), {}, (100.0, 0.0))
    assert nxt is None and header.mode is GeoMode.HOME
    # A packet already home stays home.
    assert next_hop(1, (0.0, 0.0), nbrs, (9.0, 9.0), GeoHeader(GeoMode.HOME))[0] is None


def test_colocated_neighbours_route_to_the_closest_node() -> None:
    pos = {0: (0.0, 0.0), 1: (0.0, 0.0), 2: (5.0, 0.0), 3: (5.0, 0.0), 4: (10.0, 0.0)}
    adj = unit_disk_graph(pos, 6.0)
    for source in pos:
        for target in ((20.0, 5.0), (-3.0, 1.0), (5.0, -2.0)):
            result = route(source, target, pos, adj, max_hops=30)
            nearest = min(math.dist(pos[n], target) for n in pos)
            assert result.home and not result.looped
            assert math.dist(pos[result.end], target) == nearest
    twins = {0: (0.0, 0.0), 1: (0.0, 0.0)}
    assert next_hop(0, (0.0, 0.0), {1: (0.0, 0.0)}, (9.0, 9.0))[1].mode is GeoMode.HOME
    assert route(1, (9.0, 9.0), twins, unit_disk_graph(twins, 1.0), max_hops=5).home


def test_max_hops_stops_a_route() -> None:
    adj = unit_disk_graph(VOID, RANGE)
    result = route(0, VOID[9], VOID, adj, max_hops=3)
    assert not result.home and result.hops == 3 and result.path == [0, 1, 2, 3]


def test_header_wire_round_trip_through_msgpack() -> None:
    for header in (
        GeoHeader(),
        GeoHeader(GeoMode.HOME),
        GeoHeader(
            GeoMode.PERIMETER, lp=(1.5, -2.0), lf=(3.0, 4.25), e0=(7, 0xFFFF_FFFF), prev=(0.0, 1e6)
        ),
    ):
        wire = msgpack.unpackb(msgpack.packb(header.to_wire()))
        assert GeoHeader.from_wire(wire) == header
    raw_mode: Any = 1  # an int from elsewhere is coerced to the enum
    assert GeoHeader(raw_mode, lp=(0.0, 0.0), lf=(0.0, 0.0), e0=(1, 2), prev=(0.0, 0.0)).mode is (
        GeoMode.PERIMETER
    )


GOOD = [1, 0.0, 0.0, 1.0, 1.0, 3, 4, 2.0, 2.0]


@pytest.mark.parametrize(
    "wire",
    [
        None,
        "greedy",
        [],
        [7],
        ["0"],
        [True],
        [0, 1],
        [2, 0.0],
        GOOD[:-1],
        [*GOOD[:1], math.nan, *GOOD[2:]],
        [*GOOD[:3], math.inf, *GOOD[4:]],
        [*GOOD[:5], -1, *GOOD[6:]],
        [*GOOD[:6], 2**32, *GOOD[7:]],
        [*GOOD[:6], 4.0, *GOOD[7:]],
        [*GOOD[:7], "x", GOOD[8]],
        [*GOOD[:1], True, *GOOD[2:]],
    ],
)
def test_malformed_headers_are_rejected(wire: object) -> None:
    with pytest.raises(GeoHeaderError):
        GeoHeader.from_wire(wire)


def test_header_invariants() -> None:
    assert GeoHeader.from_wire(GOOD).e0 == (3, 4)
    with pytest.raises(GeoHeaderError):
        GeoHeader(GeoMode.PERIMETER, lp=(0.0, 0.0))
    with pytest.raises(GeoHeaderError):
        GeoHeader(9)  # type: ignore[arg-type]


def test_non_finite_positions() -> None:
    with pytest.raises(GeoRoutingError):
        next_hop(1, (0.0, math.nan), {}, (1.0, 1.0))
    with pytest.raises(GeoRoutingError):
        next_hop(1, (0.0, 0.0), {}, (math.inf, 1.0))
    # A neighbour with a broken position is never chosen, in either mode.
    nbrs = {2: (math.nan, 0.0), 3: (-5.0, 0.0)}
    assert next_hop(1, (0.0, 0.0), nbrs, (10.0, 0.0))[0] == 3
    only_bad = {2: (math.nan, math.nan)}
    assert next_hop(1, (0.0, 0.0), only_bad, (10.0, 0.0))[1].mode is GeoMode.HOME
