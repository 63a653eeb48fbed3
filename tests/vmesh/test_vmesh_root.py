"""Five virtual devices, the playbook over SSH, and what the field must see (issue 4).

The first five devices of the test session's fleet (``vmesh_fleet``, from the baked
image), wiped, in range of each other and of nobody else, get the full ``site.yml``
over SSH as a Pi would (the ``bake`` tasks find everything in place, the
``configure`` tasks render and start), with an inventory of their own. Waits poll
generously; nothing asserts on elapsed time.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from meshsim.vmesh.deploy import recap, run_playbook
from meshsim.vmesh.devices import AGENT_USER, CREDENTIALS_DIR

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.timeout(1800),  # the first test may bring the session's fleet up
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)"),
    pytest.mark.skipif(shutil.which("podman") is None or shutil.which("debootstrap") is None,
                       reason="needs podman and debootstrap"),
]

NODES = 5
CTL = "/opt/meshsub/bin/meshsubctl"


@dataclass
class Mesh:
    inventory: Path
    hosts: list[str]
    containers: list[str]
    first_play: subprocess.CompletedProcess[str]


def playbook(inventory: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_playbook(inventory, *extra)


def dexec(container: str, *cmd: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    from meshsim.vmesh.nodes import PODMAN

    return subprocess.run([*PODMAN, "exec", container, *cmd], capture_output=True, text=True,
                          timeout=timeout, check=False)


def poll(what: str, probe: Callable[[], bool], timeout_s: float = 180.0,
         every_s: float = 2.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(every_s)
    pytest.fail(f"timed out waiting for {what}")


def as_app(client: str, *args: str) -> list[str]:
    """A mosquitto client run as the inventory's application user: the broker takes no
    anonymous client (docs/mqtt.md), and an application reads its own password file."""
    pw = f"{CREDENTIALS_DIR}/{AGENT_USER}.password"
    return ["sh", "-c", f'exec {client} -u {AGENT_USER} -P "$(cat {pw})" "$@"', client, *args]


def unit_props(container: str, *props: str) -> dict[str, str]:
    res = dexec(container, "systemctl", "show", "meshsubd", *(f"--property={p}" for p in props))
    return dict(line.split("=", 1) for line in res.stdout.splitlines() if "=" in line)


@pytest.fixture(scope="module")
def mesh(vmesh_fleet: Any) -> Iterator[Mesh]:
    from meshsim.vmesh.inventory import write_inventory

    res = vmesh_fleet.take(NODES)
    five = dataclasses.replace(res.plan, nodes=res.devices)
    # a telemetry run of its own: whatever configuration the devices had is replaced
    inventory = write_inventory(five, res.rundir, "flooding", name="five.yml",
                                group_vars={"meshsub_telemetry_run": f"five-{os.getpid()}"})
    first = playbook(inventory)
    assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
    yield Mesh(inventory, [n.hostname for n in five.nodes], [n.container for n in five.nodes],
               first)


def test_first_run_deploys_every_host(mesh: Mesh) -> None:
    stats = recap(mesh.first_play.stdout)
    assert sorted(stats) == sorted(mesh.hosts)
    for host, s in stats.items():
        assert s["failed"] == 0 and s["unreachable"] == 0, host
        assert s["changed"] > 0, host


def test_meshsubd_active_on_each(mesh: Mesh) -> None:
    for c in mesh.containers:
        res = dexec(c, "systemctl", "is-active", "meshsubd")
        assert res.stdout.strip() == "active", (c, res.stdout, res.stderr)
        assert dexec(c, "ps", "-o", "user=", "-C", "meshsubd").stdout.split() == ["meshsub"]


def test_neighbors_lists_the_other_four(mesh: Mesh) -> None:
    for idx, c in enumerate(mesh.containers, start=1):
        others = set(range(1, NODES + 1)) - {idx}
        seen: set[int] = set()

        def probe(c: str = c, others: set[int] = others, seen: set[int] = seen) -> bool:
            res = dexec(c, CTL, "--json", "neighbors")
            if res.returncode != 0:
                return False
            seen.clear()
            seen.update(int(n["node"]) for n in json.loads(res.stdout))
            return seen == others

        poll(f"{c} to list nodes {sorted(others)} (last seen {sorted(seen)})", probe)


def test_mosquitto_pub_in_one_device_delivers_in_another(mesh: Mesh) -> None:
    sub_c, pub_c = mesh.containers[1], mesh.containers[3]
    made = dexec(sub_c, *as_app("mosquitto_pub", "-V", "5", "-q", "1", "-r", "-t",
                                f"meshsub/sub/{AGENT_USER}/vmt", "-m", "vmtest/# v>=1"))
    assert made.returncode == 0, made.stderr

    def subscribed() -> bool:
        res = dexec(sub_c, CTL, "--json", "subscriptions")
        return res.returncode == 0 and f"{AGENT_USER}/vmt" in res.stdout

    poll("the daemon to take the retained subscription", subscribed)
    from meshsim.vmesh.nodes import PODMAN

    listener = subprocess.Popen(
        [*PODMAN, "exec", sub_c, *as_app("mosquitto_sub", "-V", "5", "-q", "1", "-C", "1",
                                         "-W", "150", "-t",
                                         f"meshsub/deliver/{AGENT_USER}/vmt/#")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        n = 0

        def delivered() -> bool:
            nonlocal n
            if listener.poll() is not None:
                return True
            n += 1  # a fresh event each round: the listener may connect after the first
            dexec(pub_c, *as_app("mosquitto_pub", "-V", "5", "-q", "1", "-t",
                                 "meshsub/pub/vmtest/x", "-m",
                                 json.dumps({"v": n, "room": "lab"})))
            return False

        poll("a delivery on the subscribing device", delivered, timeout_s=140, every_s=5)
        out, err = listener.communicate(timeout=30)
    finally:
        if listener.poll() is None:
            listener.kill()
            listener.communicate()
    assert listener.returncode == 0, err
    delivery = json.loads(out)
    assert delivery["sub_id"] == f"{AGENT_USER}/vmt" and delivery["topic"] == "vmtest/x"
    assert delivery["origin"] == 4 and delivery["node"] == 2
    assert delivery["attrs"]["room"] == "lab" and delivery["attrs"]["v"] >= 1


def test_second_run_changes_nothing(mesh: Mesh) -> None:
    again = playbook(mesh.inventory)
    assert again.returncode == 0, again.stdout[-4000:]
    stats = recap(again.stdout)
    assert sorted(stats) == sorted(mesh.hosts)
    for host, s in stats.items():
        assert (s["changed"], s["failed"]) == (0, 0), (host, s, again.stdout[-3000:])


def test_systemd_analyze_verify_accepts_the_unit(mesh: Mesh) -> None:
    res = dexec(mesh.containers[0], "systemd-analyze", "verify",
                "/etc/systemd/system/meshsubd.service")
    assert res.returncode == 0, res.stdout + res.stderr
    assert "meshsubd.service" not in res.stderr, res.stderr


def test_sigkill_of_the_daemon_is_followed_by_a_restart(mesh: Mesh) -> None:
    c = mesh.containers[0]
    before = unit_props(c, "MainPID", "NRestarts")
    assert int(before["MainPID"]) > 0
    assert dexec(c, "kill", "-KILL", before["MainPID"]).returncode == 0

    def restarted() -> bool:
        now = unit_props(c, "MainPID", "NRestarts", "ActiveState")
        return (now["ActiveState"] == "active" and int(now["MainPID"]) > 0
                and now["MainPID"] != before["MainPID"]
                and int(now["NRestarts"]) == int(before["NRestarts"]) + 1)

    poll("systemd to restart meshsubd after SIGKILL", restarted)


def test_bad_config_from_the_playbook_stops_the_service_and_names_the_host(mesh: Mesh) -> None:
    host, c = mesh.hosts[2], mesh.containers[2]
    bad = playbook(mesh.inventory, "--limit", host, "-e", "meshsub_log_level=loud")
    assert bad.returncode != 0
    assert f"BAD MESHSUB CONFIG on {host}" in bad.stdout, bad.stdout[-3000:]
    assert "log.level" in bad.stdout
    assert recap(bad.stdout)[host]["failed"] == 1
    props = unit_props(c, "ActiveState", "SubState", "NRestarts")
    assert props["ActiveState"] == "inactive", props
    # the rejected file never reached the device
    assert "loud" not in dexec(c, "cat", "/etc/meshsub/meshsub.toml").stdout
    for other in mesh.containers[:2] + mesh.containers[3:]:
        assert dexec(other, "systemctl", "is-active", "meshsubd").stdout.strip() == "active"
    # a good run brings it back
    good = playbook(mesh.inventory, "--limit", host)
    assert good.returncode == 0, good.stdout[-3000:]
    assert dexec(c, "systemctl", "is-active", "meshsubd").stdout.strip() == "active"


def test_bad_config_on_the_device_does_not_restart_loop(mesh: Mesh) -> None:
    c = mesh.containers[4]
    before = int(unit_props(c, "NRestarts")["NRestarts"])
    assert dexec(c, "sed", "-i", 's/^level = .*/level = "loud"/',
                 "/etc/meshsub/meshsub.toml").returncode == 0
    dexec(c, "systemctl", "restart", "meshsubd")

    def failed() -> bool:
        p = unit_props(c, "ActiveState", "ExecMainStatus")
        return p["ActiveState"] == "failed" and p["ExecMainStatus"] == "2"

    poll("meshsubd to fail with exit status 2", failed)
    time.sleep(8)  # longer than RestartSec=3: a restart loop would have begun
    after = unit_props(c, "ActiveState", "NRestarts")
    assert after["ActiveState"] == "failed" and int(after["NRestarts"]) == before, after
    journal = dexec(c, "journalctl", "-u", "meshsubd", "--no-pager", "-n", "20").stdout
    assert "log.level" in journal
    # the playbook repairs the file, and the handler restarts the service
    fix = playbook(mesh.inventory, "--limit", mesh.hosts[4])
    assert fix.returncode == 0, fix.stdout[-3000:]
    assert recap(fix.stdout)[mesh.hosts[4]]["changed"] >= 1
    assert dexec(c, "systemctl", "is-active", "meshsubd").stdout.strip() == "active"
