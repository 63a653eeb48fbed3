"""TG vs ST vs flooding (Liu 2011, §4): runs the simulator, evaluates, writes docs/results/tg.md.

One command regenerates a page; each preset has its own (``report_for``):

    .venv/bin/python bench/tg_experiments.py --paper --jobs 2    # Table 2: tg.md
    .venv/bin/python bench/tg_experiments.py --recipe             # the recipe: tg-recipe.md
    .venv/bin/python bench/tg_experiments.py --quick --jobs 2    # 100 nodes: tg-quick.md
    .venv/bin/python bench/tg_experiments.py --jobs 2            # 200 nodes: tg-default.md

``--paper`` is the headline: Table 2's 500 nodes at 2 m/s with 10 s pauses for its whole
length (60 s warm-up, 600 s measured, 10 s drain), TG with L = 4, 3 and 6, ST and
flooding, 5 seeds, at the thesis's publication rate: about four CPU-hours, so it is run
once, resumably (``--reuse --runs DIR``), and its page states the cost measured.

``--recipe`` is the spec's recipe, the same set-up with the run shortened to 20 s warm-up
and 30 s measured (the page says why, with the cost of Table 2's length measured in the
same run); the sweeps run at its length.

The thesis's sweeps (``SWEEPS``: its parameter settings as plans of presets) write
docs/results/tg-sweep-speed.md and tg-sweep-size.md:

    .venv/bin/python bench/tg_experiments.py --sweep speed --jobs 2   # Figs. 2-3: 0-25 m/s
    .venv/bin/python bench/tg_experiments.py --sweep size --jobs 2    # Figs. 5-6: 500-1000
    .venv/bin/python bench/tg_experiments.py --sweep speed --quick    # reduced: 60 nodes

Every point is ``firmware-sim/meshsim/scenarios/tg-500.toml`` (Table 2's defaults:
random waypoint at 2 m/s with 10 s pauses, 150 m range, 50 random 8-letter
interests, 1-3 subscriptions of 1-4 interests per node, local:global 1:1) at the
preset's size, in an area scaled to keep Table 2's density (500 nodes per
2000 m x 2000 m), at the thesis's publication rate (5 % per node and second).
Schemes: TG (``preferred_levels`` 4), TG3 and TG6 (Fig. 4), ST and flooding
(``ttl = 10``). TG and ST run best effort (``reliable_publish = false``, the
thesis has no acknowledgements).

The figures are computed here from the run directories (the records each node
wrote and ``mobility.log``), per run:

- **delivery ratio** (Fig. 2): delivered expected (node, subscription) pairs
  within ``T_VALID`` = 10 s over expected pairs. Expected for a global event:
  every node whose subscription matches at publish time in the publisher's
  connected component (the unit-disk graph at publish time, the nodes' tracks in
  ``mobility.log`` linear between their points); for a
  local event: the matching nodes in the publisher's groups at publish time,
  from the ``member`` records of the TG run of the same seed (the same for
  every scheme; TG3 and TG6 use their own groups);
- **overhead** (Figs. 3-4): transmissions per second in the measured window
  (a broadcast and a unicast hop count 1 each), split into notification
  (``msg_kind`` data) and maintenance (everything else);
- **memory** (Fig. 5): bytes per node of subscription state about others, the
  protocols' ``state`` records (TG: store ``bitmaps``, ST: ``tables``; the
  node's own subscriptions excluded, so flooding is 0);
- **latency** (Fig. 6): mean over delivered expected pairs of deliver - publish
  time. Figs. 6(a) and (b) use global:local 3:1 and 1:3; here they are the 1:1
  runs' global and local deliveries re-weighted 3:1 and 1:3 (one set of runs);
- **ratio to the optimum** (``optimum_ratio``, ``optimum_ratio_high``): the counted
  events' notification transmissions over mesheval's optimum (docs/evaluation.md,
  "The optimum"), per event the fewest broadcasts that reach its expected receivers
  on the radio graph at its publish time (``mesheval.optimum.evaluate.run_metrics``).
  Where an event is not solved exactly the optimum is an interval, so the ratio lies
  between ``tx / best delivery found`` (``optimum_ratio``) and ``tx / lower bound``
  (``optimum_ratio_high``). It is taken over every ``--optimum-every``-th counted
  event by publish time (``OPTIMUM_EVERY``: the optimum costs milliseconds of CPU
  per event, and a paper-length run has about 15,000 events); events whose optimum
  is zero (no receiver but the publisher, none reachable) are left out of it;
- **notification / SPT**: the same transmissions over every counted event, against
  the broadcasts of a shortest-path tree from the publisher to the expected receivers
  (each relay of the union of shortest paths sends once): an upper bound on the
  optimum, cheap enough for every event, so a lower bound on the ratio to it.

Each verdict is computed from the figures with its rule printed on the page.
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from meshsim.run_records import NoTelemetryError, run_records

ROOT = Path(__file__).resolve().parents[1]
SCENARIO = ROOT / "firmware-sim" / "meshsim" / "scenarios" / "tg-500.toml"
RESULTS = ROOT / "docs" / "results"
HEADLINE = "paper"
"""The preset whose page is tg.md: Table 2's whole run; the others' pages are named
after them (tg-recipe.md, tg-quick.md, tg-default.md)."""


def report_for(preset_name: str) -> Path:
    """The page a preset's run writes unless ``--out`` says else."""
    return RESULTS / ("tg.md" if preset_name == HEADLINE else f"tg-{preset_name}.md")


T_VALID = 10.0
DENSITY = 500 / (2000.0 * 2000.0)  # Table 2: nodes per square metre
RATE = 0.05  # publications per node per second, Table 2
RANGE_M = 150.0
OPTIMUM_EVERY = 30
"""Default ``--optimum-every``: the optimum is solved for every k-th counted event by
publish time (measured at Table 2's length: see docs/protocols/tg.md, "Reproducing §4")."""
SCHEMES: dict[str, list[str]] = {
    "TG": ["protocol.name=tg", "protocol.tg.preferred_levels=4",
           "protocol.tg.reliable_publish=false"],
    "TG3": ["protocol.name=tg", "protocol.tg.preferred_levels=3",
            "protocol.tg.reliable_publish=false"],
    "TG6": ["protocol.name=tg", "protocol.tg.preferred_levels=6",
            "protocol.tg.reliable_publish=false"],
    "ST": ["protocol.name=st", "protocol.st.reliable_publish=false"],
    "flooding": ["protocol.name=flooding"],
}
COST = "cost.json"
"""Beside each run: its wall and CPU seconds (this worker's) and the load at its end."""
STORES = {"tg": "bitmaps", "st": "tables"}
"""The store that is a scheme's subscription state about others (Fig. 5's memory)."""
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
       9: 2.262, 10: 2.228}


@dataclass(frozen=True)
class Preset:
    """One evaluation point's settings (Table 2's names); the rest is tg-500.toml's."""

    name: str
    nodes: int
    warmup_s: float
    measured_s: float
    seeds: int
    speed_mps: float = 2.0
    """Random-waypoint speed (Table 2: 0-25 m/s, default 2); 0: the nodes stand still."""
    pause_s: float = 10.0
    """Random-waypoint pause (Table 2: 0-50 s, default 10)."""
    drain_s: float = 10.0
    """Simulated time after the measured window (tg-500.toml's 10 s). Counted events are
    published before its last ``T_VALID`` seconds, so their deliveries all fall inside
    it: 0 costs nothing in the figures and saves simulating the tail."""

    @property
    def side_m(self) -> float:
        return math.sqrt(self.nodes / DENSITY)


PRESETS = {
    "quick": Preset("quick", 100, 30.0, 60.0, 3),
    "default": Preset("default", 200, 40.0, 120.0, 5),
    "paper": Preset("paper", 500, 60.0, 600.0, 5),
    # The spec's recipe (issue 19): Table 2's 500 nodes, 2 m/s, 10 s pauses, L = 4, 5 seeds
    # at the thesis's publication rate, with the run shortened to what this machine can
    # simulate in about an hour (the page states the measured cost of the paper's length).
    "recipe": Preset("recipe", 500, 20.0, 30.0, 5, drain_s=0.0),
}


@dataclass(frozen=True)
class SweepPlan:
    """A parameter the thesis varies in one of its figures, as a plan of presets.

    ``paper`` is the thesis's range at Table 2's other defaults (``PRESETS["paper"]``);
    ``quick`` the same sweep reduced to run on a shared machine (fewer, smaller points:
    the verdicts then speak for those points only, and the page says so).
    """

    name: str
    what: str
    unit: str
    """The unit after a point's value in a sentence: "m/s" in "at 5 m/s"."""
    figures: str
    claims: tuple[str, ...]
    """The verdict rows (``claim_rows`` keys) this sweep's figures can test."""
    paper: tuple[Preset, ...]
    quick: tuple[Preset, ...]
    recipe: tuple[Preset, ...] = ()
    """The thesis's range at the recipe's run length (``PRESETS["recipe"]``)."""

    def presets(self, form: str) -> tuple[Preset, ...]:
        return {"paper": self.paper, "quick": self.quick, "recipe": self.recipe}[form]


def _vary(base: Preset, tag: str, **changes: Any) -> Preset:
    """``base`` with ``changes``, named after it and ``tag``. A point that changes
    nothing (the size sweep's 500 nodes) is ``base`` itself: the same simulation, so
    it keeps the base's run ids, and a sweep and the base preset's page run with
    ``--reuse`` into the same ``--runs`` directory share those runs."""
    from dataclasses import replace
    if all(getattr(base, key) == value for key, value in changes.items()):
        return base
    return replace(base, name=f"{base.name}-{tag}", **changes)


