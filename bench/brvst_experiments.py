"""BRVST's evaluation (Li and Wang 2014, §V) in the simulator; writes docs/results/brvst.md.

One command regenerates the page (run it under the cpu lock, see DEVELOPERS.md):

    .venv/bin/python bench/brvst_experiments.py --jobs 2            # every sweep, 5 seeds
    .venv/bin/python bench/brvst_experiments.py --quick --jobs 2    # default point, short runs

Every point is ``firmware-sim/meshsim/scenarios/brvst-400.toml`` (the paper's set-up:
400 walking nodes on 1 km^2, 80 m radio, 16 grids in 4 zones, 200 subscriptions and
200 publications a minute, 1-3 of 15 attributes, subscriptions for 300 s) with
``--set``-style overrides, run by the simulator's run writer into its own RUNDIR; the
figures are computed here from the RUNDIR's telemetry and mobility log, and only
those figures are kept (``--runs``/<run id>.json; ``--keep`` keeps the RUNDIRs).

BRVST runs with ``gm_check = "arv"``, the paper's grid-manager test (§IV-C): an event
whose ARVs match a subscription's goes to its subscriber, which drops it as a counted
``false_positive`` if the subscription does not match exactly. Deliveries are therefore
exact, and the same run gives the event-level false-positive rate of Fig. 9(a).

Figures per run (publications from the warm-up on; a pair is (event, subscription)):

- delivery ratio: delivered pairs / pairs whose subscription was active at the
  publish time and matches exactly; ``connected``: only pairs whose subscriber was in
  the publisher's radio component at that time (positions from mobility.log);
- matching time (Fig. 7): delivery time - publish time of the delivered pairs;
- false-positive rate (Fig. 9(a)): false_positive drops / (deliveries + those drops);
- traffic: transmissions (every hop, ACKs included) per second and per delivered pair;
- broker storage (Figs. 7(b), 8-i(b)): (a) measured: the bytes of the summary stores
  (gm_subscriptions, gm_summaries, zm_sof, zm_summaries, zm_zone_table) in the
  protocol's state records of nodes holding a role, per grid or zone manager; (b) the
  storage model of ``meshsub.protocols.brvst.tama`` on a snapshot of the active
  subscriptions at each state report: BRVST's encoded forests against TAMA's
  tables on the same overlay (``--tama-levels``), the basis of the 60 % verdict.

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
SCENARIO = ROOT / "firmware-sim" / "meshsim" / "scenarios" / "brvst-400.toml"
REPORT = ROOT / "docs" / "results" / "brvst.md"
SUMMARY_STORES = ("gm_subscriptions", "gm_summaries", "zm_sof", "zm_summaries",
                  "zm_zone_table")
"""What a broker keeps to match (the paper's storage; caches and id sets are left out,
since TAMA's figure has neither)."""
FLOOD_TTL = 32


# ------------------------------------------------------------------ points


@dataclass(frozen=True)
class Point:
    """One simulator run: a configuration of a sweep and a seed."""

    sweep: str
    proto: str = "brvst"
    alpha: float = 0.9
    speed: float = 5.0
    grid_m: float = 250.0
    rate_per_min: float = 200.0
    seed: int = 1
    duration_s: float = 900.0
    warmup_s: float = 300.0

    @property
    def config(self) -> str:
        return (f"{self.proto} alpha={self.alpha:g} speed={self.speed:g} grid={self.grid_m:g} "
                f"rate={self.rate_per_min:g}")

    @property
    def run_id(self) -> str:
        return (f"brvst-{self.proto}-a{self.alpha:g}-v{self.speed:g}-g{self.grid_m:g}"
                f"-r{self.rate_per_min:g}-d{self.duration_s:g}-s{self.seed}")

    def overrides(self) -> list[str]:
        out = [f"scenario.seed={self.seed}", f"scenario.duration_s={self.duration_s}",
               f"scenario.warmup_s={self.warmup_s}",
               f"workload.arrivals.rate_per_s={self.rate_per_min / 60.0}",
               f"workload.generator.rate_per_s={self.rate_per_min / 60.0}"]
        if self.speed > 0:
            out += [f"mobility.speed_min={self.speed / 2}",
                    f"mobility.speed_max={self.speed * 1.5}"]
        else:
            out += ['mobility={model="static"}']
        if self.proto == "flooding":
            out += ["protocol.name=flooding", f"protocol.flooding={{ttl={FLOOD_TTL}}}"]
        else:
            out += [f"protocol.brvst.alpha={self.alpha}",
                    f"protocol.brvst.grid_size_m={self.grid_m}", 'protocol.brvst.gm_check="arv"']
        return out


def points(quick: bool, seeds: int) -> list[Point]:
    if quick:  # short runs: subscriptions are still building up (about 400 to 800 active)
        d: dict[str, Any] = {"duration_s": 240.0, "warmup_s": 120.0}
        return ([Point("default", seed=s, **d) for s in range(1, seeds + 1)]
                + [Point("default", proto="flooding", seed=s, **d)
                   for s in range(1, seeds + 1)])
    out: list[Point] = []
    for s in range(1, seeds + 1):
        out.append(Point("default", seed=s))
        out.append(Point("default", proto="flooding", seed=s))
        out += [Point("alpha", alpha=a, seed=s) for a in (0.8, 0.95)]
        out += [Point("speed", speed=v, seed=s) for v in (0.0, 10.0, 20.0)]
        out += [Point("speed", proto="flooding", speed=v, seed=s) for v in (0.0, 20.0)]
        out += [Point("grid", grid_m=g, seed=s) for g in (125.0, 500.0, 1000.0)]
        out += [Point("load", rate_per_min=r, seed=s) for r in (100.0, 400.0)]
    return out


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
    model_brvst_mean: float | None = None
    model_tama_mean: float | None = None
    active_subs_mean: float | None = None

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
    from meshsub.core.syntax import parse_event, parse_subscription

    manifest = json.loads((rundir / "manifest.json").read_text())
    warm = float(manifest["warmup_s"])
    end = float(manifest["duration_s"])
    rng_m = float(manifest["range_m"])
    fig = RunFigures(asdict(point), wall_s, measured_s=end - warm)
    subs: dict[tuple[int, str], tuple[float, str]] = {}
    unsubs: dict[tuple[int, str], float] = {}
    pubs: dict[str, tuple[float, str, int]] = {}
    delivers: dict[tuple[str, int, str], list[float]] = defaultdict(list)
    state: dict[tuple[int, float], dict[str, int]] = defaultdict(dict)
    drops: Counter[str] = Counter()
    tx_type: Counter[str] = Counter()
    for name in manifest["files"]:
        with (rundir / name).open() as fh:
            for line in fh:
                if '"event":"rx"' in line or '"reason":"duplicate_flood"' in line:
                    continue
                r = json.loads(line)
                ev, t = r["event"], r["ts_ns"] / 1e9
                if ev == "tx":
                    if t >= warm:
                        fig.tx += 1
                        fig.tx_bytes += r.get("bytes", 0)
                        tx_type[str(r.get("msg_type"))] += 1
                elif ev == "drop":
                    if t >= warm:
                        drops[r["reason"]] += 1
                elif ev == "subscribe":
                    subs[(r["node"], r["sub_id"])] = (t, r["content"])
                elif ev == "unsubscribe":
                    unsubs[(r["node"], r["sub_id"])] = t
                elif ev == "publish":
                    pubs[r["event_id"]] = (t, r["content"], r["node"])
                elif ev == "deliver":
                    delivers[(r["event_id"], r["node"], r["sub_id"])].append(t)
                elif ev == "state" and t >= warm:
                    state[(r["node"], round(t, 1))][r["store"]] = r["bytes"]
    fig.tx_by_type = dict(tx_type.most_common())
    fig.drops = dict(drops.most_common())
    fig.false_positives = drops.get("false_positive", 0)
    tracks = Tracks(rundir / manifest["mobility_log"]["file"])
    parsed_subs = {k: (t, parse_subscription(c)) for k, (t, c) in subs.items()}
    latencies: list[float] = []
    for eid, (t, content, node) in pubs.items():
        if t < warm:
            continue
        fig.pubs += 1
        event = parse_event(content)
        comp: dict[int, int] | None = None
        for key, (ts, sub) in parsed_subs.items():
            if not sub.matches(event):
                continue
            got = delivers.get((eid, *key))
            if ts < t < unsubs.get(key, math.inf):
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
    if latencies:
        latencies.sort()
        fig.latency_mean_s = sum(latencies) / len(latencies)
        fig.latency_p95_s = latencies[min(len(latencies) - 1, int(0.95 * len(latencies)))]
    if point.proto == "brvst":
        _storage(fig, manifest, state, parsed_subs, unsubs, tracks)
    return fig


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


def run_point(point: Point, runs: Path, keep: bool, reuse: bool) -> RunFigures:
    """Simulate one point (or reuse its figures) and return its figures; a failure comes
    back as one RuntimeError naming the run (some errors do not survive pickling)."""
    try:
        return _run_point(point, runs, keep, reuse)
    except Exception as exc:
        raise RuntimeError(f"{point.run_id}: {type(exc).__name__}: {exc}") from None


def _run_point(point: Point, runs: Path, keep: bool, reuse: bool) -> RunFigures:
    from meshsim.des.run import run_scenario
    from meshsim.scenario import load_scenario

    cached = runs / f"{point.run_id}.json"
    if reuse and cached.exists():
        data = json.loads(cached.read_text())
        return RunFigures(**data)
    out = runs / point.run_id
    if out.exists():
        shutil.rmtree(out)
    started = time.perf_counter()
    run_scenario(load_scenario(SCENARIO, point.overrides()), out, run_id=point.run_id)
    wall = time.perf_counter() - started
    fig = analyse(point, out, wall)
    cached.write_text(json.dumps(asdict(fig), indent=1))
    if not keep:
        shutil.rmtree(out)
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


def write_report(figs: list[RunFigures], args: argparse.Namespace, load: str, out: Path,
                 missing: list[str] | None = None) -> str:
    groups = by_config(figs)
    lines = ["# BRVST: the paper's evaluation in the simulator (Li and Wang 2014, §V)", "",
             "Generated by `bench/brvst_experiments.py" + (" --quick" if args.quick else "")
             + f"` ({len(figs)} runs; load: {load}). Do not edit by hand.", "",
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
    if missing:
        lines += ["**Incomplete:** the page was written from the finished runs only "
                  "(`--no-run`); not run: " + ", ".join(f"`{m}`" for m in missing) + ".", ""]
    first = next(iter(figs))
    lines += [f"Run length: {first.point['duration_s']:g} s, warm-up "
              f"{first.point['warmup_s']:g} s (subscriptions reach their steady state of "
              "about 1000 active at 300 s).", ""]
    lines += ["## Figures per configuration", "",
              "| configuration | seeds | events | delivery | delivery (connected pairs) | "
              "matching time (s) | FP rate | tx / s | tx / delivered pair | "
              "broker bytes (measured) | BRVST model | TAMA model | active subs |",
              "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
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
            fmt(_ci(f.model_brvst_mean for f in fs), 0),
            fmt(_ci(f.model_tama_mean for f in fs), 0),
            fmt(_ci(f.active_subs_mean for f in fs), 0)]) + " |")
    lines += ["", "Matching time is delivery time minus publish time of each delivered pair "
              "(the paper's Fig. 7 'matching time'). Broker bytes (measured): the summary "
              f"stores ({', '.join(SUMMARY_STORES)}) of the protocol's state records per "
              "grid or zone manager, exact filters included. Models: "
              "`meshsub.protocols.brvst.tama` on the active subscriptions at each state "
              f"report, TAMA with {TAMA_LEVELS} levels (docs/protocols/brvst.md, 'Peers': "
              "the model's assumptions, not TAMA's paper's).", ""]
    lines += verdicts(groups)
    lines += ["", "## Where the traffic goes (default configuration, first seed)", ""]
    default = [f for f in figs if f.point["sweep"] == "default" and f.point["proto"] == "brvst"]
    if default:
        f = default[0]
        lines += ["| message type | transmissions |", "|---|---|"]
        lines += [f"| {TYPE_NAMES.get(k, k)} | {v} |" for k, v in list(f.tx_by_type.items())[:12]]
        lines += ["", "Drops after the warm-up (duplicates of floods left out): "
                  + ", ".join(f"{k} {v}" for k, v in list(f.drops.items())[:12]) + "."]
    lines += ["", "## Optimum ratio", "",
              "n/a: the fewest transmissions that could have delivered each event "
              "(mesheval's optimum, branch `experiments`) is not in this branch's main yet; "
              "the ratio is computed once it is (see docs/protocols/brvst.md, 'What remains')."]
    lines += ["", "## Wall time", "", "| run | simulated s | wall s |", "|---|---|---|"]
    lines += [f"| {Point(**f.point).run_id} | {f.point['duration_s']:g} | {f.wall_s:.0f} |"
              for f in figs]
    text = "\n".join(lines) + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return text


