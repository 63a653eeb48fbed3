"""The plan of a run: every name and address it will use, computed before anything exists.

Pure and deterministic (same run name and size, same plan), so ``down`` and a
crashed-run clean-up can recompute the names, and tests need no root.

Layout (documented in docs/vmesh.md):
- the medium: bridge ``msub-br0`` inside its own netns ``msub-medium``, so the host is
  not on it; node *i* is attached by a veth whose medium-side port is ``n<i>`` and whose
  node side is ``mesh0`` (mesh subnet, one broadcast domain);
- management: a host bridge ``msub-mg0`` with the host's address, and a second veth
  per node (``mgmt0`` inside, ``msub-m<i>`` on the host) in an isolated port, so the
  host reaches every sshd but is no mesh node and nodes cannot talk over it;
- node *i* (1-based) runs in netns and container ``msub-n<i>``, hostname
  ``msub-node-<i>``, node id *i*, static position on a square grid.
A run other than ``default`` puts ``<run>`` into every name and gets its own subnets.
"""

from __future__ import annotations

import hashlib
import ipaddress
import math
import re
from dataclasses import dataclass

from meshsim.host.errors import VmeshError

DEFAULT_RUN = "default"
MAX_NODES = 1000
RUN_RE = re.compile(r"[a-z][a-z0-9]{0,4}")
MEDIUM_BRIDGE = "msub-br0"
DEFAULT_SPACING_M = 50.0


@dataclass(frozen=True)
class NodePlan:
    index: int                 # 1-based
    node_id: int
    netns: str
    container: str
    hostname: str
    medium_port: str           # veth end inside the medium netns (on the bridge)
    mgmt_host_if: str          # veth end on the host (on the management bridge)
    mesh_addr: str             # with prefix, e.g. 10.201.0.1/16
    mgmt_addr: str
    mesh_mac: str
    x: float
    y: float

    @property
    def mgmt_ip(self) -> str:
        return self.mgmt_addr.split("/")[0]

    @property
    def mesh_ip(self) -> str:
        return self.mesh_addr.split("/")[0]


@dataclass(frozen=True)
class Plan:
    run: str
    medium_netns: str
    medium_bridge: str
    mgmt_bridge: str
    mesh_net: str
    mgmt_net: str
    host_mgmt_addr: str        # the host's address on the management bridge
    nodes: tuple[NodePlan, ...]

    def node(self, ref: str) -> NodePlan:
        """A node by index (``3``), hostname, container or netns name."""
        for n in self.nodes:
            if ref in (str(n.index), n.hostname, n.container, n.netns):
                return n
        raise VmeshError(f"no node {ref!r} in run {self.run!r} "
                         f"(nodes 1..{len(self.nodes)} or their names)")


def validate_run(run: str) -> str:
    if run != DEFAULT_RUN and not RUN_RE.fullmatch(run):
        raise VmeshError(f"bad run name {run!r}: 1-5 of [a-z0-9], starting with a letter "
                         f"(or {DEFAULT_RUN!r})")
    return run


def _subnets(run: str) -> tuple[ipaddress.IPv4Network, ipaddress.IPv4Network]:
    """Mesh and management /16s: 10.201/10.202 for the default run, hashed for others."""
    if run == DEFAULT_RUN:
        base = 200
    else:  # 10.121/16 .. 10.200/16, never the default run's
        base = 120 + 2 * (int.from_bytes(hashlib.sha256(run.encode()).digest()[:4], "big") % 40)
    return (ipaddress.IPv4Network(f"10.{base + 1}.0.0/16"),
            ipaddress.IPv4Network(f"10.{base + 2}.0.0/16"))


def make_plan(nodes: int, run: str = DEFAULT_RUN,
              spacing_m: float = DEFAULT_SPACING_M) -> Plan:
    validate_run(run)
    if not 1 <= nodes <= MAX_NODES:
        raise VmeshError(f"--nodes must be 1..{MAX_NODES}, got {nodes}")
    if not (math.isfinite(spacing_m) and spacing_m > 0):
        raise VmeshError(f"spacing must be a positive number of metres, got {spacing_m}")
    tag = "" if run == DEFAULT_RUN else f"{run}-"
    short = "" if run == DEFAULT_RUN else run
    mesh, mgmt = _subnets(run)
    run_byte = int(mesh.network_address.packed[1])
    cols = math.ceil(math.sqrt(nodes))
    plans = []
    for i in range(1, nodes + 1):
        hi, lo = divmod(i, 256)
        plans.append(NodePlan(
            index=i, node_id=i,
            netns=f"msub-{tag}n{i}", container=f"msub-{tag}n{i}",
            hostname=f"msub-{tag}node-{i}",
            medium_port=f"n{i}", mgmt_host_if=f"msub{short}-m{i}",
            mesh_addr=f"{mesh.network_address + i}/{mesh.prefixlen}",
            mgmt_addr=f"{mgmt.network_address + i}/{mgmt.prefixlen}",
            mesh_mac=f"02:4d:53:{run_byte:02x}:{hi:02x}:{lo:02x}",
            x=float((i - 1) % cols) * spacing_m, y=float((i - 1) // cols) * spacing_m))
    return Plan(
        run=run, medium_netns=f"msub-{tag}medium", medium_bridge=MEDIUM_BRIDGE,
        mgmt_bridge=f"msub-{tag}mg0",
        mesh_net=str(mesh), mgmt_net=str(mgmt),
        host_mgmt_addr=f"{mgmt.broadcast_address - 1}/{mgmt.prefixlen}",
        nodes=tuple(plans))
