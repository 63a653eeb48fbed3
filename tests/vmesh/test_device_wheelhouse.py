"""A device installs the field daemon only: the built wheelhouses, opened and read.

``meshsim vmesh wheelhouse DIR`` (what a field fleet installs from) must hold the
``meshsub`` wheel and the wheels of the libraries the daemon imports, and nothing of
the simulator (``meshsim``, ``simpy``) or the evaluation (``mesheval``, ``pyspark``,
pandas, ...); the meshsub wheel itself only the ``meshsub`` package and the two
device commands. The virtual mesh's wheelhouse adds exactly one wheel, the workload
agent (``meshsub-workload``), which holds only its own package. Built for real with
pip from this checkout (no root; the dependencies come from pip's cache or index).
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from meshsim.vmesh import wheelhouse

pytestmark = pytest.mark.slow

WORKSTATION_ONLY = {"meshsim", "mesheval", "simpy", "pyspark", "pandas", "pyarrow",
                    "matplotlib", "numpy", "netfilterqueue", "py4j", "meshsub-tools"}
"""Distributions and packages of the workstation: never on a device."""


def _dist(wheel: Path) -> str:
    return re.sub(r"[-_.]+", "-", wheel.name.split("-")[0]).lower()


def _top_levels(wheel: Path) -> set[str]:
    with zipfile.ZipFile(wheel) as zf:
        return {name.split("/")[0] for name in zf.namelist()
                if not name.split("/")[0].endswith((".dist-info", ".data"))}


def _metadata(wheel: Path, member: str) -> str:
    with zipfile.ZipFile(wheel) as zf:
        info = next(n for n in zf.namelist() if n.endswith(f".dist-info/{member}"))
        return zf.read(info).decode()


def _daemon_requirements() -> set[str]:
    project = tomllib.loads((wheelhouse.REPO_ROOT / "daemon" / "pyproject.toml").read_text())
    return {re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", req).group(0)).lower()  # type: ignore[union-attr]
            for req in project["project"]["dependencies"]}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("wheelhouses")
    field, vmesh = root / "field", root / "vmesh"
    wheelhouse.build_wheelhouse(field)
    wheelhouse.build_wheelhouse(vmesh, agent=True)
    return field, vmesh


def test_the_field_wheelhouse_holds_the_daemon_and_its_libraries_only(
        built: tuple[Path, Path]) -> None:
    field, _ = built
    wheels = sorted(field.glob("*.whl"))
    dists = {_dist(w) for w in wheels}
    assert not dists & WORKSTATION_ONLY, dists
    assert "meshsub-workload" not in dists  # a field fleet does not need the vmesh agent
    # exactly meshsub, what the daemon imports (daemon/pyproject.toml) and their own needs
    assert "meshsub" in dists and _daemon_requirements() <= dists, dists
    meshsub = wheelhouse.meshsub_wheel(field)
    assert _top_levels(meshsub) == {"meshsub"}
    with zipfile.ZipFile(meshsub) as zf:
        assert not [n for n in zf.namelist() if n.startswith(("meshsim/", "mesheval/"))]
    scripts = _metadata(meshsub, "entry_points.txt")
    console = scripts.split("[console_scripts]")[1].split("[")[0].split()
    assert sorted(console[0::3]) == ["meshsubctl", "meshsubd"], scripts
    requires = [ln for ln in _metadata(meshsub, "METADATA").splitlines()
                if ln.startswith("Requires-Dist:") and "extra ==" not in ln]
    assert not [ln for ln in requires if any(w in ln.lower() for w in WORKSTATION_ONLY)], requires
    for wheel in wheels:  # and no other wheel smuggles a workstation package in
        assert not _top_levels(wheel) & WORKSTATION_ONLY, wheel.name


def test_the_vmesh_wheelhouse_adds_the_workload_agent_alone(built: tuple[Path, Path]) -> None:
    field, vmesh = built
    added = {w.name for w in vmesh.glob("*.whl")} - {w.name for w in field.glob("*.whl")}
    assert [re.sub(r"-.*", "", n) for n in added] == ["meshsub_workload"], added
    agent = vmesh / added.pop()
    assert _top_levels(agent) == {"meshsub_workload"}
    requires = [ln.split(":", 1)[1].strip() for ln in _metadata(agent, "METADATA").splitlines()
                if ln.startswith("Requires-Dist:")]
    assert [re.match(r"[A-Za-z0-9_.-]+", r).group(0) for r in requires] == ["aiomqtt"]  # type: ignore[union-attr]


MODULE_IMPORTS = ["aiomqtt", "mmh3", "msgpack", "paho"]
"""What importing every module of ``meshsub`` loads, of third-party code."""
ON_USE_IMPORTS = ["ifaddr", "pynmea2", "zeroconf"]
"""Imported only when used (DNS-SD, the NMEA source): installed, not loaded before."""
DAEMON_IMPORTS = sorted(MODULE_IMPORTS + ON_USE_IMPORTS)
"""The third-party modules the daemon imports, as docs/deploy.md states them."""

_IMPORT_ALL = """
import importlib, pkgutil, sys
import meshsub
for mod in pkgutil.walk_packages(meshsub.__path__, "meshsub."):
    importlib.import_module(mod.name)
found = {n.split(".")[0] for n in sys.modules} - set(sys.stdlib_module_names)
print(" ".join(sorted(n for n in found if n != "meshsub" and not n.startswith("_"))))
"""


def test_a_field_venv_runs_the_daemon_without_the_workstation(
        built: tuple[Path, Path], tmp_path: Path) -> None:
    """Installed as the role installs it: every daemon module imports, the commands answer."""
    field, _ = built
    venv = tmp_path / "meshsub"
    subprocess.run(["/usr/bin/python3", "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    # the host venv's pip installs into the device-like venv (the devices' own pip does
    # the same from the same wheels); --no-index: nothing but the wheelhouse
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"),
                    "install", "--quiet", "--isolated", "--disable-pip-version-check",
                    "--no-index", "--find-links", str(field), "meshsub"], check=True,
                   timeout=300)
    py = str(venv / "bin" / "python")
    missing = subprocess.run([py, "-c", "import meshsim"], capture_output=True, text=True,
                             timeout=60, check=False)
    assert "No module named 'meshsim'" in missing.stderr
    out = subprocess.run([py, "-I", "-c", _IMPORT_ALL], capture_output=True, text=True,
                         timeout=300, check=True).stdout.split()
    # cython_runtime: zeroconf's compiled modules; sitecustomize: Debian's python3
    assert [m for m in out if m not in ("cython_runtime", "sitecustomize")] == MODULE_IMPORTS
    subprocess.run([py, "-I", "-c", f"import {', '.join(ON_USE_IMPORTS)}"], timeout=120,
                   check=True)
    documented = (wheelhouse.REPO_ROOT / "docs" / "deploy.md").read_text()
    assert all(f"`{m}`" in documented for m in DAEMON_IMPORTS)
    for command in ("meshsubd", "meshsubctl"):
        res = subprocess.run([str(venv / "bin" / command), "--help"], capture_output=True,
                             text=True, timeout=60, check=False)
        assert res.returncode == 0 and res.stdout.startswith(f"usage: {command}"), res.stderr
    assert sorted(p.name for p in (venv / "bin").iterdir() if p.name.startswith("mesh")) \
        == ["meshsubctl", "meshsubd"]
