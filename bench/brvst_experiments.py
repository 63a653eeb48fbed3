"""BRVST's evaluation (Li and Wang 2014, §V) in the simulator; writes docs/results/brvst.md.

The points are a sweep plan, ``experiments/brvst.sweep.toml`` (the paper's set-up and its
sweeps of alpha, speed, grid count and load, 5 seeds, flooding as the reference; 180 s
runs with a 60 s warm-up that start with the subscriptions' steady-state population,
``[workload.arrivals] steady_state``, so the runs measure the paper's ~1000 active
subscriptions without first living a whole 300 s lifetime: about 4 CPU-hours by the plan's
cost rule), run by the sweep machinery (``meshsim.sweep``: one RUNDIR per point under
``--out-runs``, a point that finished with the same input is kept, so the same command
resumes a stopped plan). One command regenerates the page; its figures are counts and CPU
time, so it runs at the lowest priority:

    nice -n 19 .venv/bin/python bench/brvst_experiments.py --jobs 1
    nice -n 19 .venv/bin/python bench/brvst_experiments.py --quick

``--quick`` is the reduced plan of the same file: the default block (BRVST and flooding)
only, 2 seeds, 120 s runs with a 60 s warm-up (``--seeds``/``--only`` narrow either plan).
The figures are computed here from each RUNDIR's telemetry and mobility log and kept
beside it (``brvst-figures.json``); the bulky telemetry is then deleted (``--keep``
keeps it).

BRVST runs with ``gm_check = "arv"``, the paper's grid-manager test (§IV-C): an event
whose ARVs match a subscription's goes to its subscriber, which drops it as a counted
``false_positive`` if the subscription does not match exactly. Deliveries are therefore
exact, and the same run gives the event-level false-positive rate of Fig. 9(a).

Figures per run (publications from the warm-up on; a pair is (event, subscription)):

- delivery ratio: delivered pairs / pairs whose subscription was active at the
  publish time and matches exactly; ``connected``: only pairs whose subscriber was in
  the publisher's radio component at that time (positions from mobility.log);
- matching time (Fig. 7): delivery time - publish time of the delivered pairs;
- false-positive rate (Fig. 9(a)): (event, subscriber node) pairs with a false_positive
  drop / (delivered pairs + those pairs); a pair counts once however many copies reached
  the node (a new grid manager gets the zone's cache again, ``replay_to_successor``, and
  its DELIVERs repeat the false positives its predecessor sent; counting every drop
  counted each copy, while a delivered pair counts once);
- traffic: transmissions (every hop, ACKs included) per second and per delivered pair;
- broker storage (Figs. 7(b), 8-i(b)): (a) measured: the bytes of the summary stores
  (gm_subscriptions, gm_summaries, zm_sof, zm_summaries, zm_zone_table) in the
  protocol's state records of nodes holding a role, per grid or zone manager; (b) the
  storage model of ``meshsub.protocols.brvst.tama`` on a snapshot of the active
  subscriptions at each state report: BRVST's encoded forests against TAMA's
  tables on the same overlay (``--tama-levels``), the basis of the 60 % verdict;
- ratio to the optimum: the event's data transmissions over the fewest broadcasts that
  could have delivered it to its interested nodes on the radio graph at its publish
  time (mesheval's optimum, ``mesheval.optimum``: an interval when not solved exactly);
- cost: the simulation's CPU seconds, its CPU per simulated second after the warm-up
  (``CpuMeter``) and the analysis's CPU seconds, the basis of the plan's length.

Flooding (the project's ``flooding``) is the traffic and matching-time reference; DRIP
cannot be built from what its and BRVST's papers say (docs/protocols/brvst.md, "Peers").
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PLAN = ROOT / "experiments" / "brvst.sweep.toml"
QUICK_BLOCKS = ("default",)
QUICK_SEEDS = 2
QUICK_DURATION_S = 120.0
QUICK_WARMUP_S = 60.0
SHORT_STATE_EVERY_S = 10.0
FIGURES = "brvst-figures.json"
KEEP_FILES = ("manifest.json", "sweep-point.json", FIGURES)
REPORT = ROOT / "docs" / "results" / "brvst.md"
RECORD_EVENTS = ("tx", "drop", "subscribe", "unsubscribe", "publish", "deliver", "state")
"""The records ``analyse`` reads (a run is mostly ``rx`` records, which it does not)."""
SUMMARY_STORES = ("gm_subscriptions", "gm_summaries", "zm_sof", "zm_summaries",
                  "zm_zone_table")
"""What a broker keeps to match (the paper's storage; caches and id sets are left out,
since TAMA's figure has neither)."""


# ------------------------------------------------------------------ points


@dataclass(frozen=True)
class Point:
    """One run of the plan: a configuration of a sweep block and a seed."""

    sweep: str
    proto: str = "brvst"
    alpha: float = 0.9
    speed: float = 5.0
    grid_m: float = 250.0
    rate_per_min: float = 200.0
    seed: int = 1
    duration_s: float = 180.0
    warmup_s: float = 60.0
    run_id: str = ""

    @property
    def config(self) -> str:
        return (f"{self.proto} alpha={self.alpha:g} speed={self.speed:g} grid={self.grid_m:g} "
                f"rate={self.rate_per_min:g}")

    @classmethod
    def of(cls, sweep_point: Any, manifest: dict[str, Any]) -> Point:
        """The bench's view of a sweep point (its axis values) and of its run's manifest."""
        v = sweep_point.values
        return cls(sweep_point.block, str(v["protocol"]), float(v["alpha"]), float(v["speed"]),
                   float(v["grid_m"]), float(v["rate"]), sweep_point.seed,
                   float(manifest["duration_s"]), float(manifest["warmup_s"]), sweep_point.id)


def plan(path: Path, quick: bool, seeds: int, only: list[str],
         length: tuple[float, float] | None = None) -> tuple[Any, list[Any]]:
    """The sweep spec and the points to run: the whole plan, or its reduced form;
    ``length`` (duration, warm-up) shortens every run of the chosen points."""
    from dataclasses import replace

    from meshsim.sweep.points import expand
    from meshsim.sweep.runner import first_seeds
    from meshsim.sweep.spec import load_sweep

    spec = load_sweep(path)
    todo = expand(spec)
    if quick:
        short = (f"scenario.duration_s={QUICK_DURATION_S}",
                 f"scenario.warmup_s={QUICK_WARMUP_S}")
        todo = [replace(p, overrides=p.overrides + short) for p in todo
                if p.block in QUICK_BLOCKS]
        seeds = seeds or QUICK_SEEDS
    if length is not None:  # state reports every 10 s: a short run needs several snapshots
        short = (f"scenario.duration_s={length[0]}", f"scenario.warmup_s={length[1]}",
                 f"scenario.state_every_s={SHORT_STATE_EVERY_S}")
        todo = [replace(p, overrides=p.overrides + short) for p in todo]
    if seeds:
        todo = first_seeds(spec, todo, seeds)
    if only:
        todo = [p for p in todo if any(o in p.id for o in only)]
    # Seed by seed: a plan stopped early has every configuration at its first seeds.
    return spec, sorted(todo, key=lambda p: p.seed)


def finished_figures(spec: Any, sweep_point: Any, out: Path) -> RunFigures | None:
    """The figures of a point that finished with this input, or None (not run yet)."""
    from meshsim.sweep.point import input_digest, resolve, rundir_of

    cached = rundir_of(out, sweep_point) / FIGURES
    try:
        data = json.loads(cached.read_text())
    except (OSError, ValueError):
        return None
    scenario, _derived = resolve(spec, sweep_point)
    if data.get("digest") != input_digest(scenario, sweep_point):
        return None
    return RunFigures(**data["figures"])


# ------------------------------------------------------------------ one run


@dataclass
class RunFigures:
    point: dict[str, Any]
    wall_s: float
    pubs: int = 0
    expected: int = 0
    delivered: int = 0
    expected_connected: int = 0
    delivered_connected: int = 0
    cache_deliveries: int = 0
    duplicates: int = 0
    latency_mean_s: float | None = None
    latency_p95_s: float | None = None
    false_positives: int = 0
    tx: int = 0
    tx_bytes: int = 0
    tx_by_type: dict[str, int] = field(default_factory=dict)
    measured_s: float = 0.0
    drops: dict[str, int] = field(default_factory=dict)
    gm_bytes_mean: float | None = None
    zm_bytes_mean: float | None = None
    broker_bytes_mean: float | None = None
    node_bytes_mean: float | None = None
    model_brvst_mean: float | None = None
    model_tama_mean: float | None = None
    active_subs_mean: float | None = None
    optimum_ratio: float | None = None
    optimum_ratio_high: float | None = None
    opt_events: int = 0
    sim_cpu_s: float | None = None
    """CPU seconds of the simulation (this process's, niced or not: CPU, not wall)."""
    steady_cpu_per_sim_s: float | None = None
    """CPU seconds per simulated second from the warm-up's end to the run's end."""
    analysis_cpu_s: float | None = None
    """CPU seconds of ``analyse`` (the figures, the optimum included)."""
    steady_state_window_s: float | None = None
    """The run started with the subscriptions' steady-state population, issued over
    this many seconds (``[workload.arrivals] steady_state``); None: it started empty."""

    @property
    def fp_rate(self) -> float | None:
        total = self.delivered_all + self.false_positives
        return self.false_positives / total if total else None

    @property
    def delivered_all(self) -> int:
        return self.delivered + self.cache_deliveries


class Tracks:
    """Positions from mobility.log, linear between its points."""

    def __init__(self, path: Path) -> None:
        raw: dict[int, list[tuple[float, float, float]]] = defaultdict(list)
        with path.open() as fh:
            for line in fh:
                if line.startswith("#") or not line.strip():
                    continue
                t, n, x, y = line.split()
                raw[int(n)].append((float(t), float(x), float(y)))
        self.times = {n: [p[0] for p in pts] for n, pts in raw.items()}
        self.points = dict(raw)

    def at(self, node: int, t: float) -> tuple[float, float]:
        times, pts = self.times[node], self.points[node]
        i = bisect.bisect_right(times, t)
        if i == 0:
            return pts[0][1], pts[0][2]
        if i == len(pts):
            return pts[-1][1], pts[-1][2]
        (t1, x1, y1), (t2, x2, y2) = pts[i - 1], pts[i]
        f = (t - t1) / (t2 - t1) if t2 > t1 else 0.0
        return x1 + f * (x2 - x1), y1 + f * (y2 - y1)

    def components(self, t: float, rng: float) -> dict[int, int]:
        """Node -> component label of the unit-disk graph at ``t`` (a spatial hash)."""
        pos = {n: self.at(n, t) for n in self.points}
        buckets: dict[tuple[int, int], list[int]] = defaultdict(list)
        for n, (x, y) in pos.items():
            buckets[(int(x // rng), int(y // rng))].append(n)
        label: dict[int, int] = {}
        for start in pos:
            if start in label:
                continue
            label[start] = start
            stack = [start]
            while stack:
                u = stack.pop()
                ux, uy = pos[u]
                cx, cy = int(ux // rng), int(uy // rng)
                for dx in (-1, 0, 1):
                    for dy in (-1, 0, 1):
                        for v in buckets.get((cx + dx, cy + dy), ()):
                            if v not in label and math.dist(pos[u], pos[v]) <= rng:
                                label[v] = start
                                stack.append(v)
        return label


def analyse(point: Point, rundir: Path, wall_s: float) -> RunFigures:
    from meshsim.run_records import run_records
    from meshsub.core.syntax import parse_event, parse_subscription

    manifest = json.loads((rundir / "manifest.json").read_text())
    warm = float(manifest["warmup_s"])
    end = float(manifest["duration_s"])
    rng_m = float(manifest["range_m"])
    fig = RunFigures(asdict(point), wall_s, measured_s=end - warm)
    arrivals = manifest["scenario"]["workload"].get("arrivals") or {}
    fig.steady_state_window_s = arrivals.get("steady_state_window_s")
    subs: dict[tuple[int, str], tuple[float, str]] = {}
    unsubs: dict[tuple[int, str], float] = {}
    pubs: dict[str, tuple[float, str, int]] = {}
    delivers: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    first_hop: dict[tuple[str, int], tuple[float, int | None]] = {}
    data_tx: Counter[str] = Counter()
    state: dict[tuple[int, float], dict[str, int]] = defaultdict(dict)
    drops: Counter[str] = Counter()
    tx_type: Counter[str] = Counter()
    fp_pairs: set[tuple[str | None, int]] = set()
    # Node files or one telemetry.parquet (the plan writes Parquet): the same records.
    for r in run_records(rundir, RECORD_EVENTS):
        ev, t = r["event"], r["ts_ns"] / 1e9
        if ev == "tx":
            if r.get("msg_kind") == "data" and "event_id" in r:
                data_tx[r["event_id"]] += 1
            if t >= warm:
                fig.tx += 1
                fig.tx_bytes += r.get("bytes", 0)
                tx_type[str(r.get("msg_type"))] += 1
        elif ev == "drop":
            if t >= warm and r["reason"] != "duplicate_flood":  # copies of announcements
                drops[r["reason"]] += 1
                if r["reason"] == "false_positive":
                    fp_pairs.add((r.get("event_id"), r["node"]))
        elif ev == "subscribe":
            subs[(r["node"], r["sub_id"])] = (t, r["content"])
        elif ev == "unsubscribe":
            unsubs[(r["node"], r["sub_id"])] = t
        elif ev == "publish":
            pubs[r["event_id"]] = (t, r["content"], r["node"])
        elif ev == "deliver":
            delivers[(r["event_id"], r["node"], r["sub_id"])].append(t)
            key2 = (r["event_id"], r["node"])
            if key2 not in first_hop or t < first_hop[key2][0]:
                first_hop[key2] = (t, r.get("hop"))
        elif ev == "state" and t >= warm:
            state[(r["node"], round(t, 1))][r["store"]] = r["bytes"]
    fig.tx_by_type = dict(tx_type.most_common())
    fig.drops = dict(drops.most_common())
    fig.false_positives = len(fp_pairs)
    tracks = Tracks(rundir / manifest["mobility_log"]["file"])
    parsed_subs = {k: (t, parse_subscription(c)) for k, (t, c) in subs.items()}
    latencies: list[float] = []
    rows: list[Any] = []
    for eid, (t, content, node) in pubs.items():
        if t < warm:
            continue
        fig.pubs += 1
        event = parse_event(content)
        comp: dict[int, int] | None = None
        interested: set[int] = set()
        for key, (ts, sub) in parsed_subs.items():
            if not sub.matches(event):
                continue
            got = delivers.get((eid, *key))
            if ts < t < unsubs.get(key, math.inf):
                interested.add(key[0])
                fig.expected += 1
                if comp is None:
                    comp = tracks.components(t, rng_m)
                connected = comp[key[0]] == comp[node]
                fig.expected_connected += connected
                if got:
                    fig.delivered += 1
                    fig.delivered_connected += connected
                    latencies.append(min(got) - t)
            elif got:
                fig.cache_deliveries += 1
            if got and len(got) > 1:
                fig.duplicates += len(got) - 1
        hits = tuple((n, first_hop[(eid, n)][1]) for n in sorted(interested)
                     if (eid, n) in first_hop)
        rows.append((eid, node, t, tuple(sorted(interested)), hits, data_tx.get(eid, 0)))
    _optimum(fig, rundir, manifest, rows)
    if latencies:
        latencies.sort()
        fig.latency_mean_s = sum(latencies) / len(latencies)
        fig.latency_p95_s = latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))]
    if point.proto == "brvst":
        _storage(fig, manifest, state, parsed_subs, unsubs, tracks)
    return fig


def _optimum(fig: RunFigures, rundir: Path, manifest: dict[str, Any],
             rows: list[tuple[str, int, float, tuple[int, ...], Any, int]]) -> None:
    """Data transmissions over the fewest broadcasts that could have delivered the same
    events (mesheval's optimum on the radio graph at each publish time)."""
    from mesheval.optimum.evaluate import EventRow, RunContext, run_metrics

    events = [EventRow(manifest["run"], eid, node, t, interested, hits, tx)
              for eid, node, t, interested, hits, tx in rows if interested]
    metrics, _detail = run_metrics(events, RunContext(rundir, manifest, None))
    fig.optimum_ratio = metrics.get("optimum_ratio")
    fig.optimum_ratio_high = metrics.get("optimum_ratio_high")
    fig.opt_events = int(metrics.get("opt_events") or 0)


TAMA_LEVELS = 7
"""TAMA's table depth: 2^7 = 128 finest cells on [0, 100), so integer ranges round to no
coarser than one unit (no false positives from the rounding on this workload)."""


def _storage(fig: RunFigures, manifest: dict[str, Any],
             state: dict[tuple[int, float], dict[str, int]],
             subs: dict[tuple[int, str], tuple[float, Any]], unsubs: dict[tuple[int, str], float],
             tracks: Tracks) -> None:
    """Measured broker bytes from the state records; both storage models per snapshot."""
    from meshsub.core.grid import Cell
    from meshsub.core.params import parse_params
    from meshsub.protocols.brvst import BrvstParams
    from meshsub.protocols.brvst.schema import Schema
    from meshsub.protocols.brvst.tama import Placed, brvst_storage, tama_storage
    from meshsub.protocols.brvst.zones import Layout

    gm: list[int] = []
    zm: list[int] = []
    for stores in state.values():
        g = sum(stores.get(s, 0) for s in SUMMARY_STORES if s.startswith("gm_"))
        z = sum(stores.get(s, 0) for s in SUMMARY_STORES if s.startswith("zm_"))
        if "gm_subscriptions" in stores:
            gm.append(g)
        if "zm_sof" in stores:
            zm.append(z)
    fig.gm_bytes_mean = sum(gm) / len(gm) if gm else None
    fig.zm_bytes_mean = sum(zm) / len(zm) if zm else None
    both = gm + zm
    fig.broker_bytes_mean = sum(both) / len(both) if both else None
    # Fig. 7(b)'s "system average node storage": every store of every node's report.
    totals = [sum(stores.values()) for stores in state.values()]
    fig.node_bytes_mean = sum(totals) / len(totals) if totals else None
    params = parse_params(BrvstParams, manifest["params"])
    schema = Schema.from_params(params)
    layout = Layout.of(params.area_width_m, params.area_height_m, params.grid_size_m, params.K)
    cols = max(1, math.ceil(params.area_width_m / params.grid_size_m))
    rows = max(1, math.ceil(params.area_height_m / params.grid_size_m))
    snapshots = sorted({t for (_n, t) in state})
    b_means: list[float] = []
    t_means: list[float] = []
    actives: list[int] = []
    for t in snapshots:
        placed = []
        for i, (key, (ts, sub)) in enumerate(sorted(subs.items())):
            if not ts <= t < unsubs.get(key, math.inf):
                continue
            x, y = tracks.at(key[0], t)
            cell = (min(cols - 1, max(0, int((x - params.origin_x) // params.grid_size_m))),
                    min(rows - 1, max(0, int((y - params.origin_y) // params.grid_size_m))))
            placed.append(Placed(i, Cell(*cell), schema.subscription_ranges(sub)))
        if not placed:
            continue
        actives.append(len(placed))
        b_means.append(brvst_storage(placed, layout, schema).mean)
        t_means.append(tama_storage(placed, layout, schema, TAMA_LEVELS).mean)
    if b_means:
        fig.model_brvst_mean = sum(b_means) / len(b_means)
        fig.model_tama_mean = sum(t_means) / len(t_means)
        fig.active_subs_mean = sum(actives) / len(actives)


def run_one(spec: Any, sweep_point: Any, out: Path, keep: bool) -> RunFigures:
    """Run one point of the plan (or keep its finished run) and return its figures; a
    failure comes back as one RuntimeError naming the point (some errors do not pickle)."""
    try:
        return _run_one(spec, sweep_point, out, keep)
    except Exception as exc:
        raise RuntimeError(f"{sweep_point.id}: {type(exc).__name__}: {exc}") from None


class CpuMeter:
    """The simulation's CPU time, and the part of it after the warm-up: the progress
    callback of ``run_point`` (every 1/200 of the run) notes the process's CPU time at
    the first report at or past the warm-up and at or past the end of the run proper
    (the drain after it is left out)."""

    def __init__(self, warmup_s: float, duration_s: float) -> None:
        self.warmup_s, self.duration_s = warmup_s, duration_s
        self.started = time.process_time()
        self.marks: dict[str, tuple[float, float]] = {}
        """``warm``/``end`` -> (virtual seconds at the report, CPU seconds then)."""

    def __call__(self, done_s: float) -> None:
        for name, at in (("warm", self.warmup_s), ("end", self.duration_s)):
            if name not in self.marks and done_s >= at:
                self.marks[name] = (done_s, time.process_time())

    def steady_per_sim_s(self) -> float | None:
        """CPU seconds per simulated second between the two marks."""
        if "warm" not in self.marks or "end" not in self.marks:
            return None
        (t0, c0), (t1, c1) = self.marks["warm"], self.marks["end"]
        return (c1 - c0) / (t1 - t0) if t1 > t0 else None


def _run_one(spec: Any, sweep_point: Any, out: Path, keep: bool) -> RunFigures:
    from meshsim.sweep.point import resolve, run_point

    scenario, _derived = resolve(spec, sweep_point)
    meter = CpuMeter(scenario.meta.warmup_s, scenario.meta.duration_s)
    res = run_point(spec, sweep_point, out, progress=meter)
    sim_cpu = time.process_time() - meter.started
    cached = res.rundir / FIGURES
    if res.status == "kept" and cached.exists():
        data = json.loads(cached.read_text())
        if data.get("digest") == res.digest:
            return RunFigures(**data["figures"])
    manifest = json.loads((res.rundir / "manifest.json").read_text())
    point = Point.of(sweep_point, manifest)
    started = time.process_time()
    fig = analyse(point, res.rundir, res.wall_s)
    fig.analysis_cpu_s = time.process_time() - started
    if res.status == "done":  # a run kept without figures has no CPU figure of its own
        fig.sim_cpu_s, fig.steady_cpu_per_sim_s = sim_cpu, meter.steady_per_sim_s()
    cached.write_text(json.dumps({"digest": res.digest, "figures": asdict(fig)}, indent=1))
    if not keep:  # the figures are kept; the telemetry is about 2 MB per simulated second
        for path in res.rundir.iterdir():
            if path.name not in KEEP_FILES:
                shutil.rmtree(path) if path.is_dir() else path.unlink()
    return fig


# ------------------------------------------------------------------ report


def _ci(values: Iterable[float | None]) -> Any:
    from mesheval.stats import mean_ci

    return mean_ci(list(values))


def fmt(ci: Any, digits: int = 3, scale: float = 1.0) -> str:
    if ci.mean is None:
        return "n/a"
    m = ci.mean * scale
    if ci.half_width is None:
        return f"{m:.{digits}f} (n={ci.n}, no interval)"
    return f"{m:.{digits}f} ± {ci.half_width * scale:.{digits}f}"


def ratio(a: int, b: int) -> float | None:
    return a / b if b else None


def by_config(figs: list[RunFigures]) -> dict[str, list[RunFigures]]:
    out: dict[str, list[RunFigures]] = defaultdict(list)
    for f in figs:
        out[Point(**f.point).config].append(f)
    return out


def command_line(args: argparse.Namespace) -> str:
    """The options that chose the page's runs, as typed."""
    opts = [" --quick" if args.quick else ""]
    if args.seeds:
        opts.append(f" --seeds {args.seeds}")
    if getattr(args, "duration", None) is not None:
        opts.append(f" --duration {args.duration:g} --warmup {args.warmup:g}")
    opts += [f" --only {o}" for o in args.only]
    return "".join(opts)


def seeds_note(args: argparse.Namespace) -> list[str]:
    """Why the page has fewer seeds than the plan, when ``--seeds`` cut it."""
    planned: int = getattr(args, "plan_seeds", 0)
    if not args.seeds or args.seeds >= planned:
        return []
    return [f"**Seeds: {args.seeds} of the plan's {planned}.** The machine time of the "
            "session that ran the plan did not reach further; the same command without "
            "`--seeds` completes the plan (finished points are kept), and with fewer seeds "
            "the 95 % intervals are wider (Student t with "
            f"{max(1, args.seeds - 1)} degree(s) of freedom), so fewer claims are decided.",
            ""]


def not_run_note(args: argparse.Namespace) -> list[str]:
    """The chosen points that had not finished when the page was written, if any."""
    missing: list[str] = getattr(args, "not_run", [])
    if not missing:
        return []
    return [f"Not run ({len(missing)} points of the chosen plan had not finished when this "
            "page was written; their claims are judged on the runs that did): "
            + ", ".join(f"`{m}`" for m in missing) + ".", ""]


def write_report(figs: list[RunFigures], args: argparse.Namespace, load: str, out: Path) -> str:
    groups = by_config(figs)
    lines = ["# BRVST: the paper's evaluation in the simulator (Li and Wang 2014, §V)", "",
             "Generated by `bench/brvst_experiments.py" + command_line(args)
             + f"` from the sweep plan `experiments/brvst.sweep.toml` ({len(figs)} runs"
             + (", the reduced plan: the default block, 2 seeds, "
                f"{QUICK_DURATION_S:g} s runs" if args.quick else "")
             + f"; load: {load}). Do not edit by hand.", "",
             *seeds_note(args),
             *not_run_note(args),
             "Set-up: `firmware-sim/meshsim/scenarios/brvst-400.toml` (400 nodes on "
             "1000 m x 1000 m, unit-disk 80 m, every node on random waypoint in its steady "
             "state with trip speeds uniform on [v/2, 3v/2], 16 grids of 250 m in 4 zones, "
             "alpha 0.9, 200 subscriptions and 200 publications a minute, 1-3 of 15 "
             "attributes on [0, 100), each range two sorted uniform integer endpoints, "
             "subscriptions for 300 s). BRVST runs with the paper's ARV check at the grid "
             "manager (`gm_check = \"arv\"`) and the default `safe` comparator (on range "
             "publications about twice the paper comparator's ARV-level false positives, "
             "docs/protocols/brvst.md, 'FP figures'); the subscriber drops its false positives. "
             "Figures from publications after the warm-up; intervals are 95 % Student-t "
             "over seeds (mean ± half-width).", ""]
    first = next(iter(figs))
    lines += [run_length(first), ""]
    lines += ["## Figures per configuration", "",
              "| configuration | seeds | events | delivery | delivery (connected pairs) | "
              "matching time (s) | FP rate | tx / s | tx / delivered pair | "
              "broker bytes (measured) | node bytes (measured) | BRVST model | TAMA model | "
              "active subs |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for config, fs in groups.items():
        lines.append("| " + " | ".join([
            config, str(len(fs)), f"{sum(f.pubs for f in fs) / len(fs):.0f}",
            fmt(_ci(ratio(f.delivered, f.expected) for f in fs)),
            fmt(_ci(ratio(f.delivered_connected, f.expected_connected) for f in fs)),
            fmt(_ci(f.latency_mean_s for f in fs)),
            fmt(_ci(f.fp_rate for f in fs), 4) if fs[0].point["proto"] == "brvst" else "n/a",
            fmt(_ci(f.tx / f.measured_s for f in fs), 0),
            fmt(_ci(ratio(f.tx, f.delivered_all) for f in fs), 1),
            fmt(_ci(f.broker_bytes_mean for f in fs), 0),
            fmt(_ci(f.node_bytes_mean for f in fs), 0),
            fmt(_ci(f.model_brvst_mean for f in fs), 0),
            fmt(_ci(f.model_tama_mean for f in fs), 0),
            fmt(_ci(f.active_subs_mean for f in fs), 0)]) + " |")
    lines += ["", "Matching time is delivery time minus publish time of each delivered pair "
              "(the paper's Fig. 7 'matching time'). Broker bytes (measured): the summary "
              f"stores ({', '.join(SUMMARY_STORES)}) of the protocol's state records per "
              "grid or zone manager, exact filters included. Node bytes (measured): every "
              "store of every node's state record (`Brvst.state_sizes`, the state-size "
              "measure), averaged over nodes and reports: the paper's 'system average node "
              "storage' (Fig. 7(b)). Models: "
              "`meshsub.protocols.brvst.tama` on the active subscriptions at each state "
              f"report, TAMA with {TAMA_LEVELS} levels (docs/protocols/brvst.md, 'Peers': "
              "the model's assumptions, not TAMA's paper's).", ""]
    lines += verdicts(groups)
    lines += differences(first)
    lines += ["", "## Where the traffic goes (default configuration, first seed)", ""]
    default = [f for f in figs if f.point["sweep"] == "default" and f.point["proto"] == "brvst"]
    if default:
        f = default[0]
        lines += ["| message type | transmissions |", "|---|---|"]
        lines += [f"| {TYPE_NAMES.get(k, k)} | {v} |" for k, v in list(f.tx_by_type.items())[:12]]
        lines += ["", "Drops after the warm-up (duplicates of floods left out): "
                  + ", ".join(f"{k} {v}" for k, v in list(f.drops.items())[:12]) + "."]
    lines += ["", "## Ratio to the optimum", "",
              "Data transmissions of the measured events (every hop of PUBLISH, PUB_UP, "
              "PUB_GRID, PUB_ZONE and DELIVER, or of the flood; per-hop ACKs not counted) "
              "over the fewest broadcasts that could have delivered each event to its "
              "interested nodes on the radio graph at its publish time (mesheval's optimum, "
              "docs/evaluation.md 'The optimum'; where an event is not solved exactly the "
              "ratio lies between the two figures: best delivery found, lower bound).", "",
              "| configuration | seeds | events | tx / optimum | tx / lower bound |",
              "|---|---|---|---|---|"]
    for config, fs in groups.items():
        lines.append(f"| {config} | {len(fs)} | {sum(f.opt_events for f in fs) / len(fs):.0f} | "
                     + fmt(_ci(f.optimum_ratio for f in fs), 2) + " | "
                     + fmt(_ci(f.optimum_ratio_high for f in fs), 2) + " |")
    lines += cost(figs)
    lines += ["", "## Wall time", "", "| run | simulated s | wall s |", "|---|---|---|"]
    lines += [f"| {f.point['run_id']} | {f.point['duration_s']:g} | {f.wall_s:.0f} |"
              for f in figs]
    text = "\n".join(lines) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return text


def run_length(first: RunFigures) -> str:
    """How long the runs are and where the subscriptions stand when measuring starts."""
    dur, warm = first.point["duration_s"], first.point["warmup_s"]
    window = first.steady_state_window_s
    if window is None:
        return (f"Run length: {dur:g} s, warm-up {warm:g} s (the runs start with no "
                "subscription: they reach their steady state of about 1000 active at 300 s).")
    return (f"Run length: {dur:g} s, warm-up {warm:g} s. Every run starts with the "
            "subscriptions' steady-state population (`[workload.arrivals] steady_state`: "
            "Poisson(r L) = about 1000 alive, each with a residual lifetime uniform on "
            f"[0, 300 s], issued over the first {window:g} s; docs/protocols/brvst.md, "
            "'Reproducing §V'), so the active set is at its steady state from the "
            "warm-up's end ('active subs': the mean over the state reports after it). "
            "The warm-up covers the managers' election and that issue window. Publications "
            "start at the warm-up's end, as in the first plan's 900 s runs.")


def cost(figs: list[RunFigures]) -> list[str]:
    """CPU per run (the plan's budget is set from it), per configuration."""
    out = ["", "## Cost", "",
           "CPU seconds of the simulation (the worker process's CPU time, not wall "
           "time: other load enters only through shared caches), its rate per "
           "simulated second from the warm-up's end (the steady state), and the CPU of "
           "the analysis (figures and optimum). The plan's length is chosen by the rule "
           "in experiments/brvst.sweep.toml: runs x (CPU per simulated second x run "
           "length + analysis) within about 4 CPU-hours.", "",
           "| configuration | seeds | simulated s | simulation CPU s | CPU s per simulated s "
           "(steady) | analysis CPU s |", "|---|---|---|---|---|---|"]
    for config, fs in by_config(figs).items():
        out.append(f"| {config} | {len(fs)} | {fs[0].point['duration_s']:g} | "
                   + fmt(_ci(f.sim_cpu_s for f in fs), 0) + " | "
                   + fmt(_ci(f.steady_cpu_per_sim_s for f in fs), 2) + " | "
                   + fmt(_ci(f.analysis_cpu_s for f in fs), 0) + " |")
    metered = [f for f in figs if f.sim_cpu_s is not None and f.analysis_cpu_s is not None]
    total = sum((f.sim_cpu_s or 0.0) + (f.analysis_cpu_s or 0.0) for f in metered)
    out += ["", f"These {len(figs)} runs: {total / 3600:.2f} CPU-hours for the {len(metered)} "
            "metered here (a run kept from an earlier session without its CPU figure is "
            "n/a)."]
    return out


TYPE_NAMES = {"1": "ACK", "16": "ANNOUNCE", "17": "RESIGN", "18": "SUBSCRIBE",
              "19": "UNSUBSCRIBE", "20": "LOCATE", "21": "GRSV_UPDATE", "22": "PUBLISH",
              "23": "PUB_UP", "24": "PUB_GRID", "25": "PUB_ZONE", "26": "DELIVER",
              "27": "ZRSV_UPDATE", "28": "PUB_ADVERT", "29": "SUB_HISTORY", "30": "SUB_QUERY",
              "31": "STATE_XFER"}


def differences(first: RunFigures) -> list[str]:
    """What the page's set-up does differently from the paper's, and what follows."""
    dur, warm = first.point["duration_s"], first.point["warmup_s"]
    out = ["", "## Differences from the paper's set-up, and what they explain", "",
           "- **No DRIP.** DRIP (Yuan and Wu 2008), the paper's peer for matching time and "
           "traffic, is not built: only its abstract is available, and neither it nor BRVST's "
           "paper says how brokers are chosen or re-chosen under mobility, what the region "
           "construction broadcast carries and how often, what the delay list measures, what "
           "brokers share and how a broker reaches its subscribers (docs/protocols/brvst.md, "
           "'Peers', lists each gap). Flooding is the reference instead; the mobility claim "
           "(relative to DRIP) is judged on BRVST's own spread, flooding's printed beside it.",
           "- **TAMA is a model.** TAMA's storage is computed from the same active "
           "subscriptions by `meshsub.protocols.brvst.tama` (its paper is not available "
           "beyond the abstract); the 60 % claim is judged on that model.",
           "- **False positives.** The event-level rate counts the copies the grid manager's "
           "ARV test sends to a subscriber that its exact filter refuses. BRVST here runs the "
           "`safe` comparator (no false negative); on range publications it has about twice "
           "the ARV-level false positives of the paper's comparator (docs/protocols/brvst.md, "
           "'FP figures': 0.24 against 0.10 at alpha 0.9 with this range generator), so the "
           "paper's bound is not expected to hold under `safe`; the paper does not state its "
           "range generator either.",
           "- **Matching time and speed.** The rule compares BRVST's mean matching time over "
           "the speeds with itself, static nodes included. With static nodes every manager is "
           "where it announced; with moving ones a leg that misses its manager waits for the "
           "area's next announcement (`T_ann` 2 s, `T_ann_zone` 6 s: docs/protocols/brvst.md, "
           "'Stale positions and missing managers'), and a publication crosses up to four "
           "legs, so the mean grows with speed. The paper's claim is relative to DRIP, which "
           "this page cannot show."]
    if first.steady_state_window_s is not None:
        out.append("- **A steady-state start instead of a 300 s warm-up.** The paper gives no "
                   "run length. Each run starts with the subscriptions' steady-state "
                   "population ('Run length' above), so these runs measure BRVST with the "
                   "paper's steady state of about 1000 active subscriptions without first "
                   "running a whole 300 s lifetime (docs/protocols/brvst.md, 'Reproducing "
                   "§V', compares such a run with a 900 s run of the same seed). The zone "
                   "managers' publication caches (`T_cache` 300 s) are not started full: "
                   "publications begin at the warm-up's end here as in the first plan's 900 s "
                   "runs, so a cache fills during the measured window (in a 900 s run over "
                   "its first half), and what grows with it, replays to new managers and "
                   "deliveries from the cache, is lower in a shorter window.")
    elif dur < 300:
        out.append(f"- **Short runs.** {dur:g} s runs with a {warm:g} s warm-up (the paper "
                   "gives no run length; the machine's time allowed this): subscriptions live "
                   "300 s, so the active set is still growing and far below the steady state "
                   "of about 1000; storage figures compare configurations at equal run "
                   "length, not the paper's absolute load. The paper explains its U's "
                   "right arm (matching time rising again at 1 grid) by longer paths and more "
                   "filters per grid; with a few hundred active subscriptions the second "
                   "cost is small, which may be why the minimum falls at 1 grid here (not "
                   "measured separately).")
    return out


def verdicts(groups: dict[str, list[RunFigures]]) -> list[str]:
    """Each claim of §V with its rule and tolerance, computed from the figures above."""
    out = ["## Claims and verdicts", "",
           "| claim (Li and Wang 2014) | rule (tolerance) | figures | verdict |",
           "|---|---|---|---|"]

    def conf(**kw: Any) -> list[RunFigures]:
        base = {"proto": "brvst", "alpha": 0.9, "speed": 5.0, "grid_m": 250.0,
                "rate_per_min": 200.0}
        base.update(kw)
        return [f for fs in groups.values() for f in fs
                if all(f.point[k] == v for k, v in base.items())]

    default = conf()
    # 1. storage 60 % below TAMA (§V-B, Fig. 8-i(b))
    red = _ci(1 - f.model_brvst_mean / f.model_tama_mean for f in default
              if f.model_brvst_mean is not None and f.model_tama_mean)
    if red.mean is None:
        v1 = "n/a"
    else:
        lo = red.low if red.low is not None else red.mean
        hi = red.high if red.high is not None else red.mean
        v1 = ("reproduced" if lo <= 0.6 + 0.1 and hi >= 0.6 - 0.1 else
              "exceeded (BRVST smaller still)" if lo > 0.7 else "not reproduced")
    out.append("| broker storage 60 % lower than TAMA's (§V-B) | 1 - BRVST/TAMA model bytes per "
               "broker; the interval meets 0.60 ± 0.10 | " + fmt(red) + f" | {v1} |")
    # 2. FP rate about <= 1 - alpha (§V-C, Fig. 9(a))
    for alpha in (0.8, 0.9, 0.95):
        fp = _ci(f.fp_rate for f in conf(alpha=alpha))
        if fp.mean is None:
            verdict = "n/a (not run)"
        else:
            top = fp.high if fp.high is not None else fp.mean
            verdict = "holds" if top <= (1 - alpha) * 1.25 else "does not hold"
        out.append(f"| event-level FP rate approximately bounded by 1 - alpha, alpha = {alpha:g} "
                   f"(§V-C) | upper end of the interval <= 1.25 (1 - alpha) = "
                   f"{1.25 * (1 - alpha):.3f} | {fmt(fp, 4)} | {verdict} |")
    # 3. matching time much more stable than the peer's under speed (§V-A, Fig. 7(a))
    speeds = (0.0, 5.0, 10.0, 20.0)
    b = [_ci(f.latency_mean_s for f in conf(speed=v)).mean for v in speeds]
    fl = [_ci(f.latency_mean_s for f in conf(proto="flooding", speed=v, alpha=0.9)).mean
          for v in speeds]
    bv = [x for x in b if x is not None]
    fv = [x for x in fl if x is not None]
    if len(bv) >= 3 and len(fv) >= 2:
        spread_b, spread_f = max(bv) / min(bv), max(fv) / min(fv)
        verdict = ("holds" if spread_b <= 2.0 else "does not hold") + \
            f" (flooding's spread {spread_f:.2f}; DRIP not built)"
        figs = ", ".join(f"{v:g} m/s {x:.3f} s" for v, x in zip(speeds, b, strict=True)
                         if x is not None)
    else:
        verdict, figs = "n/a (speed sweep not run)", "-"
    out.append("| matching time much more stable than DRIP's over 0-20 m/s (§V-A) | BRVST's "
               "max/min of mean matching time over the speeds <= 2 | " + figs + f" | {verdict} |")
    # 4. grid sweep 64 -> 1 (Fig. 7(b)): matching time U-shaped; average node storage and
    # traffic per match fall as grids grow
    grids = (125.0, 250.0, 500.0, 1000.0)
    lat = [_ci(f.latency_mean_s for f in conf(grid_m=g)).mean for g in grids]
    node = [_ci(f.node_bytes_mean for f in conf(grid_m=g)).mean for g in grids]
    tpm = [_ci(ratio(f.tx, f.delivered_all) for f in conf(grid_m=g)).mean for g in grids]
    if all(x is not None for x in lat + node + tpm):
        u_shaped = min(range(len(grids)), key=lambda i: lat[i]) in (1, 2)  # type: ignore[index]
        verdict = (f"matching time U-shaped: {'yes' if u_shaped else 'no'}; node storage "
                   f"falls: {'yes' if falls(node) else 'no'}; traffic per match falls: "
                   f"{'yes' if falls(tpm) else 'no'}")
        figs = ", ".join(f"{round((1000 / g) ** 2)} grids {t_:.3f} s {n_:.0f} B {m_:.0f} tx"
                         for g, t_, n_, m_ in zip(grids, lat, node, tpm, strict=True))
    else:
        verdict, figs = "n/a (grid sweep not run)", "-"
    out.append("| 64 -> 1 grids: matching time U-shaped, average node storage and traffic per "
               "match fall as grids grow (Fig. 7(b)) | minimum of mean matching time at 16 or "
               "4 grids; 'falls': the mean at 1 grid below the mean at 64 grids and no step "
               f"up by more than {FALL_TOLERANCE:.0%} | " + figs + f" | {verdict} |")
    # 5. storage linear in load (Fig. 8-i(b))
    loads = (100.0, 200.0, 400.0)
    ys = [y for y in (_ci(f.broker_bytes_mean for f in conf(rate_per_min=r)).mean
                      for r in loads) if y is not None]
    if len(ys) == len(loads):
        r2 = _r2(list(loads), ys)
        verdict = "holds" if r2 >= 0.95 and ys[-1] > ys[0] else "does not hold"
        figs = ", ".join(f"{r:g}/min {y:.0f} B" for r, y in zip(loads, ys, strict=True))
        figs += f"; R^2 {r2:.3f}"
    else:
        verdict, figs = "n/a (load sweep not run)", "-"
    out.append("| storage grows linearly with load (Fig. 8-i(b)) | R^2 of a straight line "
               "through broker bytes at 100, 200, 400 per minute >= 0.95, rising | " + figs
               + f" | {verdict} |")
    return out


FALL_TOLERANCE = 0.10


def falls(values: list[Any]) -> bool:
    """True if the series (by growing grid size) ends below its start and never rises
    by more than ``FALL_TOLERANCE`` from one step to the next."""
    return values[-1] < values[0] and all(
        b <= a * (1 + FALL_TOLERANCE) for a, b in itertools.pairwise(values))


def _r2(xs: list[float], ys: list[float]) -> float:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return 1.0 if syy == 0 else sxy * sxy / (sxx * syy)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", type=Path, default=PLAN, help="the sweep plan (default %(default)s)")
    ap.add_argument("--quick", action="store_true", help="the reduced plan: the default block, "
                    f"{QUICK_SEEDS} seeds, {QUICK_DURATION_S:g} s runs")
    ap.add_argument("--seeds", type=int, default=0, help="the first N seeds of every block")
    ap.add_argument("--only", action="append", default=[],
                    help="points whose id contains this (repeatable)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--out-runs", type=Path, default=None, help="where the RUNDIRs go "
                    "(default runs/brvst, or runs/brvst-quick)")
    ap.add_argument("--keep", action="store_true", help="keep each run's telemetry (about "
                    "2 MB per simulated second)")
    ap.add_argument("--duration", type=float, default=None, help="simulated seconds of "
                    "every run (overrides the plan's; needs --warmup)")
    ap.add_argument("--warmup", type=float, default=None, help="warm-up seconds of every "
                    "run (figures count publications after it)")
    ap.add_argument("--finished", action="store_true", help="run nothing: write the page "
                    "from the chosen points that finished (the others are named as not run)")
    ap.add_argument("--out", type=Path, default=REPORT)
    args = ap.parse_args(argv)
    if args.seeds < 0 or args.jobs < 1:
        print("brvst_experiments: --seeds must be >= 0 and --jobs >= 1", file=sys.stderr)
        return 2
    if (args.duration is None) != (args.warmup is None) or (
            args.duration is not None and not 0 <= args.warmup < args.duration):
        print("brvst_experiments: --duration and --warmup go together, "
              "0 <= warmup < duration", file=sys.stderr)
        return 2
    length = None if args.duration is None else (args.duration, args.warmup)
    from meshsim.sweep.spec import SweepError

    try:
        spec, todo = plan(args.plan, args.quick, args.seeds, args.only, length)
    except (SweepError, OSError) as exc:
        print(f"brvst_experiments: {exc}", file=sys.stderr)
        return 2
    args.plan_seeds = max((len(b.seeds) for b in spec.blocks), default=0)
    if not todo:
        print("brvst_experiments: no point of the plan selected", file=sys.stderr)
        return 2
    runs = args.out_runs or ROOT / "runs" / ("brvst-quick" if args.quick else "brvst")
    runs.mkdir(parents=True, exist_ok=True)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"{len(todo)} runs, {args.jobs} at a time; {load}", flush=True)
    figs: list[RunFigures] = []
    if args.finished:
        missing = []
        for p in todo:
            f = finished_figures(spec, p, runs)
            (missing.append(p.id) if f is None else figs.append(f))
        if not figs:
            print("brvst_experiments: no chosen point has finished", file=sys.stderr)
            return 2
        args.not_run = missing
        text = write_report(figs, args, f"`{load}` (page written from finished runs)", args.out)
        print(text)
        return 0
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_one, spec, p, runs, args.keep) for p in todo]
        for p, fut in zip(todo, futures, strict=True):
            f = fut.result()
            figs.append(f)
            print(f"{p.id}: delivery {ratio(f.delivered, f.expected)} wall {f.wall_s:.0f} s",
                  flush=True)
    load_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    text = write_report(figs, args, f"before `{load}`, after `{load_after}`", args.out)
    print(text)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
