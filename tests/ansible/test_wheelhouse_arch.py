"""The role refuses a wheelhouse of another architecture, and an index by bare name.

Both checks run on the controller and the device before anything is installed, so
they are exercised here on this host (the "device", amd64 or whatever dpkg says) in
check mode: a wheelhouse of aarch64 wheels must stop the role with one line naming
both architectures, never with pip's "no matching distribution".
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from tests.ansible.test_playbook import BIN, ROLE, _env, needs_ansible

from meshsim.vmesh.wheelhouse import MACHINES, host_arch

PURE = ["meshsub-0.1.0-py3-none-any.whl", "paho_mqtt-2.2.0-py3-none-any.whl"]


def wheelhouse(tmp_path: Path, machine: str) -> Path:
    """A wheelhouse of empty files named as ``pip download`` names them for ``machine``."""
    wh = tmp_path / f"wheels-{machine}"
    wh.mkdir()
    for name in [*PURE,
                 f"msgpack-1.2.4-cp311-cp311-manylinux2014_{machine}.manylinux_2_17_{machine}.whl",
                 f"mmh3-5.3.1-cp311-cp311-manylinux_2_17_{machine}.whl"]:
        (wh / name).touch()
    return wh


def run_tasks(tmp_path: Path, tasks_file: str, variables: dict[str, object]) -> str:
    """Run one task file of the role on this host (check mode); its output."""
    play = tmp_path / "play.yml"
    play.write_text(json.dumps([{
        "name": "Role part", "hosts": "localhost", "connection": "local", "gather_facts": False,
        "vars_files": [str(ROLE / "defaults" / "main.yml")],
        "tasks": [{"name": "Part",
                   "ansible.builtin.include_tasks": str(ROLE / "tasks" / tasks_file)}],
    }]))
    extra = tmp_path / "vars.json"
    extra.write_text(json.dumps({"ansible_python_interpreter": "/usr/bin/python3", **variables}))
    res = subprocess.run([str(BIN / "ansible-playbook"), "-i", "localhost,", "--check", str(play),
                          "-e", f"@{extra}"], cwd=tmp_path, env=_env(), capture_output=True,
                         text=True, timeout=300, check=False)
    return res.stdout + res.stderr


@needs_ansible
def test_a_wheelhouse_of_another_architecture_fails_with_one_clear_line(tmp_path: Path) -> None:
    here = host_arch()
    other = next(m for a, m in MACHINES.items() if a != here)
    wh = wheelhouse(tmp_path, other)
    out = run_tasks(tmp_path, "arch.yml", {"meshsub_wheelhouse_dir": str(wh)})
    line = next((ln for ln in out.splitlines() if "WHEELHOUSE ARCHITECTURE MISMATCH" in ln), "")
    assert f"the device is {here} ({MACHINES[here]})" in line, out[-2000:]
    assert f"is built for {other}" in line and f"--arch {here}" in line, line
    assert "failed=1" in out


@needs_ansible
def test_a_wheelhouse_of_the_device_architecture_passes(tmp_path: Path) -> None:
    wh = wheelhouse(tmp_path, MACHINES[host_arch()])
    out = run_tasks(tmp_path, "arch.yml", {"meshsub_wheelhouse_dir": str(wh)})
    assert "failed=0" in out and "MISMATCH" not in out, out[-2000:]


@needs_ansible
def test_a_wheelhouse_without_meshsub_is_named(tmp_path: Path) -> None:
    wh = wheelhouse(tmp_path, MACHINES[host_arch()])
    (wh / PURE[0]).unlink()
    out = run_tasks(tmp_path, "arch.yml", {"meshsub_wheelhouse_dir": str(wh)})
    assert "NO MESHSUB WHEEL on localhost" in out and "failed=1" in out, out[-2000:]


@needs_ansible
@pytest.mark.parametrize("variables", [
    {},
    {"meshsub_index_url": "https://pypi.example.org/simple"},
], ids=["bare-name", "no-hashes"])
def test_the_index_method_needs_its_own_index_and_hashes(tmp_path: Path,
                                                         variables: dict[str, str]) -> None:
    out = run_tasks(tmp_path, "bake.yml", {"meshsub_install_method": "index",
                                           "meshsub_version": "0.1.0", **variables})
    assert "needs meshsub_index_url" in out and "failed=1" in out, out[-2000:]
    assert "Create the meshsub group" not in out  # stopped before the first change
