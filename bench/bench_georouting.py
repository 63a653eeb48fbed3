"""GPSR figures at HESPER scale: next_hop calls/s, planarisation cost, route lengths.

The HESPER set-up (Zheng 2008, Table 4.1): 4000 or 8000 nodes uniformly in a
1000 m x 1000 m square, radio range 70 m or 100 m. For each network it
prints the mean degree, the cost of one local planarisation (GG, RNG), the
rate of ``next_hop`` decisions in greedy and in perimeter mode, and the hop
counts of routes to random points (all of which must end at the node closest
to the point). Also the TCBF operation rates of B-SUB, for scale.

Run: ``.venv/bin/python bench/bench_georouting.py [--routes 200]`` (about a
minute). Prints a table; not a test.
"""

from __future__ import annotations

import argparse
import math
import random
import time

from meshsub.core.georouting import GeoHeader, GeoMode, next_hop, route
from meshsub.core.planar import Planarization, planar_neighbors, unit_disk_graph
from meshsub.core.tcbf import TCBF, FilterKind, decode_filter, encode_filter

Graph = tuple[dict[int, tuple[float, float]], dict[int, set[int]]]


def network(n: int, radius: float, seed: int) -> Graph:
    rng = random.Random(seed)
    pos = {i: (rng.uniform(0, 1000), rng.uniform(0, 1000)) for i in range(n)}
    return pos, unit_disk_graph(pos, radius)


def bench_network(n: int, radius: float, routes: int, seed: int = 1) -> None:
    t0 = time.perf_counter()
    pos, adj = network(n, radius, seed)
    build = time.perf_counter() - t0
    degree = sum(len(v) for v in adj.values()) / n
    rng = random.Random(seed)
    sample = rng.sample(list(pos), 200)
    views = {u: {v: pos[v] for v in adj[u]} for u in sample}
    figures = {}
    for method in Planarization:
        t0 = time.perf_counter()
        sizes = [len(planar_neighbors(pos[u], views[u], method)) for u in sample]
        figures[method] = ((time.perf_counter() - t0) / len(sample), sum(sizes) / len(sizes))
    # Greedy decisions: fresh header, random far targets.
    targets = [(rng.uniform(0, 1000), rng.uniform(0, 1000)) for _ in sample]
    t0 = time.perf_counter()
    for u, target in zip(sample, targets, strict=True):
        next_hop(u, pos[u], views[u], target)
    greedy_rate = len(sample) / (time.perf_counter() - t0)
    # Perimeter decisions without and with a cached planar neighbour list
    # (Lp next to the target, so the node stays in perimeter mode).
    headers = []
    for u, (tx, ty) in zip(sample, targets, strict=True):
        lp = (tx + 0.5, ty + 0.5)
        headers.append(
            GeoHeader(
                GeoMode.PERIMETER, lp=lp, lf=lp, e0=(n + 1, n + 2), prev=pos[next(iter(adj[u]))]
            )
        )
    t0 = time.perf_counter()
    for u, target, h in zip(sample, targets, headers, strict=True):
        next_hop(u, pos[u], views[u], target, h)
    perim_rate = len(sample) / (time.perf_counter() - t0)
    cached = {u: planar_neighbors(pos[u], views[u]) for u in sample}
    t0 = time.perf_counter()
    for u, target, h in zip(sample, targets, headers, strict=True):
        next_hop(u, pos[u], views[u], target, h, planar=cached[u])
    perim_cached_rate = len(sample) / (time.perf_counter() - t0)
    # Whole routes (the driver builds each node's neighbour view per hop).
    cache: dict[int, list[int]] = {}
    hops, short_hops, perimeter, ok = [], [], 0, 0
    t0 = time.perf_counter()
    for _ in range(routes):
        source = rng.randrange(n)
        target = (rng.uniform(0, 1000), rng.uniform(0, 1000))
        result = route(source, target, pos, adj, max_hops=6 * n, planar_cache=cache)
        hops.append(result.hops)
        perimeter += result.perimeter_hops
        best = min(math.dist(p, target) for p in pos.values())
        ok += result.home and math.dist(pos[result.end], target) == best
        short = route(
            source, target, pos, adj, max_hops=6 * n, planar_cache=cache, radio_range=radius
        )
        short_hops.append(short.hops)
        ok += short.home and math.dist(pos[short.end], target) == best
    route_time = time.perf_counter() - t0
    (gg_ms, gg_deg), (rng_ms, rng_deg) = (figures[m] for m in Planarization)
    print(
        f"{n:>5} {radius:>5.0f} {degree:>6.1f} {build:>7.2f} "
        f"{gg_deg:>5.1f} {gg_ms * 1e3:>7.3f} {rng_deg:>5.1f} {rng_ms * 1e3:>7.3f} "
        f"{greedy_rate:>9.0f} {perim_rate:>9.0f} {perim_cached_rate:>9.0f} "
        f"{sum(hops) / len(hops):>6.1f} {max(hops):>5} {perimeter / max(1, sum(hops)):>6.3f} "
        f"{ok:>4}/{2 * routes:<4} {sum(hops) / route_time:>8.0f} "
        f"{sum(short_hops) / len(short_hops):>6.1f} {max(short_hops):>5}"
    )


