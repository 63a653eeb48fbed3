"""Figures of the radio medium: set-up time and the time of one full update per tick.

Root only. Builds a container-less medium of N nodes (plain netns on the medium
bridge, run ``mb``: ``msub-mb-*``), installs the nftables medium, then moves the
nodes random-waypoint style (speeds 1-10 m/s, one tick per simulated second,
no pauses) and times ``Medium.update`` for every tick: the radio model over all
positions plus one ``nft -f`` transaction replacing the whole map. Prints the
median over the ticks, split into model and nft time, and the directed pairs.
Everything is removed at the end, also on failure.

    sudo .venv/bin/python bench/bench_medium.py [--nodes 200 500] [--ticks 20]
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "firmware-sim"))

from meshsim.medium import Medium  # noqa: E402
from meshsim.radio import (  # noqa: E402
    LinearRamp,
    LogDistance,
    RadioModel,
)
from meshsim.vmesh import testbed  # noqa: E402

RUN = "mb"
AREA_M = 1000.0


def waypoint_walk(nodes: list[int], rng: random.Random
                  ) -> Iterator[dict[int, tuple[float, float]]]:
    """Yield positions every simulated second: each node walks to a random target."""
    pos = {n: (rng.uniform(0, AREA_M), rng.uniform(0, AREA_M)) for n in nodes}
    goal = {n: (rng.uniform(0, AREA_M), rng.uniform(0, AREA_M)) for n in nodes}
    speed = {n: rng.uniform(1.0, 10.0) for n in nodes}
    while True:
        yield dict(pos)
        for n in nodes:
            (x, y), (gx, gy) = pos[n], goal[n]
            d = math.hypot(gx - x, gy - y)
            if d <= speed[n]:
                pos[n] = goal[n]
                goal[n] = (rng.uniform(0, AREA_M), rng.uniform(0, AREA_M))
                speed[n] = rng.uniform(1.0, 10.0)
            else:
                f = speed[n] / d
                pos[n] = (x + (gx - x) * f, y + (gy - y) * f)


def ms(values: list[float]) -> str:
    return (f"median {statistics.median(values) * 1e3:.1f} ms "
            f"(min {min(values) * 1e3:.1f}, max {max(values) * 1e3:.1f})")


def bench(n: int, models: list[tuple[str, RadioModel]], ticks: int, seed: int) -> None:
    t0 = time.perf_counter()
    plan = testbed.build(n, RUN)
    try:
        built = time.perf_counter() - t0
        medium = Medium(plan.medium_netns, testbed.ports(plan))
        t0 = time.perf_counter()
        medium.install()
        installed = time.perf_counter() - t0
        print(f"N={n}: {n} netns + veths on the bridge in {built:.2f} s; "
              f"table installed in {installed * 1e3:.1f} ms")
        for name, model in models:
            medium.model = model
            walk = waypoint_walk([nd.node_id for nd in plan.nodes], random.Random(seed))
            first = medium.update(next(walk))
            totals, computes, applies, pairs = [], [], [], []
            for _ in range(ticks):
                totals.append(medium.update(next(walk)))
                assert medium.last is not None
                computes.append(medium.last.compute_s)
                applies.append(medium.last.apply_s)
                pairs.append(medium.last.pairs)
            degree = statistics.mean(pairs) / n
            print(f"  {name} (range {model.range_m:.0f} m, mean degree {degree:.1f}): "
                  f"first load {first * 1e3:.1f} ms; directed pairs per tick "
                  f"{min(pairs)}-{max(pairs)} (mean {statistics.mean(pairs):.0f})")
            print(f"    update for {n} positions: {ms(totals)}")
            print(f"      radio model: {ms(computes)}; nft transaction: {ms(applies)}")
        medium.remove()
    finally:
        t0 = time.perf_counter()
        testbed.teardown(plan)
        print(f"  removed in {time.perf_counter() - t0:.2f} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[200, 500])
    ap.add_argument("--ticks", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_medium: needs root", file=sys.stderr)
        return 2
    print(f"load average before: {' '.join(f'{v:.2f}' for v in os.getloadavg())} "
          f"({os.cpu_count()} CPUs; other work on the machine inflates every figure)")
    for n in args.nodes:
        # ramp range for a mean degree of ~12 on 1 km^2 (LESSONS: 150 m at 200, 95 m at 500)
        ramp_r = math.sqrt(12 / (n - 1) * AREA_M**2 / math.pi)
        ld = LogDistance(path_loss_exp=3.8)  # a range of about the same size
        bench(n, [("linear_ramp", LinearRamp(ramp_r, 0.0, 0.75)),
                  ("log_distance n=3.8", ld),
                  ("log_distance defaults", LogDistance())], args.ticks, args.seed)
    print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
