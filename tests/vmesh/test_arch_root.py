"""Raspberry Pi architectures on the virtual mesh, under qemu-user (root).

``test_playbook_deploys_onto_an_arm64_device`` (default run): one arm64 device from
the bare operating system image (debootstrap --arch=arm64), the whole ``site.yml``
over SSH from an arm64 wheelhouse, as onto a new Pi; meshsubd active, ``meshsubctl
status`` (on the PATH) with the link up, MQTT connected and a fix, a
publish/subscribe round trip through the device's own broker, and a device venv
without the simulator. Its base image, built under emulation on a clean machine, is
started from the session's start by ``tests/conftest.py`` (marker
``emulated_device``), niced, and the test is scheduled last on a worker of its own
(xdist group ``arm64``), beside the fleet's tests; with the image cached it costs the
deployment alone (docs/vmesh.md, "Tests and figures").

Long tier (``./test.sh -m long tests/vmesh/test_arch_root.py``):
``test_second_run_on_the_arm64_device_changes_nothing`` and
``test_mixed_fleet_exchanges_events`` (``vmesh-mixed-arch``: two arm64 devices, one
amd64, over the radio medium, every event delivered; it bakes the arm64 image).
``MSUB_TEST_ARCH=armhf`` runs the deploy test on a 32-bit armhf device instead (its
wheelhouse compiles msgpack and mmh3 in an emulated container).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fleet import SCENARIOS

from meshsim.scenario import load_scenario
from meshsim.vmesh import lifecycle
from meshsim.vmesh.deploy import recap, run_playbook
from meshsim.vmesh.devices import AGENT_USER, CREDENTIALS_DIR, run_records
from meshsim.vmesh.nodes import PODMAN
from meshsim.vmesh.scenario_run import RunOptions, run_on_vmesh
from meshsim.vmesh.wheelhouse import MACHINES

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.timeout(5400),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)"),
    pytest.mark.skipif(shutil.which("podman") is None or shutil.which("debootstrap") is None,
                       reason="needs podman and debootstrap"),
]

ARCH = os.environ.get("MSUB_TEST_ARCH", "arm64")
RUN = "piarm"
MIX_RUN = "pimix"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def dexec(container: str, *cmd: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PODMAN, "exec", container, *cmd], capture_output=True, text=True,
                          timeout=timeout, check=False)


def as_app(client: str, *args: str) -> list[str]:
    pw = f"{CREDENTIALS_DIR}/{AGENT_USER}.password"
    return ["sh", "-c", f'exec {client} -u {AGENT_USER} -P "$(cat {pw})" "$@"', client, *args]


def poll(what: str, probe: Any, timeout_s: float = 300.0, every_s: float = 3.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(every_s)
    pytest.fail(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def pi() -> Iterator[tuple[str, subprocess.CompletedProcess[str], float]]:
    t = time.monotonic()
    up = lifecycle.up(1, RUN, image_kind="base", arch=ARCH, log=log)
    log(f"{ARCH} device up in {up.seconds:.0f} s (of which image and wheelhouse "
        f"{up.prepare_s:.0f} s)")
    try:
        t = time.monotonic()
        first = run_playbook(up.inventory)
        log(f"site.yml onto the {ARCH} device: {time.monotonic() - t:.0f} s")
        assert first.returncode == 0, first.stdout[-4000:] + first.stderr[-2000:]
        yield up.plan.nodes[0].container, first, time.monotonic() - t
    finally:
        lifecycle.teardown(RUN, purge=True)


@pytest.mark.emulated_device(ARCH)
def test_playbook_deploys_onto_an_arm64_device(
        pi: tuple[str, subprocess.CompletedProcess[str], float]) -> None:
    container, first, _ = pi
    assert dexec(container, "dpkg", "--print-architecture").stdout.strip() == ARCH
    assert dexec(container, "uname", "-m").stdout.strip() == MACHINES[ARCH]
    stats = recap(first.stdout)
    assert all(s["failed"] == 0 and s["changed"] > 0 for s in stats.values()), stats
    assert dexec(container, "systemctl", "is-active", "meshsubd").stdout.strip() == "active"
    # the commands are on the PATH, as docs/operations.md uses them
    assert dexec(container, "sh", "-lc", "command -v meshsubd").stdout.strip() \
        == "/usr/local/bin/meshsubd"
    status: dict[str, Any] = {}

    def ready() -> bool:
        res = dexec(container, "sh", "-lc", "meshsubctl --json status")
        if res.returncode != 0:
            return False
        status.update(json.loads(res.stdout))
        return (status["link"]["state"] == "up" and status["mqtt"]["state"] == "connected"
                and bool(status["location"]["fix"]))

    poll(f"link up, MQTT connected and a fix (last {status.get('link')}, "
         f"{status.get('mqtt')}, {status.get('location')})", ready)
    installed = dexec(container, "/opt/meshsub/bin/pip", "list", "--format=json").stdout
    names = sorted(p["name"].lower() for p in json.loads(installed))
    size = dexec(container, "du", "-sk", "/opt/meshsub").stdout.split()[0]
    log(f"packages in the device venv ({size} KiB): {names}")
    assert "simpy" not in names and "setuptools" not in names
    assert "meshsub-tools" not in names  # the device has the daemon's distribution only
    assert "No module named 'meshsim'" in dexec(container, "/opt/meshsub/bin/python", "-c",
                                                 "import meshsim").stderr
    for command in ("meshsubd", "meshsubctl"):
        helped = dexec(container, "sh", "-lc", f"{command} --help")
        assert helped.returncode == 0 and helped.stdout.startswith(f"usage: {command}"), helped

    made = dexec(container, *as_app("mosquitto_pub", "-V", "5", "-q", "1", "-r", "-t",
                                    f"meshsub/sub/{AGENT_USER}/pi", "-m", "pitest/# v>=1"))
    assert made.returncode == 0, made.stderr
    poll("the daemon to take the subscription", lambda: f"{AGENT_USER}/pi" in dexec(
        container, "meshsubctl", "--json", "subscriptions").stdout)
    listener = subprocess.Popen(
        [*PODMAN, "exec", container, *as_app("mosquitto_sub", "-V", "5", "-q", "1", "-C", "1",
                                             "-W", "200", "-t",
                                             f"meshsub/deliver/{AGENT_USER}/pi/#")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        n = 0

        def delivered() -> bool:
            nonlocal n
            if listener.poll() is not None:
                return True
            n += 1
            dexec(container, *as_app("mosquitto_pub", "-V", "5", "-q", "1", "-t",
                                     "meshsub/pub/pitest/x", "-m", json.dumps({"v": n})))
            return False

        poll("a local delivery", delivered, timeout_s=190, every_s=5)
        out, err = listener.communicate(timeout=30)
    finally:
        if listener.poll() is None:
            listener.kill()
            listener.communicate()
    assert listener.returncode == 0, err
    delivery = json.loads(out)
    assert delivery["sub_id"] == f"{AGENT_USER}/pi" and delivery["topic"] == "pitest/x"


@pytest.mark.long
def test_second_run_on_the_arm64_device_changes_nothing(
        pi: tuple[str, subprocess.CompletedProcess[str], float]) -> None:
    from meshsim.vmesh.runstate import run_dir

    t = time.monotonic()
    again = run_playbook(run_dir(RUN) / "inventory.yml")
    log(f"second site.yml run: {time.monotonic() - t:.0f} s")
    assert again.returncode == 0, again.stdout[-3000:]
    assert all(s["changed"] == 0 for s in recap(again.stdout).values()), again.stdout[-3000:]


@pytest.mark.long
def test_mixed_fleet_exchanges_events(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "vmesh-mixed-arch.toml")
    t = time.monotonic()
    try:
        res = run_on_vmesh(scenario, RunOptions(out=tmp_path / "run", vmesh_run=MIX_RUN,
                                                keep=True, log=log))
        log(f"vmesh-mixed-arch: {time.monotonic() - t:.0f} s ({res.timings})")
        arches = {node: dexec(c, "dpkg", "--print-architecture").stdout.strip()
                  for node, c in res.devices.items()}
    finally:
        lifecycle.teardown(MIX_RUN, purge=True)
    assert arches == {1: "amd64", 2: "arm64", 3: "arm64"}
    recs = run_records(res.out)
    pubs = sorted(r["event_id"] for r in recs if r["event"] == "publish")
    delivered = sorted((r["node"], r["sub_id"].rsplit("/", 1)[-1], r["event_id"]) for r in recs
                       if r["event"] == "deliver")
    assert len(pubs) == 3
    # every event reaches both subscribers: the laptop (1) and the far Pi (3)
    assert delivered == sorted([(1, "laptop", e) for e in pubs] + [(3, "far-pi", e) for e in pubs])
