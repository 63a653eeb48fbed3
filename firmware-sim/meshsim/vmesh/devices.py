"""What a scenario run does on the devices themselves, through ``podman exec``.

A run may reuse devices that an earlier run left up (``--keep``, or the tests), so
each run starts from a clean device: the daemon's state and spool, the broker's
retained subscriptions and gpsd's last fix are wiped before the playbook deploys.
At the end the daemon is stopped (SIGTERM closes and renames its spool files) and
its records, its journal and the workload agent's report are copied out.
"""

from __future__ import annotations

import io
import json
import tarfile
from pathlib import Path
from typing import Any

from meshsim.host import sh
from meshsim.host.errors import VmeshError
from meshsim.vmesh import nodes

VENV_PYTHON = "/opt/meshsub/bin/python"
CTL = "/opt/meshsub/bin/meshsubctl"
STATE_DIR = "/var/lib/meshsub"
SPOOL_DIR = f"{STATE_DIR}/spool"
WORKLOAD_DIR = "/var/lib/msub-workload"
AGENT_USER = "workload"
"""The agent's broker user: the inventory lists it in ``mosquitto_apps``."""
CREDENTIALS_DIR = "/etc/mosquitto/credentials"

_RESET = f"""
systemctl stop meshsubd.service 2>/dev/null || true
systemctl reset-failed meshsubd.service 2>/dev/null || true
systemctl stop mosquitto.service gpsd.service gpsd.socket 2>/dev/null || true
rm -rf {STATE_DIR}/* {STATE_DIR}/.[!.]* /var/lib/mosquitto/* {WORKLOAD_DIR}
if systemctl cat mosquitto.service >/dev/null 2>&1; then systemctl start mosquitto.service; fi
if systemctl cat gpsd.service >/dev/null 2>&1; then systemctl start gpsd.service; fi
true
"""


def reset(container: str) -> None:
    """Forget everything an earlier run left on the device (services stay installed)."""
    nodes.exec_in(container, ["sh", "-c", _RESET], timeout=120)


def start_agent(container: str, schedule_json: str) -> None:
    """Copy the schedule in and start the workload agent in the background."""
    nodes.exec_in(container, ["sh", "-c", f"mkdir -p {WORKLOAD_DIR} && "
                                          f"cat > {WORKLOAD_DIR}/schedule.json"],
                  input_data=schedule_json.encode())
    nodes.exec_in(container, ["systemd-run", "--unit", "msub-workload", "--collect",
                              "--quiet", "--property=Type=exec", VENV_PYTHON, "-m",
                              "meshsim.workload.agent", "--schedule",
                              f"{WORKLOAD_DIR}/schedule.json", "--out",
                              f"{WORKLOAD_DIR}/report.json", "--username", AGENT_USER,
                              "--password-file", f"{CREDENTIALS_DIR}/{AGENT_USER}.password"])


def agent_running(container: str) -> bool:
    state = nodes.exec_in(container, ["systemctl", "is-active", "msub-workload"],
                          check=False, timeout=30).strip()
    return state in ("active", "activating", "deactivating")


def stop_agent(container: str) -> None:
    nodes.exec_in(container, ["systemctl", "stop", "msub-workload"], check=False, timeout=60)


def agent_report(container: str) -> dict[str, Any] | None:
    """The agent's report, or None if it wrote none (counted by the caller)."""
    text = nodes.exec_in(container, ["cat", f"{WORKLOAD_DIR}/report.json"], check=False)
    try:
        doc = json.loads(text)
    except ValueError:
        return None
    return doc if isinstance(doc, dict) else None


def ctl_json(container: str, *args: str) -> Any:
    """``meshsubctl --json ARGS`` on the device; None if the daemon does not answer."""
    text = nodes.exec_in(container, [CTL, "--json", *args], check=False, timeout=30)
    try:
        return json.loads(text)
    except ValueError:
        return None


def stop_daemon(container: str) -> None:
    """SIGTERM: the daemon drains, closes and renames its telemetry files, and exits."""
    nodes.exec_in(container, ["systemctl", "stop", "meshsubd"], timeout=120)


def collect_spool(container: str, dest: Path) -> int:
    """Copy the daemon's closed telemetry files into ``dest``; return their count."""
    res = sh.run([*nodes.PODMAN, "exec", container, "tar", "-C", SPOOL_DIR,
                        "--exclude=./.*", "-cf", "-", "."], check=False, timeout=300)
    if res.returncode != 0:
        raise VmeshError(f"{container}: cannot read {SPOOL_DIR}: "
                         f"{res.stderr.decode(errors='replace').strip()[:200]}")
    dest.mkdir(parents=True, exist_ok=True)
    count = 0
    with tarfile.open(fileobj=io.BytesIO(res.stdout)) as tar:
        for member in tar.getmembers():
            name = Path(member.name).name
            if not member.isfile() or not name.endswith(".jsonl") or name.startswith("."):
                continue
            data = tar.extractfile(member)
            if data is not None:
                (dest / name).write_bytes(data.read())
                count += 1
    return count


def journal(container: str, unit: str = "meshsubd") -> str:
    return nodes.exec_in(container, ["journalctl", "--no-pager", "-o", "short-iso", "-u", unit],
                         check=False, timeout=120)
