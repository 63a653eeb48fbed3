"""Ground truth and per-event outcome of a run, from the plan and the driver's counters.

Expected deliveries use the exact matcher on the planned workload: an event is
expected at every (node, subscription) that subscribed at or before the
publication time and whose subscription matches it (the publisher's own
subscriptions included). This mirrors what the evaluation job computes from
the ``subscribe``/``publish`` records.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass

from meshsim.des.stats import SimStats
from meshsim.scenario.plan import Plan


@dataclass(frozen=True, slots=True)
class EventOutcome:
    event_id: str
    node: int
    t: float
    topic: str
    expected: int
    delivered: int
    """Distinct expected (node, subscription) pairs reached."""
    unexpected: int
    """Deliveries to pairs that should not have received it (must be 0)."""
    duplicates: int
    """Deliveries beyond the first per (node, subscription)."""
    mean_hops: float | None
    mean_latency_s: float | None
    max_latency_s: float | None


def expected_pairs(plan: Plan) -> list[set[tuple[int, str]]]:
    """For each planned publication, the (node, sub_id) pairs that should receive it."""
    out = []
    for pub in plan.publications:
        out.append({(s.node, s.sub_id) for s in plan.subscriptions
                    if s.t <= pub.t and (s.until is None or s.until > pub.t)
                    and s.matches(pub.event)})
    return out


def outcomes(plan: Plan, stats: SimStats) -> list[EventOutcome]:
    expected = expected_pairs(plan)
    by_event: dict[str, list[tuple[int, str, float, int]]] = defaultdict(list)
    for d in stats.deliveries:
        by_event[d.event_id].append((d.node, d.sub_id, d.t, d.hop))
    result = []
    for pub in stats.published:
        want = expected[pub.index]
        first: dict[tuple[int, str], tuple[float, int]] = {}
        dups = 0
        for node, sub_id, t, hop in by_event.get(pub.event_id, []):
            if (node, sub_id) in first:
                dups += 1
            else:
                first[(node, sub_id)] = (t, hop)
        good = [v for k, v in first.items() if k in want]
        latencies = [t - pub.t for t, _ in good]
        result.append(EventOutcome(
            event_id=pub.event_id,
            node=pub.node,
            t=pub.t,
            topic=pub.event.topic,
            expected=len(want),
            delivered=len(good),
            unexpected=len(first) - len(good),
            duplicates=dups,
            mean_hops=statistics.fmean(h for _, h in good) if good else None,
            mean_latency_s=statistics.fmean(latencies) if latencies else None,
            max_latency_s=max(latencies) if latencies else None,
        ))
    return result


@dataclass(frozen=True, slots=True)
class Totals:
    published: int
    expected: int
    delivered: int
    unexpected: int
    duplicates: int

    @property
    def delivery_ratio(self) -> float | None:
        return self.delivered / self.expected if self.expected else None


def totals(events: list[EventOutcome]) -> Totals:
    return Totals(len(events), sum(e.expected for e in events),
                  sum(e.delivered for e in events), sum(e.unexpected for e in events),
                  sum(e.duplicates for e in events))
