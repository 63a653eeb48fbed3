"""Per-event optimum and path stretch, turned into per-run metrics (driver side).

The job hands over one small row per measured event (``EventRow``: publisher, publish
time, interested nodes, first deliveries with their hop count, data transmissions of
the event); everything else comes from the run directory (``topology``). Static and
mobile runs are measured on the connectivity graph at the publish time
(``steiner.solve``), runs with a contact trace over the contact history until the
event's deadline (``journeys``).

Metrics per run (sums over events whose optimum is not zero):

- ``opt_broadcast_lower`` / ``_upper``, ``opt_unicast_lower`` / ``_upper``: the optimum's
  bounds summed over events (equal where every event was solved exactly);
- ``optimum_ratio``: data transmissions / ``opt_broadcast_upper``, and
  ``optimum_ratio_high``: / ``opt_broadcast_lower``: the protocol's cost relative to the
  fewest broadcasts that could have delivered the events lies between the two (one
  figure when exact); ``optimum_ratio_unicast`` / ``_high`` the same against the
  fewest unicasts;
- ``opt_exact_share``: share of those events solved exactly; ``opt_method``: exact,
  approx, journeys or a ``+``-joined mix;
- ``opt_unreachable``: interested (event, node) pairs with no path at publish time (no
  journey before the deadline), left out of the optimum;
- ``hop_stretch_mean`` / ``_max``: first delivery's hop count / shortest hop count at
  publish time (static graph runs);
- ``geo_stretch_mean`` / ``_max`` / ``geo_stretch_n``: hop count / (distance / range)
  over first deliveries farther than one range (the thesis's end-to-end path stretch
  against a straight line of full-range hops).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mesheval.optimum.graph import UNREACHED, bfs
from mesheval.optimum.journeys import journey_bounds, journeys
from mesheval.optimum.steiner import Bounds, solve
from mesheval.optimum.topology import Topology, TopologyError, load_topology

NS = 1e9


@dataclass(frozen=True)
class EventRow:
    run: str
    event_id: str
    pub_node: int
    pub_s: float
    """Publish time in scenario seconds (since the run's t0)."""
    interested: tuple[int, ...]
    hits: tuple[tuple[int, int | None], ...]
    """(node, hop) of each first delivery to an interested node."""
    data_tx: int


@dataclass(frozen=True)
class RunContext:
    rundir: Path
    manifest: Mapping[str, Any]
    deadline_s: float | None


def event_optimum(topo: Topology, row: EventRow, ctx: RunContext,
                  cache: dict[Any, tuple[Bounds, Bounds, int, int]]
                  ) -> tuple[Bounds, Bounds, int, int]:
    """(broadcast, unicast, reachable terminals, unreachable terminals) of one event."""
    terms = tuple(sorted(set(row.interested) - {row.pub_node}))
    if topo.contacts is not None:
        deadline = row.pub_s + ctx.deadline_s if ctx.deadline_s is not None else topo.end_s
        result = journeys(topo.contacts, row.pub_node, row.pub_s, min(deadline, topo.end_s))
        return journey_bounds(result, terms)
    key = (round(row.pub_s, 9) if not topo.static else None, row.pub_node, terms)
    if key not in cache:
        graph = topo.graph_at(row.pub_s)
        index = graph.index()
        if row.pub_node not in index:
            raise TopologyError(f"publisher {row.pub_node} is not in the mobility log")
        inside = [index[t] for t in terms if t in index]
        opt = solve(graph, index[row.pub_node], inside)
        cache[key] = (opt.broadcast, opt.unicast, opt.terminals,
                      opt.unreachable + len(terms) - len(inside))
    return cache[key]


def stretches(topo: Topology, row: EventRow) -> tuple[list[float], list[float]]:
    """(hop stretch, geometric stretch) of the event's first deliveries."""
    hits = [(n, h) for n, h in row.hits if h is not None and h > 0]
    if not hits:
        return [], []
    pos = topo.positions(row.pub_s)
    index = {node: i for i, node in enumerate(topo.ids)}
    if row.pub_node not in index:
        return [], []
    src = index[row.pub_node]
    hop_stretch: list[float] = []
    if topo.contacts is None:
        dist, _, _ = bfs(topo.graph_at(row.pub_s), [src])
        hop_stretch = [h / int(dist[index[n]]) for n, h in hits
                       if n in index and dist[index[n]] not in (UNREACHED, 0)]
    reach = topo.range_m
    geo: list[float] = []
    if reach > 0 and topo.contacts is None:
        for n, h in hits:
            if n in index:
                d = float(np.hypot(*(pos[index[n]] - pos[src])))
                if d > reach:
                    geo.append(h / (d / reach))
    return hop_stretch, geo


def run_metrics(rows: Sequence[EventRow], ctx: RunContext) -> tuple[dict[str, Any],
                                                                    list[dict[str, Any]]]:
    """Per-run optimum metrics and per-event rows; n/a (None) where the run directory
    cannot give its topology (``opt_error`` says why)."""
    try:
        topo = load_topology(ctx.rundir, ctx.manifest)
    except TopologyError as exc:
        return {"opt_error": str(exc)}, []
    cache: dict[Any, tuple[Bounds, Bounds, int, int]] = {}
    sums = {"bl": 0, "bu": 0, "ul": 0, "uu": 0, "tx": 0}
    methods: set[str] = set()
    events = exact = unreachable = 0
    hop_all: list[float] = []
    geo_all: list[float] = []
    per_event: list[dict[str, Any]] = []
    for row in rows:
        try:
            b, u, reach, missing = event_optimum(topo, row, ctx, cache)
        except TopologyError as exc:
            return {"opt_error": str(exc)}, []
        hs, gs = stretches(topo, row)
        hop_all += hs
        geo_all += gs
        unreachable += missing
        per_event.append({
            "run": row.run, "event_id": row.event_id, "data_tx": row.data_tx,
            "terminals": reach, "unreachable": missing, "method": b.method,
            "opt_broadcast_lower": b.lower, "opt_broadcast_upper": b.upper,
            "opt_unicast_lower": u.lower, "opt_unicast_upper": u.upper,
            "ratio": row.data_tx / b.upper if b.upper else None,
        })
        if b.upper == 0:
            continue
        events += 1
        exact += b.exact and u.exact
        methods.add(b.method)
        sums["bl"] += b.lower
        sums["bu"] += b.upper
        sums["ul"] += u.lower
        sums["uu"] += u.upper
        sums["tx"] += row.data_tx

    def ratio(num: int, den: int) -> float | None:
        return num / den if den else None

    out: dict[str, Any] = {
        "opt_events": events,
        "opt_exact_share": exact / events if events else None,
        "opt_method": "+".join(sorted(methods)) if methods else None,
        "opt_unreachable": unreachable,
        "opt_broadcast_lower": sums["bl"], "opt_broadcast_upper": sums["bu"],
        "opt_unicast_lower": sums["ul"], "opt_unicast_upper": sums["uu"],
        "opt_broadcast_per_event": ratio(sums["bu"], events),
        "optimum_ratio": ratio(sums["tx"], sums["bu"]),
        "optimum_ratio_high": ratio(sums["tx"], sums["bl"]),
        "optimum_ratio_unicast": ratio(sums["tx"], sums["uu"]),
        "optimum_ratio_unicast_high": ratio(sums["tx"], sums["ul"]),
        "hop_stretch_mean": float(np.mean(hop_all)) if hop_all else None,
        "hop_stretch_max": max(hop_all) if hop_all else None,
        "geo_stretch_mean": float(np.mean(geo_all)) if geo_all else None,
        "geo_stretch_max": max(geo_all) if geo_all else None,
        "geo_stretch_n": len(geo_all),
    }
    return {k: (None if isinstance(v, float) and not math.isfinite(v) else v)
            for k, v in out.items()}, per_event