TYPE_NAMES = {"1": "ACK", "16": "ANNOUNCE", "17": "RESIGN", "18": "SUBSCRIBE",
              "19": "UNSUBSCRIBE", "20": "LOCATE", "21": "GRSV_UPDATE", "22": "PUBLISH",
              "23": "PUB_UP", "24": "PUB_GRID", "25": "PUB_ZONE", "26": "DELIVER",
              "27": "ZRSV_UPDATE", "28": "PUB_ADVERT", "29": "SUB_HISTORY", "30": "SUB_QUERY",
              "31": "STATE_XFER"}


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
    # 4. grid sweep 64 -> 1 (Fig. 7(b)): fewer, larger grids hold more per broker
    grids = (125.0, 250.0, 500.0, 1000.0)
    st = [_ci(f.broker_bytes_mean for f in conf(grid_m=g)).mean for g in grids]
    lat = [_ci(f.latency_mean_s for f in conf(grid_m=g)).mean for g in grids]
    st_v = [x for x in st if x is not None]
    lat_v = [x for x in lat if x is not None]
    if len(st_v) == len(lat_v) == len(grids):
        grows = all(a <= b2 for a, b2 in itertools.pairwise(st_v))
        u_shaped = min(range(len(grids)), key=lambda i: lat_v[i]) in (1, 2)
        verdict = (f"storage per broker grows with grid size: {'yes' if grows else 'no'}; "
                   f"matching time U-shaped: {'yes' if u_shaped else 'no'}")
        figs = ", ".join(f"{round((1000 / g) ** 2)} grids {s_:.0f} B {t_:.3f} s"
                         for g, s_, t_ in zip(grids, st_v, lat_v, strict=True))
    else:
        verdict, figs = "n/a (grid sweep not run)", "-"
    out.append("| 64 -> 1 grids: matching time U-shaped, fewer brokers hold more (Fig. 7(b)) | "
               "minimum of matching time at 16 or 4 grids; broker bytes non-decreasing with "
               "grid size | " + figs + f" | {verdict} |")
    # 5. storage linear in load (Fig. 8-i(b))
    loads = (100.0, 200.0, 400.0)
    ys = [y for y in (_ci(f.broker_bytes_mean for f in conf(rate_per_min=r)).mean
                      for r in loads) if y is not None]
    if len(ys) == len(loads):
        r2 = _r2(list(loads), ys)
        verdict = "holds" if r2 >= 0.95 else "does not hold"
        figs = ", ".join(f"{r:g}/min {y:.0f} B" for r, y in zip(loads, ys, strict=True))
        figs += f"; R^2 {r2:.3f}"
    else:
        verdict, figs = "n/a (load sweep not run)", "-"
    out.append("| storage grows linearly with load (Fig. 8-i(b)) | R^2 of a straight line "
               "through broker bytes at 100, 200, 400 per minute >= 0.95 | " + figs
               + f" | {verdict} |")
    return out


