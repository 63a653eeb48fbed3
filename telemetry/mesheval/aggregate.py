"""Per-configuration summaries: mean and 95% Student-t interval over seeds.

A configuration is (protocol, scenario, varied parameter name and value); the runs
of one configuration differ only in their seed. Undefined per-run values (e.g. a
latency with no delivery) are left out of the mean, and ``n`` says how many counted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from mesheval.settings import GROUP_KEYS, RunSettings
from mesheval.stats import mean_ci

HEADLINE = (
    "delivery_ratio",
    "latency_mean_s",
    "latency_median_s",
    "latency_p95_s",
    "latency_p99_s",
    "overhead_ratio",
    "tx_per_delivery",
    "bytes_per_delivery",
    "control_share_bytes",
    "fp_deliveries",
    "fp_forward",
    "duplicates",
    "energy_per_event_j",
    "energy_per_subscriber_j",
    "state_entries_mean",
    "state_bytes_mean",
)
"""Metrics summarised per configuration (all per-run metrics are in metrics.json)."""


def group_key(s: RunSettings) -> tuple[str, ...]:
    return tuple(str(getattr(s, k)) for k in GROUP_KEYS)


def numeric_metrics(runs: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Every per-run metric that is a number in some run (booleans are not)."""
    names = {k for values in runs.values() for k, v in values.items()
             if isinstance(v, int | float) and not isinstance(v, bool)}
    return sorted(names)


def aggregate(
    settings: Sequence[RunSettings],
    runs: Mapping[str, Mapping[str, Any]],
    metrics: Sequence[str] | None = None,
    confidence: float = 0.95,
) -> list[dict[str, Any]]:
    """One dict per configuration: keys, seeds, the varied values, and {mean, half_width,
    low, high, n} per metric (every numeric per-run metric unless ``metrics`` names some)."""
    if metrics is None:
        metrics = sorted(set(HEADLINE) | set(numeric_metrics(runs)))
    groups: dict[tuple[str, ...], list[RunSettings]] = {}
    for s in settings:
        groups.setdefault(group_key(s), []).append(s)
    out: list[dict[str, Any]] = []
    for key, members in sorted(groups.items(), key=lambda kv: _sort_key(kv[1][0])):
        row: dict[str, Any] = dict(zip(GROUP_KEYS, key, strict=True))
        row["param_number"] = members[0].param_number
        row["varied"] = dict(members[0].varied)
        row["runs"] = sorted(m.run for m in members)
        row["seeds"] = sorted(m.seed for m in members if m.seed is not None)
        row["metrics"] = {}
        for name in metrics:
            values = [v for v in (runs.get(m.run, {}).get(name) for m in members)
                      if isinstance(v, int | float) and not isinstance(v, bool)
                      and math.isfinite(v)]
            ci = mean_ci(values, confidence)
            row["metrics"][name] = {
                "mean": ci.mean, "half_width": ci.half_width, "low": ci.low, "high": ci.high,
                "n": ci.n, "min": min(values) if values else None,
                "max": max(values) if values else None,
            }
        out.append(row)
    return out


def _sort_key(s: RunSettings) -> tuple[Any, ...]:
    number = s.param_number
    return (s.scenario, s.param_name, number is None, number or 0.0, s.param_value, s.protocol,
            s.tier)
