"""The baked device image (root): the same device as the playbook over SSH, and no secrets.

Two one-device runs of their own: ``teqa`` from the base image (the bare operating
system) deployed with the full ``site.yml`` over SSH, as a new Pi is; ``teqb`` from
the baked image deployed with ``site.yml --tags configure`` only, as a fleet is. Both
get the same variables (node id and name, fleet key, wheels), so everything the
roles install and render must be equal: files (content, mode, owner), the meshsub
user, packages, services, the unit as systemd loaded it, versions. Both runs are
removed at the end, also when the test fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.timeout(1800),  # the first build of the base and baked images included
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)"),
    pytest.mark.skipif(shutil.which("podman") is None or shutil.which("debootstrap") is None,
                       reason="needs podman and debootstrap"),
]


def log(message: str) -> None:
    print(f"vmesh: {message}", flush=True)


FLEET_KEY = "9f3c1e7a52b84d06e1a7c3f95b20d8e4c6a19f37b5e02d8c4f61a3b9e7d05c28"
"""Random-looking: meshsubd refuses a key with a pattern (issue 25)."""


def test_a_baked_device_and_one_deployed_over_ssh_end_in_the_same_state(
        vmesh_fleet: Any, tmp_path: Path) -> None:  # the fleet's private state directory
    from meshsim.vmesh import deploy, devstate, lifecycle

    same = tmp_path / "same.json"
    same.write_text(json.dumps({"meshsub_node_name": "eq", "meshsub_node_id": 7,
                                "meshsub_fleet_keys": {"1": FLEET_KEY}}))
    try:
        ssh = lifecycle.up(1, "teqa", image_kind="base", log=log)
        baked = lifecycle.up(1, "teqb", image_kind="baked", log=log)
        assert ssh.image != baked.image
        full = deploy.deploy(ssh.inventory, "-e", f"@{same}")
        configured = deploy.deploy(baked.inventory, "--tags", "configure", "-e", f"@{same}")
        # the configure-only deployment does a fraction of the full one's work
        assert 0 < configured.changed < full.changed, (configured.changed, full.changed)
        a = devstate.snapshot(ssh.plan.nodes[0].container)
        b = devstate.snapshot(baked.plan.nodes[0].container)
    finally:
        lifecycle.teardown("teqa", purge=True)
        lifecycle.teardown("teqb", purge=True)
    # generated on each device (issue 25: broker passwords never leave it) or naming the
    # device's own mesh address: present with the same owner and mode, contents differ
    per_device = ["/etc/meshsub/mqtt.password", "/etc/mosquitto/meshsub.passwd",
                  "/etc/mosquitto/meshsub.passwd.plain",
                  "/etc/systemd/system/meshsubd.service.d/ip-allow.conf",
                  *(p for p in a["files"] if p.startswith("/etc/mosquitto/credentials/"))]
    diff = devstate.differences(a, b, secret_paths=per_device)
    assert diff == [], "\n".join(diff[:40])
    # and the comparison sees what matters: the daemon runs, configured, from the venv
    assert a["services"]["meshsubd.service"] == {"enabled": "enabled", "active": "active"}
    assert a["files"]["/etc/meshsub/fleet.keys"]["mode"] == "0o400"  # the service's alone
    assert a["files"]["/etc/meshsub/meshsub.toml"]["group"] == "meshsub"
    assert a["versions"]["meshsubd"].startswith("meshsubd ")
    assert any(p.startswith("/opt/meshsub/lib/") for p in a["files"])


def test_the_baked_image_holds_no_key_no_config_and_no_identity(vmesh_fleet: Any) -> None:
    ref = vmesh_fleet.up(1).image
    assert "msub-device-baked" in ref
    root = Path(subprocess.run(["podman", "image", "mount", ref], capture_output=True,
                               text=True, check=True).stdout.strip())
    try:
        assert (root / "opt/meshsub/bin/meshsubd").exists()  # meshsub is baked in ...
        assert (root / "etc/systemd/system/meshsubd.service").exists()
        assert (root / "etc/meshsub").is_dir()
        # ... but nothing of one device: no fleet key, configuration, host keys, id
        assert not (root / "etc/meshsub/fleet.keys").exists()
        assert not (root / "etc/meshsub/meshsub.toml").exists()
        assert not list((root / "etc/ssh").glob("ssh_host_*"))
        assert (root / "etc/machine-id").read_text() == ""
        keys = root / "root/.ssh/authorized_keys"
        assert not keys.exists() or keys.read_text() == ""
        assert not (root / "var/lib/meshsub").exists()
        assert not (root / "root/.ansible").exists() and not (root / "root/.cache").exists()
        # the service is not enabled in the image: a device starts it once configured
        assert not (root / "etc/systemd/system/multi-user.target.wants/meshsubd.service"
                    ).exists()
    finally:
        subprocess.run(["podman", "image", "unmount", ref], capture_output=True, check=False)
