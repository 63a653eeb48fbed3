"""HESPER-II's subscribing cost against DF's and HESPER-I's, message type by message type.

Issue 13 item 3: the thesis (Zheng 2008, §4.4.2, Fig. 4.11) puts HESPER-II at about 3 x
DF's subscribing messages below 80 subscribers at TR 70 m and 2 x at 20 subscribers at
TR 100 m (4000 nodes). This script runs the Table 4.1 set-ups of
``bench/hesper_experiments.py`` (scenario ``hesper-<size>.toml``, subscribers joining
0.5 s apart, three events) in the simulator and counts the subscription transmissions
of each run by message type: SUBSCRIBE, REPLY and CONFIRM (HESPER), SUBSCRIBE (DF). It
prints each point's mean over the seeds with a 95 % confidence interval, the ratios
HESPER-II / DF and HESPER-II / HESPER-I, and the single-subscriber model of Algorithm
4.2 (every broker branching) for comparison:

    flock -s /tmp/msub-locks/cpu.lock nice .venv/bin/python bench/geo_subscribing.py

``--sizes 4000-tr70,4000-tr100 --subscribers 20,80,200 --seeds 5`` are the defaults;
``--quick`` is one size, 20 subscribers, 3 seeds. It runs against whatever meshsub is
importable, so the same file measures an older checkout (``PYTHONPATH``) for a
before/after comparison; scenario files of either format (``[protocol.hesper]`` or the
older ``[protocol.params]``) are understood.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "firmware-sim" / "meshsim" / "scenarios"
INTERVAL = 0.5
PROTOCOLS = ("HESPER-I", "HESPER-II", "DF")
TYPE_NAMES = {"HESPER": {16: "SUBSCRIBE", 17: "REPLY", 18: "CONFIRM", 20: "UNSUBSCRIBE"},
              "DF": {16: "SUBSCRIBE", 18: "UNSUBSCRIBE"}}


def _overrides(size: str, label: str, subs: int, seed: int, table: str) -> list[str]:
    from meshsim.scenario import load_scenario

    base = load_scenario(SCENARIOS / f"hesper-{size}.toml")
    tr, w, h = base.radio.range_m, base.area.width_m, base.area.height_m
    t_pub = 1.0 + subs * INTERVAL + 5.0
    out = [f"workload.subscribers.count={subs}", f"scenario.seed={seed}",
           f"scenario.duration_s={t_pub + 15.0}"]
    out += [f"workload.publications[{i}].t={t_pub + 5.0 * i}" for i in range(3)]
    if label == "DF":
        df_table = "df" if table == "hesper" else "params"
        out += ["protocol.name=df",
                f"protocol.{df_table}={{TR={tr}, area_width_m={w}, area_height_m={h}}}"]
    else:
        out.append(f'protocol.{table}.variant="{label.split("-")[1]}"')
    return out


@dataclass(frozen=True)
class Point:
    size: str
    label: str
    subs: int
    seed: int
    types: dict[str, int]
    delivery: float
    wall_s: float

    @property
    def total(self) -> int:
        return sum(self.types.values())


def run_point(size: str, label: str, subs: int, seed: int) -> Point:
    """Simulate one point into a temporary RUNDIR and count its transmissions by type."""
    from meshsim.des.run import run_scenario
    from meshsim.des.summary import outcomes, totals
    from meshsim.scenario import ScenarioError, load_scenario

    path = SCENARIOS / f"hesper-{size}.toml"
    try:
        scenario = load_scenario(path, _overrides(size, label, subs, seed, "hesper"))
    except ScenarioError:  # a checkout from before per-protocol tables
        scenario = load_scenario(path, _overrides(size, label, subs, seed, "params"))
    tmp = Path(tempfile.mkdtemp(prefix="msub-geosub-"))
    try:
        started = time.perf_counter()
        result = run_scenario(scenario, tmp / "run")
        wall = time.perf_counter() - started
        names = TYPE_NAMES["DF" if label == "DF" else "HESPER"]
        by_type: Counter[str] = Counter()
        for node_file in (tmp / "run").glob("node-*.jsonl"):
            with node_file.open(encoding="utf-8") as fh:
                for line in fh:
                    if '"event":"tx"' in line and '"msg_kind":"subscription"' in line:
                        rec = json.loads(line)
                        by_type[names.get(int(rec["msg_type"]), str(rec["msg_type"]))] += 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    t = totals(outcomes(result.plan, result.stats))
    return Point(size, label, subs, seed, dict(by_type), t.delivery_ratio or 0.0, wall)


def region_model(cells: int) -> tuple[float, float, float]:
    """Single subscriber, publisher in cell (0,0), subscriber uniform over the other cells
    of a ``cells`` x ``cells`` grid: mean cell-to-cell SUBSCRIBE messages when every broker
    applies Algorithm 4.2 (the region between the two extreme shortest paths, each cell
    once: our per-subscription dedup), HESPER-I's path length, and their ratio."""

    def nxt(dx: int, dy: int) -> list[tuple[int, int]]:
        if dx == dy == 0:
            return []
        if dx == 0:
            return [(0, dy - 1)]
        if dy == 0:
            return [(dx - 1, 0)]
        diag = (dx - 1, dy - 1)
        if dx == dy:
            return [diag]
        axis = (dx - 1, dy) if dx > dy else (dx, dy - 1)
        return [axis, diag]

    edges = hops = n = 0
    for a in range(cells):
        for b in range(cells):
            if a == b == 0:
                continue
            seen, todo = {(a, b)}, [(a, b)]
            while todo:
                for c in nxt(*todo.pop()):
                    edges += 1
                    if c not in seen:
                        seen.add(c)
                        todo.append(c)
            hops += max(a, b)
            n += 1
    return edges / n, hops / n, edges / hops


