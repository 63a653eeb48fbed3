"""HESPER-I/II, DF and flooding around voids: delivery and subscription cost per protocol.

Issue 21's set-up, on fields of our own: 1000 m x 1000 m, unit disk TR = 100 m, no loss,
no per-hop ACKs (the thesis's message counts), four publishers in the west strip, 40
subscribers in the east strip joining one after another (each subscribes to one
publisher's region, i.e. its cell), then three events per publisher: 120 expected
deliveries per run. The fields:

- ``uniform``: 800 random nodes (the reference: no void);
- ``hole``: the same density with a disc of radius 150 m in the middle left empty;
- ``ushape``: a concave deployment, the field less a 500 m x 750 m bay open to the
  north; publishers and subscribers at the tops of the two arms;
- ``river``: a river 150 m wide (wider than TR) from north to south with a single
  crossing, a bridge 60 m wide near the north edge.

Each seed draws its own connected placement, publishers and subscribers. Seed 1 of each
field is shipped as ``firmware-sim/meshsim/scenarios/voids-<field>.toml`` (written by
``--write-scenarios``; ``meshsim simulate`` runs them, ``--set protocol.name=df`` etc.).

Figures per field and protocol, mean over seeds with a 95 % confidence interval
(Student's t): delivery ratio, subscription transmissions (SUBSCRIBE/REPLY/CONFIRM;
DF: SUBSCRIBE/UNSUBSCRIBE; flooding: none), data transmissions per event. Verdicts are
computed from the figures, rule and tolerance printed beside each:

- delivery: every protocol delivers every expected event on every field and seed
  (rule: the smallest delivery ratio over the seeds is 1.0);
- void cost: a void costs HESPER about what it costs DF. HESPER's subscription cost
  relative to DF's on a void field is at most 1.25 x the same ratio on the uniform
  field (seeds paired by index); likewise for data transmissions per event.

Run it under the shared CPU lock (long computation):

    flock -s /tmp/msub-locks/cpu.lock nice .venv/bin/python bench/geo_voids.py [--quick] \
        [--jobs 2] [--page docs/results/hesper-voids.md]

With ``--page`` it also writes the figures as that results page.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "firmware-sim" / "meshsim" / "scenarios"
SIDE = 1000.0
TR = 100.0
PUBLISHERS = 4
SUBSCRIBERS = 40
EVENTS_PER_PUBLISHER = 3
SUB_INTERVAL = 0.5
PROTOCOLS: tuple[tuple[str, list[str]], ...] = (
    ("HESPER-I", ["protocol.name=hesper", 'protocol.hesper.variant="I"']),
    ("HESPER-II", ["protocol.name=hesper", 'protocol.hesper.variant="II"']),
    ("DF", ["protocol.name=df"]),
    ("flooding", ["protocol.name=flooding"]),
)
VOID_COST_TOLERANCE = 1.25
"""A void may raise HESPER's cost relative to DF's by at most this factor."""

Rect = tuple[float, float, float, float]


@dataclass(frozen=True)
class Field:
    """A deployment: where nodes may stand, and where publishers and subscribers are."""

    name: str
    nodes: int
    void: Callable[[float, float], bool]
    west: Rect
    """Publishers are drawn from the nodes in this rectangle (x0, y0, x1, y1)."""
    east: Rect
    """Subscribers are drawn from the nodes in this rectangle."""
    description: str


def _in(rect: Rect, x: float, y: float) -> bool:
    return rect[0] <= x <= rect[2] and rect[1] <= y <= rect[3]


FIELDS = {
    f.name: f for f in (
        Field("uniform", 800, lambda x, y: False, (20, 50, 150, 950), (850, 50, 980, 950),
              "800 random nodes, no void (the reference)"),
        Field("hole", 730, lambda x, y: math.hypot(x - 500, y - 500) < 150,
              (20, 50, 150, 950), (850, 50, 980, 950),
              "a disc of radius 150 m in the middle without nodes"),
        Field("ushape", 500, lambda x, y: 250 < x < 750 and y > 250,
              (20, 600, 200, 980), (800, 600, 980, 980),
              "a concave deployment: the field less a 500 m x 750 m bay open to the north"),
        Field("river", 680, lambda x, y: 425 < x < 575 and not 800 <= y <= 860,
              (20, 50, 150, 950), (850, 50, 980, 950),
              "a river 150 m wide from north to south, one bridge 60 m wide at y = 800..860"),
    )
}
"""Node counts keep the density of the uniform field (800 per km2) on the land left."""


# ------------------------------------------------------------------ scenarios


def _connected(pos: Sequence[tuple[float, float]]) -> bool:
    cell = TR
    grid: dict[tuple[int, int], list[int]] = {}
    for i, (x, y) in enumerate(pos):
        grid.setdefault((int(x // cell), int(y // cell)), []).append(i)
    seen = {0}
    todo = deque([0])
    while todo:
        i = todo.popleft()
        x, y = pos[i]
        cx, cy = int(x // cell), int(y // cell)
        for gx in (cx - 1, cx, cx + 1):
            for gy in (cy - 1, cy, cy + 1):
                for j in grid.get((gx, gy), ()):
                    if j not in seen and math.dist(pos[i], pos[j]) <= TR:
                        seen.add(j)
                        todo.append(j)
    return len(seen) == len(pos)


def scenario_text(field: Field, seed: int) -> str:
    """The scenario of ``field`` for ``seed``: placement, publishers and subscribers drawn
    from ``random.Random(f"voids:{field}:{seed}")`` (connected placements only)."""
    rng = random.Random(f"voids:{field.name}:{seed}")
    for _ in range(200):
        pos: list[tuple[float, float]] = []
        while len(pos) < field.nodes:
            x, y = round(rng.uniform(0, SIDE), 1), round(rng.uniform(0, SIDE), 1)
            if not field.void(x, y):
                pos.append((x, y))
        if _connected(pos):
            break
    else:
        raise RuntimeError(f"no connected placement of {field.name} for seed {seed}")
    s = TR / math.sqrt(2)
    west = [i for i, p in enumerate(pos) if _in(field.west, *p)]
    rng.shuffle(west)
    publishers: list[int] = []
    cells: list[tuple[int, int]] = []
    for i in west:
        c = (int(pos[i][0] // s), int(pos[i][1] // s))
        if c not in cells:
            publishers.append(i)
            cells.append(c)
        if len(publishers) == PUBLISHERS:
            break
    east = [i for i, p in enumerate(pos) if _in(field.east, *p)]
    subscribers = rng.sample(east, SUBSCRIBERS)
    t_pub = 1.0 + SUBSCRIBERS * SUB_INTERVAL + 10.0
    duration = t_pub + PUBLISHERS * EVENTS_PER_PUBLISHER + 10.0
    lines = [
        f"# HESPER around voids (issue 21): {field.description}.",
        f"# Generated by `python bench/geo_voids.py --write-scenarios` (field {field.name},"
        f" seed {seed});",
        "# bench/geo_voids.py runs every field over several seeds under HESPER-I/II, DF and",
        "# flooding. Publishers west, subscribers east; 120 expected deliveries.",
        "[scenario]",
        f'name = "voids-{field.name}"',
        f"seed = {seed}",
        f"duration_s = {duration}",
        "drain_s = 10.0",
        f'description = "HESPER around voids: {field.description}"',
        "",
        "[area]",
        f"width_m = {SIDE}",
        f"height_m = {SIDE}",
        "",
        "[radio]",
        'model = "unit_disk"',
        f"range_m = {TR}",
        "",
        "[protocol]",
        'name = "hesper"',
        "",
        "[protocol.hesper]",
        'variant = "II"',
        f"TR = {TR}",
        f"area_width_m = {SIDE}",
        f"area_height_m = {SIDE}",
        "beacon_s = 0.0              # static, loss-free: membership from the neighbour table",
        "reliable_control = false    # the thesis's message counts: no ACKs",
        "per_hop_rtt_s = 0.005       # 1 ms per simulated hop",
        "sub_refresh_s = 600.0",
        "lease_s = 1800.0",
        "",
        "[protocol.df]",
        f"TR = {TR}",
        f"area_width_m = {SIDE}",
        f"area_height_m = {SIDE}",
        "",
        "[protocol.flooding]",
        "ttl = 64                    # detours round a void are long",
        "",
        "[nodes]",
        'placement = "explicit"',
        "positions = [",
        *(f"  {{x = {x}, y = {y}}}," for x, y in pos),
        "]",
        "",
    ]
    for k, i in enumerate(subscribers):
        gx, gy = cells[k % PUBLISHERS]
        lines += ["[[workload.subscriptions]]", f"node = {i + 1}",
                  f'expr = "temp gx={gx} gy={gy}"', f"t = {1.0 + k * SUB_INTERVAL}", ""]
    t = t_pub
    for round_ in range(EVENTS_PER_PUBLISHER):
        for k, i in enumerate(publishers):
            gx, gy = cells[k]
            lines += ["[[workload.publications]]", f"t = {t}", f"node = {i + 1}",
                      f'event = "temp gx={gx} gy={gy} value={round_}"', ""]
            t += 1.0
    return "\n".join(lines)


def write_scenarios() -> None:
    for field in FIELDS.values():
        path = SCENARIOS / f"voids-{field.name}.toml"
        path.write_text(scenario_text(field, 1), encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")


# ------------------------------------------------------------------ one run


@dataclass(frozen=True)
class Run:
    field: str
    protocol: str
    seed: int
    expected: int
    delivered: int
    unexpected: int
    sub_tx: int
    data_tx: int
    events: int
    mean_hops: float
    wall_s: float
    budget_drops: int = 0
    """Messages dropped as ``ttl_expired`` (out of the end-to-end hop budget)."""

    @property
    def delivery(self) -> float:
        return self.delivered / self.expected if self.expected else math.nan

    @property
    def data_per_event(self) -> float:
        return self.data_tx / self.events if self.events else math.nan


def simulate(field: str, protocol: str, seed: int) -> Run:
    from meshsim.des.engine import Simulation
    from meshsim.des.summary import outcomes, totals
    from meshsim.scenario import loads_scenario
    from meshsim.scenario.plan import make_plan

    overrides = dict(PROTOCOLS)[protocol]
    scenario = loads_scenario(scenario_text(FIELDS[field], seed), overrides)
    started = time.perf_counter()
    plan = make_plan(scenario)
    sim = Simulation(scenario, None, plan=plan)
    stats = sim.run()
    events = outcomes(plan, stats)
    t = totals(events)
    hops = [e.mean_hops for e in events if e.mean_hops is not None]
    budget = sum(node.proto.drops.get("ttl_expired", 0) for node in sim.nodes.values())
    return Run(field, protocol, seed, t.expected, t.delivered, t.unexpected,
               stats.tx["subscription"], stats.tx["data"], len(events),
               statistics.fmean(hops) if hops else math.nan, time.perf_counter() - started,
               budget)


# ------------------------------------------------------------------ statistics


def t95(n: int) -> float:
    """Two-sided 95 % Student t quantile for n - 1 degrees of freedom."""
    table = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365,
             8: 2.306, 9: 2.262, 10: 2.228, 15: 2.131, 20: 2.086, 30: 2.042}
    df = n - 1
    if df <= 0:
        return math.nan
    return table[max(k for k in table if k <= df)]  # the next smaller df: conservative


def mean_ci(values: Sequence[float]) -> tuple[float, float]:
    """Mean and half-width of its 95 % confidence interval over the values that are
    numbers (a run that delivered nothing has no mean hop count); nan if none, a nan
    half-width with one."""
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return math.nan, math.nan
    m = statistics.fmean(values)
    if len(values) < 2:
        return m, math.nan
    return m, t95(len(values)) * statistics.stdev(values) / math.sqrt(len(values))


def fmt(values: Sequence[float], digits: int = 1) -> str:
    m, h = mean_ci(values)
    if math.isnan(m):
        return "n/a"
    if math.isnan(h):
        return f"{m:.{digits}f}"
    return f"{m:.{digits}f} ± {h:.{digits}f}"


# ------------------------------------------------------------------ report


def _budget_column(rs: Sequence[Run]) -> str:
    """Messages out of the hop budget over the seeds, and which seeds lost any."""
    total = sum(r.budget_drops for r in rs)
    seeds = [str(r.seed) for r in rs if r.budget_drops]
    return f"{total} ({', '.join(seeds)})" if seeds else "0"


def report(runs: list[Run], seeds: list[int], fields: list[str]) -> str:
    by = {(r.field, r.protocol, r.seed): r for r in runs}
    out = [f"seeds {seeds[0]}..{seeds[-1]} ({len(seeds)}); mean ± 95 % CI half-width",
           "",
           "| field | protocol | delivery ratio | subscription tx | data tx / event "
           "| mean hops | ttl_expired drops (seeds with any) |",
           "|---|---|---|---|---|---|---|"]
    for field in fields:
        for protocol, _ in PROTOCOLS:
            rs = [by[(field, protocol, s)] for s in seeds]
            out.append(f"| {field} | {protocol} | {fmt([r.delivery for r in rs], 3)} | "
                       f"{fmt([r.sub_tx for r in rs], 0)} | "
                       f"{fmt([r.data_per_event for r in rs], 1)} | "
                       f"{fmt([r.mean_hops for r in rs], 2)} | "
                       f"{_budget_column(rs)} |")
    out += ["", "Verdicts (computed from the figures above):", ""]
    out.append("| claim | field | protocol | figure | rule | verdict |")
    out.append("|---|---|---|---|---|---|")
    for field in fields:
        for protocol, _ in PROTOCOLS:
            worst = min(by[(field, protocol, s)].delivery for s in seeds)
            out.append(f"| delivers every expected event | {field} | {protocol} | "
                       f"min delivery {worst:.3f} | min over seeds = 1.0 | "
                       f"{'holds' if worst == 1.0 else 'fails'} |")
    for metric, label in (("sub_tx", "subscription tx"), ("data_per_event", "data tx/event")):
        for field in fields:
            if field == "uniform":
                continue
            for protocol in [p for p, _ in PROTOCOLS if p.startswith("HESPER")]:
                factors = []
                for s in seeds:
                    void = getattr(by[(field, protocol, s)], metric)
                    void_df = getattr(by[(field, "DF", s)], metric)
                    flat = getattr(by[("uniform", protocol, s)], metric)
                    flat_df = getattr(by[("uniform", "DF", s)], metric)
                    if void_df and flat_df and flat:
                        factors.append((void / void_df) / (flat / flat_df))
                if not factors:
                    out.append(f"| void costs HESPER what it costs DF ({label}) | {field} | "
                               f"{protocol} | n/a | - | n/a |")
                    continue
                m, h = mean_ci(factors)
                upper = m + (0.0 if math.isnan(h) else h)
                verdict = "holds" if upper <= VOID_COST_TOLERANCE else (
                    "fails" if m - (0.0 if math.isnan(h) else h) > VOID_COST_TOLERANCE
                    else "undecided")
                out.append(f"| void costs HESPER what it costs DF ({label}) | {field} | "
                           f"{protocol} | (HESPER/DF on {field}) / (HESPER/DF uniform) = "
                           f"{fmt(factors, 2)} | upper 95 % bound <= {VOID_COST_TOLERANCE} "
                           f"holds, lower > {VOID_COST_TOLERANCE} fails | {verdict} |")
    return "\n".join(out)


def page(table: str, footer: str, argv: Sequence[str]) -> str:
    """The results page: how the figures were made, then the figures and verdicts."""
    intro = __doc__.split("Run it under", 1)[0].strip()
    command = " ".join(["python bench/geo_voids.py", *argv])
    return "\n".join([
        "# HESPER around voids: delivery and subscription cost (generated)", "",
        f"Written by `{command}`; do not edit by hand. Section numbers are Zheng 2008's; "
        "the rules these figures judge are in docs/protocols/hesper.md "
        "(\"Cells without nodes\", \"Hop budget\").", "",
        intro, "", "## Figures", "", table, "", footer, ""])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds 1..N (default 5)")
    parser.add_argument("--quick", action="store_true", help="2 seeds")
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--fields", default=",".join(FIELDS))
    parser.add_argument("--page", type=Path, default=None,
                        help="also write the figures as a results page (e.g. "
                             "docs/results/hesper-voids.md)")
    parser.add_argument("--write-scenarios", action="store_true",
                        help="write seed 1 of every field into the scenarios folder, then stop")
    args = parser.parse_args()
    if args.write_scenarios:
        write_scenarios()
        return
    fields = [f for f in args.fields.split(",") if f]
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown or "uniform" not in fields:
        parser.error(f"--fields: unknown {unknown}" if unknown else
                     "--fields must include uniform (the reference of the verdicts)")
    seeds = list(range(1, (2 if args.quick else args.seeds) + 1))
    jobs = [(f, p, s) for f in fields for p, _ in PROTOCOLS for s in seeds]
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"load before: {load}", flush=True)
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        runs = list(pool.map(simulate, *zip(*jobs, strict=True)))
    for r in runs:
        print(f"  {r.field:8s} {r.protocol:9s} seed {r.seed}: delivered {r.delivered}/"
              f"{r.expected}, subscription tx {r.sub_tx}, data tx {r.data_tx}, "
              f"ttl_expired {r.budget_drops}, "
              f"{r.wall_s:.1f} s", file=sys.stderr)
    table = report(runs, seeds, fields)
    print(table)
    after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    footer = (f"{len(runs)} runs in {time.perf_counter() - started:.0f} s on "
              f"{os.cpu_count()} cores; load before: {load}; load after: {after}")
    print(f"\n{footer}")
    if args.page is not None:
        args.page.write_text(page(table, footer, sys.argv[1:]), encoding="utf-8")
        print(f"wrote {args.page}")


if __name__ == "__main__":
    main()
