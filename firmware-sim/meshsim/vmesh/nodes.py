"""The device containers: podman with runc, systemd as PID 1, one netns each.

``PODMAN`` carries the global flags that work on this machine (crun fails on its
hybrid cgroups). Containers are labelled with their run, so nothing else is touched.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

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


def container_exists(name: str) -> bool:
    return sh.ok([*PODMAN, "container", "exists", name])


def container_running(name: str) -> bool:
    state = sh.out([*PODMAN, "inspect", "--format", "{{.State.Running}}", name], check=False)
    return state.strip() == "true"


def start_node(node: NodePlan, image: str, run: str) -> None:
    """Start the node's container in its netns (replacing a stale one of that name)."""
    if container_exists(node.container):
        remove_container(node.container)
    sh.run([*PODMAN, "run", "--detach", "--name", node.container,
            "--hostname", node.hostname, "--label", f"{RUN_LABEL}={run}",
            "--network", f"ns:/run/netns/{node.netns}",
            "--systemd", "always", "--cap-add", CAPS,
            "--ulimit", "nofile=16384:16384", "--ulimit", "nproc=4096:4096",
            "--stop-timeout", "10", "--tmpfs", "/tmp:rw,mode=1777",
            image, "/sbin/init"])


def remove_container(name: str) -> bool:
    if not container_exists(name):
        return False
    sh.run([*PODMAN, "rm", "--force", "--time", "5", name], timeout=120)
    return True


def run_labelled(run: str) -> list[str]:
    """Names of the containers of ``run`` that podman knows (also ones a crash left)."""
    text = sh.out([*PODMAN, "ps", "--all", "--filter", f"label={RUN_LABEL}={run}",
                   "--format", "{{.Names}}"], check=False)
    return [n for n in text.split() if n.startswith("msub-")]


def exec_in(name: str, cmd: Sequence[str], *, input_data: bytes | None = None,
            check: bool = True, timeout: float = 120.0) -> str:
    args = [*PODMAN, "exec"] + (["-i"] if input_data is not None else []) + [name, *cmd]
    return sh.run(args, input_data=input_data, check=check,
                  timeout=timeout).stdout.decode(errors="replace")


def wait_booted(name: str, timeout_s: float = 180.0) -> str:
    """Wait until systemd has finished booting (running or degraded); return the state."""
    deadline = time.monotonic() + timeout_s
    state = ""
    while time.monotonic() < deadline:
        state = exec_in(name, ["systemctl", "is-system-running"], check=False,
                        timeout=30).strip()
        if state in ("running", "degraded"):
            return state
        time.sleep(1.0)
    raise VmeshError(f"{name}: systemd did not finish booting in {timeout_s:g} s "
                     f"(state {state or 'unknown'!r}); see `meshsim vmesh exec {name} "
                     "systemctl --failed`")


def authorize_key(name: str, public_key: str) -> None:
    exec_in(name, ["sh", "-c", "umask 077; mkdir -p /root/.ssh && "
                   "cat > /root/.ssh/authorized_keys"], input_data=public_key.encode())


def wait_sshd(name: str, timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if exec_in(name, ["systemctl", "is-active", "ssh"], check=False,
                   timeout=30).strip() == "active":
            return
        time.sleep(1.0)
    raise VmeshError(f"{name}: sshd did not start in {timeout_s:g} s")
