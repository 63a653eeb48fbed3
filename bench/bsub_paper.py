"""What is specific to the B-SUB paper's experiments (Zhao & Wu, ICDCS 2010, §VII).

Everything else (the runs, the metrics, the verdicts, the page) is data:
experiments/bsub.sweep.toml and experiments/bsub.claims.toml (docs/experiments.md).
Two things are not, and live here:

- ``derive``, the sweep's hook: per point, the message rate and B-SUB's ``N`` follow
  from the point's contact trace. The rate is the paper's ``R = C R^ / C^`` per node
  (degree centrality ``C``, ``R^`` = 1/30 message per minute at the lowest centrality
  ``C^``), summed over the nodes and scaled by the point's ``rate`` axis. ``N`` (Eq. 5)
  is "obtained by counting the number of different nodes met" in ``T`` (§VII-B): the
  mean, over nodes and consecutive windows of length ``T`` (``T`` = the point's TTL),
  of the distinct nodes a node met in the window. Eq. 5 then gives B-SUB's DF.
- ``figures``: the figures of the paper's text that no run measures (trace statistics,
  N in 10 hours and the DF it gives, the key set, filter sizes, Eq. 1), written as
  JSON for the claims file:

      .venv/bin/python bench/bsub_paper.py figures --out experiments/bsub-figures.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "firmware-sim" / "meshsim" / "scenarios"
R_HAT_PER_S = 1 / 30 / 60
"""The paper's message rate at the lowest centrality: 1/30 message per minute."""
TEN_HOURS = 10 * 3600.0


def paper_rate(contacts: Any) -> float:
    """Whole-network rate of ``R = C R^ / C^`` per node (degree centrality ``C``)."""
    from meshsim.traces.stats import degree_centrality

    centrality = degree_centrality(contacts or ())
    low = min(c for c in centrality.values() if c > 0)
    return sum(centrality.values()) * R_HAT_PER_S / low


def distinct_met(contacts: Any, window: float, end: float) -> float:
    """Mean over nodes and consecutive windows of the distinct nodes met in a window
    (nodes that met nobody in a window are left out of it)."""
    from meshsim.traces.stats import intervals

    spans = intervals(contacts or ())
    counts: list[int] = []
    start = 0.0
    while start == 0.0 or start + window <= end:
        met: dict[int, set[int]] = defaultdict(set)
        for s, e, a, b in spans:
            if s < start + window and e >= start:
                met[a].add(b)
                met[b].add(a)
        counts.extend(len(v) for v in met.values())
        start += window
    return statistics.fmean(counts) if counts else 0.0


def derive(scenario: Any, point: Any) -> list[str]:
    """The sweep's hook: the rate from the trace (times the trace's ``rate_base`` and the
    point's ``rate``), and B-SUB's N for T = its TTL."""
    scale = float(point.vars.get("rate_base", 1.0)) * float(point.values.get("rate", 1.0))
    out = [f"workload.generator.rate_per_s={paper_rate(scenario.contacts) * scale!r}"]
    if scenario.protocol.name == "bsub":
        params = scenario.protocol.params
        lifetime = params.T if params.T is not None else params.TTL
        n = round(distinct_met(scenario.contacts, min(lifetime, scenario.meta.duration_s),
                               scenario.meta.duration_s))
        out.append(f"protocol.bsub.N={n}")
    return out


# -------------------------------------------------------------------- figures


def _mean(values: Sequence[float]) -> dict[str, Any]:
    from mesheval.stats import mean_ci

    ci = mean_ci(values)
    return {"value": ci.mean, "half_width": ci.half_width, "n": ci.n}


def figures(seeds: Sequence[int], days: dict[str, float]) -> dict[str, Any]:
    """The paper's text figures that no run measures, per trace over ``seeds``."""
    from meshsim.scenario import load_scenario
    from meshsim.traces.stats import intervals, trace_stats
    from meshsub.core.tcbf import TCBF, FilterKind, decay_factor, encode_filter, false_positive_rate

    out: dict[str, Any] = {}
    for trace, length in days.items():
        n10, df10, contacts, per_node_day, pairs = [], [], [], [], []
        for seed in seeds:
            sc = load_scenario(SCENARIOS / f"bsub-{trace}.toml", [
                f"scenario.seed={seed}", f"contacts.generate.seed={seed}",
                f"contacts.generate.days={length}", f"scenario.duration_s={length * 86400}"])
            n = distinct_met(sc.contacts, TEN_HOURS, sc.meta.duration_s)
            n10.append(n)
            df10.append(decay_factor(round(n), initial=50, lifetime=TEN_HOURS) * 60)
            st = trace_stats(sc.contacts or (), len(sc.nodes.ids))
            contacts.append(len(intervals(sc.contacts or ())))
            per_node_day.append(st.contacts_per_node_day)
            pairs.append(st.pairs_met)
        label = {"haggle": "Haggle-like", "mit": "MIT-like"}[trace]
        out[f"{trace}_N_10h"] = {**_mean(n10), "label": f"{label}: distinct nodes met in "
                                 f"10 h (mean over nodes and windows; {length:g} days)"}
        out[f"{trace}_DF_10h_per_min"] = {**_mean(df10), "label": f"{label}: Eq. 5 DF for "
                                          "T = 10 h at that N (per minute)"}
        out[f"{trace}_contacts"] = {**_mean(contacts), "label": f"{label}: contacts in "
                                    f"{length:g} days"}
        out[f"{trace}_contacts_per_node_day"] = {**_mean(per_node_day), "label": label}
        out[f"{trace}_pairs_met"] = {**_mean(pairs), "label": f"{label}: share of node pairs "
                                     "that ever met"}
        out[f"{trace}_nodes"] = {"value": len(sc.nodes.ids), "n": 1, "label": label}
    sc = load_scenario(SCENARIOS / "bsub-haggle.toml")
    gen = sc.workload.generator
    keys = [tp.topic for tp in gen.templates] if gen else []
    weights = [tp.weight for tp in gen.templates] if gen else []
    out["keys"] = {"value": len(keys), "n": 1, "label": "key universe (Table II + Zipf tail)"}
    for i, w in enumerate(weights[:4], 1):
        out[f"key_weight_{i}"] = {"value": w, "n": 1, "label": f"popularity of key {i}"}
    out["key_length_mean"] = {"value": statistics.fmean(len(k.encode()) for k in keys),
                              "n": len(keys), "label": "mean key length (bytes)"}
    g = TCBF()
    g.insert("NewMoon")
    out["genuine_bytes_per_key"] = {"value": len(encode_filter(g, FilterKind.GENUINE)) - 8,
                                    "n": 1, "label": "body of a one-key genuine filter"}
    out["fpr_eq1_38_keys"] = {"value": false_positive_rate(38), "n": 1,
                              "label": "Eq. 1 FPR, 38 keys, m = 256, k = 4"}
    out["counter_granularity_min"] = {"value": 1440 / 256, "n": 1,
                                      "label": "24 h over a one-byte counter (minutes)"}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("command", choices=("figures",))
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--seeds", type=int, default=5)
    args = ap.parse_args(argv)
    seeds = list(range(1, args.seeds + 1))
    doc = {"command": f"bench/bsub_paper.py figures --seeds {args.seeds}",
           "figures": figures(seeds, {"haggle": 3.0, "mit": 3.0})}
    args.out.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
