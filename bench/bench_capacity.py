"""How many virtual devices the 2-core host carries: a 10-minute random-waypoint run.

Root only. Runs ``vmesh-rwp-load.toml`` (random waypoint, simulated GPS into every
device's gpsd, flooding a steady sensor workload) on N devices with ``meshsim run``'s
code, as its own run ``cap``, and samples every ``--every`` seconds while the scenario
plays:

- host CPU busy (from /proc/stat; this includes anything else the host runs);
- CPU of the devices (each container's cpuacct cgroup: systemd, mosquitto, gpsd,
  meshsubd, the workload agent) and of the runner (this process and its children:
  medium ticks, ``nft``, the GPS feeder);
- memory of each device (its cgroup's usage less inactive file cache), also at rest
  ``--rest`` seconds after the scenario.

The host keeps up while the medium's ticks are on time (the run's ``late_max_s`` below
one tick, no merged ticks) and the mesh's own CPU stays below 90 % of the cores. The
figures per device give the largest N the host carries: 0.9 x cores / (CPU per device +
runner CPU per device). Prints a table; everything is removed at the end unless --keep.

    sudo .venv/bin/python bench/bench_capacity.py [--nodes 50] [--duration 600]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "firmware-sim"))

from meshsim.scenario import load_scenario  # noqa: E402
from meshsim.vmesh.nodes import PODMAN  # noqa: E402

RUN = "cap"
SCENARIO = REPO / "firmware-sim" / "meshsim" / "scenarios" / "vmesh-rwp-load.toml"
CGROUP = Path("/sys/fs/cgroup")


def host_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs since boot."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def container_ids(names: list[str]) -> dict[str, str]:
    out = subprocess.run([*PODMAN, "inspect", "--format", "{{.Name}} {{.Id}}", *names],
                         capture_output=True, text=True, check=True).stdout
    return dict(line.split() for line in out.splitlines() if line.strip())


def cpu_ns(cid: str) -> int:
    return int((CGROUP / "cpuacct" / "libpod_parent" / f"libpod-{cid}" / "cpuacct.usage")
               .read_text())


def working_set_mib(cid: str) -> float:
    base = CGROUP / "memory" / "libpod_parent" / f"libpod-{cid}"
    usage = int((base / "memory.usage_in_bytes").read_text())
    stat = dict(line.split() for line in (base / "memory.stat").read_text().splitlines())
    return (usage - int(stat.get("total_inactive_file", 0))) / 2**20


def runner_cpu_s() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


class Sampler:
    """Samples CPU and memory from the scenario's start until stopped."""

    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self.stop = threading.Event()
        self.samples: list[dict[str, float]] = []
        self.ids: dict[str, str] = {}
        self.thread: threading.Thread | None = None

    def start(self, containers: list[str]) -> None:
        self.ids = container_ids(containers)
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        prev = self._read()
        while not self.stop.wait(self.every_s):
            cur = self._read()
            dt = cur["t"] - prev["t"]
            jiffies = cur["total"] - prev["total"]
            self.samples.append({
                "host": (cur["busy"] - prev["busy"]) / jiffies if jiffies else 0.0,
                "devices": (cur["dev_ns"] - prev["dev_ns"]) / 1e9 / dt,
                "runner": (cur["runner"] - prev["runner"]) / dt,
                "mem_mib": statistics.fmean(working_set_mib(c) for c in self.ids.values()),
            })
            prev = cur

    def _read(self) -> dict[str, float]:
        busy, total = host_busy()
        return {"t": time.monotonic(), "busy": busy, "total": total,
                "dev_ns": float(sum(cpu_ns(c) for c in self.ids.values())),
                "runner": runner_cpu_s()}

    def finish(self) -> list[dict[str, float]]:
        self.stop.set()
        if self.thread is not None:
            self.thread.join(30)
        return self.samples


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=50)
    ap.add_argument("--duration", type=float, default=600.0, help="scenario seconds")
    ap.add_argument("--every", type=float, default=10.0, help="sampling period (s)")
    ap.add_argument("--rest", type=float, default=30.0, help="seconds at rest before the "
                    "memory at rest is read")
    ap.add_argument("--keep", action="store_true", help="leave the devices up afterwards")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_capacity: needs root", file=sys.stderr)
        return 2
    from meshsim.vmesh import lifecycle
    from meshsim.vmesh.scenario_run import RunOptions, run_on_vmesh

    scenario = load_scenario(SCENARIO, [f"nodes.count={args.nodes}",
                                        f"scenario.duration_s={args.duration}"])
    cores = os.cpu_count() or 1
    sampler = Sampler(args.every)
    with tempfile.TemporaryDirectory(prefix="msub-cap-") as tmp:
        try:
            res = run_on_vmesh(scenario, RunOptions(
                out=Path(tmp) / "run", vmesh_run=RUN, keep=True,
                log=lambda m: print(f"run: {m}", flush=True),
                on_start=lambda _t0, devs: sampler.start([d.container for d in devs.values()])))
            samples = sampler.finish()
            time.sleep(args.rest)  # the workload is over: memory at rest
            rest = statistics.fmean(working_set_mib(c) for c in sampler.ids.values())
        finally:
            samples = sampler.finish()
            if not args.keep:
                lifecycle.teardown(RUN, purge=True)
        medium = res.manifest.get("stats", {}).get("medium", {})
        delivered = sum(1 for p in (Path(tmp) / "run" / "nodes").rglob("*.jsonl")
                        for line in p.read_text().splitlines() if '"deliver"' in line)
    if not samples:
        print("bench_capacity: the scenario ended before the first sample", file=sys.stderr)
        return 1
    steady = samples[1:] or samples  # the first interval holds the agents' start
    n = args.nodes
    host = statistics.fmean(s["host"] for s in steady)
    dev = statistics.fmean(s["devices"] for s in steady)
    runner = statistics.fmean(s["runner"] for s in steady)
    mem = statistics.fmean(s["mem_mib"] for s in steady)
    mesh = (dev + runner) / cores
    capacity = int(0.9 * cores / ((dev + runner) / n))
    t = res.timings
    print(f"\n{n} devices, {args.duration:.0f} s random waypoint + GPS + flooding, "
          f"{len(steady)} samples of {args.every:.0f} s")
    print(f"bring-up                      {t.get('bring_up_s', float('nan')):8.1f} s")
    print(f"deployment (playbook)         {t.get('deploy_s', float('nan')):8.1f} s")
    print(f"host CPU busy (all work)      {100 * host:8.1f} % of {cores} cores "
          f"(max sample {100 * max(s['host'] for s in steady):.1f} %)")
    print(f"mesh CPU (devices + runner)   {100 * mesh:8.1f} % of {cores} cores")
    print(f"CPU per device                {100 * dev / n:8.2f} % of one core")
    print(f"runner CPU per device         {100 * runner / n:8.2f} % of one core "
          f"(medium ticks, nft, GPS feeder)")
    print(f"memory per device (cgroup)    {mem:8.1f} MiB working set under load, "
          f"{rest:.1f} MiB at rest")
    print(f"medium update median / max   {medium.get('update_median_s')} / "
          f"{medium.get('update_max_s')} s; ticks late by up to {medium.get('late_max_s')} s; "
          f"merged ticks {medium.get('merged_ticks')}")
    print(f"deliveries                    {delivered:8d}")
    print(f"devices at 90 % of the cores  {capacity:8d} (from the CPU per device)")
    print(json.dumps({"nodes": n, "host": host, "devices_cpu": dev, "runner_cpu": runner,
                      "mem_mib": mem, "mem_rest_mib": rest, "timings": t, "medium": medium,
                      "capacity_estimate": capacity}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
