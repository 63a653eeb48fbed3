"""``up``, ``down`` and ``status`` of a run: plan, record, create; or remove what was recorded.

``up`` first removes whatever a previous run of the same name left (by its state
file, and by the exact names of the plan), then creates and records each object
before making it. An ``up`` of a complete, healthy run of the same shape does nothing.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from meshsim.host import sh
from meshsim.host.errors import VmeshError
from meshsim.vmesh import bake, devices, image, inventory, net, nodes
from meshsim.vmesh.plan import DEFAULT_RUN, DEFAULT_SPACING_M, NodePlan, Plan, make_plan
from meshsim.vmesh.runstate import RunState, forget, load_state, run_dir
from meshsim.vmesh.wheelhouse import build_wheelhouse, host_arch

Log = Callable[[str], None]


IMAGE_KINDS = ("baked", "base")


@dataclass(frozen=True)
class UpResult:
    plan: Plan
    rundir: Path
    inventory: Path
    seconds: float
    reused: bool
    image: str = ""
    devices: tuple[NodePlan, ...] = ()
    """The devices asked for: all of the plan, or its first N when a larger run was reused."""
    prepare_s: float = 0.0
    """Of ``seconds``: the wheelhouse and the image (a bake, when its inputs changed)."""
    arches: tuple[str, ...] = ()
    """Each device's Debian architecture, in plan order."""


def device_arches(arch: str | Sequence[str] | None, count: int) -> tuple[str, ...]:
    """Each of ``count`` devices' architecture: one for all (``arm64``) or one each.

    A string may list them comma-separated (``arm64,arm64,amd64``), as ``meshsim vmesh
    up --arch`` takes them; ``None`` is the host's architecture.
    """
    if arch is None:
        return (host_arch(),) * count
    names = [a.strip() for a in arch.split(",")] if isinstance(arch, str) else list(arch)
    for name in names:
        if name not in image.ARCHES:
            raise VmeshError(f"bad architecture {name!r} (one of {', '.join(image.ARCHES)})")
    if len(names) == 1:
        return (names[0],) * count
    if len(names) != count:
        raise VmeshError(f"{len(names)} architectures for {count} devices: give one for all "
                         "or one per device")
    return tuple(names)


def image_label(refs: Sequence[str]) -> str:
    """The run state's image: the one image, or each device's comma-separated."""
    return refs[0] if len(set(refs)) == 1 else ",".join(refs)


def _quiet(_: str) -> None:
    pass


def up(nodes_count: int, run: str = DEFAULT_RUN, *, protocol: str = "flooding",
       spacing_m: float = 50.0, image_kind: str = "baked", rebuild_image: bool = False,
       reuse_larger: bool = False, arch: str | Sequence[str] | None = None,
       log: Log = _quiet) -> UpResult:
    """Bring up ``nodes_count`` devices (or reuse a healthy run of that shape).

    ``image_kind`` ``baked`` (the default) starts the devices from the baked image
    (meshsub installed; ``site.yml --tags configure`` deploys them), ``base`` from the
    bare operating system (the full ``site.yml`` over SSH, as on a new Pi).
    ``reuse_larger``: a healthy run with more devices is reused as it is, and the
    first ``nodes_count`` are the ones asked for (a test session's shared fleet).
    ``arch``: the devices' architectures (``device_arches``); each architecture has
    its own wheelhouse and image, and a foreign one runs under qemu-user.
    """
    t0 = time.monotonic()
    if image_kind not in IMAGE_KINDS:
        raise VmeshError(f"image must be one of {', '.join(IMAGE_KINDS)}, got {image_kind!r}")
    make_plan(nodes_count, run, spacing_m)  # checks the arguments before any work
    arches = device_arches(arch, nodes_count)
    for name in sorted(set(arches)):
        image.check_emulation(name)
    rundir = run_dir(run)
    rundir.mkdir(parents=True, exist_ok=True, mode=0o700)
    refs: dict[str, str] = {}
    for name in sorted(set(arches)):
        wheels = rundir / inventory.wheelhouse_name(name)
        log(f"building the {name} wheelhouse in {wheels}")
        build_wheelhouse(wheels, arch=name, agent=True, log=log)
        if image_kind == "base":
            refs[name] = image.ensure_image(rebuild=rebuild_image, arch=name, log=log)
        else:
            refs[name] = bake.ensure_baked(wheels, arch=name, rebuild=rebuild_image, log=log)
    images = [refs[a] for a in arches]
    ref = image_label(images)
    prepared = time.monotonic() - t0
    old = load_state(rundir)
    size = nodes_count
    if (old is not None and reuse_larger and old.nodes > nodes_count
            and len(set(arches)) == 1):
        size = old.nodes
    plan = make_plan(size, run, spacing_m)
    if (old is not None and old.complete and old.nodes == size and old.image == ref
            and old.spacing_m == spacing_m and healthy(plan)):
        log(f"run {run!r} is already up with {size} devices")
        inv = rundir / inventory.INVENTORY
        if old.protocol != protocol:  # only the inventory names it: no need to restart
            old.protocol = protocol
            old.save(rundir)
            inv = inventory.write_inventory(plan, rundir, protocol,
                                            arches=_by_host(plan, old.arches))
        return UpResult(plan, rundir, inv, time.monotonic() - t0, True, ref,
                        plan.nodes[:nodes_count], prepared, arches)
    plan = make_plan(nodes_count, run, spacing_m)
    _check_subnet_free(plan)
    teardown(run, log=log)
    inv = bring_up(plan, images, rundir, protocol, spacing_m, log, arches=arches)
    return UpResult(plan, rundir, inv, time.monotonic() - t0, False, ref, plan.nodes, prepared,
                    arches)


