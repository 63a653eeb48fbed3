"""The device containers: podman with runc, systemd as PID 1, one netns each.

``PODMAN`` carries the global flags that work on this machine (crun fails on its
hybrid cgroups). Containers are labelled with their run, so nothing else is touched.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from meshsim.host import sh
from meshsim.host.errors import VmeshError
from meshsim.vmesh.plan import NodePlan

PODMAN = ("podman", "--runtime", "runc", "--cgroup-manager", "cgroupfs")
RUN_LABEL = "org.meshsub.vmesh.run"
# NET_ADMIN: the daemon's link layer (and the next issue's per-node shaping) inside the
# node's own netns; NET_RAW: SO_BINDTODEVICE, ping, tcpdump. SYS_ADMIN: without it
# systemd skips the mount namespaces of sandboxed units ("namespace setup is prohibited
# ... ignoring", measured), so meshsubd.service would run unsandboxed and its
# ProtectSystem=/PrivateTmp= would go untested; with it they apply as on a Pi.
CAPS = "NET_ADMIN,NET_RAW,SYS_ADMIN"
ULIMITS = ("--ulimit", "nofile=16384:16384", "--ulimit", "nproc=4096:4096")
"""Explicit limits: podman's defaults (the host's hard limits) are refused here by runc
("error setting rlimit type 7: operation not permitted")."""
START_WORKERS = 4
"""Containers started at once; podman holds locks for much of a start, so more
threads mostly wait (see docs/benchmarks.md for the measured bring-up)."""
EXEC_WORKERS = 8
"""``podman exec`` at once when every device is asked something."""


def container_exists(name: str) -> bool:
    return sh.ok([*PODMAN, "container", "exists", name])


def container_running(name: str) -> bool:
    state = sh.out([*PODMAN, "inspect", "--format", "{{.State.Running}}", name], check=False)
    return state.strip() == "true"


def start_node(node: NodePlan, image: str, run: str, authorized_key: Path | None = None) -> None:
    """Start the node's container in its netns (replacing a stale one of that name).

    ``authorized_key`` (the run's public key) is bind-mounted read-only as root's
    ``authorized_keys``: the device is reachable over SSH the moment sshd runs, with
    no ``podman exec`` per device, and the key never enters an image layer.
    """
    if container_exists(node.container):
        remove_container(node.container)
    key = ([] if authorized_key is None else
           ["--volume", f"{authorized_key}:/root/.ssh/authorized_keys:ro"])
    sh.run([*PODMAN, "run", "--detach", "--name", node.container,
            "--hostname", node.hostname, "--label", f"{RUN_LABEL}={run}",
            "--network", f"ns:/run/netns/{node.netns}",
            "--systemd", "always", "--cap-add", CAPS,
            *ULIMITS,
            "--stop-timeout", "10", "--tmpfs", "/tmp:rw,mode=1777", *key,
            image, "/sbin/init"])


def start_nodes(nodes: Sequence[NodePlan], image: str | Sequence[str], run: str,
                authorized_key: Path, workers: int = START_WORKERS) -> None:
    """Start many containers, a few at a time (podman serialises much of the work).

    ``image``: one for all, or one per device (a fleet of mixed architectures).
    """
    images = [image] * len(nodes) if isinstance(image, str) else list(image)
    if len(images) != len(nodes):
        raise VmeshError(f"{len(images)} images for {len(nodes)} devices")
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(nodes)))) as pool:
        list(pool.map(lambda ni: start_node(ni[0], ni[1], run, authorized_key),
                      zip(nodes, images, strict=True)))


def remove_container(name: str) -> bool:
    if not container_exists(name):
        return False
    sh.run([*PODMAN, "rm", "--force", "--time", "5", name], timeout=120)
    return True


def run_labelled(run: str, *, running_only: bool = False) -> list[str]:
    """Names of the containers of ``run`` that podman knows (also ones a crash left)."""
    text = sh.out([*PODMAN, "ps", *([] if running_only else ["--all"]),
                   "--filter", f"label={RUN_LABEL}={run}", "--format", "{{.Names}}"],
                  check=False)
    return [n for n in text.split() if n.startswith("msub-")]


_PIDS: dict[str, tuple[int, str]] = {}


def _start_time(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def container_pid(name: str) -> int | None:
    """The host PID of the container's init (its ``/proc/PID/root`` is the device's
    file system), or None if it does not run. Cached, and checked against the
    process's start time, so a restarted container or a reused PID is noticed."""
    cached = _PIDS.get(name)
    if cached is not None and _start_time(cached[0]) == cached[1]:
        return cached[0]
    text = sh.out([*PODMAN, "inspect", "--format", "{{.State.Pid}}", name], check=False)
    try:
        pid = int(text.strip())
    except ValueError:
        return None
    started = _start_time(pid) if pid > 0 else None
    if started is None:
        return None
    _PIDS[name] = (pid, started)
    return pid


