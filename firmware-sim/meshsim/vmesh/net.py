"""Namespaces, bridges and veths of a run (``ip``), made and removed by name.

Nothing here touches a name outside the run's plan; removal is by exact name and
tolerates names that do not exist (a crashed run may have made only some).
"""

from __future__ import annotations

from meshsim.host import sh
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


def delete_netns(name: str) -> bool:
    """Remove a namespace (its veths go with it). True if it existed."""
    if not netns_exists(name):
        return False
    sh.run(["ip", "netns", "delete", name])
    return True


def delete_link(name: str) -> bool:
    if not link_exists(name):
        return False
    sh.run(["ip", "link", "delete", "dev", name])
    return True
