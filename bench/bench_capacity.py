"""How many virtual devices the host carries: ten minutes of random waypoint, measured.

Root only. For each size (default 100) a fresh run ``cap`` plays ``vmesh-rwp-load.toml``
(random waypoint, simulated GPS into every device's gpsd, flooding a steady sensor
workload) with ``meshsim run``'s code for ``--duration`` seconds (default 600) and
samples CPU and memory every ``--every`` seconds (``meshsim.vmesh.usage``).

A size is *carried* when every daemon listed its radio neighbours before the traffic
started, the medium's ticks stayed on time (late by less than one tick, none merged)
and the host's CPU stayed below 90 % of its cores on average. The largest size
carried is printed as measured; nothing is extrapolated. Give several sizes
(``--nodes 100 150 200``) to find it; the host's load average is printed beside each.
Run under ``flock -x /tmp/msub-locks/cpu.lock`` (and the root lock).

    sudo .venv/bin/python bench/bench_capacity.py [--nodes 100 ...] [--duration 600]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from meshsim.vmesh import bake
from meshsim.vmesh.usage import host_busy_share
from meshsim.vmesh.wheelhouse import build_wheelhouse
from vmesh_load import load_line, load_run

RUN = "cap"
TICK_S = 1.0  # vmesh-rwp-load's mobility tick


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[100])
    ap.add_argument("--duration", type=float, default=600.0, help="scenario seconds")
    ap.add_argument("--every", type=float, default=10.0, help="sampling period (s)")
    ap.add_argument("--rest", type=float, default=30.0, help="seconds at rest before the "
                    "memory at rest is read")
    ap.add_argument("--keep", action="store_true", help="leave the last devices up")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_capacity: needs root", file=sys.stderr)
        return 2
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="msub-wheels-") as tmp:  # not in the figures
        build_wheelhouse(Path(tmp) / "wheels", agent=True)
        print(f"baked image: {bake.ensure_baked(Path(tmp) / 'wheels', log=print)}", flush=True)
    others = host_busy_share(10.0)
    print(f"host busy before the runs (other work): {100 * others:.0f} % of {cores} cores; "
          f"{load_line()}", flush=True)
    carried: list[int] = []
    results = []
    for n in args.nodes:
        r = load_run(n, args.duration, run=RUN, every_s=args.every, rest_s=args.rest,
                     keep=args.keep and n == args.nodes[-1])
        ok, why = r.carried(TICK_S, cores)
        if ok:
            carried.append(n)
        t, u = r.timings, r.usage
        print(f"\n{n} devices, {args.duration:.0f} s random waypoint + GPS + flooding "
              f"({u.samples if u else 0} samples of {args.every:.0f} s); {load_line()}")
        print(f"bring-up                      {t.get('bring_up_s', float('nan')):8.1f} s")
        print(f"deployment (--tags configure) {t.get('deploy_s', float('nan')):8.1f} s")
        print(f"convergence                   {t.get('settle_s', float('nan')):8.1f} s "
              f"({'every daemon' if r.settle.get('complete') else 'NOT every daemon'} "
              "lists its radio neighbours)")
        print(f"up, deployed and converged    {r.ready_s:8.1f} s")
        if u is not None:
            cpu, runner = u.per_device(n)
            print(f"host CPU busy (all work)      {100 * u.host_busy:8.1f} % of {cores} cores "
                  f"(max sample {100 * u.host_busy_max:.1f} %)")
            print(f"mesh CPU (devices + runner)   "
                  f"{100 * (u.devices_cpu + u.runner_cpu) / cores:8.1f} % of {cores} cores")
            print(f"CPU per device                {100 * cpu:8.2f} % of one core")
            print(f"runner CPU per device         {100 * runner:8.2f} % of one core "
                  "(medium ticks, nft, GPS feeder)")
            print(f"memory per device (cgroup)    {u.mem_mib:8.1f} MiB working set under load, "
                  f"{r.mem_rest_mib:.1f} MiB at rest")
        m = r.medium
        print(f"medium update median / max    {m.get('update_median_s')} / "
              f"{m.get('update_max_s')} s; ticks late by up to {m.get('late_max_s')} s; "
              f"merged ticks {m.get('merged_ticks')}")
        print(f"deliveries                    {r.deliveries:8d}")
        print(f"carried                       {'yes' if ok else 'no: ' + '; '.join(why)}")
        results.append({"nodes": n, "timings": t, "ready_s": r.ready_s,
                        "settle": r.settle.get("complete"), "usage": u.__dict__ if u else None,
                        "mem_rest_mib": r.mem_rest_mib, "medium": m,
                        "deliveries": r.deliveries, "carried": ok, "why_not": why,
                        "load": r.load})
    print(f"\nlargest fleet carried (measured): {max(carried) if carried else 'none'} of "
          f"{sorted(args.nodes)}; rule: converged, ticks late < {TICK_S:g} s and none merged, "
          f"host CPU < 90 %; host busy with other work before: {100 * others:.0f} %")
    print(json.dumps({"duration_s": args.duration, "host_busy_before": others,
                      "runs": results}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
