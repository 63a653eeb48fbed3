"""Simulator throughput: node-events (protocol inputs) per wall second.

Flooding on a random connected 1000-node unit-disk network with a workload of
50 events, run twice: once with the telemetry files written (as ``meshsim
simulate`` does) and once into a null sink (the engine alone). Prints figures.

    python bench/bench_sim.py [--nodes 1000] [--events 50]
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

from meshsim.des.engine import Simulation
from meshsim.des.run import run_scenario
from meshsim.des.summary import outcomes, totals
from meshsim.scenario import loads_scenario, make_plan

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--events", type=int, default=50)
    args = parser.parse_args()
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
        result = run_scenario(scenario, Path(tmp) / "run", plan=plan)
        st = result.stats
        tot = totals(outcomes(plan, st))
        print(f"with telemetry files: {st.node_events:,} node-events in {st.wall_s:.2f} s = "
              f"{st.node_events_per_s:,.0f} node-events/s; {st.records:,} records, "
              f"{sum(st.tx.values()):,} tx, delivered {tot.delivered}/{tot.expected}")

    sim = Simulation(scenario, plan=plan)
    st = sim.run()
    print(f"engine only (null sink): {st.node_events:,} node-events in {st.wall_s:.2f} s = "
          f"{st.node_events_per_s:,.0f} node-events/s")


if __name__ == "__main__":
    main()
