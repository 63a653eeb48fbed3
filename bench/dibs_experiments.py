"""DIBS vs DR (Pham and Tran 2012, §4) in the simulator; writes docs/results/dibs.md.

One command regenerates the page:

    .venv/bin/python bench/dibs_experiments.py --quick    # 200 x 80 m (~237 nodes), 3 seeds
    .venv/bin/python bench/dibs_experiments.py            # the paper's 1479 nodes, 5 seeds

The network is the paper's (§4): nodes uniform in the field at its density
(1479 per 500 m x 200 m), 20 m unit-disk range, the largest component; m
references chosen at random in it (m = 1, 5, 10), k = 64. The workload is the
paper's: queries of log-uniform size in 1 .. 2^64 at random subscribers, then
events with uniform keys at random publishers, as explicit subscriptions and
publications with hexadecimal keys (docs/protocols/dibs.md, "Keys"). DR runs on
the same networks and workloads (``dr_halfwidth`` 4 m, docs/protocols/dr.md).

Each query and each event gets its own time slot after the trees formed, and
the protocols' counters are read at every slot boundary, so the figures per
query and per event are measured, not derived:

- **storage** (Fig. 5): nodes storing a query at the end of the run;
- **subscription messages** (Fig. 6): SUBSCRIBE transmissions in the query's slot;
- **computation** (Fig. 7a): stored queries checked in the event's slot;
- **publication messages** (Fig. 7b): PUBLISH transmissions in the event's slot;
- **stretch** (Fig. 8), the ratio to the optimum path: a delivery's hops
  (publisher to designated node to subscriber) over the BFS hop distance
  between publisher and subscriber;
- **completeness**: delivered matching (event, query) pairs over all.

- **repair cost** (Fig. 9b): 1 % of the nodes (not references) crash at once
  after the events; 60 s later, the alive nodes whose VA or cluster changed,
  per failed node (the paper: "the number of nodes that must update state").

Recall under failures (Fig. 9a) is not measured by this script yet (n/a on
the page). Each figure is the mean over seeds with a 95 %
confidence interval (Student t); each verdict is computed from the figures with
its rule and tolerance printed on the page.
"""

from __future__ import annotations

import argparse
import bisect
import math
import random
import statistics
import subprocess
import sys
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meshsim.des.engine import Simulation
from meshsim.scenario.load import from_dict
from meshsub.protocols.dibs.keys import format_key

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "results" / "dibs.md"
DENSITY = 1479 / (500.0 * 200.0)
RANGE = 20.0
K = 64
SLOT = 0.5
"""Seconds per query or event: far longer than a query's or an event's spread."""
FAIL_FRACTION = 0.01
"""Nodes crashed at once after the events (§4.4's p = 1 %)."""
REPAIR_S = 60.0
"""Virtual seconds after the crash before the VAs are compared (12 heartbeat periods)."""
T95 = {1: 12.71, 2: 4.30, 3: 3.18, 4: 2.78, 5: 2.57, 6: 2.45, 7: 2.36, 8: 2.31, 9: 2.26}


@dataclass
class Preset:
    width: float
    height: float
    seeds: int
    queries: int
    events: int
    ms: tuple[int, ...] = (1, 5, 10)


PRESETS = {
    "quick": Preset(200.0, 80.0, 3, 50, 30),
    "full": Preset(500.0, 200.0, 5, 300, 100),
}


@dataclass
class Run:
    scheme: str
    seed: int
    replicas: list[int] = field(default_factory=list)
    sub_msgs: list[int] = field(default_factory=list)
    pub_msgs: list[int] = field(default_factory=list)
    checks: list[int] = field(default_factory=list)
    stretch: list[float] = field(default_factory=list)
    expected: int = 0
    delivered: int = 0
    failed: int = 0
    repaired: int = 0
    """Alive nodes whose (VA, cluster) changed after the crash (§4.4's repair cost)."""
    nodes: int = 0
    wall_s: float = 0.0


def largest_component(pos: dict[int, tuple[float, float]]) -> list[int]:
    adj = neighbours(pos)
    seen: set[int] = set()
    best: list[int] = []
    for start in pos:
        if start in seen:
            continue
        comp, todo = [start], deque([start])
        seen.add(start)
        while todo:
            a = todo.popleft()
            for b in adj[a]:
                if b not in seen:
                    seen.add(b)
                    comp.append(b)
                    todo.append(b)
        if len(comp) > len(best):
            best = comp
    return sorted(best)


