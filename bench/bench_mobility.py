"""Mobility throughput: building tracks, and positions per second at driver ticks.

200 nodes in 1 km^2 for 10 minutes (the run's end) with each model, queried
at 1 s ticks as the simulator and the virtual-mesh runner do
(``trajectories.positions(t)``); plus the size and write time of the mobility
log. Prints figures; asserts nothing.

    python bench/bench_mobility.py [--nodes 200] [--duration 600] [--tick 1]
"""

from __future__ import annotations

import argparse
import io
import os
import time
from typing import Any

from meshsim.mobility import make_trajectories, write_log
from meshsim.scenario import from_dict
from meshsim.scenario.plan import place_nodes

MODELS: dict[str, dict[str, Any]] = {
    "random_waypoint": {"speed_min": 0.5, "speed_max": 2.0, "pause_max": 30.0},
    "random_walk": {"speed_min": 0.5, "speed_max": 2.0, "walk_time": 10.0},
    "gauss_markov": {"alpha": 0.75, "mean_speed": 1.5, "sigma_speed": 0.3,
                     "sigma_direction": 30.0},
    "group": {"group_size": 10, "radius": 50.0, "speed_min": 0.5, "speed_max": 2.0,
              "pause_max": 30.0},
}


def scenario_doc(model: str, nodes: int, duration: float, tick: float) -> dict[str, Any]:
    return {
        "scenario": {"name": "bench-mobility", "seed": 1, "duration_s": duration,
                     "drain_s": 0.0},
        "area": {"width_m": 1000.0, "height_m": 1000.0},
        "nodes": {"count": nodes, "placement": "random"},
        "mobility": {"model": model, "tick_s": tick, **MODELS[model]},
        "protocol": {"name": "flooding"},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=200)
    parser.add_argument("--duration", type=float, default=600.0)
    parser.add_argument("--tick", type=float, default=1.0)
    args = parser.parse_args()
    ticks = int(args.duration / args.tick) + 1
    print(f"{args.nodes} nodes, 1000 x 1000 m, {args.duration:g} s, "
          f"{ticks} ticks of {args.tick:g} s (load average {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} CPUs)")
    print(f"{'model':<16} {'build s':>8} {'points':>8} {'positions/s':>12} "
          f"{'tick ms':>8} {'log KiB':>8} {'log s':>6}")
    for model in MODELS:
        scenario = from_dict(scenario_doc(model, args.nodes, args.duration, args.tick))
        placed = place_nodes(scenario)
        started = time.perf_counter()
        traj = make_trajectories(scenario, placed)
        build = time.perf_counter() - started
        points = sum(len(traj.track(n)) for n in traj.nodes)
        started = time.perf_counter()
        for k in range(ticks):
            traj.positions(k * args.tick)
        query = time.perf_counter() - started
        out = io.StringIO()
        started = time.perf_counter()
        write_log(traj, out)
        log_s = time.perf_counter() - started
        rate = args.nodes * ticks / query
        print(f"{model:<16} {build:>8.3f} {points:>8} {rate:>12,.0f} "
              f"{1000 * query / ticks:>8.3f} {len(out.getvalue()) / 1024:>8.0f} {log_s:>6.3f}")


if __name__ == "__main__":
    main()
