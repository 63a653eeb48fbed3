"""The load run the virtual-mesh benches share: vmesh-rwp-load.toml on N fresh devices.

``meshsim run``'s code on a run of its own (brought up from the baked image, so the
figures are those of a fleet: bring-up, ``site.yml --tags configure``, convergence),
with CPU and memory sampled while the scenario plays (``meshsim.vmesh.usage``).
Not a test: bench/bench_vmesh.py and bench/bench_capacity.py print its figures.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "firmware-sim"))

from meshsim.scenario import load_scenario  # noqa: E402
from meshsim.vmesh import lifecycle  # noqa: E402
from meshsim.vmesh.usage import Sampler, Usage  # noqa: E402

SCENARIO = REPO / "firmware-sim" / "meshsim" / "scenarios" / "vmesh-rwp-load.toml"


@dataclass
class LoadRun:
    nodes: int
    duration_s: float
    timings: dict[str, float]
    settle: dict[str, Any]
    medium: dict[str, Any]
    usage: Usage | None
    mem_rest_mib: float
    deliveries: int
    records: int
    load: tuple[float, float, float]
    """The host's load average (1, 5, 15 min) at the end of the scenario."""

    @property
    def ready_s(self) -> float:
        """Up, deployed and converged: bring-up + reset + deployment + settle."""
        t = self.timings
        return sum(t.get(k, 0.0) for k in ("bring_up_s", "reset_s", "deploy_s", "settle_s"))

    def carried(self, tick_s: float, cores: int) -> tuple[bool, list[str]]:
        """Whether the host kept up, and why not: every daemon found its radio
        neighbours (and, with GPS, its fix) before t0, the medium's ticks ran on time
        (late by less than a tick, none merged) and the host's CPU stayed below 90 % of
        its cores on average."""
        why = []
        if not self.settle.get("complete"):
            why.append(f"{len(self.settle.get('missing', {}))} daemons did not converge, "
                       f"{len(self.settle.get('unfixed', []))} had no position fix")
        late = self.medium.get("late_max_s")
        if late is None or late >= tick_s:
            why.append(f"medium ticks late by up to {late} s")
        if self.medium.get("merged_ticks"):
            why.append(f"{self.medium.get('merged_ticks')} medium ticks merged")
        if self.usage is None:
            why.append("no CPU samples")
        elif self.usage.host_busy >= 0.9:
            why.append(f"host CPU {100 * self.usage.host_busy:.0f} % of {cores} cores")
        return not why, why


def scenario_for(nodes: int, duration_s: float) -> Any:
    """The load scenario for N devices and ``duration_s`` of traffic (``ScenarioError``
    names a bad size or duration, e.g. traffic shorter than the scenario's warm-up)."""
    return load_scenario(SCENARIO, [f"nodes.count={nodes}", f"scenario.duration_s={duration_s}"])


def refused(prog: str, options: str, *scenarios: Callable[[], object]) -> bool:
    """Build each scenario a bench will play before anything is built or brought up.

    A bad size, a duration shorter than the scenario's warm-up or an unknown
    protocol is one line on stderr naming the bench's options and the scenario's key
    (``True``: the caller exits 2), not a traceback minutes later.
    """
    from meshsim.scenario.reader import ScenarioError

    try:
        for build in scenarios:
            build()
    except ScenarioError as exc:
        print(f"{prog}: {options}: {exc}", file=sys.stderr)
        return True
    return False


def load_run(nodes: int, duration_s: float, *, run: str, every_s: float = 10.0,
             rest_s: float = 30.0, keep: bool = False) -> LoadRun:
    """One fresh run of N devices: the scenario for ``duration_s``, sampled."""
    from meshsim.vmesh.scenario_run import RunOptions, run_on_vmesh

    scenario = scenario_for(nodes, duration_s)
    sampler = Sampler(every_s)
    lifecycle.teardown(run)  # a fresh bring-up is what is measured
    with tempfile.TemporaryDirectory(prefix="msub-bench-") as tmp:
        try:
            res = run_on_vmesh(scenario, RunOptions(
                out=Path(tmp) / "run", vmesh_run=run, keep=True, settle_timeout_s=300.0,
                log=lambda m: print(f"run: {m}", flush=True),
                on_start=lambda _t0, devs: sampler.start([d.container for d in devs.values()]),
                on_end=lambda _devs: None))
            usage = sampler.finish()
            load = os.getloadavg()
            time.sleep(rest_s)  # the workload is over: memory at rest
            rest = sampler.memory_now()
        finally:
            sampler.finish()
            if not keep:
                lifecycle.teardown(run, purge=True)
        deliveries = sum(1 for p in (Path(tmp) / "run" / "nodes").rglob("*.jsonl")
                         for line in p.read_text().splitlines() if '"deliver"' in line)
    stats = res.manifest.get("stats", {})
    return LoadRun(nodes=nodes, duration_s=duration_s, timings=res.timings,
                   settle=stats.get("settle", {}), medium=stats.get("medium", {}), usage=usage,
                   mem_rest_mib=rest, deliveries=deliveries, records=res.records,
                   load=(load[0], load[1], load[2]))


def load_line() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} {five:.1f} {fifteen:.1f} on {os.cpu_count()} cores"
