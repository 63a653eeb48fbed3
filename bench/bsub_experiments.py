"""The B-SUB paper's experiments (Zhao & Wu 2010, §VII) in simulation -> docs/results/bsub.md.

One command regenerates the results page:

    .venv/bin/python bench/bsub_experiments.py            # the sweeps (~30 min)
    .venv/bin/python bench/bsub_experiments.py --quick    # a smaller, faster set
    .venv/bin/python bench/bsub_experiments.py --report-only   # the page from the JSON

It runs PUSH (``epidemic``), B-SUB (``bsub``) and PULL (``pull``) on the
generated Haggle-like and MIT-like contact traces (``meshsim.traces``, the
scenarios ``bsub-haggle.toml`` / ``bsub-mit.toml``) over a TTL sweep, B-SUB
over a DF sweep, and a control run that tests a reason the page gives for a
difference (``Plan.controls``). Metrics come from each run's
telemetry records (``bsub_metrics.metrics``). Every finished run is cached in
``--cache`` (JSON), so an interrupted sweep resumes and the page is rewritten
from whatever has finished (``bsub_report.write_report``).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bsub_metrics import MemorySink, metrics
from meshsim.des.engine import Simulation
from meshsim.scenario import Scenario, load_scenario
from meshsim.traces.stats import degree_centrality, intervals
from meshsub.core.tcbf import decay_factor

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "firmware-sim" / "meshsim" / "scenarios"
R_HAT_PER_S = 1 / 30 / 60
"""The paper's message rate at the lowest centrality: 1/30 message per minute."""
HOUR = 3600.0
PROTOCOLS = ("epidemic", "bsub", "pull")


@dataclass(frozen=True)
class RunSpec:
    """One simulation: a trace, a protocol, its TTL, and what varies."""

    trace: str
    protocol: str
    ttl_h: float
    days: float
    rate_scale: float
    """Fraction of the paper's message rate R = C R^/C^ (messages are independent)."""
    df_per_min: float | None = None
    """B-SUB's DF; None: Eq. 5 with N from the trace."""
    warmup_h: float = 5.0
    variant: tuple[tuple[str, str], ...] = ()
    """Extra protocol parameters of a control run, e.g. (("C", "79"),)."""
    seed: int = 1

    @property
    def key(self) -> str:
        df = "eq5" if self.df_per_min is None else f"{self.df_per_min:g}"
        var = "".join(f"/{k}={v}" for k, v in self.variant)
        return (f"{self.trace}/{self.protocol}/ttl{self.ttl_h:g}/df{df}/d{self.days:g}"
                f"/r{self.rate_scale:g}/w{self.warmup_h:g}/s{self.seed}{var}")


def load(spec: RunSpec, extra: list[str] | None = None) -> Scenario:
    """The shipped scenario with the run's trace length, protocol and parameters.

    PUSH gets an unlimited buffer and hop count, as the paper's epidemic
    baseline; every protocol the same TTL.
    """
    ttl = spec.ttl_h * HOUR
    sets = [f"scenario.seed={spec.seed}", f"contacts.generate.seed={spec.seed}",
            f"contacts.generate.days={spec.days}",
            f"scenario.duration_s={spec.days * 86400}", f"protocol.name={spec.protocol}"]
    if spec.protocol == "epidemic":
        sets.append(f"protocol.epidemic={{ ttl_s = {ttl}, buffer_size = 1000000, "
                    "max_hops = 255 }")
    elif spec.protocol == "pull":
        sets.append(f"protocol.pull={{ TTL = {ttl}, buffer_size = 1000000 }}")
    else:
        sets += [f"protocol.bsub.TTL={ttl}", "protocol.bsub.buffer_size=1000000"]
        sets += [f"protocol.bsub.{k}={v}" for k, v in spec.variant]
    sets += extra or []
    return load_scenario(SCENARIOS / f"bsub-{spec.trace}.toml", sets)


def paper_rate(scenario: Scenario) -> float:
    """Whole-network rate of ``R = C R^ / C^`` per node (degree centrality C)."""
    centrality = degree_centrality(scenario.contacts or ())
    low = min(c for c in centrality.values() if c > 0)
    return sum(centrality.values()) * R_HAT_PER_S / low


def distinct_met(scenario: Scenario, window: float) -> float:
    """Mean number of distinct nodes a node meets within ``window`` (Eq. 5's N).

    The paper: N is "obtained by counting the number of different nodes met"
    in T; every node has one key. Consecutive windows over the trace, nodes
    that met someone in the window.
    """
    spans = intervals(scenario.contacts or ())
    end = scenario.meta.duration_s
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


