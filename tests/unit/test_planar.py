"""Gabriel graph and RNG planarisation on hand-drawn cases; geometry helpers."""

from __future__ import annotations

import itertools
import random

import pytest

from meshsub.core.planar import (
    PlanarCache,
    Planarization,
    planar_neighbors,
    planarize,
    segment_intersection,
    segments_cross,
    unit_disk_graph,
)

GG, RNG = Planarization.GABRIEL, Planarization.RNG


def full(positions: dict[int, tuple[float, float]]) -> dict[int, set[int]]:
    return {u: set(positions) - {u} for u in positions}


def edges(adj: dict[int, set[int]]) -> set[frozenset[int]]:
    return {frozenset((u, v)) for u, vs in adj.items() for v in vs}


def test_square_drops_both_diagonals() -> None:
    square = {0: (0.0, 0.0), 1: (10.0, 0.0), 2: (10.0, 10.0), 3: (0.0, 10.0)}
    sides = {frozenset(e) for e in [(0, 1), (1, 2), (2, 3), (3, 0)]}
    for method in Planarization:
        assert edges(planarize(square, full(square), method)) == sides


def test_rng_lune_is_open() -> None:
    # |01| = |02| = 10 exactly: node 2 is on the lune's border, not a witness, so
    # the triangle (like an equilateral one) keeps all three sides.
    tri = {0: (0.0, 0.0), 1: (10.0, 0.0), 2: (6.0, 8.0)}
    for method in Planarization:
        assert len(edges(planarize(tri, full(tri), method))) == 3


def test_gabriel_keeps_what_rng_drops() -> None:
    pos = {0: (0.0, 0.0), 1: (10.0, 0.0), 2: (5.0, 6.0)}
    assert frozenset((0, 1)) in edges(planarize(pos, full(pos), GG))
    assert frozenset((0, 1)) not in edges(planarize(pos, full(pos), RNG))
    inside = {0: (0.0, 0.0), 1: (10.0, 0.0), 2: (5.0, 4.0)}  # in the diametral disk
    assert frozenset((0, 1)) not in edges(planarize(inside, full(inside), GG))


def test_colocated_nodes_keep_their_links() -> None:
    pos = {0: (0.0, 0.0), 1: (0.0, 0.0), 2: (10.0, 0.0)}
    for method in Planarization:
        assert edges(planarize(pos, full(pos), method)) == {
            frozenset((0, 1)),
            frozenset((0, 2)),
            frozenset((1, 2)),
        }


def test_neighbors_are_nearest_first_and_empty_is_fine() -> None:
    nbrs = {5: (3.0, 0.0), 6: (0.0, 1.0), 7: (-2.0, 0.0)}
    assert planar_neighbors((0.0, 0.0), nbrs) == [6, 7, 5]
    assert planar_neighbors((0.0, 0.0), {}) == []


def test_unit_disk_graph_matches_brute_force() -> None:
    rng = random.Random(1)
    pos = {i: (rng.uniform(-50, 150), rng.uniform(0, 100)) for i in range(120)}
    adj = unit_disk_graph(pos, 17.0)
    for u, v in itertools.combinations(pos, 2):
        close = (pos[u][0] - pos[v][0]) ** 2 + (pos[u][1] - pos[v][1]) ** 2 <= 17.0**2
        assert (v in adj[u]) is close and (u in adj[v]) is close
    with pytest.raises(ValueError):
        unit_disk_graph(pos, 0.0)


def test_segment_helpers() -> None:
    assert segments_cross((0, 0), (2, 2), (0, 2), (2, 0))
    assert not segments_cross((0, 0), (1, 1), (1, 1), (2, 0))  # shared endpoint
    assert not segments_cross((0, 0), (2, 0), (1, 0), (3, 0))  # collinear overlap
    assert not segments_cross((0, 0), (1, 0), (2, 1), (2, -1))
    assert segment_intersection((0, 0), (2, 2), (0, 2), (2, 0)) == (0.5, 0.5)
    assert segment_intersection((0, 0), (1, 0), (0, 1), (1, 1)) is None  # parallel
    assert segment_intersection((0, 0), (1, 0), (2, 1), (2, -1)) is None  # beyond the end


def test_planar_cache_recomputes_only_on_change() -> None:
    cache = PlanarCache(RNG)
    nbrs = {1: (0.0, 0.0), 2: (10.0, 0.0), 3: (6.0, 8.0)}
    assert cache.get((5.0, -1.0), nbrs) == planar_neighbors((5.0, -1.0), nbrs, RNG)
    assert cache.get((5.0, -1.0), dict(reversed(nbrs.items()))) is cache.get((5.0, -1.0), nbrs)
    assert cache.recomputed == 1
    cache.get((5.0, -1.0), {**nbrs, 4: (5.0, 0.0)})
    cache.get((5.0, -2.0), {**nbrs, 4: (5.0, 0.0)})
    assert cache.recomputed == 3