def mean_ci(values: list[float]) -> tuple[float, float]:
    m = statistics.fmean(values)
    if len(values) < 2:
        return m, math.nan
    t = {2: 12.706, 3: 4.303, 4: 3.182, 5: 2.776, 6: 2.571, 7: 2.447, 8: 2.365,
         9: 2.306, 10: 2.262}.get(len(values), 2.262)  # beyond 10 values: df 9's t
    return m, t * statistics.stdev(values) / math.sqrt(len(values))


def fmt(values: list[float], digits: int = 0) -> str:
    m, h = mean_ci(values)
    return f"{m:.{digits}f}" if math.isnan(h) else f"{m:.{digits}f} ± {h:.{digits}f}"


def ratio(by: dict[tuple[str, str, int, int], Point], size: str, subs: int,
          seeds: list[int], a: str, b: str) -> str:
    """Per-seed ratio of the subscription transmissions of ``a`` to ``b``, mean and CI."""
    return fmt([by[(size, a, subs, s)].total / by[(size, b, subs, s)].total for s in seeds], 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4000-tr70,4000-tr100")
    parser.add_argument("--subscribers", default="20,80,200")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    sizes = ["4000-tr70"] if args.quick else args.sizes.split(",")
    counts = [20] if args.quick else [int(c) for c in args.subscribers.split(",")]
    seeds = list(range(1, (3 if args.quick else args.seeds) + 1))
    for size in sizes:
        if not (SCENARIOS / f"hesper-{size}.toml").exists():
            parser.error(f"--sizes: no scenario hesper-{size}.toml")
    import meshsub

    print(f"meshsub from {Path(meshsub.__file__).parent}")
    print("load before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())
    started = time.perf_counter()
    jobs = [(size, label, subs, seed) for size in sizes for subs in counts
            for label in PROTOCOLS for seed in seeds]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(run_point, *zip(*jobs, strict=True)))
    for r in results:
        print(f"  {r.size} {r.label:9s} {r.subs:4d} subs seed {r.seed}: {r.types} "
              f"delivery {r.delivery:.3f} ({r.wall_s:.0f} s)", file=sys.stderr)
    by = {(r.size, r.label, r.subs, r.seed): r for r in results}
    print(f"\nseeds {seeds[0]}..{seeds[-1]}; mean ± 95 % CI half-width\n")
    print("| size | subs | protocol | SUBSCRIBE | REPLY | CONFIRM | total | delivery (min) |")
    print("|---|---|---|---|---|---|---|---|")
    for size in sizes:
        for subs in counts:
            for label in PROTOCOLS:
                rs = [by[(size, label, subs, s)] for s in seeds]
                col = [fmt([float(r.types.get(t, 0)) for r in rs])
                       for t in ("SUBSCRIBE", "REPLY", "CONFIRM")]
                print(f"| {size} | {subs} | {label} | {' | '.join(col)} | "
                      f"{fmt([float(r.total) for r in rs])} | "
                      f"{min(r.delivery for r in rs):.3f} |")
    print("\n| size | subs | HESPER-II / DF | HESPER-II / HESPER-I | HESPER-I / DF |")
    print("|---|---|---|---|---|")
    for size in sizes:
        for subs in counts:
            row = [ratio(by, size, subs, seeds, a, b) for a, b in
                     (("HESPER-II", "DF"), ("HESPER-II", "HESPER-I"), ("HESPER-I", "DF"))]
            print(f"| {size} | {subs} | {' | '.join(row)} |")
    print("\nAlgorithm 4.2 at every broker, one subscriber, publisher in cell (0,0):")
    for cells, tr in ((21, 70), (15, 100)):
        edges, hops, factor = region_model(cells)
        print(f"  {cells} x {cells} cells (TR {tr} m): {edges:.1f} SUBSCRIBE cell messages vs "
              f"HESPER-I's {hops:.1f} cell hops: x{factor:.2f}; with one REPLY (and for "
              f"HESPER-II one CONFIRM) per subscription: x{(edges + 2 * hops) / (2 * hops):.2f}")
    print(f"\n{len(results)} runs in {time.perf_counter() - started:.0f} s; load after:",
          subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip())


if __name__ == "__main__":
    main()
