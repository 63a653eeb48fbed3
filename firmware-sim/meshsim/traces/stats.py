"""Statistics of a contact trace: what calibration compares with the real traces.

Works on any trace in ONE connection events (generated or read from a file).
An ``up`` without a matching ``down`` ends at the trace's last event.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from meshsim.scenario.model import Contact


@dataclass(frozen=True, slots=True)
class TraceStats:
    nodes: int
    """Nodes that appear in at least one contact."""
    contacts: int
    duration_s: float
    contacts_per_node_day: float
    pairs_met: float
    """Fraction of all node pairs that met at least once."""
    duration_median_s: float
    duration_mean_s: float
    ict_median_s: float
    ict_mean_s: float
    ict_p90_s: float
    ict_tail_exponent: float
    """Hill estimate of the Pareto tail of inter-contact times (top 10%); < 2: heavy."""
    degree_cv: float
    """Coefficient of variation of the number of distinct peers per node."""

    def lines(self) -> list[str]:
        return [
            f"nodes {self.nodes}, contacts {self.contacts}, "
            f"{self.duration_s / 86400:.2f} days, {self.contacts_per_node_day:.1f} "
            "contacts/node/day",
            f"pairs that ever met: {100 * self.pairs_met:.1f}%  "
            f"degree CV: {self.degree_cv:.2f}",
            f"contact duration median {self.duration_median_s:.0f} s, "
            f"mean {self.duration_mean_s:.0f} s",
            f"inter-contact time median {self.ict_median_s / 60:.1f} min, "
            f"mean {self.ict_mean_s / 3600:.2f} h, p90 {self.ict_p90_s / 3600:.2f} h, "
            f"tail exponent {self.ict_tail_exponent:.2f}",
        ]


def intervals(contacts: Sequence[Contact]) -> list[tuple[float, float, int, int]]:
    """(start, end, a, b) with a < b, from up/down events."""
    end_t = max((c.t for c in contacts), default=0.0)
    open_: dict[tuple[int, int], float] = {}
    out = []
    for c in contacts:
        pair = (min(c.a, c.b), max(c.a, c.b))
        if c.up:
            open_.setdefault(pair, c.t)
        elif pair in open_:
            out.append((open_.pop(pair), c.t, *pair))
    out.extend((start, end_t, *pair) for pair, start in open_.items())
    out.sort()
    return out


def degree_centrality(contacts: Sequence[Contact]) -> dict[int, float]:
    """Distinct peers met / (n - 1) per node: the workload's centrality (B-SUB, §VII-A)."""
    peers: dict[int, set[int]] = defaultdict(set)
    for c in contacts:
        if c.up:
            peers[c.a].add(c.b)
            peers[c.b].add(c.a)
    n = len(peers)
    return {node: len(p) / max(1, n - 1) for node, p in peers.items()}


def _hill(values: list[float], top: float = 0.1) -> float:
    tail = sorted(values, reverse=True)[: max(2, int(len(values) * top))]
    if len(tail) < 2 or tail[-1] <= 0:
        return math.nan
    x_min = tail[-1]
    logs = [math.log(v / x_min) for v in tail[:-1]]
    return len(logs) / sum(logs) if sum(logs) > 0 else math.nan


def trace_stats(contacts: Sequence[Contact], nodes: int | None = None) -> TraceStats:
    spans = intervals(contacts)
    seen = {n for _, _, a, b in spans for n in (a, b)}
    n = nodes if nodes is not None else len(seen)
    duration = max((c.t for c in contacts), default=0.0) - min((c.t for c in contacts),
                                                               default=0.0)
    by_pair: dict[tuple[int, int], list[tuple[float, float]]] = defaultdict(list)
    for start, end, a, b in spans:
        by_pair[(a, b)].append((start, end))
    icts = [s2 - e1 for spans_ in by_pair.values()
            for (_, e1), (s2, _) in itertools.pairwise(spans_) if s2 > e1]
    lengths = [end - start for start, end, _, _ in spans]
    deg = list(degree_centrality(contacts).values())
    q = statistics.quantiles(icts, n=10) if len(icts) >= 10 else [math.nan] * 9
    return TraceStats(
        nodes=len(seen),
        contacts=len(spans),
        duration_s=duration,
        contacts_per_node_day=2 * len(spans) / max(1, n) / max(duration / 86400, 1e-9),
        pairs_met=len(by_pair) / max(1, n * (n - 1) // 2),
        duration_median_s=statistics.median(lengths) if lengths else math.nan,
        duration_mean_s=statistics.fmean(lengths) if lengths else math.nan,
        ict_median_s=statistics.median(icts) if icts else math.nan,
        ict_mean_s=statistics.fmean(icts) if icts else math.nan,
        ict_p90_s=q[8],
        ict_tail_exponent=_hill(icts) if icts else math.nan,
        degree_cv=(statistics.pstdev(deg) / statistics.fmean(deg)) if deg else math.nan,
    )