def _r2(xs: list[float], ys: list[float]) -> float:
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxy = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True))
    sxx = sum((x - mx) ** 2 for x in xs)
    syy = sum((y - my) ** 2 for y in ys)
    return 1.0 if syy == 0 else sxy * sxy / (sxx * syy)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="the default configuration and flooding only (240 s runs, 2 seeds)")
    ap.add_argument("--seeds", type=int, default=0, help="seeds per configuration "
                    "(default 5, --quick 2)")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--runs", type=Path, default=Path("/tmp/msub-brvst-runs"))
    ap.add_argument("--keep", action="store_true", help="keep the RUNDIRs (about 2 MB per "
                    "simulated second)")
    ap.add_argument("--reuse", action="store_true", help="reuse figures of finished runs")
    ap.add_argument("--only", default="", help="run only the points whose run id contains "
                    "this (then --no-run writes the page from every finished run)")
    ap.add_argument("--no-run", action="store_true", help="write the page from the figures "
                    "of finished runs only (the page lists the runs missing)")
    ap.add_argument("--out", type=Path, default=REPORT)
    args = ap.parse_args(argv)
    seeds = args.seeds or (2 if args.quick else 5)
    if seeds < 1 or args.jobs < 1:
        print("brvst_experiments: --seeds and --jobs must be at least 1", file=sys.stderr)
        return 2
    args.runs.mkdir(parents=True, exist_ok=True)
    todo = points(args.quick, seeds)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print(f"{len(todo)} runs, {args.jobs} at a time; {load}", flush=True)
    figs: list[RunFigures] = []
    if args.no_run:
        missing = [p.run_id for p in todo if not (args.runs / f"{p.run_id}.json").exists()]
        figs = [run_point(p, args.runs, False, True) for p in todo
                if p.run_id not in missing]
        if not figs:
            print(f"brvst_experiments: no finished run in {args.runs}", file=sys.stderr)
            return 2
        text = write_report(figs, args, f"not measured here (--no-run), now `{load}`",
                            args.out, missing)
        print(text)
        return 0
    if args.only:
        todo = [p for p in todo if args.only in p.run_id]
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        futures = [pool.submit(run_point, p, args.runs, args.keep, args.reuse) for p in todo]
        for p, fut in zip(todo, futures, strict=True):
            f = fut.result()
            figs.append(f)
            print(f"{p.run_id}: delivery {ratio(f.delivered, f.expected)} wall {f.wall_s:.0f} s",
                  flush=True)
    load_after = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    text = write_report(figs, args, f"before `{load}`, after `{load_after}`", args.out)
    print(text)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