_QUICK_SWEEP = Preset("quick", 60, 20.0, 40.0, 2)
SWEEPS = {
    # Figs. 2-3: delivery and overhead vs. speed, 0-25 m/s, Table 2's 500 nodes
    "speed": SweepPlan(
        "speed", "node moving speed (m/s)", "m/s", "Figs. 2-3", ("delivery", "overhead"),
        tuple(_vary(PRESETS["paper"], f"v{v:g}", speed_mps=float(v))
              for v in (0, 5, 10, 15, 20, 25)),
        tuple(_vary(_QUICK_SWEEP, f"v{v:g}", speed_mps=float(v)) for v in (0, 10, 25)),
        tuple(_vary(PRESETS["recipe"], f"v{v:g}", speed_mps=float(v))
              for v in (0, 5, 10, 15, 20, 25))),
    # Figs. 5-6: memory and latency vs. network size, 500-1000 nodes at Table 2's density
    "size": SweepPlan(
        "size", "network size (nodes)", "nodes", "Figs. 5-6", ("memory", "latency"),
        tuple(_vary(PRESETS["paper"], f"n{n}", nodes=n) for n in (500, 625, 750, 875, 1000)),
        tuple(_vary(_QUICK_SWEEP, f"n{n}", nodes=n) for n in (40, 80)),
        tuple(_vary(PRESETS["recipe"], f"n{n}", nodes=n)
              for n in (500, 600, 700, 800, 900, 1000))),  # the spec's recipe: 500, 600, ... 1000
}
SWEEP_SCHEMES = ("TG", "ST", "flooding")
SWEEP_REPORT = RESULTS / "tg-sweep-{name}.md"


@dataclass(frozen=True)
class Point:
    scheme: str
    seed: int
    preset: Preset

    @property
    def run_id(self) -> str:
        return f"tg-{self.preset.name}-{self.scheme.lower()}-s{self.seed}"


# --------------------------------------------------------------------- running


def simulate(point: Point, runs: Path, reuse: bool) -> tuple[Path, float]:
    """Run one point into ``runs/<run id>`` with the simulator's run writer."""
    from meshsim.des.run import run_scenario
    from meshsim.scenario import load_scenario
    from meshsim.telemetry_parquet import writer_class

    out = runs / point.run_id
    if reuse and (out / "manifest.json").exists():
        manifest = json.loads((out / "manifest.json").read_text())
        return out, float(manifest["stats"]["wall_s"])
    if out.exists():
        shutil.rmtree(out)
    p = point.preset
    overrides = [
        f"scenario.seed={point.seed}", f"nodes.count={p.nodes}",
        f"area.width_m={p.side_m:.1f}", f"area.height_m={p.side_m:.1f}",
        f"scenario.warmup_s={p.warmup_s}", f"scenario.duration_s={p.warmup_s + p.measured_s}",
        f"scenario.drain_s={p.drain_s}",
        f"workload.generator.rate_per_s={RATE * p.nodes:.3f}",
        "scenario.state_every_s=10.0",
        *(['mobility={model="static"}'] if p.speed_mps == 0 else [
            f"mobility.speed_min={p.speed_mps}", f"mobility.speed_max={p.speed_mps}",
            f"mobility.pause_min={p.pause_s}", f"mobility.pause_max={p.pause_s}"]),
        *SCHEMES[point.scheme],
    ]
    started, cpu = time.perf_counter(), time.process_time()
    # Parquet: a flooding run at Table 2's length is ~45 million records, ~7 GB of node files
    run_scenario(load_scenario(SCENARIO, overrides), out, run_id=point.run_id,
                 writer_cls=writer_class("parquet"))
    wall = time.perf_counter() - started
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    (out / COST).write_text(json.dumps({"wall_s": wall, "cpu_s": time.process_time() - cpu,
                                        "load": load}) + "\n")
    return out, wall


# ------------------------------------------------------------------ evaluating


GRAPH_STEP_S = 0.25
"""The unit-disk graph of an event is taken at its publish time rounded down to this
step, so events close in time share one graph: a node moves at most speed x step from
where it was (0.5 m at Table 2's 2 m/s, 6.25 m at the speed sweep's 25 m/s, against the
150 m range), and a 600 s window builds at most 2,400 graphs."""


