"""Deploying to the virtual devices: ``deploy/ansible/site.yml`` over SSH, as on a Pi fleet.

One place runs the playbook (``meshsim vmesh deploy``, ``meshsim run``, the tests)
and reads its PLAY RECAP, so a failed host is named the same way everywhere.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from meshsim.host.errors import VmeshError

ANSIBLE_DIR = Path(__file__).resolve().parents[3] / "deploy" / "ansible"
PLAYBOOK = ANSIBLE_DIR / "site.yml"
_RECAP = re.compile(r"^(\S+)\s+:\s+((?:\w+=\d+\s*)+)$", re.M)
_BAD_CONFIG = re.compile(r"BAD MESHSUB CONFIG on (\S+): (.*?)(?: -- |\"|$)", re.M)
_STOPPED = re.compile(r"ROLLOUT STOPPED at (\S+) \(task '([^']*)'\): (.*?)(?: -- |\"|$)", re.M)


def ansible_playbook() -> str:
    """The venv's ansible-playbook when meshsim runs from it, else the one on PATH."""
    local = Path(sys.executable).with_name("ansible-playbook")
    return str(local) if local.exists() else "ansible-playbook"


MITOGEN_ENV = "MSUB_MITOGEN"
"""Set to ``0`` to run the playbook with Ansible's own linear strategy."""
STRATEGY = "msub_mitogen_linear"
"""Mitogen's linear strategy without its CPU pinning (``strategy/msub_mitogen_linear.py``)."""
STRATEGY_DIR = Path(__file__).with_name("strategy")


def mitogen_strategy() -> dict[str, str]:
    """Ansible settings for Mitogen's linear strategy, when it is installed and wanted.

    Most of a deployment's time is not the controller's: every task starts a
    Python on each device that unpacks the module and imports Ansible's module
    utilities again (about 0.23 s of a device's CPU per task, 19 tasks per device
    on re-configuration). Mitogen keeps one interpreter per device for the whole
    run and caches the imports: the same 6-device ``--tags configure`` took
    19 s instead of 67 s (docs/vmesh.md). The roles and their results are the
    same; only how the modules run on the device differs. Mitogen's own pinning of
    the controller to one core of a small host is left out (the plugin's docstring).
    """
    if os.environ.get(MITOGEN_ENV, "1") == "0":
        return {}
    try:
        import ansible_mitogen
    except ImportError:
        return {}
    plugins = Path(ansible_mitogen.__file__).parent / "plugins" / "strategy"
    return {"ANSIBLE_STRATEGY_PLUGINS": os.pathsep.join((str(plugins), str(STRATEGY_DIR))),
            "ANSIBLE_STRATEGY": STRATEGY}


def strategy_name() -> str:
    """The strategy the playbook runs with (``msub_mitogen_linear`` or Ansible's ``linear``)."""
    return mitogen_strategy().get("ANSIBLE_STRATEGY", "linear")


CONNECT_TIMEOUT_S = 120
"""Ansible's connection timeout for the virtual fleet (its default is 10 s). A hundred
devices deployed at once on a busy 2-core host: 77 of 100 connections (SSH and
Mitogen's bootstrap) timed out after 10 s at load 50 (2026-11-27), and an
unreachable device fails the deployment."""


def playbook_env() -> dict[str, str]:
    bindir = str(Path(sys.executable).parent)
    env = dict(os.environ, ANSIBLE_CONFIG=str(ANSIBLE_DIR / "ansible.cfg"),
               ANSIBLE_NOCOLOR="1", PATH=f"{bindir}:{os.environ.get('PATH', '')}",
               **mitogen_strategy())
    env.setdefault("ANSIBLE_TIMEOUT", str(CONNECT_TIMEOUT_S))
    return env


def run_playbook(inventory: Path, *extra: str, timeout_s: float = 1800.0,
                 ) -> subprocess.CompletedProcess[str]:
    """``ansible-playbook -i INVENTORY site.yml -e meshsub_serial=100% EXTRA...``."""
    try:
        return subprocess.run(
            [ansible_playbook(), "-i", str(inventory), str(PLAYBOOK),
             "-e", "meshsub_serial=100%", *extra],
            cwd=ANSIBLE_DIR, env=playbook_env(), capture_output=True, text=True,
            timeout=timeout_s, check=False, stdin=subprocess.DEVNULL)
    except FileNotFoundError as exc:
        raise VmeshError("ansible-playbook: not installed (pip install the dev extras)") from exc
    except subprocess.TimeoutExpired as exc:
        raise VmeshError(f"the playbook did not finish in {timeout_s:g} s") from exc


def recap(output: str) -> dict[str, dict[str, int]]:
    """PLAY RECAP lines -> {host: {ok: n, changed: n, failed: n, ...}}."""
    return {m.group(1): {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
            for m in _RECAP.finditer(output)}


@dataclass(frozen=True)
class Deployment:
    hosts: dict[str, dict[str, int]]
    output: str

    @property
    def changed(self) -> int:
        return sum(h.get("changed", 0) for h in self.hosts.values())


def deploy(inventory: Path, *extra: str) -> Deployment:
    """Run the playbook; a failed or unreachable host is a one-line ``VmeshError``."""
    res = run_playbook(inventory, *extra)
    hosts = recap(res.stdout)
    bad = sorted(h for h, s in hosts.items() if s.get("failed") or s.get("unreachable"))
    if res.returncode != 0 or bad or not hosts:
        detail = "; ".join(stop_reasons(res.stdout)) or _last_error(res.stdout + res.stderr)
        raise VmeshError(f"deployment failed on {', '.join(bad) or 'the run'}"
                         f" (ansible-playbook exit {res.returncode}): {detail}")
    return Deployment(hosts, res.stdout)


def stop_reasons(output: str) -> list[str]:
    """Why hosts failed, one line each, from the playbook's own messages.

    ``BAD MESHSUB CONFIG`` (the rejected configuration) when there is one, else the
    ``ROLLOUT STOPPED`` line site.yml prints for every failed host (its task and error).
    """
    reasons = {h: f"{h}: {why.strip()}" for h, why in _BAD_CONFIG.findall(output)}
    for host, task, why in _STOPPED.findall(output):  # Ansible prints each failure twice
        reasons.setdefault(host, f"{host}: {task}: {why.strip()}")
    return list(reasons.values())


def _last_error(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines()
             if ln.strip().startswith(("fatal:", "ERROR!", "msg:", "failed:"))]
    return (lines[-1] if lines else text.strip().splitlines()[-1] if text.strip() else
            "no output")[:400]
