"""The fewest transmissions that could have delivered an event on a static graph.

Two costs of a delivery from the publisher ``s`` to the interested nodes ``T``:

- **broadcast** (the primary one): the fewest broadcast transmissions, a node that
  transmits once reaching all its neighbours. A delivery is a set ``F`` of transmitting
  nodes with ``s`` in ``F``, ``F`` connected in the graph (every transmitter but ``s``
  heard an earlier one) and every terminal in ``F`` or next to a node of ``F``. The
  minimum ``|F|`` is a node-weighted group Steiner tree (the Steiner version of the
  connected dominating set): all nodes of ``F`` cost 1, terminals merely dominated
  cost 0.
- **unicast**: the fewest unicast transmissions, one per link of a tree spanning
  ``{s} | T``: the minimum Steiner tree in hop count (what protocols that count every
  sender-to-receiver transmission, as HESPER's thesis does, are measured against).

``solve`` answers both with an interval ``[lower, upper]``: ``upper`` is a delivery it
found (so the optimum is at most that), ``lower`` a proven lower bound. Small instances
are solved exactly (Dreyfus-Wagner dynamic programming over terminal subsets, lower =
upper, method ``exact``). Larger ones use approximations with a proven factor and a
lower bound from that factor and from simple arguments (method ``approx``):

- unicast: Mehlhorn's Steiner tree (one multi-source BFS, a minimum spanning tree of
  the terminals' Voronoi boundary links, paths expanded, non-terminal leaves pruned),
  at most ``2 (1 - 1/l)`` times the optimum for ``l = |T| + 1`` terminals (Mehlhorn
  1988, after Kou, Markowsky and Berman 1981). Lower bound: the largest of that
  factor's bound, ``|T|`` (a tree on ``|T| + 1`` nodes has ``|T|`` links), the farthest
  terminal's hop distance, and an exact optimum over a sample of terminals.
- broadcast: the better of (a) the transmitters of that Steiner tree (the publisher and
  every node with a child), and (b) greedy set cover of the terminals by closed
  neighbourhoods (``D``) connected to ``s`` by a Mehlhorn tree, all of whose nodes
  transmit. (b) is at most ``(2 + 4 H(Delta + 1))`` times the optimum, ``H`` the
  harmonic number and ``Delta`` the largest degree: greedy set cover gives
  ``|D| <= H(Delta + 1) OPT``, every node of ``D`` is within two hops of an optimal
  ``F`` so ``F`` grows into a connected set containing ``D | {s}`` with at most
  ``OPT + 2 |D|`` nodes, and Mehlhorn's tree on ``D | {s}`` has at most twice as many
  links. Lower bound: the largest of that factor's bound, the farthest terminal's hop
  distance (a terminal ``h`` hops away needs ``h`` transmissions along its path), a
  packing (terminals pairwise at least three hops apart have disjoint closed
  neighbourhoods, so each needs its own transmitter) and an exact optimum over a
  sample of terminals.

Terminals the publisher cannot reach are left out and counted (``unreachable``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from mesheval.optimum.graph import UNREACHED, Graph, IntArray, bfs, relax, within

EXACT_BUDGET = 60_000_000
"""Largest 3^k n + 2^k (n + links) (diameter) of an exact solve (a few seconds)."""
SAMPLE_TERMINALS = 8
"""Terminals in the sample whose exact optimum is a lower bound of the whole."""


@dataclass(frozen=True)
class Bounds:
    """The optimum of one cost lies in [lower, upper]; ``method`` says how it was found."""

    lower: int
    upper: int
    method: str
    """``exact`` (dynamic programming, lower == upper), ``approx`` or ``trivial``."""
    factor: float | None = None
    """The proven approximation factor of ``upper`` (approx only)."""

    @property
    def exact(self) -> bool:
        return self.lower == self.upper


@dataclass(frozen=True)
class Optimum:
    broadcast: Bounds
    unicast: Bounds
    terminals: int
    """Terminals reachable from the publisher (the ones the bounds are for)."""
    unreachable: int


def harmonic(n: int) -> float:
    return math.fsum(1.0 / i for i in range(1, n + 1))


# ------------------------------------------------------------------- exact (DP)


PER_STEP = 2000
"""The Python overhead of one vectorised step of the dynamic programme, in array elements."""


def _exact_cost(graph: Graph, k: int, diameter: int) -> int:
    """Rough work of an exact solve: 3^k subset merges over all nodes, 2^k relaxations."""
    return int(3 ** k * (graph.n + PER_STEP)
               + 2 ** k * (graph.n + len(graph.indices) + PER_STEP) * (diameter + 2))


def exact(graph: Graph, source: int, terminals: Sequence[int], *, broadcast: bool) -> int:
    """Dreyfus-Wagner over terminal subsets: the exact optimum (node indices in, count out).

    ``dp[S][v]`` is the cheapest structure containing ``v`` that serves the terminal set
    ``S``. Unicast: links of a tree spanning ``S | {v}``. Broadcast: nodes of a connected
    set of transmitters containing ``v`` whose closed neighbourhood holds ``S``. Two
    structures meeting at ``v`` merge (broadcast: ``v`` counted once), and a structure at
    ``u`` extends to ``v`` along a shortest path (one link, or one more transmitter, per
    hop). Terminals must be reachable from ``source``.
    """
    terms = [t for t in dict.fromkeys(terminals) if t != source]
    k = len(terms)
    if k == 0:
        return 0
    cap = 4 * graph.n + 4
    full = (1 << k) - 1
    dp = np.full((full + 1, graph.n), cap, dtype=np.int64)
    for i, t in enumerate(terms):
        dist, _, _ = bfs(graph, [t])
        dist = np.where(dist == UNREACHED, cap, dist)
        # broadcast: transmitters from v to a neighbour of t (t itself if v == t)
        dp[1 << i] = np.minimum(np.maximum(dist - 1, 0) + 1, cap) if broadcast else dist
    overlap = 1 if broadcast else 0
    for mask in range(1, full + 1):
        if mask & (mask - 1) == 0:
            continue
        best = np.full(graph.n, cap, dtype=np.int64)
        low = mask & -mask  # every split counted once: the part holding the lowest bit
        sub = (mask - 1) & mask
        while sub:
            if sub & low:
                best = np.minimum(best, dp[sub] + dp[mask ^ sub] - overlap)
            sub = (sub - 1) & mask
        dp[mask] = relax(graph, np.minimum(best, cap), cap)
    return int(dp[full][source])


# ------------------------------------------------------------- approximations


def mehlhorn_tree(graph: Graph, terminals: Sequence[int]) -> set[tuple[int, int]]:
    """Links (i < j) of Mehlhorn's Steiner tree over ``terminals`` (all mutually reachable).

    One BFS from every terminal at once gives each node its nearest terminal; a link
    between two Voronoi regions is a path between their terminals; the minimum spanning
    tree of those paths (Kruskal) is expanded into links; then a spanning tree of their
    union is pruned of non-terminal leaves."""
    terms = list(dict.fromkeys(terminals))
    if len(terms) < 2:
        return set()
    dist, parent, base = bfs(graph, terms)
    src, dst = graph.expand(np.arange(graph.n, dtype=np.int64))
    cross = (base[src] != base[dst]) & (base[src] != UNREACHED) & (src < dst)
    src, dst = src[cross], dst[cross]
    weight = dist[src] + dist[dst] + 1
    a, b = np.minimum(base[src], base[dst]), np.maximum(base[src], base[dst])
    order = np.lexsort((dst, src, weight))
    root = {t: t for t in terms}

    def find(x: int) -> int:
        while root[x] != x:
            root[x] = root[root[x]]
            x = root[x]
        return x

    links: set[tuple[int, int]] = set()
    joined = 0
    for i in order:
        ra, rb = find(int(a[i])), find(int(b[i]))
        if ra == rb:
            continue
        root[ra] = rb
        joined += 1
        u, v = int(src[i]), int(dst[i])
        links.add((min(u, v), max(u, v)))
        for x in (u, v):
            while parent[x] != x:
                p = int(parent[x])
                links.add((min(x, p), max(x, p)))
                x = p
        if joined == len(terms) - 1:
            break
    return _prune(_spanning(links, terms[0]), set(terms))


def _spanning(links: set[tuple[int, int]], start: int) -> set[tuple[int, int]]:
    """A BFS spanning tree of the (connected) union of paths: same nodes, no cycle."""
    adj: dict[int, list[int]] = {}
    for u, v in links:
        adj.setdefault(u, []).append(v)
        adj.setdefault(v, []).append(u)
    tree: set[tuple[int, int]] = set()
    seen = {start}
    frontier = [start]
    while frontier:
        nxt = []
        for u in frontier:
            for v in sorted(adj.get(u, ())):
                if v not in seen:
                    seen.add(v)
                    tree.add((min(u, v), max(u, v)))
                    nxt.append(v)
        frontier = nxt
    return tree


def _prune(tree: set[tuple[int, int]], keep: set[int]) -> set[tuple[int, int]]:
    """Remove leaves that are not terminals until none is left."""
    adj: dict[int, set[int]] = {}
    for u, v in tree:
        adj.setdefault(u, set()).add(v)
        adj.setdefault(v, set()).add(u)
    leaves = [x for x, nbrs in adj.items() if len(nbrs) == 1 and x not in keep]
    while leaves:
        x = leaves.pop()
        if len(adj.get(x, ())) != 1:
            continue
        (other,) = adj.pop(x)
        adj[other].discard(x)
        if len(adj[other]) == 1 and other not in keep:
            leaves.append(other)
    return {(min(u, v), max(u, v)) for u, nbrs in adj.items() for v in nbrs}


def transmitter_set(tree: set[tuple[int, int]], source: int) -> set[int]:
    """Nodes that broadcast to deliver along ``tree`` rooted at ``source``: those with a
    child (the source always)."""
    adj: dict[int, list[int]] = {}
    for u, v in tree:
        adj.setdefault(u, []).append(v)
        adj.setdefault(v, []).append(u)
    out, seen, frontier = {source}, {source}, [source]
    while frontier:
        nxt = []
        for u in frontier:
            children = [v for v in adj.get(u, ()) if v not in seen]
            if children:
                out.add(u)
            seen.update(children)
            nxt.extend(children)
        frontier = nxt
    return out


def tree_transmitters(tree: set[tuple[int, int]], source: int) -> int:
    """Broadcasts to deliver along ``tree`` rooted at ``source``: nodes with a child."""
    if not tree:
        return 0
    adj: dict[int, list[int]] = {}
    for u, v in tree:
        adj.setdefault(u, []).append(v)
        adj.setdefault(v, []).append(u)
    count, seen, frontier = 0, {source}, [source]
    while frontier:
        nxt = []
        for u in frontier:
            children = [v for v in adj.get(u, ()) if v not in seen]
            if children:
                count += 1
            seen.update(children)
            nxt.extend(children)
        frontier = nxt
    return count


def greedy_cover(graph: Graph, terminals: Sequence[int], covered: NDArray[np.bool_]) -> list[int]:
    """Greedy set cover of the terminals not ``covered`` (indexed by node) by closed
    neighbourhoods: repeatedly the node whose neighbourhood holds most uncovered ones."""
    terms = np.array([t for t in dict.fromkeys(terminals) if not covered[t]], dtype=np.int64)
    if len(terms) == 0:
        return []
    holders, nbrs = graph.expand(terms)
    # (covering node, terminal) pairs: each terminal's neighbours and itself
    cover_node = np.concatenate([nbrs, terms])
    cover_term = np.concatenate([holders, terms])
    gain = np.bincount(cover_node, minlength=graph.n)
    by_term: dict[int, IntArray] = {}
    order = np.argsort(cover_term, kind="stable")
    starts = np.searchsorted(cover_term[order], terms)
    ends = np.searchsorted(cover_term[order], terms, side="right")
    for t, a, b in zip(terms.tolist(), starts.tolist(), ends.tolist(), strict=True):
        by_term[t] = cover_node[order[a:b]]
    by_node_order = np.argsort(cover_node, kind="stable")
    sorted_nodes = cover_node[by_node_order]
    left = set(terms.tolist())
    chosen: list[int] = []
    while left:
        v = int(np.argmax(gain))
        chosen.append(v)
        a, b = np.searchsorted(sorted_nodes, [v, v + 1])
        for t in cover_term[by_node_order[a:b]].tolist():
            if t in left:
                left.discard(t)
                np.subtract.at(gain, by_term[t], 1)
    return chosen


def prune_transmitters(graph: Graph, transmitters: set[int], source: int,
                       terminals: Sequence[int]) -> set[int]:
    """Drop transmitters one by one (fewest terminals next to them first) while the rest
    stays connected, holds ``source`` and still has every terminal in or next to it."""
    keep = set(transmitters) | {source}
    terms = set(terminals)
    count: dict[int, int] = {}
    for f in keep:
        for t in _closed(graph, f) & terms:
            count[t] = count.get(t, 0) + 1
    for f in sorted(keep - {source}, key=lambda f: (len(_closed(graph, f) & terms), f)):
        mine = _closed(graph, f) & terms
        if any(count.get(t, 0) < 2 for t in mine):
            continue
        rest = keep - {f}
        if not _connected(graph, rest, source):
            continue
        keep = rest
        for t in mine:
            count[t] -= 1
    return keep


def _closed(graph: Graph, i: int) -> set[int]:
    return {i, *graph.neighbours(i).tolist()}


def _connected(graph: Graph, nodes: set[int], start: int) -> bool:
    seen, todo = {start}, [start]
    while todo:
        u = todo.pop()
        for v in graph.neighbours(u).tolist():
            if v in nodes and v not in seen:
                seen.add(v)
                todo.append(v)
    return seen == nodes


def fractional_packing(graph: Graph, terminals: Sequence[int]) -> float:
    """A feasible dual of the covering LP: ``y_t = 1 / max over v in N[t] of |N[v] & T|``
    keeps every node's closed neighbourhood at total <= 1, so ``sum y`` is a lower bound
    on the transmitters needed just to have every terminal next to one."""
    terms = np.array(list(dict.fromkeys(terminals)), dtype=np.int64)
    if len(terms) == 0:
        return 0.0
    holders, nbrs = graph.expand(terms)
    cover_node = np.concatenate([nbrs, terms])
    cover_term = np.concatenate([holders, terms])
    load = np.bincount(cover_node, minlength=graph.n)
    worst = np.zeros(graph.n, dtype=np.int64)
    np.maximum.at(worst, cover_term, load[cover_node])
    return float(np.sum(1.0 / worst[terms]))


def packing(graph: Graph, terminals: Sequence[int]) -> int:
    """Size of a greedy set of terminals pairwise at least three hops apart."""
    blocked = np.zeros(graph.n, dtype=bool)
    size = 0
    for t in dict.fromkeys(terminals):
        if blocked[t]:
            continue
        size += 1
        blocked[within(graph, t, 2)] = True
    return size


def _sample(dist_from_source: IntArray, graph: Graph, terms: list[int], size: int) -> list[int]:
    """Farthest-point sample: the farthest terminal, then repeatedly the one farthest from
    those chosen (spread-out terminals give the strongest subset lower bound)."""
    if len(terms) <= size:
        return terms
    chosen = [max(terms, key=lambda t: (int(dist_from_source[t]), -t))]
    near = np.full(graph.n, np.iinfo(np.int64).max, dtype=np.int64)
    while len(chosen) < size:
        d, _, _ = bfs(graph, [chosen[-1]])
        near = np.minimum(near, np.where(d == UNREACHED, np.iinfo(np.int64).max, d))
        chosen.append(max((t for t in terms if t not in chosen),
                          key=lambda t: (int(near[t]), -t)))
    return chosen


def solve(graph: Graph, source: int, terminals: Sequence[int],
          budget: int = EXACT_BUDGET) -> Optimum:
    """Both optima for one event: node indices in; see the module docstring."""
    dist, _, _ = bfs(graph, [source])
    wanted = [t for t in dict.fromkeys(terminals) if t != source]
    terms = [t for t in wanted if dist[t] != UNREACHED]
    unreachable = len(wanted) - len(terms)
    if not terms:
        zero = Bounds(0, 0, "trivial")
        return Optimum(zero, zero, 0, unreachable)
    far = int(max(dist[t] for t in terms))
    diameter = 2 * far + 2
    if _exact_cost(graph, len(terms), diameter) <= budget:
        b = exact(graph, source, terms, broadcast=True)
        u = exact(graph, source, terms, broadcast=False)
        return Optimum(Bounds(b, b, "exact"), Bounds(u, u, "exact"), len(terms), unreachable)
    size = max((k for k in range(1, SAMPLE_TERMINALS + 1)
                if _exact_cost(graph, k, diameter) <= budget), default=0)
    sample = _sample(dist, graph, terms, size) if size else []
    sampled = bool(sample)
    # unicast
    tree = mehlhorn_tree(graph, [source, *terms])
    factor_u = 2.0 * (1.0 - 1.0 / (len(terms) + 1))
    lower_u = max(math.ceil(len(tree) / factor_u - 1e-9), len(terms), far)
    if sampled:
        lower_u = max(lower_u, exact(graph, source, sample, broadcast=False))
    unicast = Bounds(min(lower_u, len(tree)), len(tree), "approx", factor_u)
    # broadcast
    covered = np.zeros(graph.n, dtype=bool)
    covered[source] = True
    covered[graph.neighbours(source)] = True
    dominators = greedy_cover(graph, terms, covered)
    connect = mehlhorn_tree(graph, [source, *dominators])
    candidates = [{x for link in connect for x in link} | {source},
                  transmitter_set(tree, source)]
    upper_b = min(len(prune_transmitters(graph, c, source, terms)) for c in candidates)
    factor_b = 2.0 + 4.0 * harmonic(graph.max_degree() + 1)
    lower_b = max(math.ceil(upper_b / factor_b - 1e-9), far, packing(graph, terms),
                  math.ceil(fractional_packing(graph, terms) - 1e-9), 1)
    if sampled:
        lower_b = max(lower_b, exact(graph, source, sample, broadcast=True))
    broadcast = Bounds(min(lower_b, upper_b), upper_b, "approx", factor_b)
    return Optimum(broadcast, unicast, len(terms), unreachable)
