"""Ansible callback: per task, how many hosts changed and the CPU it cost where.

Used by bench/bench_vmesh.py ``--profile`` (not by a deployment): for every task of
the play it records the hosts' results (changed, ok, skipped, failed), its wall
time (from its start to the next task's), the devices' CPU (the sum of the run's
containers' ``cpuacct.usage``: every Python a module, a ``--check`` or a service
start costs on a device) and the controller's CPU (ansible-playbook and every
process under it: forks, Mitogen's brokers, ssh). The figures are written as JSON
to ``$MSUB_TASK_PROFILE`` when the play ends.

The containers are those labelled with the run ``$MSUB_TASK_PROFILE_RUN``
(meshsim.vmesh.nodes.RUN_LABEL); handlers are tasks too (their names are marked).
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

from ansible.plugins.callback import CallbackBase

CGROUP = Path("/sys/fs/cgroup/cpuacct/libpod_parent")
PODMAN = ("podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs")
TICK = os.sysconf("SC_CLK_TCK")


def _tree_cpu_s(root: int) -> float:
    """CPU seconds of ``root`` and its live descendants (each with its reaped children)."""
    parent: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            stat = Path(entry.path, "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        pid = int(entry.name)
        parent[pid] = int(fields[1])
        cpu[pid] = sum(int(x) for x in fields[11:15]) / TICK
    total = 0.0
    for pid, value in cpu.items():
        p = pid
        while p > 1 and p != root:
            p = parent.get(p, 0)
        if p == root:
            total += value
    return total


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "msub_task_profile"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self) -> None:
        super().__init__()
        self.out = os.environ.get("MSUB_TASK_PROFILE", "")
        self.run = os.environ.get("MSUB_TASK_PROFILE_RUN", "")
        self.cgroups: list[Path] = []
        self.tasks: list[dict[str, Any]] = []
        self.current: dict[str, Any] | None = None
        self.started = self._sample()

    def _devices_cpu_s(self) -> float:
        total = 0
        for path in self.cgroups:
            with contextlib.suppress(OSError):  # a device that went away: no CPU
                total += int((path / "cpuacct.usage").read_text())
        return total / 1e9

    def _sample(self) -> tuple[float, float, float]:
        return time.monotonic(), self._devices_cpu_s(), _tree_cpu_s(os.getpid())

    def v2_playbook_on_start(self, playbook: Any) -> None:
        if not self.run:
            return
        out = subprocess.run(
            [*PODMAN, "ps", "--no-trunc", "--format", "{{.ID}}",
             "--filter", f"label=org.meshsub.vmesh.run={self.run}"],
            capture_output=True, text=True, check=False).stdout
        self.cgroups = [CGROUP / f"libpod-{cid}" for cid in out.split()]
        self.started = self._sample()

    def _close(self) -> None:
        if self.current is None:
            return
        t, dev, ctl = self._sample()
        t0, dev0, ctl0 = self.current.pop("_at")
        self.current.update(wall_s=t - t0, devices_cpu_s=dev - dev0, controller_cpu_s=ctl - ctl0)
        self.tasks.append(self.current)
        self.current = None

    def _open(self, name: str) -> None:
        self._close()
        self.current = {"task": name, "changed": 0, "ok": 0, "skipped": 0, "failed": 0,
                        "_at": self._sample()}

    def v2_playbook_on_task_start(self, task: Any, is_conditional: bool) -> None:
        self._open(task.get_name())

    def v2_playbook_on_handler_task_start(self, task: Any) -> None:
        self._open(f"handler: {task.get_name()}")

    def _count(self, key: str) -> None:
        if self.current is not None:
            self.current[key] += 1

    def v2_runner_on_ok(self, result: Any) -> None:
        self._count("changed" if result._result.get("changed") else "ok")

    def v2_runner_on_skipped(self, result: Any) -> None:
        self._count("skipped")

    def v2_runner_on_failed(self, result: Any, ignore_errors: bool = False) -> None:
        self._count("failed")

    def v2_runner_on_unreachable(self, result: Any) -> None:
        self._count("failed")

    def v2_playbook_on_stats(self, stats: Any) -> None:
        self._close()
        t, dev, ctl = self._sample()
        total = {"wall_s": t - self.started[0], "devices_cpu_s": dev - self.started[1],
                 "controller_cpu_s": ctl - self.started[2], "devices": len(self.cgroups)}
        if self.out:
            Path(self.out).write_text(json.dumps({"total": total, "tasks": self.tasks}))
