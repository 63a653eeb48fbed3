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
