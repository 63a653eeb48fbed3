"""What a scenario run does on the devices themselves, through ``podman exec``.

A run may reuse devices that an earlier run left up (``--keep``, or the tests), so
each run starts from a clean device: the daemon's state and spool, the broker's
retained subscriptions and gpsd's last fix are wiped before the playbook deploys.
At the end the daemon is stopped (SIGTERM closes and renames its spool files) and
its records (those a crashed daemon never closed included), its journal and the
workload agent's report are copied out.
"""

from __future__ import annotations

import io
import json
import socket
import tarfile
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from meshsim.host import sh
from meshsim.host.errors import VmeshError
from meshsim.vmesh import nodes
from meshsim.vmesh.plan import NodePlan
from meshsub.runtime.spool import closed_name, complete_lines, file_key

VENV_PYTHON = "/opt/meshsub/bin/python"
CTL = "/opt/meshsub/bin/meshsubctl"
STATE_DIR = "/var/lib/meshsub"
SPOOL_DIR = f"{STATE_DIR}/spool"
WORKLOAD_DIR = "/var/lib/msub-workload"
AGENT_USER = "workload"
"""The agent's broker user: the inventory lists it in ``mosquitto_apps``."""
CREDENTIALS_DIR = "/etc/mosquitto/credentials"


def scenario_sub_id(sub_id: str) -> str:
    """The scenario's name of a subscription the workload agent made. The daemon names an
    application's subscriptions after its broker user (``workload/<id>``, docs/mqtt.md);
    scenarios and their checks name them without it."""
    return sub_id.removeprefix(f"{AGENT_USER}/")


def run_records(out: Path) -> list[dict[str, Any]]:
    """Every telemetry record a run collected (``out/nodes/**.jsonl``), subscriptions
    named as the scenario names them (``scenario_sub_id``)."""
    recs = [json.loads(line) for path in sorted((out / "nodes").rglob("*.jsonl"))
            for line in path.read_text().splitlines()]
    for r in recs:
        if isinstance(r.get("sub_id"), str):
            r["sub_id"] = scenario_sub_id(r["sub_id"])
    return recs

_RESET = f"""
systemctl stop meshsubd.service 2>/dev/null || true
systemctl reset-failed meshsubd.service 2>/dev/null || true
systemctl stop mosquitto.service gpsd.service gpsd.socket 2>/dev/null || true
rm -rf {STATE_DIR}/* {STATE_DIR}/.[!.]* /var/lib/mosquitto/* {WORKLOAD_DIR}
if systemctl cat mosquitto.service >/dev/null 2>&1; then systemctl start mosquitto.service; fi
if systemctl cat gpsd.service >/dev/null 2>&1; then systemctl start gpsd.service; fi
true
"""


T = TypeVar("T")
R = TypeVar("R")


def each(items: Iterable[T], fn: Callable[[T], R], workers: int = nodes.EXEC_WORKERS) -> list[R]:
    """``fn`` on every item, a few at a time (each is a ``podman exec`` or two).

    One device after another, 100 devices' ``podman exec`` take minutes on a loaded
    2-core host; all at once they starve each other. The first error is raised.
    """
    todo = list(items)
    if not todo:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(todo)))) as pool:
        return list(pool.map(fn, todo))


HOST_KEY = "/etc/ssh/ssh_host_ed25519_key.pub"
"""Made by the device at its first boot (the image carries no host key)."""


def write_known_hosts(devices: Sequence[NodePlan], path: Path) -> None:
    """The devices' host keys, read through podman (not over SSH), as ``path``.

    With them, SSH checks every device's key strictly from the first connection
    instead of trusting whatever answers first on the management address; Mitogen's
    strategy (docs/vmesh.md) needs that too, as it enforces host keys itself.
    """
    def line(dev: NodePlan) -> str:
        key = _device_file(dev.container, HOST_KEY).split()
        if len(key) < 2 or not key[0].startswith("ssh-"):
            raise VmeshError(f"{dev.container}: no SSH host key in {HOST_KEY}")
        return f"{dev.mgmt_ip} {key[0]} {key[1]}\n"

    path.write_text("".join(each(devices, line)))
    path.chmod(0o600)


