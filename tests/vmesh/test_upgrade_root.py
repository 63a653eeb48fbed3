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
from pathlib import Path
from typing import Any

import pytest
from fleet import SCENARIOS
from upgrades import (
    check_each_took_the_build_in_turn,
    check_nothing_acknowledged_lost,
    log,
    roll_back,
    rollout_under_traffic,
)

from meshsim.scenario import load_scenario

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
DURATION_S = 150.0


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


def test_a_rolling_upgrade_under_traffic_loses_nothing_acknowledged(
        vmesh_fleet: Any, builds: dict[str, tuple[Path, str]], tmp_path: Path) -> None:
    wheels, version = builds["post1"]
    scenario = load_scenario(SCENARIOS / "vmesh-upgrade.toml",
                             [f"nodes.count={DEVICES}", f"scenario.duration_s={DURATION_S}",
                              "scenario.drain_s=20", "workload.generator.rate_per_s=1.0"])
    try:
        run = rollout_under_traffic(vmesh_fleet, scenario, wheels, tmp_path / "run",
                                    rollout_at_s=ROLLOUT_AT_S)
        # a quarter at a time: four batches of one device, in inventory order
        check_each_took_the_build_in_turn(run, version, DEVICES, batches=DEVICES)
        assert all(len(b) == 1 for b in run.rollout.batches), run.rollout.batches
        check_nothing_acknowledged_lost(run, DURATION_S)
    finally:
        roll_back(vmesh_fleet, DEVICES)


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