def bench_tcbf() -> None:
    rng = random.Random(3)
    keys = [f"trend{i}".encode() for i in range(38)]
    genuine = TCBF()
    genuine.insert(keys[0])
    relay = TCBF(df=0.138 / 60)
    loops = 2000
    t0 = time.perf_counter()
    for i in range(loops):
        relay.a_merge(genuine, now=float(i))
    a_rate = loops / (time.perf_counter() - t0)
    other = relay.copy()
    t0 = time.perf_counter()
    for i in range(loops):
        relay.m_merge(other, now=float(loops + i))
    m_rate = loops / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for i in range(20 * loops):
        relay.counter(keys[i % 38])
    q_rate = 20 * loops / (time.perf_counter() - t0)
    for key in keys:
        g = TCBF()
        g.insert(key)
        for _ in range(rng.randint(1, 3)):
            relay.a_merge(g)
    t0 = time.perf_counter()
    for _ in range(loops):
        decode_filter(encode_filter(relay, FilterKind.RELAY))
    codec_rate = loops / (time.perf_counter() - t0)
    size = len(encode_filter(relay, FilterKind.RELAY))
    print(
        f"TCBF m=256 k=4: A-merge {a_rate:.0f}/s, M-merge {m_rate:.0f}/s, "
        f"counter query {q_rate:.0f}/s, encode+decode {codec_rate:.0f}/s "
        f"(38-key relay filter: {size} bytes with header)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--routes", type=int, default=200, help="routes per network")
    args = parser.parse_args()
    print("n: nodes, TR: range (m), deg: mean degree, build: UDG build (s); GG/RNG: planar")
    print("degree and ms per local planarisation; rates: next_hop calls/s (greedy, perimeter,")
    print("perimeter with cached planar list); hops mean/max, share of perimeter hops,")
    print("routes ending at the closest node (both runs), route hops/s of the driver, and")
    print("hops mean/max when next_hop knows the radio range (no home tour when provable).")
    print(
        f"{'n':>5} {'TR':>5} {'deg':>6} {'build':>7} {'GGdeg':>5} {'GG ms':>7} "
        f"{'RNGd':>5} {'RNG ms':>7} {'greedy/s':>9} {'perim/s':>9} {'cached/s':>9} "
        f"{'hops':>6} {'max':>5} {'perim':>6} {'closest':>9} {'hops/s':>8} "
        f"{'hopsR':>6} {'maxR':>5}"
    )
    for n in (4000, 8000):
        for radius in (70.0, 100.0):
            bench_network(n, radius, args.routes)
    bench_tcbf()


if __name__ == "__main__":
    main()
