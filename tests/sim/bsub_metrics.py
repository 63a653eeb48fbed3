"""The B-SUB paper's metrics (Zhao & Wu 2010, §VII) from a run's records, in memory.

For the simulator's B-SUB tests, which need the figures without a Spark job: one
function, ``metrics``, turns the records every driver writes (``publish``,
``subscribe``, ``deliver``, ``drop``, ``tx``, ``broker``) into the paper's figures,
with the definitions mesheval uses for the results page (docs/evaluation.md:
``evaluate.deadline_s``, ``event_any_delivery_ratio``, ``tx_data_per_delivery``,
``fp_forward_share``, ``broker_share``; the broker share here is sampled hourly):

- **judged messages**: published at or after ``since`` (the broker election's
  warm-up: every node starts as a user) and whose lifetime ended within the
  run (``published + ttl <= end``), so every judged message had its whole TTL;
- **delivery ratio**: delivered (message, interested consumer) pairs / all
  such pairs, over judged messages; a consumer is a node subscribed to the
  message's key, other than its producer; delivered means a ``deliver``
  record within the TTL;
- **delivered to >= 1**: judged messages delivered to at least one interested
  consumer / judged messages that have one (the per-message view of #27);
- **delay**: publication to delivery of the delivered pairs only, in hours
  (mean and median; the paper plots it on a log axis);
- **forwardings per delivered message**: every DATA transmission of a judged
  message (any mode: direct, copy, handoff; PUSH and PULL DATA) / delivered
  pairs. Control traffic (filters, offers, summary vectors)
  is counted apart, in bytes, by the caller;
- **FPR**: false deliveries / (deliveries + false deliveries) of judged
  messages, a false delivery being a DATA that passed a consumer's Bloom
  filter but matched none of its subscriptions (the drop
  ``false_positive_forward``; the application never sees it);
- **broker share**: the fraction of nodes that are brokers, sampled every
  hour from ``since`` to the end and averaged (``broker`` role records).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from meshsub.core.api import TelemetryValue

HOUR = 3600.0
KEPT = {"publish", "subscribe", "deliver", "drop", "broker"}

Record = tuple[int, float, str, dict[str, TelemetryValue]]
"""(node, time in seconds, event, attributes)."""


@dataclass
class MemorySink:
    """Keeps the records the metrics need (DATA ``tx`` only, not control traffic)."""

    records: list[Record] = field(default_factory=list)

    def record(self, node: int, ts_ns: int, event: str,
               attrs: Mapping[str, TelemetryValue]) -> None:
        if event in KEPT or (event == "tx" and attrs.get("msg_kind") == "data"):
            self.records.append((node, ts_ns / 1e9, event, dict(attrs)))


def metrics(records: list[Record], nodes: int, ttl: float, end: float,
            since: float = 0.0) -> dict[str, float]:
    """The paper's metrics over the judged messages (module docstring)."""
    subs: dict[str, set[int]] = defaultdict(set)
    published: dict[str, tuple[int, float, str]] = {}
    delivered: dict[tuple[str, int], float] = {}
    data_tx: dict[str, int] = defaultdict(int)
    false: dict[str, int] = defaultdict(int)
    roles: list[tuple[float, int, bool]] = []
    for node, t, event, attrs in records:
        if event == "subscribe":
            subs[str(attrs["topic"])].add(node)
        elif event == "publish":
            published[str(attrs["event_id"])] = (node, t, str(attrs["topic"]))
        elif event == "deliver":
            delivered.setdefault((str(attrs["event_id"]), node), t)
        elif event == "tx":
            data_tx[str(attrs["event_id"])] += 1
        elif event == "drop" and attrs.get("reason") == "false_positive_forward":
            false[str(attrs["event_id"])] += 1
        elif event == "broker":
            roles.append((t, node, attrs.get("role") == "broker"))
    judged = {eid: v for eid, v in published.items() if v[1] >= since and v[1] + ttl <= end}
    pairs = hits = wanted = reached = 0
    delays: list[float] = []
    for eid, (producer, t0, topic) in judged.items():
        consumers = subs.get(topic, set()) - {producer}
        if consumers:
            wanted += 1
        got = 0
        for consumer in consumers:
            pairs += 1
            when = delivered.get((eid, consumer))
            if when is not None and when <= t0 + ttl:
                got += 1
                delays.append(when - t0)
        hits += got
        reached += got > 0
    tx = sum(data_tx[eid] for eid in judged)
    fp = sum(false[eid] for eid in judged)
    all_deliveries = sum(1 for (eid, node) in delivered
                         if eid in judged and judged[eid][0] != node)
    return {
        "messages": len(judged),
        "pairs": pairs,
        "delivery_ratio": hits / pairs if pairs else math.nan,
        "delivered_any": reached / wanted if wanted else math.nan,
        "delay_mean_h": statistics.fmean(delays) / HOUR if delays else math.nan,
        "delay_median_h": statistics.median(delays) / HOUR if delays else math.nan,
        "forwardings_per_delivery": tx / hits if hits else math.nan,
        "data_tx": tx,
        "deliveries": hits,
        "false_deliveries": fp,
        "fpr": fp / (fp + all_deliveries) if fp + all_deliveries else 0.0,
        "broker_share": broker_share(roles, nodes, since, end),
    }


def broker_share(changes: list[tuple[float, int, bool]], nodes: int, since: float,
                 end: float) -> float:
    """Mean fraction of brokers, sampled hourly from ``since`` to ``end`` (0 if none)."""
    if not changes:
        return 0.0
    changes = sorted(changes)
    state: dict[int, bool] = {}
    samples = []
    i = 0
    t = since
    while t <= end:
        while i < len(changes) and changes[i][0] <= t:
            state[changes[i][1]] = changes[i][2]
            i += 1
        samples.append(sum(state.values()) / nodes)
        t += HOUR
    return statistics.fmean(samples) if samples else 0.0
