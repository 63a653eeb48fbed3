"""Namespaces, bridges and veths of a run (``ip``), made and removed by name.

Nothing here touches a name outside the run's plan; removal is by exact name and
tolerates names that do not exist (a crashed run may have made only some).
"""

from __future__ import annotations

from collections.abc import Sequence

from meshsim.host import sh
from meshsim.host.errors import VmeshError
from meshsim.host.netns import netns_exists
from meshsim.vmesh.plan import NodePlan, Plan

__all__ = ["attach_node", "delete_link", "delete_netns", "link_exists", "make_medium",
           "make_mgmt_bridge", "make_netns", "netns_exists"]


def link_exists(name: str, netns: str | None = None) -> bool:
    cmd = ["ip"] + (["-n", netns] if netns else []) + ["link", "show", "dev", name]
    return sh.ok(cmd)


def _ip(*args: str, netns: str | None = None) -> None:
    sh.run(["ip"] + (["-n", netns] if netns else []) + list(args))


def make_netns(name: str) -> None:
    if not netns_exists(name):
        sh.run(["ip", "netns", "add", name])
    _ip("link", "set", "lo", "up", netns=name)


def make_medium(plan: Plan) -> None:
    """The radio medium: a learning bridge in its own namespace (no address)."""
    make_netns(plan.medium_netns)
    ns = plan.medium_netns
    if not link_exists(plan.medium_bridge, ns):
        # learning on: hub mode floods every unicast to all ports (LESSONS §1.8)
        _ip("link", "add", plan.medium_bridge, "type", "bridge", "stp_state", "0",
            "forward_delay", "0", netns=ns)
    _ip("link", "set", plan.medium_bridge, "up", netns=ns)
    # the host may have net.ipv6 defaults that make the bridge noisy; it needs none
    sh.run(["ip", "netns", "exec", ns, "sysctl", "-qw",
            f"net.ipv6.conf.{plan.medium_bridge}.disable_ipv6=1"], check=False)


def make_mgmt_bridge(plan: Plan) -> None:
    """The host's management bridge, carrying the host's address for SSH."""
    if not link_exists(plan.mgmt_bridge):
        _ip("link", "add", plan.mgmt_bridge, "type", "bridge", "stp_state", "0",
            "forward_delay", "0")
    addrs = sh.out(["ip", "-o", "-4", "addr", "show", "dev", plan.mgmt_bridge])
    if plan.host_mgmt_addr not in addrs:
        _ip("addr", "add", plan.host_mgmt_addr, "dev", plan.mgmt_bridge)
    _ip("link", "set", plan.mgmt_bridge, "up")


def attach_node(plan: Plan, node: NodePlan) -> None:
    """Node netns with ``mesh0`` on the medium and ``mgmt0`` on the management bridge."""
    ns = node.netns
    make_netns(ns)
    if not link_exists("mesh0", ns):
        _ip("link", "add", node.medium_port, "type", "veth", "peer", "name", "mesh0",
            "netns", ns, netns=plan.medium_netns)
    _ip("link", "set", node.medium_port, "master", plan.medium_bridge, "up",
        netns=plan.medium_netns)
    _ip("link", "set", "mesh0", "address", node.mesh_mac, netns=ns)
    _ip("addr", "replace", node.mesh_addr, "brd", "+", "dev", "mesh0", netns=ns)
    _ip("link", "set", "mesh0", "up", netns=ns)

    if not link_exists("mgmt0", ns):
        _ip("link", "add", node.mgmt_host_if, "type", "veth", "peer", "name", "mgmt0",
            "netns", ns)
    _ip("link", "set", node.mgmt_host_if, "master", plan.mgmt_bridge, "up")
    # isolated ports talk to the host only: no node-to-node path besides the medium
    sh.run(["bridge", "link", "set", "dev", node.mgmt_host_if, "isolated", "on"])
    _ip("addr", "replace", node.mgmt_addr, "dev", "mgmt0", netns=ns)
    _ip("link", "set", "mgmt0", "up", netns=ns)


def _batch(tool: str, lines: Sequence[str], netns: str | None = None) -> None:
    """Many ``ip``/``bridge`` commands in one process (``-batch``): 100 devices' links in
    about a second instead of a thousand processes."""
    if lines:
        cmd = [tool] + (["-n", netns] if netns else []) + ["-batch", "-"]
        sh.run(cmd, input_data=("\n".join(lines) + "\n").encode())


def attach_nodes(plan: Plan, nodes: Sequence[NodePlan]) -> None:
    """``attach_node`` for many nodes at once, whose names must not exist yet.

    The same layout in a few batches: the host side (netns, management veths), the
    medium side (mesh veths on the bridge), then each node's own addresses.
    """
    host = [f"netns add {n.netns}" for n in nodes]
    host += [f"link add {n.mgmt_host_if} type veth peer name mgmt0 netns {n.netns}"
             for n in nodes]
    host += [f"link set {n.mgmt_host_if} master {plan.mgmt_bridge} up" for n in nodes]
    _batch("ip", host)
    # isolated ports talk to the host only: no node-to-node path besides the medium
    _batch("bridge", [f"link set dev {n.mgmt_host_if} isolated on" for n in nodes])
    medium = [f"link add {n.medium_port} type veth peer name mesh0 netns {n.netns}"
              for n in nodes]
    medium += [f"link set {n.medium_port} master {plan.medium_bridge} up" for n in nodes]
    _batch("ip", medium, plan.medium_netns)
    for n in nodes:
        _batch("ip", ["link set lo up", f"link set mesh0 address {n.mesh_mac}",
                      f"addr add {n.mesh_addr} brd + dev mesh0", "link set mesh0 up",
                      f"addr add {n.mgmt_addr} dev mgmt0", "link set mgmt0 up"], n.netns)


def host_links() -> set[str]:
    """Names of the host's network interfaces (one ``ip`` call)."""
    out = sh.out(["ip", "-o", "link", "show"])
    return {line.split(":", 2)[1].strip().split("@")[0] for line in out.splitlines()
            if line.count(":") >= 2}


def delete_netns(name: str) -> bool:
    """Remove a namespace (its veths go with it). True if it existed."""
    if not netns_exists(name):
        return False
    sh.run(["ip", "netns", "delete", name])
    return True


def delete_link(name: str) -> bool:
    """Remove a host link; True if this call removed it.

    A veth whose peer's netns was just deleted disappears on its own a moment later,
    so a link that vanishes between the check and the delete is not an error.
    """
    if not link_exists(name):
        return False
    res = sh.run(["ip", "link", "delete", "dev", name], check=False)
    if res.returncode != 0 and link_exists(name):
        raise VmeshError(f"ip link delete dev {name}: exit {res.returncode}: "
                         f"{res.stderr.decode(errors='replace').strip()[-200:]}")
    return res.returncode == 0
