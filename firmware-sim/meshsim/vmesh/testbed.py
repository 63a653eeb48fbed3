"""A medium without containers: plain netns on the medium bridge, as vmesh lays them out.

For the medium's self-tests and its benchmark. Names and addresses come from
``meshsim.vmesh.plan`` (so node *i* is netns ``msub-<run>-n<i>`` with ``mesh0``
on port ``n<i>`` of ``msub-br0`` in ``msub-<run>-medium``), the bridge from
``meshsim.vmesh.net.make_medium``; only the node side is built here, in
``ip -batch`` runs rather than one ``ip`` per step (200 nodes in about a second
instead of ~10 s). No management network: nothing here needs SSH.
"""

from __future__ import annotations

from meshsim.host import sh
from meshsim.host.errors import VmeshError
from meshsim.medium.errors import MediumError
from meshsim.vmesh.net import make_medium, netns_exists
from meshsim.vmesh.plan import Plan, make_plan


def _batch(lines: list[str], netns: str | None = None, *, force: bool = False) -> None:
    cmd = ["ip"] + (["-n", netns] if netns else []) + (["-force"] if force else [])
    try:
        sh.run([*cmd, "-batch", "-"], input_data=("\n".join(lines) + "\n").encode(),
               check=not force)
    except VmeshError as exc:
        raise MediumError(f"building the test medium: {exc}") from None


def build(nodes: int, run: str, spacing_m: float = 50.0) -> Plan:
    """Make the medium netns and bridge and ``nodes`` node netns attached to it."""
    plan = make_plan(nodes, run, spacing_m)
    if plan.run == "default":
        raise MediumError("the test medium needs a run name of its own (not 'default')")
    teardown(plan)  # leftovers of a crashed run, by exact name
    make_medium(plan)
    _batch([f"netns add {n.netns}" for n in plan.nodes])
    lines = []
    for n in plan.nodes:
        lines.append(f"link add {n.medium_port} type veth peer name mesh0 address {n.mesh_mac} "
                     f"netns {n.netns}")
        lines.append(f"link set {n.medium_port} master {plan.medium_bridge} up")
    _batch(lines, plan.medium_netns)
    for n in plan.nodes:
        _batch(["link set lo up", f"addr add {n.mesh_addr} brd + dev mesh0",
                "link set mesh0 up"], n.netns)
    return plan


def teardown(plan: Plan) -> list[str]:
    """Delete the plan's netns (their veths go with them); the names that existed."""
    names = [n.netns for n in plan.nodes] + [plan.medium_netns]
    present = [name for name in names if netns_exists(name)]
    if present:
        _batch([f"netns delete {name}" for name in present], force=True)
    left = [name for name in present if netns_exists(name)]
    if left:
        raise MediumError(f"could not delete netns {', '.join(left)}")
    return present


def ports(plan: Plan) -> dict[int, str]:
    """node id -> medium port, what ``Medium`` needs."""
    return {n.node_id: n.medium_port for n in plan.nodes}
