"""The optimum on graphs whose answer is known by hand, and against brute force."""

from __future__ import annotations

import itertools
import random

import pytest

from mesheval.optimum.graph import Graph, bfs, from_edges
from mesheval.optimum.steiner import exact, mehlhorn_tree, solve


def grid(width: int, height: int, holes: set[tuple[int, int]] = frozenset()) -> Graph:
    """4-neighbour grid; node id 10 * x + y; ``holes`` are missing nodes."""
    cells = [(x, y) for x in range(width) for y in range(height) if (x, y) not in holes]
    edges = [(10 * x + y, 10 * (x + dx) + y + dy) for x, y in cells for dx, dy in ((1, 0), (0, 1))
             if (x + dx, y + dy) in cells]
    return from_edges([10 * x + y for x, y in cells], edges)


def optimum(graph: Graph, source: int, terminals: list[int], **kw: int) -> tuple[
        tuple[int, int, str], tuple[int, int, str]]:
    index = graph.index()
    opt = solve(graph, index[source], [index[t] for t in terminals], **kw)
    return ((opt.broadcast.lower, opt.broadcast.upper, opt.broadcast.method),
            (opt.unicast.lower, opt.unicast.upper, opt.unicast.method))


def test_path() -> None:
    path = from_edges(range(5), [(i, i + 1) for i in range(4)])
    # 0 -> 4: four links, and four broadcasts (0, 1, 2, 3); the middle node is on the way
    assert optimum(path, 0, [4]) == ((4, 4, "exact"), (4, 4, "exact"))
    assert optimum(path, 0, [2, 4]) == ((4, 4, "exact"), (4, 4, "exact"))
    # from the middle: two links each way; three broadcasts (2, then 1 and 3)
    assert optimum(path, 2, [0, 4]) == ((3, 3, "exact"), (4, 4, "exact"))
    assert optimum(path, 0, [1]) == ((1, 1, "exact"), (1, 1, "exact"))
    assert optimum(path, 0, []) == ((0, 0, "trivial"), (0, 0, "trivial"))


def test_star() -> None:
    star = from_edges(range(7), [(0, i) for i in range(1, 7)])
    # from a leaf to the five other leaves: one link to the centre and five out of it,
    # but only two broadcasts (the leaf's, heard by the centre; the centre's, heard by all)
    assert optimum(star, 1, [2, 3, 4, 5, 6]) == ((2, 2, "exact"), (6, 6, "exact"))
    # from the centre: one broadcast, five unicasts
    assert optimum(star, 0, [1, 2, 3, 4, 5, 6]) == ((1, 1, "exact"), (6, 6, "exact"))


def test_grid_with_a_hole() -> None:
    """5 x 5 grid without its centre (2, 2): paths go round the hole."""
    g = grid(5, 5, {(2, 2)})
    # (0,2) -> (4,2): 6 links round the hole (4 without it), 6 broadcasts
    assert optimum(g, 2, [42]) == ((6, 6, "exact"), (6, 6, "exact"))
    # (0,2) to (2,4), (2,0) and (4,2): both halves of the hole share only the first link
    # (4 + 4 - 1 = 7 links), and (4,2) hangs 3 links off (2,1) or (2,3): 10 links. A
    # broadcast reaches a neighbour's neighbour's ..., so (2,4) needs (0,2), (1,2), (1,3),
    # (2,3) and (2,0) needs (1,1), (2,1) besides; (4,2) two more: 8.
    assert optimum(g, 2, [24, 20, 42]) == ((8, 8, "exact"), (10, 10, "exact"))
    full = grid(5, 5)
    assert optimum(full, 2, [42]) == ((4, 4, "exact"), (4, 4, "exact"))


def test_unreachable_terminals_are_counted_not_solved() -> None:
    g = from_edges(range(4), [(0, 1), (2, 3)])
    opt = solve(g, 0, [1, 3])
    assert (opt.terminals, opt.unreachable) == (1, 1)
    assert (opt.broadcast.upper, opt.unicast.upper) == (1, 1)


def _brute(graph: Graph, source: int, terminals: list[int]) -> tuple[int, int]:
    """(broadcast, unicast) optimum by enumerating node sets (tiny graphs only)."""
    n = graph.n
    nbrs = [set(graph.neighbours(i).tolist()) for i in range(n)]

    def connected(nodes: set[int]) -> bool:
        start = next(iter(nodes))
        seen, todo = {start}, [start]
        while todo:
            u = todo.pop()
            for v in nbrs[u] & nodes - seen:
                seen.add(v)
                todo.append(v)
        return seen == nodes

    terms = set(terminals) - {source}
    if not terms:
        return 0, 0
    best_b = best_u = n + 1
    for size in range(1, n + 1):
        for combo in itertools.combinations(range(n), size):
            nodes = set(combo)
            if source not in nodes or not connected(nodes):
                continue
            if terms <= nodes:
                best_u = min(best_u, size - 1)
            if all(t in nodes or nbrs[t] & nodes for t in terms):
                best_b = min(best_b, size)
    return best_b, best_u


@pytest.mark.parametrize("seed", range(40))
def test_exact_and_bounds_against_brute_force(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(4, 9)
    edges = [(a, b) for a, b in itertools.combinations(range(n), 2) if rng.random() < 0.35]
    edges += [(i, i + 1) for i in range(n - 1) if rng.random() < 0.5]
    g = from_edges(range(n), edges)
    source = rng.randrange(n)
    dist, _, _ = bfs(g, [source])
    reach = [i for i in range(n) if dist[i] >= 0 and i != source]
    terms = rng.sample(reach, k=min(len(reach), rng.randint(1, 4))) if reach else []
    want_b, want_u = _brute(g, source, terms)
    assert exact(g, source, terms, broadcast=True) == want_b
    assert exact(g, source, terms, broadcast=False) == want_u
    # the approximations (forced by a zero budget) bracket the optimum within their factor
    approx = solve(g, source, terms, budget=0)
    for bounds, want in ((approx.broadcast, want_b), (approx.unicast, want_u)):
        assert bounds.lower <= want <= bounds.upper
        if bounds.factor is not None:
            assert bounds.upper <= bounds.factor * want + 1e-9


def test_mehlhorn_tree_spans_the_terminals() -> None:
    g = grid(6, 6, {(2, 2), (2, 3), (3, 2), (3, 3)})
    index = g.index()
    terms = [index[t] for t in (0, 55, 5, 50, 13)]
    tree = mehlhorn_tree(g, terms)
    nodes = {x for link in tree for x in link}
    assert set(terms) <= nodes and len(tree) == len(nodes) - 1  # a tree over them
    assert len(tree) <= 2 * exact(g, terms[0], terms[1:], broadcast=False)
