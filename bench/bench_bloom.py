"""Bloom filter figures: add/query rate per hash scheme, FPR measured vs formula, sizes.

Run: ``.venv/bin/python bench/bench_bloom.py`` (about 10 s). Prints a table; not a test.
"""

from __future__ import annotations

import time

from meshsub.core.bloom import BloomFilter, HashScheme, approx_fpr, expected_fpr


def rate(fn: object, items: list[str]) -> float:
    start = time.perf_counter()
    for item in items:
        fn(item)  # type: ignore[operator]
    return len(items) / (time.perf_counter() - start)


def main() -> None:
    n, probes = 10_000, 100_000
    members = [f"sensors/temp/room{i}" for i in range(n)]
    others = [f"probe/{j}" for j in range(probes)]
    print(f"n = {n} keys, {probes} non-member probes, target p = 1%")
    print(f"{'scheme':<14} {'m':>7} {'k':>2} {'add/s':>10} {'query/s':>10} "
          f"{'FPR meas':>9} {'FPR exact':>9} {'FPR approx':>10} {'n est':>8} {'bytes':>6}")
    for scheme in HashScheme:
        bf = BloomFilter.for_capacity(n, 0.01, scheme)
        add_rate = rate(bf.add, members)
        hits = 0
        start = time.perf_counter()
        for key in others:
            hits += bf.query(key)
        query_rate = probes / (time.perf_counter() - start)
        print(f"{scheme.name:<14} {bf.m:>7} {bf.k:>2} {add_rate:>10.0f} {query_rate:>10.0f} "
              f"{hits / probes:>9.4f} {expected_fpr(bf.m, bf.k, n):>9.4f} "
              f"{approx_fpr(bf.m, bf.k, n):>10.4f} {bf.estimated_count():>8.0f} "
              f"{len(bf.to_bytes()):>6}")
    a = BloomFilter(2048, 7)
    b = BloomFilter(2048, 7)
    a.update(f"k{i}" for i in range(150))
    b.update(f"k{i}" for i in range(100, 250))
    start = time.perf_counter()
    for _ in range(10_000):
        a.union(b)
    print(f"union of two 2048-bit filters: {10_000 / (time.perf_counter() - start):.0f}/s; "
          f"intersection estimate {a.intersection_estimate(b):.1f} (true 50)")
    start = time.perf_counter()
    data = a.to_bytes()
    for _ in range(10_000):
        BloomFilter.from_bytes(data)
    print(f"from_bytes (2048 bits, {len(data)} bytes): "
          f"{10_000 / (time.perf_counter() - start):.0f}/s")


if __name__ == "__main__":
    main()
