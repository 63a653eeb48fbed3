"""GIANT's group 3 (Zheng 2008, §6.5.1, Figs. 6.14-6.17) measured in the simulator (meshsim).

``bench/giant_experiments.py`` computes group 3 from the model
(``meshsub.protocols.giant.model``: RecruitFerry against a ferry passing each
sender every ``interval`` units). Here the same placements run as protocols
in the discrete-event simulator, GIANT and its Prim baseline (``tree``):

- a ``side`` x ``side`` lattice of 10 m cells; the PHB and the subscribers'
  brokers (SHBs) at the centres of distinct random cells (``model.placement``,
  each SHB with its DR from 0.5..0.9 through a role whose parameters set it);
  a radio of 4 m, so a node hears only what is in its own cell (§6.2);
- ``side * side / interval`` ferries on the 4-neighbour lattice walk (one
  cell per unit, the renormalised walk at the border), so that a cell sees a
  ferry arrive every ``interval`` units on average (the bench measures the
  real figure at the brokers' cells: the walk visits border cells less);
- the PHB advertises at start; the SHBs subscribe one after another, GIANT's
  in increasing distance from the PHB (the model's order), Prim's in Prim's
  order, so that Prim's rule applied online builds the minimum spanning tree
  (docs/protocols/giant.md, "Prim as a protocol parameter");
- once the tree has had time to form, the PHB publishes ``EVENTS`` events
  ``EVENT_GAP`` units apart, and the run goes on ``horizon`` units after the
  last one.

Measured per run, as the protocol did it: the ferries recruited per event
(one ``counter`` record ``giant_recruited`` per acknowledged handover, summed
over the tree's hops, and counted once per sender), the delivery ratio and
the delay from publication to each SHB's delivery (in units), the tree the
subscriptions built, whether it was complete at the first publication, and
the mean interval between ferry arrivals at the brokers' cells. Beside it the
model's prediction for the same placement, on the model's tree and on the
tree the simulator built.
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from meshsim.des.engine import Simulation
from meshsim.scenario.load import from_dict
from meshsub.core.api import TelemetryValue
from meshsub.core.grid import Cell, manhattan
from meshsub.core.lattice_tree import CellTree, TreeError, prim_edges, tree_from_parents
from meshsub.protocols.giant.model import giant_tree, placement, tree_cost
from meshsub.protocols.giant.params import Tree

CELL_M = 10.0
RANGE_M = 4.0
"""Below half a cell: nodes at cell centres hear only their own cell's."""
TOPIC = "reading"
EVENTS = 4
EVENT_GAP = 50
"""Units between two publications: each event recruits its own ferries (per item)."""
SETUP = "v1"
"""Changes with anything below that changes a run's outcome (the cache's key)."""


@dataclass(frozen=True, slots=True)
class Timeline:
    """When things happen in a run, in units (one cell crossing = 1 s here)."""

    first_sub: float
    sub_gap: float
    settle: float
    horizon: float
    """Units after the last publication until the end: deliveries later are lost."""

    @classmethod
    def for_side(cls, side: int) -> Timeline:
        """Scaled with the region: a ferry's trips grow with its side."""
        return cls(first_sub=5.0 * side, sub_gap=4.0 * side, settle=20.0 * side,
                   horizon=40.0 * side)

    def publish_at(self, subscribers: int) -> float:
        return self.first_sub + subscribers * self.sub_gap + self.settle

    def end(self, subscribers: int) -> float:
        return self.publish_at(subscribers) + (EVENTS - 1) * EVENT_GAP + self.horizon


def join_order(phb: Cell, shbs: Sequence[Cell], tree: Tree) -> list[Cell]:
    """The order the SHBs subscribe in: the model's for GIANT, Prim's for Prim."""
    if tree is Tree.PRIM:
        return [v for _u, v, _w in prim_edges(phb, shbs)]
    return sorted(shbs, key=lambda c: (manhattan(c, phb), c))


