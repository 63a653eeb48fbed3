"""Rolling upgrades on the virtual mesh (root): under traffic, and one that fails.

Four devices of the test session's fleet run ``vmesh-upgrade`` (a static grid,
epidemic, steady traffic) while the playbook rolls a newer build of this checkout
(``<version>.post1``) out a quarter of the fleet at a time, as a field rollout does.
Every device must take the new build, one after another, and nothing the brokers
acknowledged to the applications may be lost: every event is delivered to every
matching subscription of another node (store-carry-forward carries what a
restarting daemon missed). Then a rollout to ``.post2`` meets a device whose upgrade
fails (an administrator's pip constraint pins the old version there): the rollout
stops at that device, names it, and the devices of later batches keep running the
version they had. The devices are rolled back to the baked build at the end.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fleet import SCENARIOS

from meshsim.scenario import load_scenario
from meshsim.vmesh.devices import run_records
from meshsim.vmesh.plan import NodePlan

pytestmark = [
    pytest.mark.root,
    pytest.mark.long,  # two rollouts and four deployments: ./test.sh -m long
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)"),
    pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman"),
]

DEVICES = 4
ROLLOUT_AT_S = 10.0


def log(message: str) -> None:
    print(f"upgrade: {message}", flush=True)


def records(out: Path) -> list[dict[str, Any]]:
    return run_records(out)


@pytest.fixture(scope="module")
def builds(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str]]:
    """Two newer builds of this checkout: ``.post1`` and ``.post2``."""
    from meshsim.vmesh.upgrade import newer_build
    from meshsim.vmesh.wheelhouse import source_version

    base = source_version()
    out = {}
    for tag in ("post1", "post2"):
        wheels = tmp_path_factory.mktemp(f"build-{tag}") / "wheels"
        out[tag] = (wheels, newer_build(wheels, f"{base}.{tag}"))
    return out


def roll_back(fleet: Any) -> None:
    """The first devices back on the baked build (the run's wheelhouse and version)."""
    from meshsim.vmesh.deploy import deploy
    from meshsim.vmesh.scenario_run import SCENARIO_INVENTORY

    res = fleet.up(DEVICES)
    deploy(res.rundir / SCENARIO_INVENTORY, "--limit",
           ",".join(d.hostname for d in res.devices))


def test_a_rolling_upgrade_under_traffic_loses_nothing_acknowledged(
        vmesh_fleet: Any, builds: dict[str, tuple[Path, str]], tmp_path: Path) -> None:
    from meshsim.vmesh.delivery import account
    from meshsim.vmesh.runstate import run_dir
    from meshsim.vmesh.scenario_run import SCENARIO_INVENTORY
    from meshsim.vmesh.upgrade import restart_times, rollout, running_versions

    wheels, version = builds["post1"]
    scenario = load_scenario(SCENARIOS / "vmesh-upgrade.toml",
                             [f"nodes.count={DEVICES}", "scenario.duration_s=150",
                              "scenario.drain_s=20", "workload.generator.rate_per_s=1.0"])
    seen: dict[str, Any] = {}

    def upgrade(t0: float, devmap: dict[int, NodePlan]) -> None:
        time.sleep(max(0.0, t0 + ROLLOUT_AT_S - time.time()))
        inventory = run_dir(vmesh_fleet.run) / SCENARIO_INVENTORY
        seen["rollout"] = rollout(inventory, [d.hostname for d in devmap.values()], wheels,
                                  serial="25%", log=log)

    def start(t0: float, devmap: dict[int, NodePlan]) -> None:
        seen["t0"] = t0
        seen["thread"] = threading.Thread(target=upgrade, args=(t0, devmap), daemon=True)
        seen["thread"].start()

    def end(devmap: dict[int, NodePlan]) -> None:
        seen["thread"].join(600)
        seen["versions"] = running_versions(list(devmap.values()))
        seen["restarts"] = restart_times(list(devmap.values()))

    try:
        res = vmesh_fleet.scenario(scenario, tmp_path / "run", on_start=start, on_end=end)
        ro = seen["rollout"]
        print(json.dumps(ro.summary()))
        hosts = [res.manifest["devices"][str(n)] for n in sorted(res.devices)]
        assert ro.returncode == 0 and not ro.failed and not ro.not_reached, ro.output[-3000:]
        # a quarter at a time: four batches of one device, in inventory order
        assert len(ro.batches) == DEVICES and all(len(b) == 1 for b in ro.batches), ro.batches
        assert set(seen["versions"].values()) == {version}, seen["versions"]
        for host, (stopped, active) in seen["restarts"].items():  # each restarted in its turn
            assert ro.started <= stopped <= active <= ro.ended, (host, stopped, active)
        assert len(seen["restarts"]) == DEVICES, (hosts, seen["restarts"])
        t0, end_s = seen["t0"], seen["t0"] + scenario.meta.duration_s
        acct = account(records(res.out), res.agents, windows={
            "before": (t0, ro.started), "during": (ro.started, ro.ended),
            "after": (ro.ended, end_s)})
        summary = acct.summary()
        print(json.dumps(summary))
        assert acct.windows["during"].owed > 0  # traffic ran through the rollout
        assert acct.unaccepted == {}  # every acknowledged event entered the mesh ...
        assert acct.lost == set(), sorted(acct.lost)[:10]  # ... and reached every subscriber
        assert acct.unowed == set()
        assert summary["acknowledged"] == summary["accepted"] > 0
    finally:
        roll_back(vmesh_fleet)


def test_a_device_whose_upgrade_fails_stops_the_rollout_and_is_named(
        vmesh_fleet: Any, builds: dict[str, tuple[Path, str]], tmp_path: Path) -> None:
    from meshsim.vmesh import devices
    from meshsim.vmesh.deploy import deploy
    from meshsim.vmesh.inventory import write_inventory
    from meshsim.vmesh.upgrade import rollout, running_versions
    from meshsim.vmesh.wheelhouse import source_version

    res = vmesh_fleet.take(DEVICES)
    four = dataclasses.replace(res.plan, nodes=res.devices)
    inventory = write_inventory(four, res.rundir, "epidemic", name="upgrade.yml")
    deploy(inventory)  # running the baked build (also after the test before)
    hosts = [d.hostname for d in four.nodes]
    broken = four.nodes[1]
    wheels, version = builds["post2"]
    try:
        devices.nodes.exec_in(broken.container, ["sh", "-c", (
            "printf '[install]\\nconstraint = /etc/pip-constraints.txt\\n' > /etc/pip.conf && "
            f"echo 'meshsub=={source_version()}' > /etc/pip-constraints.txt")])
        ro = rollout(inventory, hosts, wheels, serial="25%", log=log)
        print(json.dumps(ro.summary()))
        assert ro.returncode != 0
        assert ro.batches == [[hosts[0]], [hosts[1]]], ro.batches  # stopped at batch two
        assert ro.failed == [broken.hostname] and ro.not_reached == hosts[2:]
        assert len(ro.reasons) == 1 and ro.reasons[0].startswith(f"{broken.hostname}: ")
        assert f"ROLLOUT STOPPED at {broken.hostname}" in ro.output
        versions = running_versions(list(four.nodes))
        assert versions[hosts[0]] == version  # the batch before took the new build
        for host in hosts[1:]:  # the failed device and later batches keep the old one
            assert versions[host] == source_version(), versions
    finally:
        devices.nodes.exec_in(broken.container, ["rm", "-f", "/etc/pip.conf",
                                                 "/etc/pip-constraints.txt"], check=False)
        deploy(inventory)  # back on the baked build