def _by_host(plan: Plan, arches: Sequence[str]) -> dict[str, str]:
    return {n.hostname: a for n, a in zip(plan.nodes, arches, strict=False)}


def bring_up(plan: Plan, ref: str | Sequence[str], rundir: Path, protocol: str,
             spacing_m: float = DEFAULT_SPACING_M, log: Log = _quiet,
             inventory_vars: dict[str, Any] | None = None,
             arches: Sequence[str] = ()) -> Path:
    """Make the run's networks and devices from image ``ref``; write its inventory.

    Every object is recorded in the run's state before it is made. The devices start
    a few at a time and are ready when their sshd greets and systemd has booted.
    ``inventory_vars`` are group variables of the inventory (the bake's wheelhouse).
    ``ref``: one image for all devices or one each; ``arches``: each one's architecture.
    """
    count = len(plan.nodes)
    remove_planned(plan, log)
    raise_host_limits(count, log)
    state = RunState(run=plan.run, nodes=count,
                     image=ref if isinstance(ref, str) else image_label(ref),
                     spacing_m=spacing_m, protocol=protocol, arches=list(arches))
    state.save(rundir)
    _ensure_ssh_key(rundir)
    state.remember("netns", plan.medium_netns, rundir)
    net.make_medium(plan)
    state.remember("host_links", plan.mgmt_bridge, rundir)
    net.make_mgmt_bridge(plan)
    state.netns += [n.netns for n in plan.nodes]
    state.host_links += [n.mgmt_host_if for n in plan.nodes]
    state.containers += [n.container for n in plan.nodes]
    state.save(rundir)
    log(f"starting {count} devices")
    steps = {}
    t = time.monotonic()
    net.attach_nodes(plan, plan.nodes)
    steps["networks"] = time.monotonic() - t
    nodes.start_nodes(plan.nodes, ref, plan.run, rundir / (inventory.KEY + ".pub"))
    steps["containers"] = time.monotonic() - t - sum(steps.values())
    nodes.wait_ssh(plan.nodes)
    steps["sshd"] = time.monotonic() - t - sum(steps.values())
    nodes.wait_all_booted(plan.nodes)
    steps["boot"] = time.monotonic() - t - sum(steps.values())
    log("bring-up: " + ", ".join(f"{k} {v:.1f} s" for k, v in steps.items()))
    devices.write_known_hosts(plan.nodes, rundir / inventory.KNOWN_HOSTS)
    inv = inventory.write_inventory(plan, rundir, protocol, group_vars=inventory_vars,
                                    arches=_by_host(plan, arches))
    state.complete = True
    state.save(rundir)
    return inv


def remove_planned(plan: Plan, log: Log = _quiet) -> int:
    """Remove whatever bears one of the plan's exact names (another home's crashed run)."""
    removed = 0
    present = set(nodes.run_labelled(plan.run))
    for n in plan.nodes:
        if n.container in present:
            removed += nodes.remove_container(n.container)
    for name in [n.netns for n in plan.nodes] + [plan.medium_netns]:
        removed += net.delete_netns(name)
    links = net.host_links()
    for name in [n.mgmt_host_if for n in plan.nodes] + [plan.mgmt_bridge]:
        if name in links:
            removed += net.delete_link(name)
    if removed:
        log(f"removed {removed} leftover objects bearing run {plan.run!r}'s names")
    return removed


INOTIFY_INSTANCES = Path("/proc/sys/fs/inotify/max_user_instances")
INOTIFY_PER_DEVICE = 16


