"""The baked device image: the base image with the playbook's ``bake`` tasks applied once.

The roles stay the one description of a device. ``deploy/ansible/site.yml --tags
bake`` runs, over SSH, on one device started from the base image (the operating
system of ``meshsim.vmesh.image``) and installs what every device has alike: the
packages, the meshsub user, the venv with meshsub from the wheelhouse, the hardened
unit. The device is then cleaned of what makes it one device (SSH host keys, machine
id, Ansible's and pip's caches, the broker's store) and saved with ``podman
commit``. A fleet started from it only needs ``site.yml --tags configure``: its own
configuration and keys, and the service started. Nothing secret is in the image:
no configure task runs while baking, and no key or password is a bake input.

The image is cached under a hash of everything it is made of: the base image (its
recipe and architecture), the Ansible roles, playbook and unit, the wheelhouse's
wheels, the variables of the bake and ``FORMAT`` (this procedure). It is rebuilt only
when one of them changes; the ``KEEP`` newest baked images stay, so checkouts that
alternate on one machine do not rebuild each time.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from meshsim.host import sh
from meshsim.host.errors import VmeshError
from meshsim.vmesh import deploy, image, nodes
from meshsim.vmesh.plan import make_plan
from meshsim.vmesh.runstate import run_dir
from meshsim.vmesh.wheelhouse import (
    AGENT_PACKAGE,
    host_arch,
    meshsub_wheel,
    wheel_version,
    wheelhouse_digest,
)

Log = Callable[[str], None]
NAME = "msub-device-baked"
LABEL = "org.meshsub.bake"
RUN = "bake"
KEEP = 6
"""Baked images kept per architecture: six worktrees bake their own on one host at once
(2026-11-27); with three, each bake removed an image another was about to start from."""
FORMAT = "1"
"""Bump when what this module does to the image changes (the hash cannot see code)."""
DEPLOY_DIR = deploy.ANSIBLE_DIR.parent
INPUT_TREES = ("ansible/roles", "systemd")
INPUT_FILES = ("ansible/site.yml", "ansible/ansible.cfg")

# What makes the device one device, removed before the image is saved; the services
# that write state are stopped first. /tmp and /run are tmpfs (never saved).
_CLEAN = """
set -e
systemctl stop mosquitto.service gpsd.service gpsd.socket meshsubd.service 2>/dev/null || true
rm -f /etc/ssh/ssh_host_*
: > /etc/machine-id
rm -rf /root/.ansible /root/.cache /var/lib/meshsub /var/lib/mosquitto/* /var/tmp/* \
    /var/lib/systemd/random-seed /var/log/*.log
"""


def bake_vars(wheelhouse: Path) -> dict[str, Any]:
    """The inventory variables of the bake: where the wheels are and which to install."""
    return {"meshsub_install_method": "wheelhouse",
            "meshsub_wheelhouse_dir": str(wheelhouse),
            "meshsub_version": wheel_version(meshsub_wheel(wheelhouse)),
            "meshsub_extra_packages": [AGENT_PACKAGE]}


def bake_digest(base_ref: str, wheelhouse: Path, deploy_dir: Path = DEPLOY_DIR) -> str:
    """sha256 over every input of the baked image (see the module docstring)."""
    h = hashlib.sha256()

    def part(label: str, data: bytes) -> None:
        h.update(label.encode() + b"\0" + hashlib.sha256(data).digest())

    part("format", FORMAT.encode())
    part("base", base_ref.encode())
    for tree in INPUT_TREES:
        for path in sorted(p for p in (deploy_dir / tree).rglob("*") if p.is_file()):
            part(str(path.relative_to(deploy_dir)), path.read_bytes())
    for name in INPUT_FILES:
        part(name, (deploy_dir / name).read_bytes())
    part("wheelhouse", wheelhouse_digest(wheelhouse).encode())
    variables = {k: v for k, v in bake_vars(wheelhouse).items() if k != "meshsub_wheelhouse_dir"}
    part("vars", json.dumps(variables, sort_keys=True).encode())
    return h.hexdigest()


def baked_ref(digest: str, arch: str = "amd64") -> str:
    return f"localhost/{image.arch_name(NAME, arch)}:{digest[:12]}"


def ensure_baked(wheelhouse: Path, *, arch: str | None = None, rebuild: bool = False,
                 log: Log = print) -> str:
    """The baked image for this checkout's roles and ``wheelhouse``, baking it if missing."""
    arch = arch or host_arch()
    base = image.ensure_image(arch=arch, log=log)
    digest = bake_digest(base, wheelhouse)
    ref = baked_ref(digest, arch)
    with image.build_lock(arch):
        if image.image_exists(ref) and not rebuild:
            return ref
        started = time.monotonic()
        _bake(base, ref, digest, wheelhouse, log)
        log(f"baked {ref} in {time.monotonic() - started:.0f} s")
        image.remove_stale(image.arch_name(NAME, arch), keep=KEEP, log=log)
    return ref


def _bake(base: str, ref: str, digest: str, wheelhouse: Path, log: Log) -> None:
    from meshsim.vmesh import lifecycle  # lifecycle builds on this module

    plan = make_plan(1, RUN)
    rundir = run_dir(RUN)
    lifecycle.teardown(RUN)
    try:
        rundir.mkdir(parents=True, exist_ok=True, mode=0o700)
        log(f"baking {ref}: site.yml --tags bake on one device from {base}")
        inv = lifecycle.bring_up(plan, base, rundir, "flooding", log=log,
                                 inventory_vars=dict(bake_vars(wheelhouse)))
        deployment = deploy.deploy(inv, "--tags", "bake")
        log(f"bake: {deployment.changed} changes")
        container = plan.nodes[0].container
        nodes.exec_in(container, ["sh", "-c", _CLEAN], timeout=120)
        res = sh.run([*nodes.PODMAN, "commit", "--quiet",
                      "--change", 'CMD ["/sbin/init"]',
                      "--change", f"LABEL {LABEL}={digest[:12]}",
                      container, ref], check=False, timeout=900)
        if res.returncode != 0:
            raise VmeshError(f"podman commit of the baked device failed: "
                             f"{res.stderr.decode(errors='replace').strip()[-300:]}")
    finally:
        lifecycle.teardown(RUN, purge=True)
