"""Rolling upgrades of a virtual fleet: the field's rollout (``site.yml``), measured.

A rollout is the full playbook (no tags: the ``bake`` tasks install the new build,
the ``configure`` tasks restart the daemon and wait for READY=1) with a newer
wheelhouse and its version pinned, ``serial`` devices at a time (``25%`` as in the
field) and ``max_fail_percentage`` 0: the first device whose upgrade fails stops
the rollout, site.yml names it (``ROLLOUT STOPPED at ...``), and the devices of
later batches keep the version they run. The result says which devices took the
new build, which failed and which the rollout never reached, and when each
device's daemon was down (from systemd's own timestamps).
"""

from __future__ import annotations

import itertools
import json
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meshsim.vmesh import deploy, devices, nodes
from meshsim.vmesh.plan import NodePlan
from meshsim.vmesh.wheelhouse import build_wheelhouse, meshsub_wheel, wheel_version

Log = Callable[[str], None]
_PLAY = re.compile(r"^PLAY \[.*\] \*+$", re.M)
_HOST_RESULT = re.compile(r"^(?:ok|changed|fatal|failed|skipping): \[([^\]]+)\]", re.M)


def newer_build(dest: Path, version: str) -> str:
    """Build this checkout as ``version`` into the wheelhouse ``dest``; the version."""
    build_wheelhouse(dest, version=version, agent=True)
    return wheel_version(meshsub_wheel(dest))


@dataclass
class Rollout:
    version: str
    serial: str
    started: float
    """Unix seconds."""
    ended: float
    returncode: int
    batches: list[list[str]]
    """Hosts in the order the playbook took them, batch by batch."""
    recap: dict[str, dict[str, int]]
    failed: list[str]
    not_reached: list[str]
    reasons: list[str]
    """One line per failed host (``deploy.stop_reasons``)."""
    output: str = field(repr=False)
    downtime: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Per host, (stopped, active again) in unix seconds: the daemon's last restart."""

    @property
    def upgraded(self) -> list[str]:
        return [h for batch in self.batches for h in batch if h not in self.failed]

    def summary(self) -> dict[str, Any]:
        down = [end - start for start, end in self.downtime.values()]
        return {"version": self.version, "serial": self.serial,
                "seconds": round(self.ended - self.started, 1), "returncode": self.returncode,
                "batches": self.batches, "failed": self.failed,
                "not_reached": self.not_reached, "reasons": self.reasons,
                "downtime_s": {"max": round(max(down), 2) if down else None,
                               "mean": round(sum(down) / len(down), 2) if down else None}}


def batches_of(output: str) -> list[list[str]]:
    """Hosts per batch: a ``serial`` play prints its ``PLAY [...]`` banner again for each
    batch, so a batch is the hosts named between one banner and the next."""
    out: list[list[str]] = []
    starts = [m.start() for m in _PLAY.finditer(output)] + [len(output)]
    for begin, end in itertools.pairwise(starts):
        hosts: list[str] = []
        for host in _HOST_RESULT.findall(output[begin:end]):
            if host not in hosts:
                hosts.append(host)
        if hosts:
            out.append(hosts)
    return out


def rollout(inventory: Path, hosts: Sequence[str], wheelhouse: Path, *, serial: str = "25%",
            max_fail_percentage: int = 0, extra: Sequence[str] = (),
            log: Log = lambda _m: None) -> Rollout:
    """Roll the build in ``wheelhouse`` out to ``hosts`` of ``inventory`` (see module)."""
    version = wheel_version(meshsub_wheel(wheelhouse))
    log(f"rolling meshsub {version} out to {len(hosts)} devices, {serial} at a time")
    started = time.time()
    res = deploy.run_playbook(
        inventory, "-e", f"meshsub_serial={serial}",
        "-e", f"meshsub_max_fail_percentage={max_fail_percentage}",
        "-e", json.dumps({"meshsub_wheelhouse_dir": str(wheelhouse),
                          "meshsub_version": version}),
        "--limit", ",".join(hosts), *extra)
    ended = time.time()
    recap = deploy.recap(res.stdout)
    failed = sorted(h for h, s in recap.items() if s.get("failed") or s.get("unreachable"))
    result = Rollout(version=version, serial=serial, started=started, ended=ended,
                     returncode=res.returncode, batches=batches_of(res.stdout),
                     recap=recap, failed=failed,
                     not_reached=[h for h in hosts if h not in recap],
                     reasons=deploy.stop_reasons(res.stdout), output=res.stdout)
    log(f"rollout ended after {ended - started:.0f} s: {len(result.upgraded)} upgraded, "
        f"failed {failed or 'none'}, not reached {len(result.not_reached)}")
    return result


def restart_times(devs: Sequence[NodePlan]) -> dict[str, tuple[float, float]]:
    """Per device (hostname), when meshsubd last stopped and became active again."""

    def one(dev: NodePlan) -> tuple[float, float] | None:
        text = nodes.exec_in(dev.container, [
            "systemctl", "show", "meshsubd", "--timestamp=unix",
            "-p", "ActiveExitTimestamp", "-p", "ActiveEnterTimestamp"], check=False)
        values = dict(line.split("=", 1) for line in text.splitlines() if "=" in line)
        try:
            stopped = float(values["ActiveExitTimestamp"].lstrip("@"))
            active = float(values["ActiveEnterTimestamp"].lstrip("@"))
        except (KeyError, ValueError):
            return None  # never restarted
        return (stopped, active) if active >= stopped else None

    times = devices.each(devs, one)
    return {d.hostname: t for d, t in zip(devs, times, strict=True) if t is not None}


def running_versions(devs: Sequence[NodePlan]) -> dict[str, str | None]:
    """Per device, the version the running daemon reports (``meshsubctl status``)."""

    def one(dev: NodePlan) -> str | None:
        status = devices.ctl_json(dev.container, "status")
        version = status.get("version") if isinstance(status, dict) else None
        return str(version) if version is not None else None

    return dict(zip((d.hostname for d in devs), devices.each(devs, one), strict=True))