def _centre(c: Cell) -> dict[str, float]:
    return {"x": (c.gx + 0.5) * CELL_M, "y": (c.gy + 0.5) * CELL_M}


def _role(dr: float) -> str:
    return f"dr{round(dr * 100)}"


def scenario(phb: Cell, dr: Mapping[Cell, float], side: int, interval: int, tree: Tree,
             seed: int, timeline: Timeline | None = None) -> dict[str, Any]:
    """The scenario of one run, as a document ``meshsim.scenario.load.from_dict`` reads."""
    tl = timeline or Timeline.for_side(side)
    order = join_order(phb, list(dr), tree)
    groups: list[dict[str, Any]] = [{"name": "phb", "placement": "explicit", "role": "phb",
                                     "mains": True, "positions": [{"id": 1, **_centre(phb)}]}]
    subs = []
    for k, cell in enumerate(order):
        node = 2 + k
        groups.append({"name": f"shb{node}", "placement": "explicit", "role": _role(dr[cell]),
                       "mains": True, "positions": [{"id": node, **_centre(cell)}]})
        subs.append({"node": node, "expr": TOPIC, "id": "s", "t": tl.first_sub + k * tl.sub_gap})
    groups.append({"name": "ferries", "count": max(1, side * side // interval),
                   "placement": "random", "role": "ferry",
                   "mobility": {"model": "lattice_walk", "cell_m": CELL_M, "columns": side,
                                "rows": side, "step_s": 1.0, "motion": "teleport",
                                "border": "resample"}})
    t0 = tl.publish_at(len(order))
    pubs = [{"t": t0 + e * EVENT_GAP, "node": 1, "event": f"{TOPIC} n={e}"}
            for e in range(EVENTS)]
    roles: dict[str, dict[str, Any]] = {"phb": {"adverts": [TOPIC]}}
    roles.update({_role(d): {"DR": d} for d in sorted(set(dr.values()))})
    forever = 100.0 * tl.end(len(order))  # no refresh, expiry or re-advertising within a run
    return {
        "scenario": {"name": f"giant-g3-{tree.value}", "seed": seed,
                     "duration_s": tl.end(len(order)), "warmup_s": 0.0, "drain_s": 0.0,
                     "state_every_s": 0.0},
        "area": {"width_m": side * CELL_M, "height_m": side * CELL_M},
        "radio": {"model": "unit_disk", "range_m": RANGE_M, "loss": 0.0, "delay_s": 0.002},
        "nodes": {"groups": groups},
        "protocol": {"name": "giant", "giant": {
            "cols": side, "rows": side, "cell_size_m": CELL_M, "unit_s": 1.0,
            "tree": tree.value, "sweep_s": 10.0, "event_ttl_s": tl.horizon + EVENTS * EVENT_GAP,
            "adv_ttl_s": forever, "adv_refresh_s": forever, "sub_lease_s": forever,
            "sub_refresh_s": forever, "roles": roles}},
        "workload": {"subscriptions": subs, "publications": pubs},
    }


class RecruitSink:
    """Keeps the ``giant_recruited`` records of events: (event id, sender node, ferry)."""

    def __init__(self) -> None:
        self.recruits: list[tuple[str, int, int]] = []

    def record(self, node: int, ts_ns: int, event: str,
               attrs: Mapping[str, TelemetryValue]) -> None:
        if event == "counter" and attrs.get("reason") == "giant_recruited" \
                and attrs.get("event_id") is not None:
            self.recruits.append((str(attrs["event_id"]), node, int(attrs["peer"] or 0)))

    def record_many(self, nodes: Sequence[int], ts_ns: int, event: str,
                    attrs: Mapping[str, TelemetryValue]) -> None:
        return None  # only frames' receptions come in bulk


@dataclass(frozen=True, slots=True)
class Measured:
    """One run in the simulator, and the model's prediction for its placement."""

    ferries: float
    """Recruitments per event, summed over the tree's hops (mean over the events)."""
    distinct: float
    """Per event, each sender's ferries counted once for all its next hops."""
    delivery: float
    """Delivered (event, SHB) pairs over those owed, within the horizon."""
    delay: float
    """Mean units from publication to delivery over the delivered pairs (NaN if none)."""
    target: float
    """The SHBs' mean DR: the delivery ratio the protocol aims at."""
    complete: bool
    """Every SHB's subscription held by its upstream at the first publication."""
    same_tree: bool
    """The tree built equals the model's tree for this placement."""
    interval: float
    """Measured units between ferry arrivals at a broker's cell (mean over the brokers)."""
    model_ferries: float
    model_distinct: float
    model_delay: float
    built_ferries: float
    """The model's ferries on the tree the simulator built (NaN if it built none)."""
    built_delay: float
    cpu_s: float


def measure(phb: Cell, dr: Mapping[Cell, float], side: int, interval: int, tree: Tree,
            seed: int, timeline: Timeline | None = None) -> Measured:
    """Run one placement with one tree in the simulator; measure it and model it."""
    tl = timeline or Timeline.for_side(side)
    order = join_order(phb, list(dr), tree)
    cell_of = {1: phb, **{2 + k: c for k, c in enumerate(order)}}
    sink = RecruitSink()
    started = time.process_time()
    sim = Simulation(from_dict(scenario(phb, dr, side, interval, tree, seed, tl)), sink)
    t_pub = tl.publish_at(len(order))
    complete: list[bool] = []

    def progress(now: float) -> None:
        if not complete and now >= t_pub - 1.0:
            complete.append(_tree_complete(sim, cell_of, phb))

    sim.run(progress, steps=max(1, math.ceil(tl.end(len(order)))))
    stats = sim.stats
    cpu = time.process_time() - started
    events = [p for p in stats.published if p.node == 1]
    published = {p.event_id: p.t for p in events}
    owed = {(e, n) for e in published for n in cell_of if n != 1}
    got = {(d.event_id, d.node): d.t for d in stats.deliveries if (d.event_id, d.node) in owed}
    delays = [t - published[e] for (e, _n), t in got.items()]
    per_event = {e: [(s, f) for ev, s, f in sink.recruits if ev == e] for e in published}
    parents = {}
    for node, cell in cell_of.items():
        route = sim.nodes[node].proto.routes.get((TOPIC, phb))  # type: ignore[attr-defined]
        if node != 1 and route is not None and route.upstream is not None:
            parents[cell] = route.upstream.upstream
    built: CellTree | None
    try:
        built = tree_from_parents(phb, parents) if len(parents) == len(order) else None
    except TreeError:
        built = None
    model = tree_cost(giant_tree(phb, list(dr), tree), dr, interval)
    on_built = tree_cost(built, dr, interval) if built is not None else None
    contacts = [sim.nodes[n].proto.stats["contacts"] for n in cell_of]  # type: ignore[attr-defined]
    end = tl.end(len(order))
    return Measured(
        ferries=_mean(len(r) for r in per_event.values()),
        distinct=_mean(len(set(r)) for r in per_event.values()),
        delivery=len(got) / len(owed) if owed else math.nan,
        delay=_mean(delays),
        target=_mean(dr.values()),
        complete=bool(complete and complete[0]),
        same_tree=built is not None
        and dict(built.parent) == dict(giant_tree(phb, list(dr), tree).parent),
        interval=_mean(end / c for c in contacts if c) if any(contacts) else math.inf,
        model_ferries=model.ferries, model_distinct=model.distinct_ferries,
        model_delay=model.mean_delay,
        built_ferries=on_built.ferries if on_built else math.nan,
        built_delay=on_built.mean_delay if on_built else math.nan,
        cpu_s=cpu)


def _mean(values: Any) -> float:
    vals = list(values)
    return sum(vals) / len(vals) if vals else math.nan


def _tree_complete(sim: Simulation, cell_of: Mapping[int, Cell], phb: Cell) -> bool:
    """Whether each SHB's upstream holds a subscription from it (its SUB arrived)."""
    node_at = {c: n for n, c in cell_of.items()}
    for node, cell in cell_of.items():
        if node == 1:
            continue
        route = sim.nodes[node].proto.routes.get((TOPIC, phb))  # type: ignore[attr-defined]
        if route is None or route.upstream is None:
            return False
        up = sim.nodes[node_at[route.upstream.upstream]].proto.routes.get((TOPIC, phb))  # type: ignore[attr-defined]
        if up is None or not any(held.value.side == cell for _k, held in up.downstream.items()):
            return False
    return True


def point_seed(side: int, subscribers: int, seed: int) -> random.Random:
    """One placement per (region, subscribers, seed), shared by both trees and every interval."""
    return random.Random(f"giant-sim:{side}:{subscribers}:{seed}")


def run_point(side: int, interval: int, subscribers: int, seed: int,
              cache: Path | None = None) -> dict[str, Measured]:
    """Both trees on one seeded placement; finished runs are kept in ``cache`` (JSON lines)."""
    out: dict[str, Measured] = {}
    done = read_cache(cache)
    phb, dr = placement(side, subscribers, point_seed(side, subscribers, seed))
    for tree in (Tree.GIANT, Tree.PRIM):
        key = cache_key(side, interval, subscribers, seed, tree)
        if key in done:
            out[tree.value] = done[key]
            continue
        out[tree.value] = measured = measure(phb, dr, side, interval, tree, seed)
        if cache is not None:
            with cache.open("a") as f:
                f.write(json.dumps({"key": key, **asdict(measured)}) + "\n")
    return out


def cache_key(side: int, interval: int, subscribers: int, seed: int, tree: Tree) -> str:
    return f"{SETUP}:{side}:{interval}:{subscribers}:{seed}:{tree.value}"


def read_cache(cache: Path | None) -> dict[str, Measured]:
    if cache is None or not cache.exists():
        return {}
    out = {}
    for line in cache.read_text().splitlines():
        try:
            row = json.loads(line)
            key = row.pop("key")
            out[key] = Measured(**row)
        except (ValueError, TypeError, KeyError):
            continue  # a line cut by an interrupted run: that run is made again
    return out


SIM_POINTS: dict[int, tuple[tuple[int, tuple[int, ...]], ...]] = {
    10: ((2, (4, 5, 6, 7, 8, 9, 10)), (4, (4, 6, 8, 10))),
    20: ((2, (10, 20)),),
}
"""(interval, subscriber counts) per region side: every count of the 10 x 10 region at the
shortest interval and every other one at interval 4, and the 20 x 20 region where the
thesis's claims are (20 subscribers at interval 2, Fig. 6.15; 10 -> 20 subscribers,
Figs. 6.16/6.17). A 20 x 20 run with 200 ferries costs 30-45 s of CPU."""
SIM_SEEDS = {10: 3, 20: 2}
"""Placements (seeds) per point, by region side."""

FIGURES = ("ferries", "distinct", "delivery", "delay", "target", "interval",
           "model_ferries", "model_distinct", "model_delay", "built_ferries", "built_delay",
           "same_tree", "complete")


def point_figures(runs: Sequence[Mapping[str, Measured]]) -> dict[str, list[float]]:
    """Per-seed figures of one point (``runs``: one {tree: Measured} per seed):
    ``g_``/``p_`` + a Measured field, and the savings of GIANT over Prim (``save_*``)."""
    out: dict[str, list[float]] = {}
    for pair in runs:
        g, p = pair[Tree.GIANT.value], pair[Tree.PRIM.value]
        for name in FIGURES:
            out.setdefault(f"g_{name}", []).append(float(getattr(g, name)))
            out.setdefault(f"p_{name}", []).append(float(getattr(p, name)))
        for name in ("ferries", "distinct", "delay", "model_ferries", "model_distinct",
                     "model_delay"):
            out.setdefault(f"save_{name}", []).append(
                1 - getattr(g, name) / getattr(p, name) if getattr(p, name) else math.nan)
    return out
