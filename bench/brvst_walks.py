"""How long BRVST's routed legs are at the paper's density (Li and Wang 2014, §V).

One command (no lock needed: a few seconds of one core):

    .venv/bin/python bench/brvst_walks.py              # 20 placements, 200 legs each

Every placement is the paper's field: 400 nodes uniform on 1000 m x 1000 m, unit disk
of 80 m (the steady state of random waypoint is denser in the middle; uniform is the
paper's "randomly distributed initially"). A leg goes from a random node to another
random node of the same radio component with GPSR (``meshsub.core.georouting.route``,
Gabriel graph, the radio range known), addressed to that node at its position, as
BRVST addresses a manager. The table prints the share of legs longer than each hop
budget and, for one publication crossing zones (PUBLISH, PUB_UP, PUB_ZONE, PUB_GRID,
DELIVER: five legs), the share of journeys that a budget cuts somewhere.

Why it matters: with a 64-hop leg budget about one leg in twenty ran out of TTL on a
perimeter walk round a large face (the field is sparse: mean degree about 8, with
voids), so a five-leg journey was lost about one time in five; that was the most of
BRVST's lost deliveries in the simulator (docs/protocols/brvst.md, "Transport").
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
from collections import defaultdict

from meshsub.core.georouting import route

WIDTH = 1000.0
NODES = 400
RANGE_M = 80.0
BUDGETS = (32, 64, 96, 128, 160, 192, 224, 255)
LEGS_PER_JOURNEY = 5


def placement(seed: int) -> tuple[dict[int, tuple[float, float]], dict[int, set[int]]]:
    rnd = random.Random(seed)
    pos = {n: (rnd.uniform(0, WIDTH), rnd.uniform(0, WIDTH)) for n in range(NODES)}
    cells: dict[tuple[int, int], list[int]] = defaultdict(list)
    for n, (x, y) in pos.items():
        cells[(int(x // RANGE_M), int(y // RANGE_M))].append(n)
    adj: dict[int, set[int]] = {n: set() for n in pos}
    for n, (x, y) in pos.items():
        cx, cy = int(x // RANGE_M), int(y // RANGE_M)
        for dx in (-1, 0, 1):
            for dy in (-1, 0, 1):
                for o in cells.get((cx + dx, cy + dy), ()):
                    if o != n and math.dist(pos[n], pos[o]) <= RANGE_M:
                        adj[n].add(o)
    return pos, adj


def components(adj: dict[int, set[int]]) -> dict[int, int]:
    label: dict[int, int] = {}
    for s in adj:
        if s in label:
            continue
        label[s] = s
        stack = [s]
        while stack:
            u = stack.pop()
            for v in adj[u]:
                if v not in label:
                    label[v] = s
                    stack.append(v)
    return label


def shortest(adj: dict[int, set[int]], s: int, d: int) -> int:
    dist = {s: 0}
    queue = [s]
    for u in queue:
        if u == d:
            return dist[u]
        for v in adj[u]:
            if v not in dist:
                dist[v] = dist[u] + 1
                queue.append(v)
    return -1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--placements", type=int, default=20)
    ap.add_argument("--legs", type=int, default=200, help="legs per placement")
    args = ap.parse_args()
    share_over: dict[int, list[float]] = {b: [] for b in BUDGETS}
    hops_all: list[int] = []
    stretch: list[float] = []
    degree: list[float] = []
    failed = 0
    for seed in range(1, args.placements + 1):
        pos, adj = placement(seed)
        degree.append(sum(len(v) for v in adj.values()) / len(adj))
        comp = components(adj)
        rnd = random.Random(1000 + seed)
        nodes = sorted(pos)
        cache: dict[int, list[int]] = {}
        hops: list[int] = []
        while len(hops) < args.legs:
            s, d = rnd.sample(nodes, 2)
            if comp[s] != comp[d]:
                continue
            r = route(s, pos[d], pos, adj, max_hops=4 * NODES, dest=d, planar_cache=cache,
                      radio_range=RANGE_M)
            if not (r.home and r.end == d):
                failed += 1
                continue
            hops.append(r.hops)
            stretch.append(r.hops / max(1, shortest(adj, s, d)))
        hops_all += hops
        for b in BUDGETS:
            share_over[b].append(sum(h > b for h in hops) / len(hops))
    hops_all.sort()
    q = statistics.quantiles(hops_all, n=100)
    print(f"{args.placements} placements of {NODES} nodes on {WIDTH:g} m x {WIDTH:g} m, "
          f"{RANGE_M:g} m unit disk, mean degree {statistics.mean(degree):.1f}; "
          f"{len(hops_all)} legs in a component (GPSR failed to reach {failed})")
    print(f"hops: median {q[49]:.0f}, p90 {q[89]:.0f}, p95 {q[94]:.0f}, p99 {q[98]:.0f}, "
          f"max {hops_all[-1]}; stretch over the shortest path: mean "
          f"{statistics.mean(stretch):.2f}")
    print(f"{'budget':>6} {'legs over':>16} {'5-leg journeys cut':>19}")
    for b in BUDGETS:
        s = share_over[b]
        mean = statistics.mean(s)
        half = 1.96 * statistics.stdev(s) / math.sqrt(len(s)) if len(s) > 1 else math.nan
        journeys = 1 - (1 - mean) ** LEGS_PER_JOURNEY
        print(f"{b:>6} {mean:>8.4f} ± {half:.4f} {journeys:>19.3f}")


if __name__ == "__main__":
    main()