def run(spec: RunSpec) -> dict[str, Any]:
    """Simulate ``spec`` and return its metrics plus what the page reports about it.

    Messages are published from the end of the warm-up until ``end - TTL``:
    exactly the judged ones (outcomes of one message do not depend on the
    others, so the ones that would not be judged are not simulated).
    """
    base = load(spec)
    ttl = spec.ttl_h * HOUR
    warmup = spec.warmup_h * HOUR
    rate = paper_rate(base) * spec.rate_scale
    extra = [f"workload.generator.rate_per_s={rate}", f"workload.generator.start_s={warmup}",
             f"workload.generator.stop_s={base.meta.duration_s - ttl}"]
    info: dict[str, Any] = {"rate_per_s": rate}
    if spec.protocol == "bsub":
        if spec.df_per_min is None:  # Eq. 5 with N from the trace, as the paper did
            n_keys = round(distinct_met(base, min(ttl, spec.days * 86400)))
            df = decay_factor(n_keys, initial=50, lifetime=ttl)
            info["N"] = n_keys
        else:
            df = spec.df_per_min / 60
        extra.append(f"protocol.bsub.DF={df}")
        info["DF_per_min"] = df * 60
    scenario = load(spec, extra)
    sink = MemorySink()
    started = time.perf_counter()
    sim = Simulation(scenario, sink)
    stats = sim.run()
    out: dict[str, Any] = dict(metrics(sink.records, len(sim.nodes), ttl, scenario.end_s,
                                       since=warmup))
    out.update(info)
    out["wall_s"] = round(time.perf_counter() - started, 1)
    out["control_bytes"] = stats.tx_bytes.get("control", 0) + stats.tx_bytes.get(
        "subscription", 0)
    out["data_bytes"] = stats.tx_bytes.get("data", 0)
    out["published"] = len(stats.published)
    if spec.protocol == "bsub":
        totals: dict[str, int] = defaultdict(int)
        for st in sim.nodes.values():
            for name, value in getattr(st.proto, "stats", {}).items():
                totals[name] += value
        out["bsub_stats"] = dict(totals)
    return out


# ------------------------------------------------------------------ the sweeps


@dataclass(frozen=True)
class TracePlan:
    """How one trace is run: its length, message rate and election warm-up."""

    name: str
    days: float
    rate_scale: float
    warmup_h: float


@dataclass(frozen=True)
class Plan:
    traces: tuple[TracePlan, ...]
    ttls_h: tuple[float, ...]
    dfs_per_min: tuple[float, ...]
    df_ttl_h: float
    controls: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = ()
    """(label, B-SUB parameters) of control runs on every trace at ``df_ttl_h``."""

    def trace(self, name: str) -> TracePlan:
        return next(t for t in self.traces if t.name == name)

    def spec(self, trace: str, protocol: str, ttl_h: float, df: float | None = None,
             variant: tuple[tuple[str, str], ...] = ()) -> RunSpec:
        t = self.trace(trace)
        return RunSpec(trace, protocol, ttl_h, t.days, t.rate_scale, df, t.warmup_h, variant)


FULL = Plan(traces=(TracePlan("haggle", 1.5, 0.05, 2.0), TracePlan("mit", 3.0, 0.01, 12.0)),
            ttls_h=(1.0, 2.0, 5.0, 10.0, 20.0),
            dfs_per_min=(0.0, 0.03, 0.138, 1.0, 10.0, 100.0),
            df_ttl_h=20.0, controls=(("C = 100 (no copy limit)", (("C", "100"),)),))
"""What fits this machine (2 shared cores, one pure-Python simulation at a time) in
about half an hour: the first 36 hours of the Haggle-like preset (its full contact
rate), the 3-day MIT-like trace, the paper's TTL of 20 h for the DF sweep, and
message rates scaled down from the paper's (``rate_scale`` x its R = C R^/C^)."""
QUICK = Plan(traces=(TracePlan("haggle", 0.5, 0.05, 2.0), TracePlan("mit", 3.0, 0.005, 12.0)),
             ttls_h=(1.0, 5.0), dfs_per_min=(0.0, 0.138, 10.0), df_ttl_h=5.0)


def specs(plan: Plan) -> list[RunSpec]:
    out = []
    for t in plan.traces:
        for ttl in plan.ttls_h:
            out += [plan.spec(t.name, proto, ttl) for proto in PROTOCOLS]
        out += [plan.spec(t.name, "bsub", plan.df_ttl_h, df) for df in plan.dfs_per_min]
        out += [plan.spec(t.name, "bsub", plan.df_ttl_h, None, variant)
                for _, variant in plan.controls]
    return out


def main(argv: list[str] | None = None) -> int:
    from bsub_report import write_report

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the smaller sweep")
    parser.add_argument("--cache", type=Path, default=ROOT / "docs" / "results" / "bsub.json")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "results" / "bsub.md")
    parser.add_argument("--only", choices=("haggle", "mit"), help="run one trace only")
    parser.add_argument("--report-only", action="store_true", help="write the page from the cache")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    cache: dict[str, Any] = json.loads(args.cache.read_text()) if args.cache.exists() else {}
    # Drop results of runs this plan does not make (older plans), so the JSON is the page's.
    cache = {s.key: cache[s.key] for s in specs(plan) if s.key in cache}
    todo = [s for s in specs(plan) if args.only in (None, s.trace)]
    if not args.report_only:
        missing = [s for s in todo if s.key not in cache]
        # One simulation at a time (the machine is shared); the page is rewritten after
        # each, so an interrupted sweep leaves a page of what finished.
        for i, spec in enumerate(missing, 1):
            r = run(spec)
            cache[spec.key] = r
            print(f"[{i}/{len(missing)}] {spec.key}: delivery {r['delivery_ratio']:.3f}  "
                  f"delay {r['delay_mean_h']:.2f} h  fwd/deliv "
                  f"{r['forwardings_per_delivery']:.2f}  fpr {r['fpr']:.4f}  brokers "
                  f"{r['broker_share']:.2f}  ({r['wall_s']} s)", flush=True)
            args.cache.write_text(json.dumps(cache, indent=1, sort_keys=True))
            write_report(plan, cache, args.out, quick=args.quick)
    write_report(plan, cache, args.out, quick=args.quick)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
