"""CPU and memory of the virtual devices and of the host, sampled while a scenario plays.

For the virtual-mesh benches (bench/bench_vmesh.py, bench/bench_capacity.py). Each
device is a container with its own cgroup (podman with cgroupfs on this host's
cgroup v1 hierarchy): ``cpuacct.usage`` is the CPU of everything in the device
(systemd, mosquitto, gpsd, meshsubd, the workload agent), the memory cgroup's usage
less its inactive file cache is its working set. The host's busy share comes from
``/proc/stat`` (it includes whatever else the host runs), the runner's CPU (medium
ticks, ``nft``, the GPS feeder) from this process and its children.
"""

from __future__ import annotations

import resource
import statistics
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from meshsim.vmesh.nodes import PODMAN

CGROUP = Path("/sys/fs/cgroup")


def host_busy() -> tuple[float, float]:
    """(busy, total) jiffies of all CPUs since boot."""
    fields = [float(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def host_busy_share(seconds: float) -> float:
    """How busy the host's CPUs were over the next ``seconds`` (0..1): the load others put
    on it, measured before a bench starts its own work."""
    b0, t0 = host_busy()
    time.sleep(seconds)
    b1, t1 = host_busy()
    return (b1 - b0) / (t1 - t0) if t1 > t0 else 0.0


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


@dataclass(frozen=True)
class Usage:
    """Means over the samples; CPU in cores (1.0 = one core busy), memory in MiB."""

    samples: int
    host_busy: float
    """Share of all the host's cores busy (0..1), everything included."""
    host_busy_max: float
    devices_cpu: float
    runner_cpu: float
    mem_mib: float
    """Working set per device."""

    def per_device(self, n: int) -> tuple[float, float]:
        """(CPU of one device, runner CPU per device), in cores."""
        return self.devices_cpu / n, self.runner_cpu / n


class Sampler:
    """Samples CPU and memory every ``every_s`` seconds from ``start`` until ``finish``."""

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

    def finish(self, skip_first: bool = True) -> Usage | None:
        """Stop sampling; the means (the first interval, the agents' start, skipped)."""
        self.stop.set()
        if self.thread is not None:
            self.thread.join(30)
        steady = (self.samples[1:] if skip_first else self.samples) or self.samples
        if not steady:
            return None
        return Usage(
            samples=len(steady),
            host_busy=statistics.fmean(s["host"] for s in steady),
            host_busy_max=max(s["host"] for s in steady),
            devices_cpu=statistics.fmean(s["devices"] for s in steady),
            runner_cpu=statistics.fmean(s["runner"] for s in steady),
            mem_mib=statistics.fmean(s["mem_mib"] for s in steady))

    def memory_now(self) -> float:
        """Mean working set per device right now (MiB)."""
        return statistics.fmean(working_set_mib(c) for c in self.ids.values())