def cache_pids(names: Sequence[str]) -> None:
    """Fill ``container_pid``'s cache for many containers with one ``podman inspect``."""
    if not names:
        return
    text = sh.out([*PODMAN, "inspect", "--format", "{{.Name}} {{.State.Pid}}", *names],
                  check=False)
    for line in text.splitlines():
        name, _, pid_text = line.strip().partition(" ")
        try:
            pid = int(pid_text)
        except ValueError:
            continue
        started = _start_time(pid) if pid > 0 else None
        if started is not None:
            _PIDS[name.lstrip("/")] = (pid, started)


def exec_in(name: str, cmd: Sequence[str], *, input_data: bytes | None = None,
            check: bool = True, timeout: float = 120.0) -> str:
    args = [*PODMAN, "exec"] + (["-i"] if input_data is not None else []) + [name, *cmd]
    return sh.run(args, input_data=input_data, check=check,
                  timeout=timeout).stdout.decode(errors="replace")


def systemctl_in(name: str, args: Sequence[str], *, timeout: float = 60.0) -> None:
    """``systemctl ARGS`` on the device, by ``nsenter`` into its init's namespaces.

    What must happen at a scenario's time (a fault's kill) cannot wait for a
    ``podman exec`` (the runtime's exec, a conmon, the podman CLI): on a host running
    the test suite one took 6 s, and the scenario's next publication came first. The
    device's own systemctl talks to its own systemd, as ``_boot_state_nsenter``
    does; through ``podman exec`` when the init's PID is unknown. A failure raises
    ``VmeshError`` either way.
    """
    pid = container_pid(name)
    if pid is None:
        exec_in(name, ["systemctl", *args], timeout=timeout)
        return
    sh.run(_nsenter_systemctl(pid, args), timeout=timeout)


def _nsenter_systemctl(pid: int, args: Sequence[str]) -> list[str]:
    """The device's own systemctl with ``args``, run from the host in the mount, PID, IPC
    and UTS namespaces of its init (host PID ``pid``): it reaches the device's systemd."""
    return ["nsenter", "--target", str(pid), "--mount", "--pid", "--ipc", "--uts",
            "systemctl", *args]


BOOTED = ("running", "degraded")


def _boot_state_nsenter(name: str, timeout_s: float) -> str | None:
    """``systemctl is-system-running --wait`` in the device's namespaces by ``nsenter``.

    A ``podman exec`` per device (the runtime's exec, a conmon, the podman CLI) costs
    the host far more than the question; ``nsenter`` into the init's mount, PID and
    IPC namespaces runs the device's own systemctl against its systemd the same way.
    None when the PID is unknown or the answer is not a booted state (the caller then
    asks through podman, as before).
    """
    pid = container_pid(name)
    if pid is None:
        return None
    res = sh.run(_nsenter_systemctl(pid, ["is-system-running", "--wait"]), check=False,
                 timeout=timeout_s)
    state = res.stdout.decode(errors="replace").strip()
    return state if state in BOOTED else None


def wait_booted(name: str, timeout_s: float = 180.0) -> str:
    """Wait until systemd has finished booting (running or degraded); return the state."""
    state = _boot_state_nsenter(name, timeout_s)
    if state is not None:
        return state
    state = exec_in(name, ["systemctl", "is-system-running", "--wait"], check=False,
                    timeout=timeout_s).strip()
    if state in BOOTED:
        return state
    raise VmeshError(f"{name}: systemd did not finish booting in {timeout_s:g} s "
                     f"(state {state or 'unknown'!r}); see `meshsim vmesh exec {name} "
                     "systemctl --failed`")


def wait_all_booted(nodes: Sequence[NodePlan], timeout_s: float = 300.0,
                    workers: int = EXEC_WORKERS) -> None:
    """``wait_booted`` on every node, a few at a time."""
    cache_pids([n.container for n in nodes])
    with ThreadPoolExecutor(max_workers=max(1, min(workers, len(nodes)))) as pool:
        list(pool.map(lambda n: wait_booted(n.container, timeout_s), nodes))


def wait_ssh(nodes: Sequence[NodePlan], timeout_s: float = 180.0) -> None:
    """Wait until every node's sshd greets on its management address (port 22).

    Cheap (a TCP connection from the host, no process per probe), so it runs for all
    devices at once; a node whose sshd never greets is named.
    """
    deadline = time.monotonic() + timeout_s
    waiting = {n.mgmt_ip: n for n in nodes}
    while waiting:
        for ip in list(waiting):
            if _greets(ip):
                del waiting[ip]
        if not waiting:
            return
        if time.monotonic() > deadline:
            names = sorted(n.container for n in waiting.values())
            raise VmeshError(f"sshd did not answer in {timeout_s:g} s on "
                             f"{', '.join(names[:5])}{' ...' if len(names) > 5 else ''}")
        time.sleep(0.5)


def _greets(ip: str) -> bool:
    try:
        with socket.create_connection((ip, 22), timeout=1.0) as conn:
            conn.settimeout(2.0)
            return conn.recv(8).startswith(b"SSH-")
    except OSError:
        return False
