"""A rolling upgrade under a scenario's traffic on the session fleet, and its account.

Shared by the default run's small rolling upgrade (``test_upgrade_small_root.py``) and the
long tier's (``test_upgrade_root.py``): the scenario runs on the fleet's first devices,
``rollout_at_s`` into its traffic the playbook rolls the build in ``wheels`` out to them
(``meshsim.vmesh.upgrade.rollout``, ``serial`` devices at a time) from a thread, and the
run's end waits for the rollout before the telemetry is collected. What the applications
were owed and got is ``meshsim.vmesh.delivery.account``'s, split by publication before,
during and after the rollout; a lost delivery fails with its trace through the
subscriber's records (``delivery.trace``).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from meshsim.scenario import Scenario
from meshsim.vmesh.devices import run_records
from meshsim.vmesh.plan import NodePlan


def log(message: str) -> None:
    print(f"upgrade: {message}", flush=True)


@dataclass
class UpgradeRun:
    res: Any
    """The scenario run (``run_on_vmesh``'s result)."""
    rollout: Any
    """``meshsim.vmesh.upgrade.Rollout``, with each device's downtime."""
    versions: dict[str, str | None]
    """Per device, the version its daemon runs at the end."""
    t0: float
    devmap: dict[int, NodePlan]


def rollout_under_traffic(fleet: Any, scenario: Scenario, wheels: Path, out: Path, *,
                          rollout_at_s: float, serial: str = "25%") -> UpgradeRun:
    """Run ``scenario`` on the fleet with a rollout of ``wheels`` into its traffic."""
    from meshsim.vmesh.runstate import run_dir
    from meshsim.vmesh.scenario_run import SCENARIO_INVENTORY
    from meshsim.vmesh.upgrade import restart_times, rollout, running_versions

    seen: dict[str, Any] = {}

    def upgrade(t0: float, devmap: dict[int, NodePlan]) -> None:
        time.sleep(max(0.0, t0 + rollout_at_s - time.time()))
        inventory = run_dir(fleet.run) / SCENARIO_INVENTORY
        seen["rollout"] = rollout(inventory, [d.hostname for d in devmap.values()], wheels,
                                  serial=serial, log=log)

    def start(t0: float, devmap: dict[int, NodePlan]) -> None:
        seen["t0"], seen["devmap"] = t0, devmap
        seen["thread"] = threading.Thread(target=upgrade, args=(t0, devmap), daemon=True)
        seen["thread"].start()

    def end(devmap: dict[int, NodePlan]) -> None:
        seen["thread"].join(600)
        seen["versions"] = running_versions(list(devmap.values()))
        seen["restarts"] = restart_times(list(devmap.values()))

    res = fleet.scenario(scenario, out, on_start=start, on_end=end)
    ro = seen["rollout"]
    ro.downtime = seen["restarts"]
    print(json.dumps(ro.summary()))
    return UpgradeRun(res, ro, seen["versions"], seen["t0"], seen["devmap"])


def check_nothing_acknowledged_lost(run: UpgradeRun, duration_s: float) -> dict[str, Any]:
    """Every acknowledged event entered the mesh and reached every matching subscription
    (the store-carry-forward rule), and no restarted subscriber took a frame before its
    subscriptions were back; the account's summary."""
    from meshsim.vmesh.delivery import account, frames_before_restore, trace

    ro = run.rollout
    records = run_records(run.res.out)
    acct = account(records, run.res.agents, windows={
        "before": (run.t0, ro.started), "during": (ro.started, ro.ended),
        "after": (ro.ended, run.t0 + duration_s)})
    summary = acct.summary()
    print(json.dumps(summary))
    restarts = {sid: ro.downtime[d.hostname] for sid, d in run.devmap.items()
                if d.hostname in ro.downtime}
    traces = ["\n".join(trace(records, lost, restarts, run.res.agents.get(lost[0])))
              for lost in sorted(acct.lost)[:5]]
    # the daemon's start restores the subscriptions before it reads a frame
    assert frames_before_restore(records) == {}
    assert acct.windows["during"].owed > 0  # traffic ran through the rollout
    assert acct.unaccepted == {}  # every acknowledged event entered the mesh ...
    assert acct.lost == set(), "\n".join(traces)  # ... and reached every subscriber
    assert acct.unowed == set()
    assert summary["acknowledged"] == summary["accepted"] > 0
    return summary


def check_each_took_the_build_in_turn(run: UpgradeRun, version: str, devices: int,
                                      batches: int) -> None:
    """Every device took the new build, ``batches`` batches in inventory order, each
    daemon restarted within the rollout."""
    ro = run.rollout
    assert ro.returncode == 0 and not ro.failed and not ro.not_reached, ro.output[-3000:]
    assert len(ro.batches) == batches, ro.batches
    assert sum(len(b) for b in ro.batches) == devices, ro.batches
    assert set(run.versions.values()) == {version}, run.versions
    for host, (stopped, active) in ro.downtime.items():  # each restarted in its turn
        assert ro.started <= stopped <= active <= ro.ended, (host, stopped, active)
    assert len(ro.downtime) == devices, ro.downtime


def roll_back(fleet: Any, devices: int) -> None:
    """The first devices back on the baked build (the run's wheelhouse and version)."""
    from meshsim.vmesh.deploy import deploy
    from meshsim.vmesh.scenario_run import SCENARIO_INVENTORY

    res = fleet.up(devices)
    deploy(res.rundir / SCENARIO_INVENTORY, "--limit",
           ",".join(d.hostname for d in res.devices))