def neighbours(pos: dict[int, tuple[float, float]]) -> dict[int, list[int]]:
    cells: dict[tuple[int, int], list[int]] = {}
    for n, (x, y) in pos.items():
        cells.setdefault((int(x // RANGE), int(y // RANGE)), []).append(n)
    adj: dict[int, list[int]] = {n: [] for n in pos}
    for n, (x, y) in pos.items():
        cx, cy = int(x // RANGE), int(y // RANGE)
        for dx in (-1, 0, 1):
            for dy in (-1, 0, 1):
                for o in cells.get((cx + dx, cy + dy), ()):
                    if o != n and (pos[o][0] - x) ** 2 + (pos[o][1] - y) ** 2 <= RANGE ** 2:
                        adj[n].append(o)
    return adj


def bfs(adj: dict[int, list[int]], src: int) -> dict[int, int]:
    dist = {src: 0}
    todo = deque([src])
    while todo:
        a = todo.popleft()
        for b in adj[a]:
            if b not in dist:
                dist[b] = dist[a] + 1
                todo.append(b)
    return dist


def workload(rng: random.Random, nodes: list[int], preset: Preset, t0: float) -> tuple[
        list[dict[str, Any]], list[dict[str, Any]], list[tuple[int, int]], list[int]]:
    subs, pubs, intervals, keys = [], [], [], []
    for i in range(preset.queries):
        size = min(1 << K, max(1, round(2 ** rng.uniform(0, K))))
        lo = rng.randrange(0, (1 << K) - size + 1)
        hi = lo + size - 1
        intervals.append((lo, hi))
        subs.append({"node": rng.choice(nodes), "id": f"q{i}", "t": t0 + i * SLOT + 0.05,
                     "expr": f'dibs key>="{format_key(lo, K)}" key<="{format_key(hi, K)}"'})
    te = t0 + preset.queries * SLOT
    for j in range(preset.events):
        key = rng.randrange(0, 1 << K)
        keys.append(key)
        pubs.append({"t": te + j * SLOT + 0.05, "node": rng.choice(nodes),
                     "event": f'dibs key="{format_key(key, K)}"'})
    return subs, pubs, intervals, keys


def run_one(scheme: str, m: int, seed: int, preset: Preset) -> Run:
    rng = random.Random(f"dibs-bench:{seed}")
    n_all = round(DENSITY * preset.width * preset.height)
    pos = {i + 1: (rng.uniform(0, preset.width), rng.uniform(0, preset.height))
           for i in range(n_all)}
    comp = largest_component(pos)
    wrng = random.Random(f"dibs-bench:{seed}:refs")
    refs = set(wrng.sample(comp, m))
    t0 = 30.0
    subs, pubs, intervals, keys = workload(random.Random(f"dibs-bench:{seed}:work"), comp,
                                           preset, t0)
    t_fail = t0 + (preset.queries + preset.events) * SLOT + 5.0
    end = t_fail + REPAIR_S
    victims = sorted(wrng.sample([n for n in comp if n not in refs],
                                 max(1, round(FAIL_FRACTION * len(comp)))))
    groups = [{"name": "sensors", "placement": "explicit",
               "positions": [{"id": n, "x": pos[n][0], "y": pos[n][1]}
                             for n in comp if n not in refs]},
              {"name": "references", "placement": "explicit", "role": "reference",
               "positions": [{"id": n, "x": pos[n][0], "y": pos[n][1]} for n in sorted(refs)]}]
    doc: dict[str, Any] = {
        "scenario": {"name": f"dibs-{scheme}", "seed": seed, "duration_s": end,
                     "drain_s": 2.0, "warmup_s": t0},  # a static network: slow heartbeats
        "area": {"width_m": preset.width, "height_m": preset.height},
        "radio": {"model": "unit_disk", "range_m": RANGE, "loss": 0.0, "delay_s": 0.002},
        "nodes": {"groups": groups},
        "protocol": {"name": "dr" if scheme == "dr" else "dibs",
                     "dibs": {"k": K, "hb_period": 5.0, "lease_s": 3600.0},
                     "dr": {"k": K, "dr_halfwidth": 4.0, "lease_s": 3600.0}},
        "workload": {"subscriptions": subs, "publications": pubs},
        "faults": [{"t": t_fail, "action": "crash", "nodes": victims}],
    }
    sim = Simulation(from_dict(doc), None)
    run = Run(scheme, seed, nodes=len(comp))
    snaps: list[tuple[float, dict[str, int]]] = []
    before: dict[int, tuple[Any, Any]] = {}

    def snapshot(now: float) -> None:
        if not before and now >= t_fail - SLOT / 2:
            before.update({n: (getattr(node.proto, "va", None), getattr(node.proto, "cl", None))
                           for n, node in sim.nodes.items()})
        total: dict[str, int] = {}
        for node in sim.nodes.values():
            for name, value in node.proto.stats.items():  # type: ignore[attr-defined]
                total[name] = total.get(name, 0) + value
        snaps.append((now, total))

    steps = round(end / SLOT)
    started = time.perf_counter()
    sim.run(snapshot, steps=steps)
    run.wall_s = time.perf_counter() - started
    times = [t for t, _ in snaps]

    def at(t: float) -> dict[str, int]:
        """The counters at the last snapshot at or before ``t``."""
        i = bisect.bisect_right(times, t + 1e-6) - 1
        return snaps[i][1] if i >= 0 else {}

    def delta(name: str, slot_start: float) -> int:
        return at(slot_start + SLOT).get(name, 0) - at(slot_start).get(name, 0)

    for i, s in enumerate(subs):
        start = t0 + i * SLOT
        run.sub_msgs.append(delta("subscribe_tx", start))
        qid = (s["node"], s["id"])
        run.replicas.append(sum(1 for node in sim.nodes.values()
                                if qid in node.proto.store))  # type: ignore[attr-defined]
    te = t0 + preset.queries * SLOT
    for j in range(len(pubs)):
        start = te + j * SLOT
        run.pub_msgs.append(delta("publish_tx", start))
        run.checks.append(delta("evaluations", start))
    adj = neighbours({n: pos[n] for n in comp})
    pub_of = {p.event_id: p for p in sim.stats.published}
    ev_index = {p.event_id: i for i, p in enumerate(sorted(sim.stats.published,
                                                           key=lambda p: p.t))}
    wanted = set()
    for eid, j in ev_index.items():
        for i, (lo, hi) in enumerate(intervals):
            if lo <= keys[j] <= hi:
                wanted.add((eid, subs[i]["node"], subs[i]["id"]))
    run.expected = len(wanted)
    dists: dict[int, dict[int, int]] = {}
    seen = set()
    for d in sim.stats.deliveries:
        key = (d.event_id, d.node, d.sub_id)
        if key not in wanted or key in seen:
            continue
        seen.add(key)
        src = pub_of[d.event_id].node
        if src not in dists:
            dists[src] = bfs(adj, src)
        best = dists[src].get(d.node, 0)
        if best > 0:
            run.stretch.append(d.hop / best)
    run.delivered = len(seen)
    if scheme != "dr":
        run.failed = len(victims)
        run.repaired = sum(1 for n, node in sim.nodes.items() if n not in victims
                           and (node.proto.va, node.proto.cl) != before.get(n))  # type: ignore[attr-defined]
    return run


def mean_ci(values: list[float]) -> tuple[float, float]:
    values = [x for x in values if not math.isnan(x)]
    if not values:
        return math.nan, math.nan
    mu = statistics.fmean(values)
    if len(values) < 2:
        return mu, math.nan
    return mu, T95.get(len(values) - 1, 1.96) * statistics.stdev(values) / math.sqrt(len(values))


def share(values: list[float], pred: Any) -> float:
    return sum(1 for v in values if pred(v)) / len(values) if values else math.nan


def fmt(mu: float, ci: float, pct: bool = False) -> str:
    if math.isnan(mu):
        return "n/a"
    if pct:
        return f"{100 * mu:.1f} % ± {100 * ci:.1f}" if not math.isnan(ci) else f"{100 * mu:.1f} %"
    return f"{mu:.2f} ± {ci:.2f}" if not math.isnan(ci) else f"{mu:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the reduced network (~237 nodes)")
    parser.add_argument("--out", type=Path, default=PAGE)
    args = parser.parse_args(argv)
    preset = PRESETS["quick" if args.quick else "full"]
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    schemes = [f"dibs-m{m}" for m in preset.ms] + ["dr"]
    runs: dict[str, list[Run]] = {s: [] for s in schemes}
    for seed in range(1, preset.seeds + 1):
        for scheme in schemes:
            m = int(scheme.split("m")[-1]) if scheme != "dr" else 1
            r = run_one("dr" if scheme == "dr" else "dibs", m, seed, preset)
            runs[scheme].append(r)
            print(f"{scheme} seed {seed}: {r.nodes} nodes, {r.wall_s:.1f} s, "
                  f"delivered {r.delivered}/{r.expected}", file=sys.stderr, flush=True)

    def fig(scheme: str, f: Any) -> tuple[float, float]:
        return mean_ci([f(r) for r in runs[scheme]])

    rows = {
        "replicas <= 2": lambda r: share(r.replicas, lambda v: v <= 2),
        "replicas > 18": lambda r: share(r.replicas, lambda v: v > 18),
        "mean replicas": lambda r: statistics.fmean(r.replicas),
        "subscription msgs < 12": lambda r: share(r.sub_msgs, lambda v: v < 12),
        "subscription msgs > 18": lambda r: share(r.sub_msgs, lambda v: v > 18),
        "mean subscription msgs": lambda r: statistics.fmean(r.sub_msgs),
        "mean publication msgs": lambda r: statistics.fmean(r.pub_msgs),
        "mean queries checked per event": lambda r: statistics.fmean(r.checks),
        "mean stretch (ratio to the optimum path)": lambda r: statistics.fmean(r.stretch)
        if r.stretch else math.nan,
        "stretch < 2": lambda r: share(r.stretch, lambda v: v < 2),
        "completeness": lambda r: r.delivered / r.expected if r.expected else math.nan,
        "repair cost (nodes per failure, p = 1 %)": lambda r: r.repaired / r.failed
        if r.failed else math.nan,
    }
    pct = {"replicas <= 2", "replicas > 18", "subscription msgs < 12",
           "subscription msgs > 18", "stretch < 2", "completeness"}
    table = {(name, s): fig(s, f) for name, f in rows.items() for s in schemes}
    lines = [
        "# DIBS vs DR: Pham and Tran (2012), §4, in the simulator",
        "",
        "Generated by `bench/dibs_experiments.py" + (" --quick`" if args.quick else "`")
        + f" ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}).",
        f"Load while it ran: `{load}` (the figures here are counts, not times).",
        "",
        f"Network: nodes uniform at the paper's density in {preset.width:.0f} m x "
        f"{preset.height:.0f} m, 20 m range, largest component "
        f"({', '.join(str(r.nodes) for r in runs[schemes[0]])} nodes by seed); k = 64; "
        f"{preset.queries} queries of log-uniform size, {preset.events} events with uniform "
        f"keys; seeds 1..{preset.seeds}. "
        + ("The paper's network is 1479 nodes in 500 m x 200 m (run without `--quick`); "
           "on 16 % of the area clusters and paths are smaller, so the absolute "
           "figures are not the paper's. " if args.quick else "")
        + "Each figure: mean over seeds ± the 95 % confidence interval (Student t).",
        "",
        "| figure | " + " | ".join(schemes) + " |",
        "|---|" + "---|" * len(schemes),
    ]
    for name in rows:
        lines.append(f"| {name} | " + " | ".join(
            fmt(*table[(name, s)], pct=name in pct) for s in schemes) + " |")

    verdicts: list[tuple[str, str, str, str]] = []

    def verdict(claim: str, rule: str, ok: bool | None, figures: str) -> None:
        verdicts.append((claim, rule, figures,
                         "n/a" if ok is None else ("holds" if ok else "does not hold")))

    def v(name: str, s: str) -> float:
        return table[(name, s)][0]

    dibs_ms = [s for s in schemes if s != "dr"]
    verdict("> 90 % of DIBS queries stored on <= 2 nodes (§4.1, Fig. 5a)",
            "share(replicas <= 2) > 0.90 for every m, tolerance 0",
            all(v("replicas <= 2", s) > 0.9 for s in dibs_ms),
            ", ".join(f"{s}: {100 * v('replicas <= 2', s):.1f} %" for s in dibs_ms))
    band = DENSITY * preset.height * 2 * 4.0  # nodes expected in a 4 m-half-width vertical band
    verdict("> 90 % of DR queries stored on > 18 nodes (§4.1, Fig. 5a)",
            "share(replicas > 18) > 0.90, tolerance 0; n/a when a vertical band holds "
            "fewer than 18 nodes on average (density x height x 2 w)",
            None if band < 18 else v("replicas > 18", "dr") > 0.9,
            f"dr: {100 * v('replicas > 18', 'dr'):.1f} % (a band holds {band:.1f} nodes)")
    verdict("DIBS queries need < 12 messages at m = 5 and 10 (§4.1, Fig. 6)",
            "share(subscription msgs < 12) >= 0.90 at m = 5 and m = 10, tolerance 0",
            all(v("subscription msgs < 12", s) >= 0.9 for s in ("dibs-m5", "dibs-m10")),
            ", ".join(f"{s}: {100 * v('subscription msgs < 12', s):.1f} %"
                      for s in ("dibs-m5", "dibs-m10")))
    ratio = min(v("mean queries checked per event", "dr")
                / max(v("mean queries checked per event", s), 1e-9) for s in dibs_ms)
    verdict("DIBS checks at least 8x fewer queries per event than DR (§4.2, Fig. 7a)",
            "min over m of mean(DR checks) / mean(DIBS checks) >= 8, tolerance 0 (DR's "
            "checks grow with the field's width: the paper's is 500 m)",
            ratio >= 8, f"smallest ratio {ratio:.1f} (field {preset.width:.0f} m wide)")
    p1, p5, p10 = (v("mean publication msgs", s) for s in dibs_ms)
    per_ref = [p1 / 1, p5 / 5, p10 / 10]
    lin = max(per_ref) / min(per_ref)
    verdict("DIBS publication messages grow linearly in m (§4.2, Fig. 7b)",
            "max/min of (mean publication msgs / m) over m <= 1.5",
            lin <= 1.5, "per copy: " + ", ".join(f"{x:.1f}" for x in per_ref)
            + f" (max/min {lin:.2f})")
    drp = v("mean publication msgs", "dr")
    verdict("DR publishes with more messages than DIBS m = 1, fewer than m = 5 (§4.2)",
            "mean(DIBS m1) < mean(DR) < mean(DIBS m5), tolerance 0",
            p1 < drp < p5, f"m1 {p1:.1f}, DR {drp:.1f}, m5 {p5:.1f}")
    for s, target, share_target in (("dibs-m1", 2.5, 0.6), ("dibs-m5", 1.9, 0.8),
                                    ("dibs-m10", 1.8, 0.8)):
        mu = v("mean stretch (ratio to the optimum path)", s)
        verdict(f"{s}: mean stretch {target} (§4.3, Fig. 8)",
                f"|mean - {target}| <= 0.5", abs(mu - target) <= 0.5, f"{mu:.2f}")
        sh = v("stretch < 2", s)
        verdict(f"{s}: {100 * share_target:.0f} % of paths with stretch < 2 (§4.3)",
                f"|share - {share_target}| <= 0.15", abs(sh - share_target) <= 0.15,
                f"{100 * sh:.1f} %")
    mu = v("mean stretch (ratio to the optimum path)", "dr")
    verdict("DR mean stretch 1.3 (§4.3)", "|mean - 1.3| <= 0.3", abs(mu - 1.3) <= 0.3,
            f"{mu:.2f}")
    verdict("DIBS delivers every matching pair in a stable network (§3.2)",
            "completeness = 1 for every m", all(v("completeness", s) == 1.0 for s in dibs_ms),
            ", ".join(f"{s}: {100 * v('completeness', s):.1f} %" for s in dibs_ms))
    rc1 = v("repair cost (nodes per failure, p = 1 %)", "dibs-m1")
    rc5 = v("repair cost (nodes per failure, p = 1 %)", "dibs-m5")
    rc10 = v("repair cost (nodes per failure, p = 1 %)", "dibs-m10")
    verdict("repair cost per failure falls as m grows: 13.5 (m = 1) to 6.7 (m = 5) at p = 1 % "
            "(§4.4, Fig. 9b)", "mean(m1) > mean(m5) >= mean(m10) (the trend; the absolute "
            "values depend on the network's size)", rc1 > rc5 >= rc10,
            f"m1 {rc1:.2f}, m5 {rc5:.2f}, m10 {rc10:.2f}")
    verdict("recall at 10 % failures 60 / 81 / 90 % for m = 1 / 5 / 10 (§4.4, Fig. 9a)",
            "not measured by this script yet", None, "n/a")
    lines += ["", "## Verdicts", "", "| claim | rule and tolerance | figures | verdict |",
              "|---|---|---|---|"]
    lines += [f"| {c} | {r} | {f} | {o} |" for c, r, f, o in verdicts]
    lines += ["", "Notes: stretch is the ratio of a delivery's hops to the shortest path "
              "between publisher and subscriber (the optimum); the notification leg is CRES "
              "routing (docs/protocols/dibs.md, deviation 8). The implementation "
              "specification's own re-simulation got a mean stretch of 3.9 at m = 1 where the "
              "paper states 2.5; see the table for what this implementation gets. DR's figures "
              "depend on its band width (docs/protocols/dr.md).", ""]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