class Positions:
    """Every node's track from ``mobility.log``: its points (a waypoint, a pause's end)
    with the node moving in a straight line between them and holding its last point, as
    the simulator moved it (``mesheval.optimum.topology.read_tracks``)."""

    def __init__(self, rundir: Path) -> None:
        from mesheval.optimum.topology import read_tracks

        self.tracks = {n: (times.tolist(), xs.tolist(), ys.tolist())
                       for n, (times, xs, ys) in read_tracks(rundir / "mobility.log").items()}
        self._last: tuple[int, dict[int, list[int]]] | None = None

    def graph(self, t: float) -> dict[int, list[int]]:
        """The unit-disk graph at ``t`` rounded down to ``GRAPH_STEP_S`` (the last one
        built is kept: ``evaluate`` asks in publish-time order)."""
        step = math.floor(t / GRAPH_STEP_S)
        if self._last is None or self._last[0] != step:
            at = step * GRAPH_STEP_S
            pos = {n: self.at(n, at) for n in self.tracks}
            cells: dict[tuple[int, int], list[int]] = defaultdict(list)
            for n, (x, y) in pos.items():
                cells[(int(x // RANGE_M), int(y // RANGE_M))].append(n)
            adj: dict[int, list[int]] = {n: [] for n in pos}
            r2 = RANGE_M * RANGE_M
            for (cx, cy), members in cells.items():
                for dx in (-1, 0, 1):
                    for dy in (-1, 0, 1):
                        for b in cells.get((cx + dx, cy + dy), ()):
                            xb, yb = pos[b]
                            for a in members:
                                if a != b:
                                    xa, ya = pos[a]
                                    if (xa - xb) ** 2 + (ya - yb) ** 2 <= r2:
                                        adj[a].append(b)
            self._last = (step, adj)
        return self._last[1]

    def at(self, node: int, t: float) -> tuple[float, float]:
        """Where ``node`` is at ``t`` (plain floats: numpy's per-call cost, once per node
        and graph, would be most of a graph's)."""
        times, xs, ys = self.tracks[node]
        i = bisect.bisect_right(times, t)
        if i == 0:
            return xs[0], ys[0]
        if i == len(times):
            return xs[-1], ys[-1]
        f = (t - times[i - 1]) / (times[i] - times[i - 1])
        return xs[i - 1] + f * (xs[i] - xs[i - 1]), ys[i - 1] + f * (ys[i] - ys[i - 1])


def bfs_parents(adj: dict[int, list[int]], source: int) -> dict[int, int | None]:
    parent: dict[int, int | None] = {source: None}
    frontier = [source]
    while frontier:
        nxt = []
        for a in frontier:
            for b in adj.get(a, ()):
                if b not in parent:
                    parent[b] = a
                    nxt.append(b)
        frontier = nxt
    return parent


def spt_broadcasts(parent: dict[int, int | None], receivers: Iterable[int]) -> int:
    """Relays of the union of shortest paths to ``receivers``: each broadcasts once."""
    senders: set[int] = set()
    for r in receivers:
        v: int | None = r
        while v is not None and parent.get(v) is not None:
            p = parent[v]
            assert p is not None
            if p in senders:
                break
            senders.add(p)
            v = p
    return len(senders)


class Membership:
    """Who was in which group when, from a TG run's ``member`` records."""

    def __init__(self, rundir: Path) -> None:
        self.spans: dict[int, list[tuple[str, float, float]]] = defaultdict(list)
        open_at: dict[tuple[int, str], float] = {}
        for r in run_records(rundir, {"member"}):
            key = (r["node"], r["group"])
            t = r["ts_ns"] / 1e9
            if r["reason"] == "join":
                open_at[key] = t
            elif key in open_at:
                self.spans[key[0]].append((key[1], open_at.pop(key), t))
        for (node, group), t in open_at.items():
            self.spans[node].append((group, t, math.inf))

    def groups(self, node: int, t: float) -> set[str]:
        return {g for g, a, b in self.spans.get(node, ()) if a <= t < b}

    def members(self, groups: set[str], t: float) -> set[int]:
        return {n for n, spans in self.spans.items()
                if any(g in groups and a <= t < b for g, a, b in spans)}

    def count(self, t: float) -> int:
        """Groups (TG) or trees (ST) with a member at ``t``."""
        return len({g for spans in self.spans.values() for g, a, b in spans if a <= t < b})


@dataclass
class RunFigures:
    scheme: str
    seed: int
    wall_s: float
    published: int = 0
    expected: dict[str, int] = field(default_factory=lambda: {"global": 0, "local": 0})
    delivered: dict[str, int] = field(default_factory=lambda: {"global": 0, "local": 0})
    latency_sum: dict[str, float] = field(default_factory=lambda: {"global": 0.0, "local": 0.0})
    notification_tx: int = 0
    maintenance_tx: int = 0
    measured_s: float = 0.0
    memory_bytes: float = 0.0
    spt_broadcasts: int = 0
    event_notification_tx: int = 0
    """Every transmission of the counted events' copies (whenever it happened)."""
    groups: tuple[float, float] = (math.nan, math.nan)
    """Groups (TG) or trees (ST) at the start and the end of the measured window, from
    the run's own ``member`` records; NaN for flooding."""
    simulated_s: float = math.nan
    """Simulated seconds of the run (warm-up, measured window and drain): its CPU time
    per simulated second is the cost of a longer run."""
    cpu_s: float = math.nan
    """CPU seconds of the simulation (``cost.json``; NaN for runs made before it was kept)."""
    optimum_ratio: float | None = None
    """Sampled events' notification transmissions / the optimum's best delivery found
    (mesheval's ``optimum_ratio``); None (n/a) where the run gives no topology."""
    optimum_ratio_high: float | None = None
    """The same over the optimum's lower bound: the ratio lies between the two."""
    opt_every: int = 1
    opt_sample: int = 0
    """Counted events in the optimum's sample (every ``opt_every``-th by publish time)."""
    opt_events: int = 0
    """Those of the sample with a non-zero optimum: the ones the ratio is over."""
    opt_error: str | None = None
    opt_cpu_s: float = math.nan
    """CPU seconds the optimum took (``time.process_time``)."""

    @property
    def delivery(self) -> float:
        e = sum(self.expected.values())
        return sum(self.delivered.values()) / e if e else math.nan

    def latency(self, global_weight: float = 1.0, local_weight: float = 1.0) -> float:
        d = global_weight * self.delivered["global"] + local_weight * self.delivered["local"]
        s = (global_weight * self.latency_sum["global"]
             + local_weight * self.latency_sum["local"])
        return s / d if d else math.nan

    @property
    def overhead_per_s(self) -> float:
        return (self.notification_tx + self.maintenance_tx) / self.measured_s

    @property
    def spt_ratio(self) -> float:
        """Notification / SPT: a lower bound on the ratio to the optimum (every event)."""
        return (self.event_notification_tx / self.spt_broadcasts if self.spt_broadcasts
                else math.nan)


def evaluate(rundir: Path, point: Point, wall_s: float, groups_from: Path,
             optimum_every: int = OPTIMUM_EVERY) -> RunFigures:
    from meshsub.core.disjunction import delivery_group
    from meshsub.core.syntax import parse_event, parse_subscription
    from meshsub.core.tags import Scope, event_scope

    p = point.preset
    t0, t1 = p.warmup_s, p.warmup_s + p.measured_s
    fig = RunFigures(point.scheme, point.seed, wall_s, measured_s=p.measured_s,
                     simulated_s=p.warmup_s + p.measured_s + p.drain_s)
    subs: dict[int, list[tuple[str, Any, float]]] = defaultdict(list)
    pubs: list[tuple[str, int, float, Any]] = []
    delivered: dict[str, dict[tuple[int, str], float]] = defaultdict(dict)
    store = STORES.get(SCHEMES[point.scheme][0].split("=")[1])
    memory: list[int] = []
    per_event: Counter[str] = Counter()
    wanted = {"subscribe", "publish", "deliver", "tx", "state"}
    for r in run_records(rundir, wanted):
        t = r["ts_ns"] / 1e9
        ev = r["event"]
        if ev == "tx":
            if r["msg_kind"] == "data":
                per_event[r.get("event_id", "")] += 1
            if t0 <= t < t1:
                if r["msg_kind"] == "data":
                    fig.notification_tx += 1
                else:
                    fig.maintenance_tx += 1
        elif ev == "deliver":
            key = (r["node"], r["sub_id"])
            delivered[r["event_id"]].setdefault(key, t)
        elif ev == "publish":
            if t0 <= t < t1 - T_VALID:
                pubs.append((r["event_id"], r["node"], t, parse_event(r["content"])))
        elif ev == "subscribe":
            subs[r["node"]].append((r["sub_id"], parse_subscription(r["content"]), t))
        elif ev == "state" and store is not None and r["store"] == store and t0 <= t < t1:
            memory.append(r["bytes"])
    # nodes that report no such store hold none of it (0 bytes); state records come
    # per node every state_every_s, so the mean over all nodes' reports is per node
    reports = max(1, int(p.measured_s // 10.0)) * p.nodes
    fig.memory_bytes = sum(memory) / reports if store is not None else 0.0
    positions = Positions(rundir)
    membership = Membership(groups_from)
    if store is not None:
        own = membership if groups_from == rundir else Membership(rundir)
        fig.groups = (float(own.count(t0)), float(own.count(t1 - 1e-9)))
    fig.published = len(pubs)
    fig.event_notification_tx = sum(per_event[event_id] for event_id, *_ in pubs)
    pubs.sort(key=lambda p: (p[2], p[0]))  # by publish time: the optimum's sample
    receivers: list[tuple[str, int, float, tuple[int, ...], int]] = []
    for i, (event_id, publisher, t, event) in enumerate(pubs):
        scope = "local" if event_scope(event) is Scope.LOCAL else "global"
        adj = positions.graph(t)
        parent = bfs_parents(adj, publisher)
        if scope == "local":
            reach = membership.members(membership.groups(publisher, t), t) | {publisher}
        else:
            reach = set(parent)
        want = {(n, delivery_group(sid)) for n in reach for sid, sub, ts in subs.get(n, ())
                if ts <= t and sub.matches(event)}  # an OR's members owe one delivery
        got = delivered.get(event_id, {})
        fig.expected[scope] += len(want)
        for key in want:
            td = got.get(key)
            if td is not None and td - t <= T_VALID:
                fig.delivered[scope] += 1
                fig.latency_sum[scope] += td - t
        fig.spt_broadcasts += spt_broadcasts(parent, {n for n, _ in want if n in parent})
        if i % optimum_every == 0:
            receivers.append((event_id, publisher, t, tuple(sorted({n for n, _ in want})),
                              per_event[event_id]))
    optimum(fig, rundir, receivers, optimum_every)
    return fig


def optimum(fig: RunFigures, rundir: Path,
            events: list[tuple[str, int, float, tuple[int, ...], int]], every: int) -> None:
    """The sampled events' (id, publisher, publish time, expected receivers, notification
    transmissions) against mesheval's optimum on the run's radio graph at each publish
    time; n/a (None, ``opt_error`` says why) where the run directory has no topology.
    No first deliveries are handed over: the path stretches they would give are not
    on this page, and their shortest paths would cost another search per event."""
    from mesheval.optimum.evaluate import EventRow, RunContext, run_metrics

    started = time.process_time()
    path = rundir / "manifest.json"
    manifest = json.loads(path.read_text()) if path.exists() else {}
    rows = [EventRow(str(manifest.get("run", rundir.name)), eid, node, t, want, (), tx)
            for eid, node, t, want, tx in events]
    metrics, _per_event = run_metrics(rows, RunContext(rundir, manifest, None))
    fig.opt_every, fig.opt_sample = every, len(rows)
    fig.opt_error = metrics.get("opt_error")
    fig.optimum_ratio = metrics.get("optimum_ratio")
    fig.optimum_ratio_high = metrics.get("optimum_ratio_high")
    fig.opt_events = int(metrics.get("opt_events") or 0)
    fig.opt_cpu_s = time.process_time() - started


def evaluated(rundir: Path, point: Point, wall_s: float, groups_from: Path,
              reuse: bool, optimum_every: int = OPTIMUM_EVERY) -> RunFigures:
    """``evaluate``, kept in ``rundir/figures.json``: with ``--reuse`` a finished run
    evaluated by the same code against the same groups and optimum sample is not read
    again (a 500-node run's records take about a minute, its optimum's sample at the
    default ``--optimum-every`` about half a minute more)."""
    import hashlib
    import inspect

    from mesheval.optimum import evaluate as opt_evaluate
    from mesheval.optimum import graph, journeys, steiner, topology
    from mesheval.optimum.topology import TopologyError

    code = hashlib.sha256("".join(inspect.getsource(f) for f in (
        evaluate, Membership, Positions, run_records, spt_broadcasts, bfs_parents,
        optimum, opt_evaluate, graph, journeys, steiner, topology)).encode()).hexdigest()
    key = {"code": code, "groups_from": str(groups_from.resolve()),
           "preset": asdict(point.preset), "optimum_every": optimum_every,
           "graph_step_s": GRAPH_STEP_S}
    cache = rundir / "figures.json"
    if reuse and cache.exists():
        kept = json.loads(cache.read_text())
        if kept.get("key") == key:
            fig = RunFigures(**kept["figures"])
            fig.wall_s = wall_s
            fig.groups = tuple(fig.groups)  # type: ignore[assignment]
            return with_cost(fig, rundir)
    try:
        fig = evaluate(rundir, point, wall_s, groups_from, optimum_every)
    except NoTelemetryError as exc:  # an archived run: refused, not a page of zeros
        raise SystemExit(f"{exc}: unpack its node files, or rerun it without --reuse") \
            from None
    except TopologyError as exc:  # no mobility.log, or a bad line in it: no graph
        raise SystemExit(f"tg_experiments: {exc}") from None
    cache.write_text(json.dumps({"key": key, "figures": asdict(fig)}) + "\n")
    return with_cost(fig, rundir)


def with_cost(fig: RunFigures, rundir: Path) -> RunFigures:
    if (rundir / COST).exists():
        fig.cpu_s = float(json.loads((rundir / COST).read_text())["cpu_s"])
    return fig


# --------------------------------------------------------------------- summary


@dataclass(frozen=True)
class Estimate:
    mean: float
    half: float
    n: int

    @property
    def lo(self) -> float:
        return self.mean - self.half

    @property
    def hi(self) -> float:
        return self.mean + self.half

    def __str__(self) -> str:
        if math.isnan(self.mean):
            return "n/a"
        digits = 3 if abs(self.mean) < 10 else 1 if abs(self.mean) < 1000 else 0
        return f"{self.mean:.{digits}f} ± {self.half:.{digits}f}"


def estimate(values: list[float]) -> Estimate:
    vals = [v for v in values if not math.isnan(v)]
    if not vals:
        return Estimate(math.nan, math.nan, 0)
    if len(vals) == 1:
        return Estimate(vals[0], math.inf, 1)
    half = T95[min(len(vals) - 1, 10)] * statistics.stdev(vals) / math.sqrt(len(vals))
    return Estimate(statistics.fmean(vals), half, len(vals))


def less(a: Estimate, b: Estimate) -> str:
    """a < b: holds if a's interval lies below b's, fails if above, else inconclusive."""
    if a.n == 0 or b.n == 0:
        return "n/a"
    if a.hi < b.lo:
        return "holds"
    if a.lo > b.hi:
        return "fails"
    return "inconclusive"


def much_less(a: Estimate, b: Estimate, factor: float) -> str:
    """a ≪ b read as a * factor <= b on the means, with a's interval below b's; it fails
    where even a's lower bound times the factor lies above b's upper bound (or a's mean
    is not below b's)."""
    if a.n == 0 or b.n == 0:
        return "n/a"
    if a.mean * factor <= b.mean and a.hi < b.lo:
        return "holds"
    if a.mean >= b.mean or a.lo * factor > b.hi:
        return "fails"
    return "inconclusive"


def about(a: Estimate, b: Estimate, tol: float) -> str:
    """a ≈ b: abs(a - b) <= tol * max(a, b) on the means."""
    if a.n == 0 or b.n == 0:
        return "n/a"
    return "holds" if abs(a.mean - b.mean) <= tol * max(abs(a.mean), abs(b.mean)) else "fails"


def at_least(a: Estimate, b: Estimate, tol: float) -> str:
    """a >= b within tol (absolute): a.mean >= b.mean - tol."""
    if a.n == 0 or b.n == 0:
        return "n/a"
    return "holds" if a.mean >= b.mean - tol else "fails"


def estimates(figs: list[RunFigures]) -> Figs:
    """Every figure of the page, per scheme, as a mean and 95 % interval over seeds."""
    by: dict[str, list[RunFigures]] = defaultdict(list)
    for f in figs:
        by[f.scheme].append(f)
    value_of: dict[str, Any] = {
        "delivery": lambda f: f.delivery,
        "overhead": lambda f: f.overhead_per_s,
        "notif": lambda f: f.notification_tx / f.measured_s,
        "maint": lambda f: f.maintenance_tx / f.measured_s,
        "mshare": lambda f: f.maintenance_tx / (f.notification_tx + f.maintenance_tx)
        if f.notification_tx + f.maintenance_tx else math.nan,
        "memory": lambda f: f.memory_bytes,
        "lat31": lambda f: f.latency(3.0, 1.0),
        "lat13": lambda f: f.latency(1.0, 3.0),
        "dglob": lambda f: f.delivered["global"] / f.expected["global"]
        if f.expected["global"] else math.nan,
        "dloc": lambda f: f.delivered["local"] / f.expected["local"]
        if f.expected["local"] else math.nan,
        "opt": lambda f: _nan(f.optimum_ratio),
        "opt_high": lambda f: _nan(f.optimum_ratio_high),
        "opt_events": lambda f: float(f.opt_events) if f.optimum_ratio is not None
        else math.nan,
        "spt": lambda f: f.spt_ratio,
        "per_event": lambda f: f.event_notification_tx / f.published if f.published
        else math.nan,
        "pairs": lambda f: sum(f.expected.values()) / f.published if f.published
        else math.nan,
        "groups0": lambda f: f.groups[0],
        "groups1": lambda f: f.groups[1],
        "cost": lambda f: f.cpu_s / f.simulated_s,
        "share": lambda f: f.cpu_s / f.wall_s,
    }
    return {key: {s: estimate([value(f) for f in by[s]]) for s in SCHEMES if s in by}
            for key, value in value_of.items()}


def _nan(value: float | None) -> float:
    """A figure that may be n/a (None) as an ``estimate`` input: n/a is NaN there."""
    return math.nan if value is None else value


def _span(values: list[int]) -> str:
    return str(min(values)) if min(values) == max(values) else f"{min(values)}-{max(values)}"


def optimum_note(figs: list[RunFigures]) -> list[str]:
    """What the ratio-to-the-optimum columns are, over which events, and which runs
    could not give them (the runs' ``opt_error``)."""
    every = sorted({f.opt_every for f in figs})
    samples = [f.opt_sample for f in figs if f.optimum_ratio is not None]
    cpu = [f.opt_cpu_s for f in figs if not math.isnan(f.opt_cpu_s)]
    missing = sorted({f"{f.scheme} seed {f.seed}: {f.opt_error}" for f in figs
                      if f.optimum_ratio is None})
    sample = ("every counted event" if every == [1] else
              "a sample, one counted event in " + "/".join(map(str, every))
              + " by publish time (`--optimum-every`)")
    return [
        "*tx / optimum* and *tx / lower bound*: the counted events' notification "
        "transmissions over mesheval's optimum (docs/evaluation.md, 'The optimum'), per "
        "event the fewest broadcasts that reach its expected receivers on the radio graph "
        "at its publish time; where an event is not solved exactly the optimum is an "
        "interval and the ratio lies between the two columns (best delivery found, lower "
        f"bound). They are over {sample}, "
        + (f"{_span(samples)} events per run" if samples else "no run")
        + " (*optimum events*: those with a non-zero optimum, the ones the ratio is "
        "over), at "
        + (f"{statistics.fmean(cpu):.1f} CPU s per run for the optimum" if cpu else
           "a cost not measured")
        + ". *notification / SPT*: the same transmissions over every counted event, "
        "against a shortest-path tree's broadcasts to the expected receivers, an upper "
        "bound on the optimum (so a lower bound on the ratio to it); it is kept because "
        "it covers every event, not a sample.",
        *(["", "n/a: no topology for the optimum in " + "; ".join(missing) + "."]
          if missing else []),
    ]


def write_report(preset: Preset, figs: list[RunFigures], load: str, wall: float,
                 seeds: list[int], figures_json: str = "") -> str:
    """The preset's page; ``figures_json`` names the JSON written beside it."""
    figures_json = figures_json or report_for(preset.name).with_suffix(".json").name
    e = estimates(figs)
    schemes = [s for s in SCHEMES if s in e["delivery"]]
    delivery, overhead, notif, maint = e["delivery"], e["overhead"], e["notif"], e["maint"]
    memory, lat31, lat13 = e["memory"], e["lat31"], e["lat13"]
    dglob, dloc, per_event = e["dglob"], e["dloc"], e["per_event"]

    lines = [
        "# TG results: Liu 2011, §4, reproduced in the simulator",
        "",
        "Generated by `bench/tg_experiments.py"
        + ("" if preset.name == "default" else f" --{preset.name}")
        + (f" --seeds {len(seeds)}" if len(seeds) != preset.seeds else "")
        + f"` (do not edit by hand); the figures are also in `docs/results/{figures_json}`.",
        "",
        *([f"**Seeds: {len(seeds)} of the preset's {preset.seeds}.** The machine time "
           "of this session (a shared machine) did not reach further; the whole "
           f"plan is `bench/tg_experiments.py --{preset.name}` on an idle machine, "
           "and with fewer seeds the 95 % intervals are wider (Student t with "
           f"{max(1, len(seeds) - 1)} degree(s) of freedom), so fewer orderings are "
           "decided.", ""] if len(seeds) < preset.seeds else []),
        f"Preset `{preset.name}`: {preset.nodes} nodes on {preset.side_m:.0f} m x "
        f"{preset.side_m:.0f} m (Table 2's density), 150 m range, random waypoint 2 m/s "
        f"with 10 s pauses, {preset.warmup_s:g} s warm-up and {preset.measured_s:g} s "
        f"measured, {RATE * preset.nodes:g} publications/s (Table 2's 5 % per node and "
        f"second), local:global 1:1, seeds {', '.join(map(str, seeds))}; mean ± 95 % "
        "interval (Student t over seeds). Machine load at the end of this command "
        f"(uptime): `{load}`; the runs' simulation wall time "
        f"{sum(f.wall_s for f in figs):.0f} s and CPU time "
        f"{sum(f.cpu_s for f in figs if not math.isnan(f.cpu_s)):.0f} s in all (their "
        f"cost.json, summed), this pass's wall time {wall:.0f} s (a pass with `--reuse` "
        "reads the runs it finds finished instead of simulating them again).",
        "",
        *run_length_note(preset, e),
        "The thesis's figures are images that did not survive; it states orderings only "
        "(§4.2), so each claim below is an ordering checked by a rule. See "
        "bench/tg_experiments.py for how every figure is computed and "
        "[docs/protocols/tg.md](../protocols/tg.md) for what differs from the thesis.",
        "",
        "## Figures",
        "",
        "| scheme | delivery | global | local | overhead tx/s | notification | maintenance "
        "| maintenance share | notification tx/event | memory B/node | latency 3:1 s "
        "| latency 1:3 s | tx / optimum | tx / lower bound | optimum events "
        "| notification / SPT |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in schemes:
        lines.append(f"| {s} | {delivery[s]} | {dglob[s]} | {dloc[s]} | {overhead[s]} | "
                     f"{notif[s]} | {maint[s]} | {e['mshare'][s]} | {per_event[s]} | "
                     f"{memory[s]} | {lat31[s]} | "
                     f"{lat13[s]} | {e['opt'][s]} | {e['opt_high'][s]} | "
                     f"{e['opt_events'][s]} | {e['spt'][s]} |")
    lines += [
        "",
        *optimum_note(figs),
        "",
        "| scheme | groups (TG) or trees (ST) at the window's start | at its end "
        "| CPU s per simulated s |",
        "|---|---|---|---|",
        *(f"| {s} | {e['groups0'][s]} | {e['groups1'][s]} | {e['cost'][s]} |"
          for s in schemes),
        "",
        "Groups and trees are counted from each run's own `member` records (flooding has "
        "none). The thesis's ST is one tree over the network; here ST's trees merge "
        "only as fast as its merge protocol goes (a gateway, a lock, a re-rooting per "
        "merge, docs/protocols/tg.md), so a count above 1 means ST was measured while "
        "still merging: its events do not cross from one tree into another, and its "
        "maintenance includes the merges.",
        "",
        "## Verdicts",
        "",
        "| claim (Liu 2011) | rule | verdict |",
        "|---|---|---|",
    ]

    for _key, claim, rule, verdict in claim_rows(e):
        lines.append(f"| {claim} | {rule} | **{verdict}** |")
    lines += [
        "",
        "*holds*: the figures satisfy the rule; *fails*: they contradict it; "
        "*inconclusive*: the 95 % intervals overlap (more seeds or a longer run may "
        "decide). Latency at 3:1 and 1:3 re-weights the 1:1 runs' global and local "
        "deliveries. Figs. 2-3 over speeds 0-25 m/s and Figs. 5-6 over 500-1000 nodes: "
        "`--sweep speed` and `--sweep size` ([tg-sweep-speed.md](tg-sweep-speed.md), "
        "[tg-sweep-size.md](tg-sweep-size.md)).",
        "",
        "Flooding's notification cost per event grows with the nodes it reaches and ST's "
        "maintenance with the nodes and links, so ST ≪ flooding depends on the size: "
        "compare the *notification tx/event* column at this preset's size with Table 2's "
        "500 nodes before reading the R2 verdict as the thesis's.",
        *differences_section(differences(e, claim_rows(e), preset.nodes)),
        "",
        "## Runs",
        "",
        "| scheme | seed | published | expected pairs | delivered | tx | wall s |",
        "|---|---|---|---|---|---|---|",
    ]
    for f in sorted(figs, key=lambda f: (list(SCHEMES).index(f.scheme), f.seed)):
        lines.append(f"| {f.scheme} | {f.seed} | {f.published} | {sum(f.expected.values())} | "
                     f"{sum(f.delivered.values())} | {f.notification_tx + f.maintenance_tx} | "
                     f"{f.wall_s:.0f} |")
    return "\n".join(lines) + "\n"


def sweep_cost_s(cost: dict[str, float], run_s: float, seeds: int) -> tuple[float, float]:
    """CPU seconds of the speed and the size sweep at ``cost`` CPU-s per simulated second
    per scheme and runs of ``run_s`` simulated seconds (the size sweep's cost taken as
    linear in the nodes, a lower bound: it grows faster)."""
    three = sum(cost.get(s, math.nan) for s in SWEEP_SCHEMES) * run_s * seeds
    base = PRESETS["recipe"].nodes
    return (three * len(SWEEPS["speed"].recipe),
            three * sum(p.nodes / base for p in SWEEPS["size"].recipe))


def paper_length_note(preset: Preset, e: Figs) -> list[str]:
    """Table 2's whole run: what it cost here, and why the sweeps run shorter."""
    cost = {s: c.mean for s, c in e["cost"].items() if c.n}
    if not cost:
        return []
    length = preset.warmup_s + preset.measured_s + preset.drain_s
    spent = sum(cost.values()) * length * preset.seeds
    share = statistics.fmean(c.mean for c in e["share"].values() if c.n)
    speed_s, size_s = sweep_cost_s(cost, length, preset.seeds)
    trees = e["groups0"].get("ST"), e["groups1"].get("ST")
    merged = (f" ST had {trees[0].mean:.1f} trees when the window opened and "
              f"{trees[1].mean:.1f} when it closed (mean over seeds)."
              if trees[0] is not None and trees[1] is not None and trees[0].n else "")
    return [
        "**Run length.** Table 2's whole run for every scheme (60 s warm-up, 600 s "
        f"measured, {preset.drain_s:g} s drain) at the thesis's publication rate "
        f"({RATE * preset.nodes:g} events/s). CPU seconds per simulated second measured "
        "in these runs: " + ", ".join(f"{s} {c:.2f}" for s, c in cost.items())
        + f"; {spent / 3600:.1f} hours of CPU for the plan (the runs got {share:.0%} of "
        f"one core on average, on a shared machine).{merged} The same set-up with the "
        "run shortened to 20 s warm-up and 30 s measured is the spec's recipe, "
        "[tg-recipe.md](tg-recipe.md). The thesis's sweeps run at the recipe's length "
        "([tg-sweep-speed.md](tg-sweep-speed.md), [tg-sweep-size.md](tg-sweep-size.md)): "
        f"at Table 2's length and these costs the speed sweep would take "
        f"{speed_s / 3600:.1f} and the size sweep at least {size_s / 3600:.1f} hours of "
        "CPU (the cost taken as linear in the nodes).",
        "",
    ]


PAPER_RUN_S = PRESETS["paper"].warmup_s + PRESETS["paper"].measured_s + \
    PRESETS["paper"].drain_s


def run_length_note(preset: Preset, e: Figs) -> list[str]:
    """Why the recipe's runs are shorter than the thesis's, with the cost measured here;
    for Table 2's whole run, its cost and where the shorter runs' pages are."""
    if preset.name == HEADLINE:
        return paper_length_note(preset, e)
    if preset.name != "recipe":
        return []
    cost = {s: c.mean for s, c in e["cost"].items() if c.n}
    length = preset.warmup_s + preset.measured_s + preset.drain_s
    trees = (e["groups0"].get("ST"), e["groups1"].get("ST"))
    merging = (f"The price of the short warm-up: ST is measured while its trees still "
               f"merge ({trees[0].mean:.1f} trees at the window's start, "
               f"{trees[1].mean:.1f} at its end, mean over seeds). "
               if trees[0] is not None and trees[1] is not None and trees[0].n
               and trees[0].mean > 1 else "")
    maint_share = (e["maint"]["ST"].mean / e["overhead"]["ST"].mean
                   if "ST" in e["overhead"] else math.nan)
    why = ("The run is shortened rather than the rate lowered: the "
           "notification/maintenance split the thesis compares depends on the rate "
           f"({maint_share:.0%} of ST's transmissions here are maintenance) and not on "
           "the run's length; what a lower rate would save was not measured. " + merging)
    if len(cost) < len(e["cost"]) or not cost:
        return ["**Rate and run length.** The recipe keeps the thesis's publication rate "
                f"({RATE * preset.nodes:g} events/s) and shortens the run to "
                f"{length:g} simulated seconds. " + why
                + "(The CPU cost per simulated second is not known for every scheme: "
                f"runs made before `{COST}` was kept have none.)", ""]
    per_seed = sum(cost.values()) * PAPER_RUN_S
    share = statistics.fmean(c.mean for c in e["share"].values() if c.n)
    total = per_seed * preset.seeds
    here = sum(cost.values()) * length * preset.seeds
    sweep_s, size_s = sweep_cost_s(cost, length, preset.seeds)
    return [
        "**Rate and run length.** The recipe keeps the thesis's publication rate "
        f"({RATE * preset.nodes:g} events/s, Table 2's 5 % per node and second) and "
        "shortens the run: Table 2's length (60 s warm-up, 600 s measured, "
        f"{PRESETS['paper'].drain_s:g} s drain) for {len(cost)} schemes and "
        f"{preset.seeds} seeds would cost {total / 3600:.1f} hours of CPU time on this "
        "machine at the CPU seconds per simulated second measured in this run ("
        + ", ".join(f"{s} {c:.2f}" for s, c in cost.items())
        + f"; {per_seed / 3600:.1f} h per seed), against {here / 60:.0f} minutes for "
        f"this plan; the runs got {share:.0%} of one core on average (CPU over wall "
        "time, on a shared machine). " + why
        + "Table 2's length is `bench/tg_experiments.py --paper`, whose page is "
        "[tg.md](tg.md).",
        "",
        "**The sweeps at the recipe's settings** are not part of this run: at the "
        "costs above, the speed sweep (Figs. 2-3: 0, 5, 10, 15, 20, 25 m/s; TG, ST, flooding; "
        f"{preset.seeds} seeds) would take {sweep_s / 3600:.1f} hours of CPU and the "
        "size sweep (Figs. 5-6: 500, 600, ..., 1000 nodes) at least "
        f"{size_s / 3600:.1f} hours (the cost per simulated second taken as linear in "
        "the nodes; it grows faster). One command each: "
        "`bench/tg_experiments.py --sweep speed --recipe` and `--sweep size --recipe`; "
        "their pages are [tg-sweep-speed.md](tg-sweep-speed.md) and "
        "[tg-sweep-size.md](tg-sweep-size.md), which show "
        f"{sweep_page_shows('speed')} and {sweep_page_shows('size')} respectively.",
        "",
    ]


def sweep_page_shows(name: str) -> str:
    """What a sweep's page shows, from its JSON: the plan, the seeds it ran and their
    runs' measured CPU time (where every run kept its cost)."""
    path = Path(str(SWEEP_REPORT).format(name=name)).with_suffix(".json")
    try:
        data = json.loads(path.read_text())
        plan = str(data["plan"])
        per_point = [len(p["figures"]) // len(SWEEP_SCHEMES) for p in data["points"]]
        cpu = [float(f.get("cpu_s", math.nan)) for p in data["points"] for f in p["figures"]]
        points = len(SWEEPS[name].presets(plan))
    except (OSError, ValueError, KeyError, TypeError):
        return "no figures yet"
    if not per_point:
        return "no figures yet"
    low, high = min(per_point), max(per_point)
    seeds = str(low) if low == high else f"{low}-{high}"
    of = "" if plan != "recipe" else f" of the recipe's {PRESETS['recipe'].seeds}"
    where = "" if len(per_point) == points else f" at {len(per_point)} of its {points} points"
    measured = ("" if not cpu or any(math.isnan(c) for c in cpu)
                else f" (their simulations took {sum(cpu) / 3600:.1f} hours of CPU, "
                "measured; the evaluation is not counted)")
    return (f"the {'reduced' if plan == 'quick' else plan} plan (`{plan}`) with {seeds}"
            f"{of} seed{'s' if high != 1 or of else ''}"
            f"{' per point' if low != high else ''}{where}{measured}")


Figs = dict[str, dict[str, Estimate]]
"""Per figure (delivery, overhead, maint, memory, lat31, lat13), per scheme: an estimate."""


def claim_rows(f: Figs) -> list[tuple[str, str, str, str]]:
    """Every claim the figures can test: (figure key, claim, rule, verdict); a claim whose
    schemes did not run is left out."""
    out: list[tuple[str, str, str, str]] = []
    delivery, overhead, maint, share = f["delivery"], f["overhead"], f["maint"], f["mshare"]
    memory, lat31, lat13 = f["memory"], f["lat31"], f["lat13"]

    def have(*names: str) -> bool:
        return all(n in delivery for n in names)

    def row(key: str, claim: str, rule: str, verdict: str) -> None:
        out.append((key, claim, rule, verdict))

    if have("TG", "ST"):
        row("overhead", "R2: overhead TG < ST (Fig. 3)", "TG's interval below ST's",
            less(overhead["TG"], overhead["ST"]))
    if have("ST", "flooding"):
        row("overhead", "R2: overhead ST ≪ flooding (Fig. 3)",
            "2 x ST's mean <= flooding's, intervals apart; fails if 2 x ST's lower "
            "bound > flooding's upper bound",
            much_less(overhead["ST"], overhead["flooding"], 2.0))
    # Fig. 4 is one setting (Table 2's defaults), so its rows are "breakdown", which
    # no sweep tests: a sweep would check them at speeds and sizes the thesis did not
    for tg in ("TG3", "TG6"):
        if have(tg, "ST"):
            row("breakdown", f"R3: {tg}'s total overhead below ST's (Fig. 4)",
                f"{tg}'s interval below ST's", less(overhead[tg], overhead["ST"]))
    if have("ST", "TG"):
        # §4.2 on Fig. 4: ST's "maintenance overhead accounts for a higher proportion"
        row("breakdown", "R3: ST's maintenance share above TG's (Fig. 4)",
            "TG's interval below ST's, share = maintenance / all transmissions per run",
            less(share["TG"], share["ST"]))
    if have("flooding"):
        row("breakdown", "R3: flooding's overhead is all notification (Fig. 4)",
            "flooding's maintenance = 0", "holds" if maint["flooding"].mean == 0
            else "fails")
    if have("flooding", "TG"):
        row("delivery", "R1: delivery flooding >= TG (Fig. 2)",
            "flooding's mean >= TG's - 0.02",
            at_least(delivery["flooding"], delivery["TG"], 0.02))
        row("delivery", "R1: TG 'comparable' to flooding (Fig. 2)",
            "abs(TG - flooding) <= 10 % of the larger mean",
            about(delivery["TG"], delivery["flooding"], 0.10))
    if have("TG", "ST"):
        row("delivery", "R1: delivery TG > ST (Fig. 2)", "ST's interval below TG's",
            less(delivery["ST"], delivery["TG"]))
    if have("flooding"):
        row("memory", "R4: flooding keeps no subscription state (Fig. 5)",
            "flooding's memory = 0", "holds" if memory["flooding"].mean == 0 else "fails")
    if have("TG", "ST"):
        row("memory", "R4: memory TG ≪ ST (Fig. 5)", "2 x TG's mean <= ST's, intervals apart; "
            "fails if 2 x TG's lower bound > ST's upper bound",
            much_less(memory["TG"], memory["ST"], 2.0))
    if have("flooding", "TG", "ST"):
        row("latency", "R5: latency flooding lowest, global:local 3:1 (Fig. 6a)",
            "flooding's interval below TG's and ST's",
            _both(less(lat31["flooding"], lat31["TG"]),
                  less(lat31["flooding"], lat31["ST"])))
        row("latency", "R5: latency TG ≈ ST, 3:1 (Fig. 6a)",
            "abs(TG - ST) <= 25 % of the larger mean", about(lat31["TG"], lat31["ST"], 0.25))
        row("latency", "R6: latency TG < ST, global:local 1:3 (Fig. 6b)",
            "TG's interval below ST's", less(lat13["TG"], lat13["ST"]))
        row("latency", "R6: latency TG ≈ flooding, 1:3 (Fig. 6b)",
            "abs(TG - flooding) <= 25 % of the larger mean",
            about(lat13["TG"], lat13["flooding"], 0.25))
    return out


def differences(e: Figs, rows: list[tuple[str, str, str, str]], nodes: int) -> list[str]:
    """Why a claim does not hold here: one paragraph per claim whose verdict is not
    *holds*, each from the figures of this page (only where a cause is known)."""
    def fig(key: str, scheme: str) -> str:
        est = e[key].get(scheme)
        return str(est) if est is not None else "n/a"

    def mean(key: str, scheme: str) -> float:
        est = e[key].get(scheme)
        return est.mean if est is not None and est.n else math.nan

    st_cost = (
        f"Most of ST's transmissions are maintenance ({fig('mshare', 'ST')} of them per "
        "run): its trees are repaired and merged as the nodes move "
        f"({fig('groups0', 'ST')} trees at the window's start, {fig('groups1', 'ST')} at "
        f"its end), while its notifications cost {fig('per_event', 'ST')} transmissions "
        f"per event against flooding's {fig('per_event', 'flooding')}."
        if mean("maint", "ST") > mean("notif", "ST") else
        "Table 2's workload gives an event "
        f"{mean('pairs', 'TG'):.0f} expected (node, subscription) pairs on average "
        "(1-3 subscriptions per node over 50 interests, half of them ORs), so the "
        "tree's matching branches span much of each tree: ST's "
        f"{fig('per_event', 'ST')} notification transmissions per event against "
        f"flooding's {fig('per_event', 'flooding')}.")
    comparable = (
        "See the row above: flooding's reach is bounded by its TTL of 10."
        if mean("delivery", "TG") >= mean("delivery", "flooding") else
        f"Here TG delivers less than flooding: {fig('dglob', 'TG')} of the global pairs "
        f"and {fig('dloc', 'TG')} of the local ones, flooding {fig('dglob', 'flooding')} "
        f"and {fig('dloc', 'flooding')}. Flooding keeps no structure to repair; TG "
        "routes along group trees that break as the nodes move (its maintenance here "
        f"{fig('maint', 'TG')} tx/s): the likely cause, not isolated by a run.")

    why: dict[str, str] = {
        "R2: overhead ST ≪ flooding": (
            f"ST sends {fig('notif', 'ST')} notification and {fig('maint', 'ST')} "
            f"maintenance transmissions per second, flooding {fig('notif', 'flooding')} "
            "notifications only. " + st_cost + " Flooding's per-event cost is "
            "bounded by its TTL of 10 (Table 2): each node it reaches broadcasts once, so "
            "it reaches about that many of the nodes, not the whole network."),
        "R1: delivery flooding >= TG": (
            f"Flooding delivers {fig('dglob', 'flooding')} of the global pairs (TG "
            f"{fig('dglob', 'TG')}): a global event's expected receivers are the "
            "publisher's whole connected component, and Table 2's TTL of 10 does not "
            "reach across a 2000 m network with 150 m range (each node a flood reaches "
            f"broadcasts once: {fig('per_event', 'flooding')} per event, of "
            f"{nodes} nodes); the TTL is kept as the thesis has it. TG's "
            "global events cross up to 32 groups (`GLOBAL_GROUP_TTL`) and 255 hops."),
        "R1: TG 'comparable' to flooding": comparable,
        "R5: latency flooding lowest, global:local 3:1": (
            f"Flooding {fig('lat31', 'flooding')} s, TG {fig('lat31', 'TG')} s, ST "
            f"{fig('lat31', 'ST')} s. Every hop here costs the radio's 2 ms delay and "
            "the frame's airtime at 2 Mb/s; flooding adds a random wait of up to 10 ms "
            "per hop before rebroadcasting (`flooding.jitter`, against collisions of "
            "the neighbours' rebroadcasts), TG and ST forward at once: the likely reason "
            "flooding's shortest paths are not the fastest here."),
        "R6: latency TG ≈ flooding, 1:3": (
            "See R5: flooding's per-hop jitter against TG's immediate forwarding."
            if mean("lat13", "flooding") > mean("lat13", "TG") else
            f"Here TG is the slower one: TG {fig('lat13', 'TG')} s, flooding "
            f"{fig('lat13', 'flooding')} s. Flooding's copies take every path, so the "
            "first to arrive took a shortest one (§4.2); TG's follow its group trees and "
            "gateways, which need not be shortest paths: the likely reason, not "
            "isolated by a run."),
        "R6: latency TG < ST, global:local 1:3": (
            f"TG {fig('lat13', 'TG')} s, ST {fig('lat13', 'ST')} s; cause not "
            "investigated."),
        "R2: overhead TG < ST": (
            f"TG {fig('overhead', 'TG')}, ST {fig('overhead', 'ST')} tx/s."),
        "R3: TG3": (
            f"TG3 sends {fig('notif', 'TG3')} notification and {fig('maint', 'TG3')} "
            f"maintenance transmissions per second, ST {fig('notif', 'ST')} and "
            f"{fig('maint', 'ST')}; TG3's notifications cost "
            f"{fig('per_event', 'TG3')} transmissions per event against ST's "
            f"{fig('per_event', 'ST')}. With depth 3 the groups are small and many "
            f"({fig('groups0', 'TG3')} at the window's start, TG "
            f"{fig('groups0', 'TG')}); the likely cause (not isolated by a run) is that "
            "a global event climbs to each group's leader and crosses more gateways."),
        "R1: delivery TG > ST": (
            f"TG {fig('delivery', 'TG')}, ST {fig('delivery', 'ST')}; ST had "
            f"{fig('groups0', 'ST')} trees when the window opened (events do not cross "
            "between trees that have not merged yet)."
            if mean("delivery", "ST") < mean("delivery", "TG") else
            f"Here ST's mean is above TG's: TG {fig('delivery', 'TG')} "
            f"({fig('dglob', 'TG')} of the global pairs, {fig('dloc', 'TG')} of the local "
            f"ones), ST {fig('delivery', 'ST')} ({fig('dglob', 'ST')}, "
            f"{fig('dloc', 'ST')}); the cause was not isolated by a run."),
    }
    agree: dict[str, bool] = {
        # whether the means lie the thesis's way (an inconclusive verdict is then the
        # intervals' width only, and needs no cause)
        "R2: overhead TG < ST": mean("overhead", "TG") < mean("overhead", "ST"),
        "R2: overhead ST ≪ flooding":
            2 * mean("overhead", "ST") <= mean("overhead", "flooding"),
        "R3: TG3": mean("overhead", "TG3") < mean("overhead", "ST"),
        "R3: TG6": mean("overhead", "TG6") < mean("overhead", "ST"),
        "R3: ST's maintenance share": mean("mshare", "TG") < mean("mshare", "ST"),
        "R1: delivery TG > ST": mean("delivery", "ST") < mean("delivery", "TG"),
        "R4: memory TG ≪ ST": 2 * mean("memory", "TG") <= mean("memory", "ST"),
        "R5: latency flooding lowest": mean("lat31", "flooding") < min(
            mean("lat31", "TG"), mean("lat31", "ST")),
        "R6: latency TG < ST": mean("lat13", "TG") < mean("lat13", "ST"),
    }
    out, undecided = [], []
    for _key, claim, _rule, verdict in rows:
        if verdict == "holds":
            continue
        if verdict == "inconclusive" and next(
                (ok for prefix, ok in agree.items() if claim.startswith(prefix)), False):
            undecided.append(claim)
            continue
        cause = next((text for prefix, text in why.items() if claim.startswith(prefix)),
                     "No cause found yet.")
        out.append(f"- **{claim}: {verdict}.** {cause}")
    if undecided:
        out.append("- **Inconclusive with the means the thesis's way** (the 95 % "
                   "intervals overlap; more seeds may decide): " + "; ".join(undecided)
                   + ".")
    return out


def differences_section(items: list[str]) -> list[str]:
    """The page's section on where the figures differ from the thesis (none if none)."""
    if not items:
        return []
    return ["", "## Where the figures differ from the thesis, and why", "", *items]


def in_thesis_range(plan: SweepPlan, preset: Preset) -> bool:
    """Whether a point lies where the thesis states its claim: the size sweep's
    claims are for 500-1000 nodes (Figs. 5-6); the speed sweep's for 0-25 m/s at
    Table 2's 500 nodes (Figs. 2-3)."""
    if plan.name == "size":
        return 500 <= preset.nodes <= 1000
    return preset.nodes >= 500 and 0 <= preset.speed_mps <= 25


def write_sweep_report(plan: SweepPlan, form: str, by_point: dict[Preset, list[RunFigures]],
                       load: str, wall: float, finished: bool = False) -> str:
    """One table row per (point, scheme), then the plan's claims at every point.
    ``finished``: the page was written by ``--finished`` (each point with its own
    seeds; the plan's points with none are left out, and the page names them)."""
    def value(p: Preset) -> str:
        return f"{p.speed_mps:g}" if plan.name == "speed" else str(p.nodes)

    cpu = sum(f.cpu_s for figs in by_point.values() for f in figs if not math.isnan(f.cpu_s))
    seeds_of = {p: len(figs) // len(SWEEP_SCHEMES) for p, figs in by_point.items()}
    ran, most = min(seeds_of.values()), max(p.seeds for p in by_point)
    missing = [value(p) for p in plan.presets(form) if p not in by_point]
    short = missing or any(k < p.seeds for p, k in seeds_of.items())
    seeds_option = (" --finished" if finished and short
                    else f" --seeds {ran} --reuse" if short else "")
    high = max(seeds_of.values())
    seeds_range = str(ran) if ran == high else f"{ran}-{high}"
    if finished and short:
        seeds_line = (
            f"**Seeds: {seeds_range} of the plan's {most}, per point** "
            "(the plan line below); "
            + (f"the plan's points {', '.join(missing)} ({plan.unit}) have none and "
               "are left out; " if missing else "")
            + "the machine time of this session did not reach further. This page is "
            "written from each point's finished seeds (`--finished`); the same command "
            "without it, with `--reuse` and the same `--runs`, completes the plan. With "
            "fewer seeds the 95 % intervals are wider (with 1 seed there is none, shown "
            "± inf), so fewer orderings are decided.")
    else:
        seeds_line = (
            f"**Seeds: {ran} of the plan's {most}.** The machine "
            "time of this session did not reach further; the same command without "
            "`--seeds`, with `--reuse` and the same `--runs`, completes the plan, and with "
            "fewer seeds the 95 % intervals are wider (Student t with "
            f"{max(1, ran - 1)} degree(s) of freedom), so fewer orderings are decided.")
    lines = [
        f"# TG sweeps: Liu 2011, {plan.figures}, over {plan.what}",
        "",
        f"Generated by `bench/tg_experiments.py --sweep {plan.name}"
        + ("" if form == "paper" else f" --{form}") + seeds_option
        + "` (do not edit by hand); the "
        f"figures are also in `docs/results/tg-sweep-{plan.name}.json`. Every point is tg-500.toml "
        "at Table 2's density and publication rate (see [tg.md](tg.md) for the figures' "
        "definitions), schemes " + ", ".join(SWEEP_SCHEMES) + "; mean ± 95 % interval "
        "(Student t over seeds). Machine load at the end (uptime): "
        f"`{load}`; this pass's wall time {wall:.0f} s; the runs' CPU time "
        f"{cpu:.0f} s (their cost.json, summed: a resumed pass reuses finished runs).",
        "",
        *([seeds_line, ""] if seeds_option else []),
        f"Plan `{form}`: "
        + "; ".join(f"{value(p)}: {p.nodes} nodes, {p.speed_mps:g} m/s, {p.pause_s:g} s "
                    f"pauses, {p.warmup_s:g} s + {p.measured_s:g} s, "
                    f"{len(figs) // len(SWEEP_SCHEMES)} of the plan's {p.seeds} seeds"
                    for p, figs in by_point.items()) + ".",
        "",
        "## Figures",
        "",
        f"| {plan.what} | scheme | delivery | overhead tx/s | maintenance tx/s "
        "| memory B/node | latency 3:1 s | latency 1:3 s | tx / optimum | tx / lower bound "
        "| notification / SPT |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    verdicts: list[str] = []
    differ: list[str] = []
    for preset, figs in by_point.items():
        e = estimates(figs)
        for sch in SWEEP_SCHEMES:
            if sch in e["delivery"]:
                lines.append(
                    f"| {value(preset)} | {sch} | {e['delivery'][sch]} | "
                    f"{e['overhead'][sch]} | {e['maint'][sch]} | {e['memory'][sch]} | "
                    f"{e['lat31'][sch]} | {e['lat13'][sch]} | {e['opt'][sch]} | "
                    f"{e['opt_high'][sch]} | {e['spt'][sch]} |")
        inside = in_thesis_range(plan, preset)
        for key, claim, rule, verdict in claim_rows(e):
            if key not in plan.claims:
                continue
            shown = f"**{verdict}**" if inside else f"n/a (rule: {verdict})"
            verdicts.append(f"| {value(preset)} | {claim} | {rule} | {shown} |")
        items = differences(e, [r for r in claim_rows(e) if r[0] in plan.claims],
                            preset.nodes) if inside else []
        if items:
            differ += [f"**At {value(preset)} {plan.unit}:**", "", *items, ""]
    lines += [
        "",
        *optimum_note([f for figs in by_point.values() for f in figs]),
        "",
        "## Verdicts",
        "",
        f"| {plan.what} | claim (Liu 2011) | rule | verdict |",
        "|---|---|---|---|",
        *verdicts,
        "",
        "*holds*: the figures satisfy the rule; *fails*: they contradict it; "
        "*inconclusive*: the 95 % intervals overlap. *n/a*: the point lies outside "
        "the thesis's setting for the claim (" + ("500-1000 nodes" if plan.name == "size"
                                               else "Table 2's 500 nodes")
        + "), so the figures cannot test it; the rule's outcome there is shown for "
        "information. Only the claims of " + plan.figures + " are tested here ("
        + ", ".join(plan.claims) + "); the others are on tg.md.",
        *differences_section(differ[:-1]),
    ]
    return "\n".join(lines) + "\n"


def run_points(points: list[Point], runs: Path, jobs: int, reuse: bool
               ) -> dict[tuple[str, str, int], tuple[Path, float]]:
    done: dict[tuple[str, str, int], tuple[Path, float]] = {}
    with ProcessPoolExecutor(max_workers=jobs) as pool:
        for point, rundir, wall in pool.map(_one, [(p, str(runs), reuse) for p in points]):
            done[(point.preset.name, point.scheme, point.seed)] = (Path(rundir), wall)
            print(f"ran {point.run_id} in {wall:.0f} s", flush=True)
    return done


def sweep_task(task: tuple[Preset, int, str, bool, int]) -> list[RunFigures]:
    """One point and seed of a sweep: its schemes' runs, TG's first (the local events'
    ground truth), then their figures, in the worker that ran them (figures.json)."""
    preset, seed, runs, reuse, optimum_every = task
    figs = []
    groups: Path | None = None
    for scheme in SWEEP_SCHEMES:
        point = Point(scheme, seed, preset)
        rundir, wall = simulate(point, Path(runs), reuse)
        print(f"ran {point.run_id} in {wall:.0f} s", flush=True)
        groups = rundir if groups is None else groups
        figs.append(evaluated(rundir, point, wall, groups, reuse, optimum_every))
    return figs


def sweep_main(plan: SweepPlan, form: str, args: argparse.Namespace) -> int:
    """Run a sweep seed by seed and write its page.

    The tasks go seed-major (every point of seed 1, then of seed 2, ...) and each
    evaluates its own runs, so the figures are made while other runs simulate, and a
    sweep stopped part-way leaves whole seeds behind: ``--reuse`` resumes it, and
    ``--seeds K --reuse`` writes the page from its first K seeds without simulating
    again. ``--finished`` writes it from what each point has finished (its seeds 1..k
    with every scheme's run simulated), simulating nothing: a stopped sweep's small
    points then keep the seeds they got beyond the last whole one.
    """
    wanted = {p: args.seeds or p.seeds for p in plan.presets(form)}
    if args.finished:
        wanted = {p: finished_seeds(p, args.runs, k) for p, k in wanted.items()}
        wanted = {p: k for p, k in wanted.items() if k}
        if not wanted:
            print(f"tg_experiments: no point of the {plan.name} sweep has a finished seed "
                  f"in {args.runs}", file=sys.stderr)
            return 2
    presets = tuple(wanted)
    tasks = [(p, seed, str(args.runs), args.reuse or args.finished, args.optimum_every)
             for seed in range(1, 1 + max(wanted.values()))
             for p in presets if seed <= wanted[p]]
    started = time.perf_counter()
    by_seed: dict[tuple[str, int], list[RunFigures]] = {}
    # a fresh interpreter per task, started with PYTHONHASHSEED as main() sets it (a
    # forked worker keeps the parent's hash seed), which a sweep of hours can afford
    with ProcessPoolExecutor(max_workers=args.jobs, max_tasks_per_child=1,
                             mp_context=multiprocessing.get_context("spawn")) as pool:
        for (preset, seed, *_), figs in zip(tasks, pool.map(sweep_task, tasks), strict=True):
            by_seed[(preset.name, seed)] = figs
    by_point = {p: [f for seed in range(1, 1 + wanted[p]) for f in by_seed[(p.name, seed)]]
                for p in presets}
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    text = write_sweep_report(plan, form, by_point, load, time.perf_counter() - started,
                              finished=args.finished)
    out = args.out or Path(str(SWEEP_REPORT).format(name=plan.name))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    data = {"sweep": plan.name, "plan": form, "load": load, "points": [
        {"preset": asdict(p), "figures": [
            {**asdict(f), "delivery": f.delivery, "overhead_per_s": f.overhead_per_s,
             "spt_ratio": f.spt_ratio} for f in figs]}
        for p, figs in by_point.items()]}
    out.with_suffix(".json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    print(text)
    return 0


def finished_seeds(preset: Preset, runs: Path, most: int) -> int:
    """How many of a point's seeds, counting from 1, have every sweep scheme's run
    simulated (its manifest written) in ``runs``: at most ``most``."""
    k = 0
    while k < most and all((runs / Point(s, k + 1, preset).run_id / "manifest.json").exists()
                           for s in SWEEP_SCHEMES):
        k += 1
    return k


def _both(a: str, b: str) -> str:
    if "fails" in (a, b):
        return "fails"
    if a == b == "holds":
        return "holds"
    return "n/a" if "n/a" in (a, b) else "inconclusive"


def _one(args: tuple[Point, str, bool]) -> tuple[Point, str, float]:
    point, runs, reuse = args
    rundir, wall = simulate(point, Path(runs), reuse)
    return point, str(rundir), wall


def _evaluated(args: tuple[Point, str, float, str, bool, int]) -> RunFigures:
    point, rundir, wall, groups, reuse, optimum_every = args
    return evaluated(Path(rundir), point, wall, Path(groups), reuse, optimum_every)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--quick", action="store_true", help="100 nodes, 60 s, 3 seeds")
    group.add_argument("--paper", action="store_true", help="Table 2: 500 nodes, 600 s")
    group.add_argument("--recipe", action="store_true",
                       help="the spec's recipe: 500 nodes, 5 seeds, Table 2's rate, 20 + 30 s")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--seeds", type=int, help="override the preset's number of seeds")
    ap.add_argument("--schemes", default=",".join(SCHEMES),
                    help="comma-separated subset of " + ", ".join(SCHEMES))
    ap.add_argument("--runs", type=Path, default=Path("/tmp/msub-tg-runs"),
                    help="where the run directories go")
    ap.add_argument("--reuse", action="store_true", help="keep finished runs")
    ap.add_argument("--finished", action="store_true",
                    help="with --sweep: write the page from each point's finished seeds "
                         "in --runs, simulating nothing")
    ap.add_argument("--out", type=Path,
                    help="the page to write (default: the preset's page, tg.md for --paper, "
                         "tg-recipe.md for --recipe, ...; a sweep's tg-sweep-NAME.md)")
    ap.add_argument("--sweep", choices=sorted(SWEEPS),
                    help="run a sweep plan instead (Figs. 2-3: speed, Figs. 5-6: size); "
                         "with --quick its reduced form, with --recipe the thesis's range "
                         "at the recipe's run length, else at Table 2's")
    ap.add_argument("--optimum-every", type=int, default=OPTIMUM_EVERY, metavar="K",
                    help="solve the optimum for every K-th counted event by publish time "
                         f"(default {OPTIMUM_EVERY}; 1: every event)")
    args = ap.parse_args(argv)
    if args.optimum_every < 1:
        print(f"tg_experiments: bad --optimum-every {args.optimum_every} (at least 1)",
              file=sys.stderr)
        return 2
    if args.sweep is not None:
        if args.jobs < 1 or (args.seeds is not None and not 1 <= args.seeds <= 11):
            print("tg_experiments: bad --jobs or --seeds (1-11)", file=sys.stderr)
            return 2
        if args.finished and not args.runs.is_dir():
            print(f"tg_experiments: --finished: no runs directory {args.runs}",
                  file=sys.stderr)
            return 2
        args.runs.mkdir(parents=True, exist_ok=True)
        return sweep_main(SWEEPS[args.sweep], "quick" if args.quick else "recipe"
                          if args.recipe else "paper", args)
    if args.finished:
        print("tg_experiments: --finished writes a sweep's page: use it with --sweep",
              file=sys.stderr)
        return 2
    preset = PRESETS["quick" if args.quick else "paper" if args.paper
                     else "recipe" if args.recipe else "default"]
    seeds = list(range(1, 1 + (args.seeds or preset.seeds)))
    schemes = [s.strip() for s in args.schemes.split(",") if s.strip()]
    bad = [s for s in schemes if s not in SCHEMES]
    if bad or args.jobs < 1 or (args.seeds is not None and not 1 <= args.seeds <= 11):
        print(f"tg_experiments: bad --schemes {bad}, --jobs or --seeds (1-11)",
              file=sys.stderr)
        return 2
    if any(s in schemes for s in ("ST", "flooding")) and "TG" not in schemes:
        schemes.insert(0, "TG")  # local events' ground truth: the TG run's groups
    args.runs.mkdir(parents=True, exist_ok=True)
    points = [Point(s, seed, preset) for seed in seeds for s in schemes]
    started = time.perf_counter()
    done = run_points(points, args.runs, args.jobs, args.reuse)
    evaluations = []
    for point in points:
        rundir, wall = done[(preset.name, point.scheme, point.seed)]
        groups = rundir if point.scheme.startswith("TG") \
            else done[(preset.name, "TG", point.seed)][0]
        evaluations.append((point, str(rundir), wall, str(groups), args.reuse,
                            args.optimum_every))
    # every run is simulated by now (ST's and flooding's ground truth is the TG run's
    # records), so the evaluations, a minute each at 500 nodes, run side by side too
    with ProcessPoolExecutor(max_workers=args.jobs) as pool:
        figs = list(pool.map(_evaluated, evaluations))
    for point, f in zip(points, figs, strict=True):
        print(f"{point.run_id}: delivery {f.delivery:.3f}, {f.overhead_per_s:.1f} tx/s, "
              f"memory {f.memory_bytes:.0f} B/node, latency {f.latency():.3f} s", flush=True)
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    wall = time.perf_counter() - started
    out = args.out or report_for(preset.name)
    text = write_report(preset, figs, load, wall, seeds, out.with_suffix(".json").name)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    data = {"preset": asdict(preset), "load": load, "figures": [
        {**asdict(f), "delivery": f.delivery, "overhead_per_s": f.overhead_per_s,
         "spt_ratio": f.spt_ratio} for f in figs]}
    out.with_suffix(".json").write_text(json.dumps(data, indent=1, default=str) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())
