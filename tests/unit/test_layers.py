"""The layering rules of docs/architecture.md hold, and breaking one fails this test.

The rules are import-linter contracts in ``pyproject.toml`` (``[tool.importlinter]``):
protocols are sans-I/O and independent of each other, the daemon's layers, a device
that needs no simulator or evaluation library, a simulator that needs neither the
field daemon nor the host, and the host side's own layers. Beside the static check,
two facts are checked the way a user meets them: what importing the simulator
loads, and that the device's dependency list is exactly what the daemon imports.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(*args: str, cwd: Path = ROOT, pythonpath: str | None = None
          ) -> subprocess.CompletedProcess[str]:
    env = {"PATH": str(Path(sys.executable).parent), "NO_COLOR": "1", "HOME": str(cwd)}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    return subprocess.run([str(LINT_IMPORTS), "--no-cache", "--no-logo", *args,
                           str(ROOT / "pyproject.toml")], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_every_layer_contract_is_kept() -> None:
    proc = _lint()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "0 broken" in proc.stdout


# One import that breaks each contract, planted in a copy of the source tree.
VIOLATIONS = [
    ("sans-io", "meshsub/core/api.py", "import meshsub.runtime.config"),
    ("sans-io", "meshsub/protocols/flooding.py", "import time"),
    ("protocols-independent", "meshsub/protocols/df.py", "import meshsub.protocols.hesper"),
    ("daemon-layers", "meshsub/wire/frame.py", "import meshsub.runtime.link"),
    ("device-light", "meshsub/runtime/node.py", "import simpy"),
    ("simulator-pure", "meshsim/des/stats.py", "import meshsim.vmesh.plan"),
    ("simulator-pure", "meshsim/scenario/reader.py", "import meshsub.runtime.mqtt"),
    ("host-layers", "meshsim/medium/nft.py", "import meshsim.vmesh.plan"),
    ("workload-agent-light", "meshsub_workload/agent.py", "import meshsub.core.api"),
    ("workload-agent-light", "meshsub_workload/agent.py", "import meshsim.scenario"),
]


@pytest.mark.parametrize(("contract", "path", "line"), VIOLATIONS)
def test_a_broken_rule_fails(tmp_path: Path, contract: str, path: str, line: str) -> None:
    for package in ("daemon/meshsub", "firmware-sim/meshsim", "telemetry/mesheval",
                    "workload/meshsub_workload"):
        shutil.copytree(ROOT / package, tmp_path / Path(package).name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    target = tmp_path / path
    target.write_text(target.read_text() + f"\n{line}  # noqa\n")
    proc = _lint("--contract", contract, cwd=tmp_path, pythonpath=str(tmp_path))
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "BROKEN" in proc.stdout
    assert line.split()[-1] in proc.stdout  # the report names the offending import


def test_importing_the_simulator_loads_no_daemon_runtime_host_or_mqtt() -> None:
    code = ('import meshsim.des.engine, sys; print(sorted(m for m in sys.modules if m.startswith('
            '("meshsub.runtime", "meshsim.vmesh", "aiomqtt"))))')
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert out.strip() == "[]"


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_device_dependencies_are_what_the_daemon_imports() -> None:
    """``[project] dependencies`` (what a device installs) == third-party imports of meshsub."""
    graph = grimp.build_graph("meshsub", include_external_packages=True)
    external = {m for m in graph.modules if "." not in m and m != "meshsub"}
    third_party = {m for m in external if m not in sys.stdlib_module_names
                   and m != "__future__"}
    dists = packages_distributions()
    project = tomllib.loads((ROOT / "daemon" / "pyproject.toml").read_text())["project"]

    def names(reqs: list[str]) -> set[str]:
        return {_normal(re.match(r"[A-Za-z0-9_.-]+", d).group(0))  # type: ignore[union-attr]
                for d in reqs}

    # An optional speed-up the daemon imports only when present (uvloop, the `fast`
    # extra) is not installed here: it must be declared as a device extra instead.
    optional = {m for m in third_party if m not in dists}
    assert {_normal(m) for m in optional} <= names(project["optional-dependencies"]["fast"])
    imported = {_normal(dists[m][0]) for m in third_party - optional}
    assert imported == names(project["dependencies"])
