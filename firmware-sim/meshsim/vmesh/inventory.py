"""The Ansible inventory of a run: one host per node, the variables the roles read.

The virtual devices differ from a Pi only in these variables (``mesh_link_enabled``
false, interface ``mesh0``, static position on the plan's grid, gpsd fed over UDP,
zeroconf off because ``mgmt0`` is no mesh link), so ``deploy/ansible/site.yml`` runs
on them unchanged. Written as JSON, which is YAML, so the types are exact.
"""

from __future__ import annotations

import json
import math
import os
import re
import secrets
from pathlib import Path
from typing import Any

from meshsim.vmesh.plan import DEFAULT_RUN, Plan
from meshsim.vmesh.wheelhouse import AGENT_PACKAGE, host_arch, meshsub_wheel, wheel_version

INVENTORY = "inventory.yml"
KEY = "id_ed25519"
KNOWN_HOSTS = "known_hosts"
WHEELHOUSE = "wheelhouse"
GPSD_UDP_PORT = 29470
EMULATED_CONNECT_TIMEOUT_S = 60
"""Connection timeout for a device under emulation. Mitogen's connection is the SSH
login and the start of its Python on the device, all under qemu-user there: with
Ansible's default 10 s, a busy host turned two arm64 devices of ``vmesh-mixed-arch``
unreachable ("Connection timed out", 2026-11-27, load 15)."""


def wheelhouse_name(arch: str) -> str:
    """The run directory's wheelhouse for devices of ``arch`` (the host's: ``wheelhouse``)."""
    return WHEELHOUSE if arch == host_arch() else f"{WHEELHOUSE}-{arch}"


def group_name(run: str) -> str:
    return "vmesh" if run == DEFAULT_RUN else f"vmesh_{run}"


def inventory_data(plan: Plan, rundir: Path, protocol: str, fleet_key: str) -> dict[str, Any]:
    hosts = {
        n.hostname: {
            "ansible_host": n.mgmt_ip,
            "meshsub_node_id": n.node_id,
            "meshsub_static_position": {"x": n.x, "y": n.y},
            "vmesh_container": n.container,
            "vmesh_mesh_address": n.mesh_ip,
            "meshsub_ip_allow": [n.mesh_addr],  # the unit's IP filter: the mesh subnet
        } for n in plan.nodes}
    ssh_args = (f"-o UserKnownHostsFile={rundir / KNOWN_HOSTS} "
                "-o StrictHostKeyChecking=yes -o ControlMaster=auto "
                "-o ControlPersist=120s -o ConnectTimeout=20")
    group_vars: dict[str, Any] = {
        "ansible_user": "root",
        "ansible_ssh_private_key_file": str(rundir / KEY),
        "ansible_ssh_common_args": ssh_args,
        "ansible_python_interpreter": "/usr/bin/python3",
        "meshsub_interface": "mesh0",
        "meshsub_link_mode": "adhoc",
        "meshsub_protocol": protocol,
        "meshsub_location_source": "static",
        "meshsub_zeroconf": False,
        "meshsub_beacon_interval": 2.0,
        "meshsub_install_method": "wheelhouse",
        "meshsub_wheelhouse_dir": str(rundir / WHEELHOUSE),
        "meshsub_extra_packages": [AGENT_PACKAGE],
        "meshsub_current_key": 1,
        "meshsub_fleet_keys": {1: fleet_key},
        "mesh_link_enabled": False,
        "gpsd_devices": [f"udp://0.0.0.0:{GPSD_UDP_PORT}"],
        # the workload agent is an application like any other: its own broker user
        "mosquitto_apps": [{"name": "workload"}],
    }
    return {group_name(plan.run): {"hosts": hosts, "vars": group_vars}}


def write_inventory(plan: Plan, rundir: Path, protocol: str, *, name: str = INVENTORY,
                    host_vars: dict[str, dict[str, Any]] | None = None,
                    group_vars: dict[str, Any] | None = None,
                    writer: str = "meshsim vmesh up",
                    arches: dict[str, str] | None = None) -> Path:
    """Write ``RUNDIR/<name>`` (mode 0600: it holds the run's fleet key).

    ``host_vars`` (by hostname) and ``group_vars`` override the plan's defaults: a
    scenario run gives each device its scenario node id, position and protocol.
    The fleet key is the run's, whichever inventory of the run is written.
    ``arches`` (by hostname): a device of another architecture than the host installs
    from the wheelhouse built for it.
    """
    path = rundir / name
    fleet_key = _existing_fleet_key(rundir / INVENTORY) or secrets.token_hex(32)
    data = inventory_data(plan, rundir, protocol, fleet_key)
    group = data[group_name(plan.run)]
    wheels = rundir / WHEELHOUSE
    if list(wheels.glob("meshsub-*.whl")):  # pin the build the devices run (or will)
        group["vars"]["meshsub_version"] = wheel_version(meshsub_wheel(wheels))
    group["vars"].update(group_vars or {})
    for host, arch in (arches or {}).items():
        if arch != host_arch() and host in group["hosts"]:
            group["hosts"][host]["meshsub_wheelhouse_dir"] = str(rundir / wheelhouse_name(arch))
            group["hosts"][host]["ansible_ssh_timeout"] = EMULATED_CONNECT_TIMEOUT_S
    for host, extra in (host_vars or {}).items():
        group["hosts"][host].update(extra)
    text = (f"# meshsim vmesh run {plan.run!r}: {len(plan.nodes)} virtual devices.\n"
            f"# Written by `{writer}`; JSON is YAML. Holds the run's fleet key.\n"
            + yaml11_json(data) + "\n")
    tmp = path.with_suffix(".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)
    return path


_FLOAT_MARK = "\x00yaml-float:"
_FLOAT_TOKEN = re.compile(r'"\\u0000yaml-float:([^"]+)"')


def _yaml11_float(value: float) -> str:
    """A float as YAML 1.1 reads it: a '.' in the mantissa and a signed exponent.

    Ansible parses inventories with PyYAML (YAML 1.1), which takes JSON's ``5e-08``
    (no '.') for a *string*: HESPER's E_elec reached the daemon as "5e-08" and
    meshsubd refused its configuration. ``5.0e-08`` is a float in both.
    """
    text = repr(value)
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    if "." not in mantissa:
        mantissa += ".0"
    if exponent[0] not in "+-":
        exponent = "+" + exponent
    return f"{mantissa}e{exponent}"


def _mark_floats(value: Any) -> Any:
    if isinstance(value, float) and math.isfinite(value) and "e" in repr(value):
        return _FLOAT_MARK + _yaml11_float(value)
    if isinstance(value, dict):
        return {k: _mark_floats(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_mark_floats(v) for v in value]
    return value


def yaml11_json(data: Any) -> str:
    """``json.dumps(data, indent=2)`` whose exponent floats YAML 1.1 reads as floats too."""
    return _FLOAT_TOKEN.sub(lambda m: m.group(1), json.dumps(_mark_floats(data), indent=2))


def _existing_fleet_key(path: Path) -> str | None:
    """Keep the fleet key across re-ups of a run, so running daemons stay compatible."""
    try:
        text = path.read_text()
        data = json.loads(text[text.index("{"):])
        for group in data.values():
            key = group["vars"]["meshsub_fleet_keys"]["1"]
            if isinstance(key, str) and len(key) == 64:
                return key
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return None