def _device_file(container: str, path: str) -> str:
    """A small file of the device, read through ``/proc/PID/root`` of its init (no
    process started: a ``podman exec`` per device adds up at 100 devices), or through
    ``podman exec`` when the host cannot see the init's root."""
    pid = nodes.container_pid(container)
    if pid is not None:
        try:
            return (Path(f"/proc/{pid}/root") / path.lstrip("/")).read_text()
        except OSError:
            pass
    return nodes.exec_in(container, ["cat", path])


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
                              "meshsub_workload.agent", "--schedule",
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


CONTROL_SOCKET = "/run/meshsub/meshsubd.sock"
"""The unit's RuntimeDirectory, which the rendered configuration names as ``runtime_dir``."""


def ctl_json(container: str, *args: str) -> Any:
    """What ``meshsubctl --json ARGS`` prints on the device; None if the daemon does not
    answer. ``status``, ``neighbors`` and ``subscriptions`` are asked straight on the
    daemon's control socket, through ``/proc/PID/root`` of the device's init, without
    starting a process in the device (asking 100 devices every second must not cost
    100 ``podman exec`` and 100 Python starts); other commands run meshsubctl there."""
    if len(args) == 1 and args[0] in ("status", "neighbors", "subscriptions"):
        pid = nodes.container_pid(container)
        return None if pid is None else control(f"/proc/{pid}/root{CONTROL_SOCKET}", args[0])
    text = nodes.exec_in(container, [CTL, "--json", *args], check=False, timeout=30)
    try:
        return json.loads(text)
    except ValueError:
        return None


def control(path: str, cmd: str, timeout_s: float = 10.0) -> Any:
    """One request on a control socket (docs/operations.md): its result, or None."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_s)
            sock.connect(path)
            sock.sendall(json.dumps({"cmd": cmd}).encode() + b"\n")
            with sock.makefile("rb") as reply:
                line = reply.readline(1 << 22)
    except OSError:
        return None
    try:
        doc = json.loads(line)
    except ValueError:
        return None
    return doc.get("result") if isinstance(doc, dict) and doc.get("ok") else None


def stop_daemon(container: str) -> None:
    """SIGTERM: the daemon drains, closes and renames its telemetry files, and exits."""
    nodes.exec_in(container, ["systemctl", "stop", "meshsubd"], timeout=120)


def collect_spool(container: str, dest: Path, node: int) -> int:
    """Copy the stopped daemon's telemetry files into ``dest`` (``spool_files``); return
    their count."""
    res = sh.run([*nodes.PODMAN, "exec", container, "tar", "-C", SPOOL_DIR, "-cf", "-", "."],
                 check=False, timeout=300)
    if res.returncode != 0:
        raise VmeshError(f"{container}: cannot read {SPOOL_DIR}: "
                         f"{res.stderr.decode(errors='replace').strip()[:200]}")
    return spool_files(res.stdout, dest, node)


def spool_files(tar_bytes: bytes, dest: Path, node: int) -> int:
    """The telemetry files of node ``node``'s spool (a tar of it) written into ``dest``;
    their count.

    The closed files as they are, and the ``.current-<epoch>-<n>`` file of a process that
    never closed it: a daemon the scenario crashed (fault ``crash``) and did not
    ``recover`` renames nothing, and its records up to the crash are the evaluation's
    data. The daemon is stopped when this runs, so every such file is a dead process's:
    its complete lines (``meshsub.runtime.spool.complete_lines``; the torn last one is
    cut) go under the closed name the daemon's own recovery would give it.
    """
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(tar_bytes)) as tar:
        files = {Path(m.name).name: m for m in tar.getmembers()
                 if m.isfile() and m.name.endswith(".jsonl")}
        written: set[str] = set()
        for name, member in files.items():
            data = tar.extractfile(member)
            key = file_key(name, node)
            if data is None or (name.startswith(".") and key is None):
                continue
            body, target = data.read(), name
            if key is not None and not key[2]:  # never closed: a dead process's
                epoch, n, _ = key
                body, target = complete_lines(body), closed_name(node, epoch, n)
                while target in files or target in written:  # never over another file
                    n += 1
                    target = closed_name(node, epoch, n)
            if body:
                (dest / target).write_bytes(body)
                written.add(target)
    return len(written)


def journal(container: str, unit: str = "meshsubd") -> str:
    return nodes.exec_in(container, ["journalctl", "--no-pager", "-o", "short-iso", "-u", unit],
                         check=False, timeout=120)
