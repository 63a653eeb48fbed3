"""BRVST's ARV-level false-positive rate by alpha and comparator, and the cost of one test.

The reference check of docs/protocols/brvst.md (Li and Wang 2014, §V-C, Fig. 9(a):
"approximately bounded by 1 - alpha"): 15 attributes on the integer domain
[0, 100), 250 subscriptions (ranges) against 250 publications (points, or
ranges) per seed, 1-3 attributes per message, ranges as two sorted uniform
endpoints. Prints, per alpha and publication kind, the pooled FP rate of each
comparator with a 95 % Wilson interval, the false negatives (only the paper's
comparator has any), and the mean vector length. Then the time of one
attribute test per comparator against the exact predicate check of meshsub's
matcher on the same pairs (the baseline, measured in the same run), with the
machine's load beside it.

    .venv/bin/python bench/brvst_arv_fp.py [--seeds 40] [--alphas 0.8,0.9,0.95] [--quick]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import time
from fractions import Fraction

from meshsub.core.arv import Comparator, attr_matches, build, decimal
from meshsub.core.content import Event, Subscription
from meshsub.protocols.brvst.arvcheck import DOMAIN, Counts, draw, run

MODES = (Comparator.PAPER, Comparator.EXACT, Comparator.SAFE)


def wilson(hits: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 0.0)
    p = hits / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (centre - half, centre + half)


def fp_table(alphas: list[Fraction], seeds: int) -> None:
    print(f"FP = false ARV matches / ARV matches, {seeds} seeds of 250 x 250 pairs")
    print(f"{'alpha':>6} {'pubs':>6} {'comparator':>10} {'FP':>7} {'95% interval':>17} "
          f"{'matches':>8} {'false neg':>9} {'1-alpha':>7}")
    for alpha in alphas:
        for points in (True, False):
            total = {mode: Counts(0, 0, 0, 0) for mode in MODES}
            for seed in range(seeds):
                for mode, c in run(seed, alpha, points=points, comparators=MODES).items():
                    total[mode] = total[mode] + c
            for mode in MODES:
                c = total[mode]
                lo, hi = wilson(c.false_positives, c.arv_matches)
                print(f"{float(alpha):>6.2f} {'points' if points else 'ranges':>6} "
                      f"{mode.value:>10} {c.fp_rate:>7.4f} [{lo:.4f}, {hi:.4f}] "
                      f"{c.arv_matches:>8} {c.false_negatives:>9} {1 - float(alpha):>7.2f}")


def lengths(alphas: list[Fraction]) -> None:
    print("\nmean ARV length (bits), 10000 draws each")
    for alpha in alphas:
        rng = random.Random(7)
        ranges = [next(iter(draw(rng, False).values())) for _ in range(10000)]
        points = [next(iter(draw(rng, True).values())) for _ in range(10000)]
        r = sum(build(DOMAIN, lo, hi, alpha).size for lo, hi in ranges) / len(ranges)
        p = sum(build(DOMAIN, lo, hi, alpha).size for lo, hi in points) / len(points)
        print(f"  alpha {float(alpha):.2f}: ranges {r:.1f}, points {p:.1f}")


def timing(pairs: int) -> None:
    rng = random.Random(3)
    alpha = Fraction(9, 10)
    cases = []
    for _ in range(pairs):
        a, b = sorted((rng.randint(0, 99), rng.randint(0, 99)))
        c = rng.randint(0, 99)
        d = rng.randint(c, 99)
        s_iv, p_iv = (Fraction(a), Fraction(b + 1)), (Fraction(c), Fraction(d + 1))
        subscription = Subscription.from_wire(["t", ["x_lo", 5, a], ["x_hi", 3, b + 1]])
        event = Event("t", {"x_lo": c, "x_hi": d + 1})
        cases.append((build(DOMAIN, *p_iv, alpha), build(DOMAIN, *s_iv, alpha), p_iv,
                      subscription, event))
    load = os.getloadavg()
    print(f"\none attribute test, {pairs} pairs (load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f})")
    t0 = time.perf_counter()
    base_hits = sum(s.matches(e) for _p, _s, _iv, s, e in cases)
    base = (time.perf_counter() - t0) / pairs
    print(f"  {'exact predicates (baseline)':>28}: {base * 1e6:7.2f} us  ({base_hits} matches)")
    for mode in MODES:
        t0 = time.perf_counter()
        hits = sum(attr_matches(p, s, mode, p_exact=iv, domain=DOMAIN)
                   for p, s, iv, _s, _e in cases)
        took = (time.perf_counter() - t0) / pairs
        print(f"  {mode.value:>28}: {took * 1e6:7.2f} us  ({hits} matches, "
              f"{took / base:.2f} x baseline)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=40)
    ap.add_argument("--alphas", default="0.8,0.9,0.95")
    ap.add_argument("--quick", action="store_true", help="4 seeds, alpha 0.9 only")
    args = ap.parse_args()
    if args.seeds < 1:
        ap.error("--seeds must be at least 1")
    try:
        alphas = [decimal(a) for a in args.alphas.split(",")]
    except ValueError:
        ap.error(f"--alphas: not a list of numbers: {args.alphas!r}")
    if any(not 0 < a <= 1 for a in alphas):
        ap.error("--alphas must lie in (0, 1]")
    if args.quick:
        args.seeds, alphas = 4, [Fraction(9, 10)]
    fp_table(alphas, args.seeds)
    lengths(alphas)
    timing(20000 if not args.quick else 2000)


if __name__ == "__main__":
    main()
