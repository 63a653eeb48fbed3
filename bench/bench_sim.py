"""Simulator throughput: node-events (protocol inputs) per wall second.

Flooding on a random connected 1000-node unit-disk network with a workload of
50 events, run three times in one process, on one core:

- ``baseline``: the telemetry written as before the speed-up, one record per drop
  (``drop_summary_s = 0``) and every line built as a dict and JSON-encoded
  (``core.telemetry.make_record`` + ``dump_line`` order, the old ``RunWriter.record``);
- ``with telemetry files``: as ``meshsim simulate`` writes them now (drop summaries,
  line patterns, ``rx`` batches);
- ``engine only``: into a null sink.

The issue's target: >= 200,000 node-events/s with telemetry files (63,265 before,
on an idle machine). ``--hesper8000`` adds the 8000-node HESPER configuration
(``hesper-8000-tr100.toml``, target <= 60 s; about 76 s before). Run it under
``flock -x /tmp/msub-locks/cpu.lock``; it prints ``uptime`` beside the figures.

    python bench/bench_sim.py [--nodes 1000] [--events 50] [--hesper8000]
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from meshsim.des.engine import Simulation
from meshsim.des.run import run_scenario
from meshsim.des.summary import outcomes, totals
from meshsim.scenario import Scenario, load_scenario, loads_scenario, make_plan
from meshsim.scenario.plan import Plan
from meshsim.telemetry_files import RunWriter
from meshsub.core.api import TelemetryValue

SCENARIOS = Path(__file__).resolve().parents[1] / "firmware-sim" / "meshsim" / "scenarios"

SCENARIO = """
[scenario]
name = "bench-flooding"
seed = 11
duration_s = 60.0
drain_s = 5.0

[area]
width_m = {side}
height_m = {side}

[radio]
model = "unit_disk"
range_m = 100.0
loss = 0.02
delay_s = 0.001

[nodes]
count = {nodes}
placement = "random"
connected = true

[protocol]
name = "flooding"

[protocol.flooding]
ttl = 64

[workload.subscribers]
fraction = 0.2
expressions = [{{ expr = "sensors/temp value>=20" }}, {{ expr = "alarms/#" }}]

[workload.generator]
rate_per_s = 1.0
process = "periodic"
count = {events}

[[workload.generator.templates]]
topic = "sensors/temp"
attrs = {{ value = {{ uniform_int = [0, 40] }} }}

[[workload.generator.templates]]
topic = "alarms/smoke"
attrs = {{ level = {{ uniform_int = [1, 5] }} }}
"""


class PerRecordWriter(RunWriter):
    """The writer as before: every line a dict JSON-encoded on its own."""

    def record_many(self, nodes: Iterable[int], ts_ns: int, event: str,
                    attrs: Mapping[str, TelemetryValue]) -> None:
        for node in nodes:
            self._slow_record(node, ts_ns, event, attrs)


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def with_files(scenario: Scenario, plan: Plan, out: Path, name: str, **kwargs: Any) -> float:
    """Run into a run directory as ``meshsim simulate`` does; print and return the rate."""
    result = run_scenario(scenario, out, plan=plan, **kwargs)
    st = result.stats
    tot = totals(outcomes(plan, st))
    print(f"{name}: {st.node_events:,} node-events in {st.wall_s:.2f} s = "
          f"{st.node_events_per_s:,.0f} node-events/s; {st.records:,} records, "
          f"{sum(st.tx.values()):,} tx, delivered {tot.delivered}/{tot.expected}", flush=True)
    return st.node_events_per_s


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--hesper8000", action="store_true",
                        help="also time the 8000-node HESPER configuration (minutes)")
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    print(f"load before: {load()}")
    # Keep the mean degree about 12 whatever the node count: n * pi * r^2 / A = 12.
    side = math.sqrt(args.nodes * math.pi * 100.0**2 / 12.0)
    scenario = loads_scenario(SCENARIO.format(side=round(side, 1), nodes=args.nodes,
                                              events=args.events))
    started = time.perf_counter()
    plan = make_plan(scenario)
    print(f"plan: {args.nodes} nodes on {side:.0f} m x {side:.0f} m (connected placement), "
          f"{len(plan.subscriptions)} subscriptions, {len(plan.publications)} events "
          f"in {time.perf_counter() - started:.2f} s")

    with tempfile.TemporaryDirectory() as tmp:
        before = with_files(scenario, plan, Path(tmp) / "before", "baseline (one record per "
                            "drop, per-record JSON writer)", drop_summary_s=0.0,
                            writer_cls=PerRecordWriter)
        now = with_files(scenario, plan, Path(tmp) / "now", "with telemetry files")

    sim = Simulation(scenario, plan=plan)
    st = sim.run()
    print(f"engine only (null sink): {st.node_events:,} node-events in {st.wall_s:.2f} s = "
          f"{st.node_events_per_s:,.0f} node-events/s")
    print(f"speed-up with telemetry files: {now / before:.2f}x over the baseline in this run; "
          f"target >= 200,000 node-events/s: {'met' if now >= 200_000 else 'not met'} "
          f"({now:,.0f})")

    if args.hesper8000:
        hesper = load_scenario(SCENARIOS / "hesper-8000-tr100.toml")
        with tempfile.TemporaryDirectory() as tmp:
            started = time.perf_counter()
            result = run_scenario(hesper, Path(tmp) / "run")
            took = time.perf_counter() - started
        st = result.stats
        print(f"hesper-8000-tr100: {took:.1f} s with telemetry files (simulation "
              f"{st.wall_s:.1f} s), {st.node_events:,} node-events, {st.records:,} records, "
              f"{len(st.deliveries):,} deliveries; target <= 60 s: "
              f"{'met' if took <= 60 else 'not met'}")
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
