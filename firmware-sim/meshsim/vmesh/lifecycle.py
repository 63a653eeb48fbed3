"""``up``, ``down`` and ``status`` of a run: plan, record, create; or remove what was recorded.

``up`` first removes whatever a previous run of the same name left (by its state
file, and by the exact names of the plan), then creates and records each object
before making it. An ``up`` of a complete, healthy run of the same shape does nothing.
"""

from __future__ import annotations

import contextlib
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from meshsim.host import sh
from meshsim.host.errors import VmeshError
from meshsim.vmesh import image, inventory, net, nodes
from meshsim.vmesh.plan import DEFAULT_RUN, Plan, make_plan
from meshsim.vmesh.runstate import RunState, forget, load_state, run_dir

Log = Callable[[str], None]


@dataclass(frozen=True)
class UpResult:
    plan: Plan
    rundir: Path
    inventory: Path
    seconds: float
    reused: bool


def _quiet(_: str) -> None:
    pass


def up(nodes_count: int, run: str = DEFAULT_RUN, *, protocol: str = "flooding",
       spacing_m: float = 50.0, rebuild_image: bool = False, log: Log = _quiet) -> UpResult:
    t0 = time.monotonic()
    plan = make_plan(nodes_count, run, spacing_m)
    rundir = run_dir(run)
    ref = image.ensure_image(rebuild=rebuild_image, log=log)
    old = load_state(rundir)
    if (old is not None and old.complete and old.nodes == nodes_count and old.image == ref
            and old.spacing_m == spacing_m and healthy(plan)):
        log(f"run {run!r} is already up with {nodes_count} devices")
        inv = rundir / inventory.INVENTORY
        if old.protocol != protocol:  # only the inventory names it: no need to restart
            old.protocol = protocol
            old.save(rundir)
            inv = inventory.write_inventory(plan, rundir, protocol)
        return UpResult(plan, rundir, inv, time.monotonic() - t0, True)
    _check_subnet_free(plan)
    teardown(run, log=log)

    raise_host_limits(nodes_count, log)
    state = RunState(run=run, nodes=nodes_count, image=ref, spacing_m=spacing_m,
                     protocol=protocol)
    state.save(rundir)
    _ensure_ssh_key(rundir)
    log(f"building the wheelhouse in {rundir / inventory.WHEELHOUSE}")
    from meshsim.vmesh.wheelhouse import build_wheelhouse
    build_wheelhouse(rundir / inventory.WHEELHOUSE)

    state.remember("netns", plan.medium_netns, rundir)
    net.make_medium(plan)
    state.remember("host_links", plan.mgmt_bridge, rundir)
    net.make_mgmt_bridge(plan)
    log(f"starting {nodes_count} devices")
    for node in plan.nodes:
        state.remember("netns", node.netns, rundir)
        state.remember("host_links", node.mgmt_host_if, rundir)
        net.attach_node(plan, node)
        state.remember("containers", node.container, rundir)
        nodes.start_node(node, ref, run)
    pub = (rundir / (inventory.KEY + ".pub")).read_text()
    for node in plan.nodes:
        nodes.wait_booted(node.container)
        nodes.authorize_key(node.container, pub)
        nodes.wait_sshd(node.container)
    with contextlib.suppress(FileNotFoundError):
        (rundir / inventory.KNOWN_HOSTS).unlink()  # fresh host keys every bring-up
    inv = inventory.write_inventory(plan, rundir, protocol)
    state.complete = True
    state.save(rundir)
    return UpResult(plan, rundir, inv, time.monotonic() - t0, False)


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
    """Every namespace exists and every container runs."""
    return (net.netns_exists(plan.medium_netns) and net.link_exists(plan.mgmt_bridge)
            and all(net.netns_exists(n.netns) and nodes.container_running(n.container)
                    for n in plan.nodes))


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
