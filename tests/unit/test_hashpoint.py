"""Broker-position hash (Zheng 2008, §4.2) and the general hash point."""

from __future__ import annotations

import hashlib
import itertools
import random

import pytest

from meshsub.core.grid import Bounds, Grid
from meshsub.core.hashpoint import (
    broker_point,
    closest_node,
    hash_point,
    iterated_sha256,
    topic_offset,
)

# Chi-square critical value, 15 degrees of freedom, alpha = 0.001.
CHI2_15_001 = 37.70


def chi_square(points: list[tuple[float, float]], bounds: Bounds, bins: int = 4) -> float:
    counts = [0] * (bins * bins)
    for x, y in points:
        i = min(int((x - bounds.x_min) / bounds.width * bins), bins - 1)
        j = min(int((y - bounds.y_min) / bounds.height * bins), bins - 1)
        counts[i * bins + j] += 1
    expected = len(points) / len(counts)
    return sum((c - expected) ** 2 / expected for c in counts)


@pytest.mark.parametrize(
    ("topic", "h1", "h2", "ux", "uy"),
    [
        ("temperature", "b314ae60cb741e69", "8a24d84dc8499dd1", 0.699534, 0.539625),
        ("light", "99a7026172d42714", "404103bc00b7c8c9", 0.600205, 0.250992),
    ],
)
def test_thesis_hash_vectors(topic: str, h1: str, h2: str, ux: float, uy: float) -> None:
    assert iterated_sha256(topic.encode(), 1)[:8].hex() == h1
    assert iterated_sha256(topic.encode(), 2)[:8].hex() == h2
    assert (
        iterated_sha256(topic.encode(), 2)
        == hashlib.sha256(hashlib.sha256(topic.encode()).digest()).digest()
    )
    got_x, got_y = topic_offset(topic)
    assert got_x == pytest.approx(ux, abs=5e-7) and got_y == pytest.approx(uy, abs=5e-7)


def test_broker_point_same_offset_in_every_cell() -> None:
    g = Grid.for_radio_range(70.0, 1000.0, 1000.0)
    ux, uy = topic_offset("temperature")
    for cell in [(0, 0), (10, 10), (16, 12), (20, 20)]:
        x, y = broker_point(g, cell, "temperature")
        assert g.cell_of(x, y) == cell
        b = g.bounds(cell)
        assert (x - b.x_min) / g.cell_size == pytest.approx(ux)
        assert (y - b.y_min) / g.cell_size == pytest.approx(uy)
    assert broker_point(g, (3, 4), "light") != broker_point(g, (3, 4), "temperature")


def test_iteration_counts_must_differ() -> None:
    with pytest.raises(ValueError):
        topic_offset("t", 2, 2)
    with pytest.raises(ValueError):
        iterated_sha256(b"t", 0)


def test_hash_points_are_uniform() -> None:
    g = Grid(0.0, 0.0, 50.0, 1, 1)
    topics = [f"topic-{i}" for i in range(1000)]
    thesis = [broker_point(g, (0, 0), t) for t in topics]
    assert chi_square(thesis, g.bounds((0, 0))) < CHI2_15_001
    area = Bounds(-100.0, 20.0, 300.0, 70.0)
    general = [hash_point(t, area) for t in topics]
    assert all(area.contains(x, y) for x, y in general)
    assert chi_square(general, area) < CHI2_15_001


def test_hash_point_is_deterministic_and_keyed() -> None:
    area = Bounds(0.0, 0.0, 10.0, 10.0)
    assert hash_point("k", area) == hash_point(b"k", area)
    assert hash_point("k", area) != hash_point("k", area, seed=1)
    assert hash_point("k", area) != hash_point("l", area)
    with pytest.raises(ValueError):
        hash_point("k", Bounds(0.0, 0.0, 0.0, 10.0))


def test_closest_node_is_deterministic() -> None:
    nodes = {7: (0.0, 0.0), 3: (2.0, 0.0), 9: (1.0, 5.0)}
    assert closest_node(nodes, (1.0, 0.0)) == 3  # a tie between 3 and 7: smaller id
    for perm in itertools.permutations(nodes.items()):
        assert closest_node(dict(perm), (1.0, 0.0)) == 3
    assert closest_node(nodes, (1.0, 4.0)) == 9
    assert closest_node({}, (0.0, 0.0)) is None


def test_topic_spreading_over_a_cell() -> None:
    """Every node of a cell is broker for some topics; shares follow Voronoi areas."""
    g = Grid(0.0, 0.0, 50.0, 1, 1)
    rng = random.Random(4)
    nodes = {i: (rng.uniform(0, 50), rng.uniform(0, 50)) for i in range(8)}
    counts = dict.fromkeys(nodes, 0)
    for i in range(1000):
        broker = closest_node(nodes, broker_point(g, (0, 0), f"t{i}"))
        assert broker is not None
        counts[broker] += 1
    # Monte Carlo Voronoi shares of the same cell, from an independent generator.
    area = dict.fromkeys(nodes, 0)
    for _ in range(20000):
        p = (rng.uniform(0, 50), rng.uniform(0, 50))
        winner = closest_node(nodes, p)
        assert winner is not None
        area[winner] += 1
    stat = sum((counts[n] - 1000 * area[n] / 20000) ** 2 / (1000 * area[n] / 20000) for n in nodes)
    assert stat < 24.32  # chi-square, 7 degrees of freedom, alpha = 0.001