def raise_host_limits(nodes_count: int, log: Log) -> None:
    """Raise the host's inotify instance limit if N systemd containers would exhaust it.

    Rootful containers share root's quota (Debian default 128); each booted device
    holds about 6-10 instances (systemd, journald, logind, dbus, ...), so 20 devices
    hang in "initializing" (measured). The limit is only ever raised, never lowered.
    """
    need = 128 + INOTIFY_PER_DEVICE * nodes_count
    try:
        have = int(INOTIFY_INSTANCES.read_text())
    except (OSError, ValueError):
        return
    if have < need:
        sh.run(["sysctl", "-qw", f"fs.inotify.max_user_instances={need}"])
        log(f"raised fs.inotify.max_user_instances {have} -> {need} for {nodes_count} devices")


def healthy(plan: Plan) -> bool:
    """Every namespace exists and every container runs (one ``podman ps``)."""
    running = set(nodes.run_labelled(plan.run, running_only=True))
    return (net.netns_exists(plan.medium_netns) and net.link_exists(plan.mgmt_bridge)
            and all(net.netns_exists(n.netns) and n.container in running for n in plan.nodes))


def _check_subnet_free(plan: Plan) -> None:
    """Refuse a management subnet some other interface of the host already uses."""
    prefix = ".".join(plan.mgmt_net.split(".")[:2]) + "."
    for line in sh.out(["ip", "-o", "-4", "addr", "show"]).splitlines():
        fields = line.split()
        dev, addr = fields[1], fields[3]
        if addr.startswith(prefix) and dev != plan.mgmt_bridge:
            raise VmeshError(f"{plan.mgmt_net} is already used by {dev} on this host; "
                             "choose another --name")


def _ensure_ssh_key(rundir: Path) -> None:
    """A fresh key pair per bring-up: a leaked key dies with its run."""
    key = rundir / inventory.KEY
    for p in (key, key.with_suffix(".pub")):
        with contextlib.suppress(FileNotFoundError):
            p.unlink()
    sh.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"meshsim-vmesh-{rundir.name}",
            "-f", str(key)])


def teardown(run: str = DEFAULT_RUN, *, log: Log = _quiet, purge: bool = False) -> int:
    """Remove what the run recorded, plus anything bearing its exact names; count removals."""
    rundir = run_dir(run)
    state = load_state(rundir)
    containers: list[str] = list(nodes.run_labelled(run))
    netns: list[str] = []
    links: list[str] = []
    if state is not None:
        containers += state.containers
        netns += state.netns
        links += state.host_links
        plan = make_plan(state.nodes, run, state.spacing_m)
        containers += [n.container for n in plan.nodes]
        netns += [plan.medium_netns] + [n.netns for n in plan.nodes]
        links += [plan.mgmt_bridge] + [n.mgmt_host_if for n in plan.nodes]
    removed = 0
    for name in dict.fromkeys(containers):
        removed += nodes.remove_container(name)
    for name in dict.fromkeys(netns):
        removed += net.delete_netns(name)
    for name in dict.fromkeys(links):
        removed += net.delete_link(name)
    if removed:
        log(f"removed {removed} objects of run {run!r}")
    forget(rundir)
    if purge and rundir.exists():
        shutil.rmtree(rundir)
    return removed


@dataclass(frozen=True)
class NodeStatus:
    hostname: str
    container: str
    mgmt_ip: str
    mesh_ip: str
    running: bool
    system: str
    meshsubd: str


def status(run: str = DEFAULT_RUN) -> tuple[RunState | None, list[NodeStatus]]:
    state = load_state(run_dir(run))
    if state is None:
        return None, []
    plan = make_plan(state.nodes, run, state.spacing_m)
    out = []
    for n in plan.nodes:
        running = nodes.container_running(n.container)
        system = meshsubd = "-"
        if running:
            system = nodes.exec_in(n.container, ["systemctl", "is-system-running"],
                                   check=False, timeout=30).strip() or "?"
            meshsubd = nodes.exec_in(n.container, ["systemctl", "is-active", "meshsubd"],
                                     check=False, timeout=30).strip() or "?"
        out.append(NodeStatus(n.hostname, n.container, n.mgmt_ip, n.mesh_ip, running,
                              system, meshsubd))
    return state, out


def load_plan(run: str = DEFAULT_RUN) -> Plan:
    state = load_state(run_dir(run))
    if state is None:
        raise VmeshError(f"run {run!r} is not up (no state in {run_dir(run)})")
    return make_plan(state.nodes, run, state.spacing_m)
