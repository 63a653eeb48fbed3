"""GPSR on random connected unit-disk graphs: planarisation and home-node delivery.

Graphs are drawn from a seeded ``random.Random`` (the seed comes from
hypothesis, so a failure shrinks to a seed that reproduces it): 30-150 nodes
in a 1000 m square, radio range near the connectivity threshold, redrawn
until connected.
"""

from __future__ import annotations

import itertools
import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from meshsub.core.georouting import GeoMode, route
from meshsub.core.planar import Planarization, planarize, segments_cross, unit_disk_graph

Point = tuple[float, float]
HOP_FACTOR = 6
"""Hop bound per node. Measured: 99.9% of routes take < 4.6 N hops and the worst
of 6340 routes on graphs at the connectivity threshold took 4.98 N (the final
home tour of an outer face dominates); 4 N is not a bound GPSR guarantees."""


def connected(adj: dict[int, set[int]]) -> bool:
    start = next(iter(adj))
    seen, stack = {start}, [start]
    while stack:
        for v in adj[stack.pop()]:
            if v not in seen:
                seen.add(v)
                stack.append(v)
    return len(seen) == len(adj)


Graph = tuple[dict[int, Point], dict[int, set[int]], float]


def random_graph(seed: int, lattice: bool = False) -> Graph:
    """Positions, adjacency and the radio range used."""
    rng = random.Random(seed)
    n = rng.randint(30, 150)
    radius = rng.uniform(1.0, 1.6) * math.sqrt(math.log(n) / (math.pi * n)) * 1000.0
    for attempt in range(1000):
        if lattice:  # many collinear, co-circular and co-located nodes
            pos = {
                i: (float(rng.randrange(0, 1001, 50)), float(rng.randrange(0, 1001, 50)))
                for i in range(n)
            }
        else:
            pos = {i: (rng.uniform(0, 1000), rng.uniform(0, 1000)) for i in range(n)}
        used = radius * (1.0 + attempt / 200)
        adj = unit_disk_graph(pos, used)
        if connected(adj):
            return pos, adj, used
    raise AssertionError("could not draw a connected graph")


def nearest_distance(pos: dict[int, Point], target: Point) -> float:
    return min(math.dist(p, target) for p in pos.values())


def check_routes(seed: int, method: Planarization, lattice: bool = False) -> int:
    pos, adj, radius = random_graph(seed, lattice)
    rng = random.Random(seed ^ 0x5EED)
    cache: dict[int, list[int]] = {}
    n = len(pos)
    perimeter = 0
    for _ in range(6):
        source = rng.choice(list(pos))
        target = (rng.uniform(-50, 1050), rng.uniform(-50, 1050))
        result = route(
            source,
            target,
            pos,
            adj,
            max_hops=HOP_FACTOR * n,
            planarization=method,
            planar_cache=cache,
        )
        assert not result.looped, (seed, source, target)
        assert result.home, (seed, source, target, result.hops)
        assert math.dist(pos[result.end], target) == nearest_distance(pos, target)
        assert all(b in adj[a] for a, b in itertools.pairwise(result.path))
        perimeter += result.perimeter_hops
        # Knowing the range only cuts the final tour short; the end is the same.
        short = route(
            source, target, pos, adj, max_hops=HOP_FACTOR * n,
            planarization=method, planar_cache=cache, radio_range=radius,
        )  # fmt: skip
        assert short.home and short.path == result.path[: len(short.path)]
        assert math.dist(pos[short.end], target) == nearest_distance(pos, target)
        # The left-hand rule is the same algorithm on the mirror image: same guarantee.
        mirrored = route(
            source, target, pos, adj, max_hops=HOP_FACTOR * n,
            planarization=method, planar_cache=cache, left_hand=True,
        )  # fmt: skip
        assert mirrored.home and not mirrored.looped, (seed, source, target)
        assert math.dist(pos[mirrored.end], target) == nearest_distance(pos, target)
        assert all(b in adj[a] for a, b in itertools.pairwise(mirrored.path))
        # The last hop's header is the state the home node received.
        if result.headers:
            assert result.headers[-1].mode in (GeoMode.GREEDY, GeoMode.PERIMETER)
    return perimeter


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(list(Planarization)))
def test_routing_ends_at_the_closest_node(seed: int, method: Planarization) -> None:
    check_routes(seed, method)


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from(list(Planarization)))
def test_routing_on_degenerate_lattice_graphs(seed: int, method: Planarization) -> None:
    check_routes(seed, method, lattice=True)


def test_seeded_routes_exercise_perimeter_mode() -> None:
    """Fixed seeds, so the perimeter code paths are certainly covered."""
    total = sum(check_routes(seed, method) for seed in range(12) for method in Planarization)
    assert total > 0


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.booleans())
def test_planarisation_is_planar_connected_and_nested(seed: int, lattice: bool) -> None:
    pos, adj, _radius = random_graph(seed, lattice)
    gg = planarize(pos, adj, Planarization.GABRIEL)
    rng_graph = planarize(pos, adj, Planarization.RNG)
    for graph in (gg, rng_graph):
        assert all(u in graph[v] for u in graph for v in graph[u])  # both ends agree
        assert connected(graph)
        edges = [(u, v) for u in graph for v in graph[u] if u < v]
        for (a, b), (c, d) in itertools.combinations(edges, 2):
            if len({a, b, c, d}) == 4:
                assert not segments_cross(pos[a], pos[b], pos[c], pos[d]), (a, b, c, d)
    assert all(rng_graph[u] <= gg[u] <= adj[u] for u in adj)


def test_the_left_hand_goes_round_a_void_on_the_other_side() -> None:
    """Two arcs round an empty oval from S (0, 0), a local minimum, to D (300, 0): with the
    right hand (counter-clockwise sweep) the packet takes the northern arc, with the left
    hand the southern one."""
    north = [(-30.0, 50.0), (-30.0, 110.0), (20.0, 160.0), (80.0, 190.0), (140.0, 200.0),
             (200.0, 190.0), (260.0, 160.0), (300.0, 110.0), (310.0, 50.0)]
    pos = {0: (0.0, 0.0), 1: (300.0, 0.0)}
    for i, (x, y) in enumerate(north):
        pos[10 + i], pos[30 + i] = (x, y), (x, -y)
    adj = unit_disk_graph(pos, 80.0)
    right = route(0, pos[1], pos, adj, max_hops=100)
    left = route(0, pos[1], pos, adj, max_hops=100, left_hand=True)
    assert right.home and left.home and right.end == left.end == 1
    assert right.path == [0, *range(10, 19), 1]
    assert left.path == [0, *range(30, 39), 1]
