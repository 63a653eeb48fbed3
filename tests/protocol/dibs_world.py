"""DIBS and DR networks on the unit-test harness: build, converge, read the trees.

A world is a ``Net`` of DIBS nodes (the ``reference`` role on chosen ids)
linked as a grid or a random unit-disk graph, plus the checks the protocol
tests share: the tree invariants (docs/protocols/dibs.md, "Invariants") and
BFS distances.
"""

from __future__ import annotations

import itertools
import random
from collections import deque
from typing import Any

from harness import Net

from meshsub.core.api import NodeId
from meshsub.protocols.dibs import DIBS, DIBSParams
from meshsub.protocols.dibs import va as v

PARAMS = DIBSParams(k=16, hb_period=1.0, lease_s=60.0)


def dibs_net(ids: list[NodeId], refs: set[NodeId], params: DIBSParams = PARAMS,
             **kwargs: Any) -> Net:
    nodes = {n: DIBS(n, params=params, seed=7,
                     capabilities=("reference",) if n in refs else ()) for n in ids}
    return Net(nodes, delay=0.002, **kwargs)  # type: ignore[arg-type]


def unit_disk(net: Net, n: int, side: float, radius: float, seed: int) -> dict[NodeId, tuple[
        float, float]]:
    """Link ``n`` random points (ids 1..n) in a square; returns the positions."""
    rng = random.Random(seed)
    pos = {i: (rng.uniform(0, side), rng.uniform(0, side)) for i in range(1, n + 1)}
    for a in pos:
        for b in pos:
            if a < b and (pos[a][0] - pos[b][0]) ** 2 + (pos[a][1] - pos[b][1]) ** 2 <= radius ** 2:
                net.link(a, b)
    return pos


def start(net: Net, until: float) -> None:
    for node in sorted(net.nodes):
        net.feed(node, _tick(net))
    net.run(until=until)


def _tick(net: Net) -> Any:
    from meshsub.core.api import PositionChanged
    return PositionChanged(net.now, None)


def bfs(net: Net, src: NodeId, alive: set[NodeId] | None = None) -> dict[NodeId, int]:
    seen = {src: 0}
    todo = deque([src])
    while todo:
        a = todo.popleft()
        for b in net.neighbors(a):
            if b not in seen and (alive is None or b in alive):
                seen[b] = seen[a] + 1
                todo.append(b)
    return seen


def dibs(net: Net, node: NodeId) -> DIBS:
    proto = net.nodes[node]
    assert isinstance(proto, DIBS)
    return proto


def check_trees(net: Net, alive: set[NodeId]) -> None:
    """T1-T4 and T8: every node attached, VAs by the prefix rule, unique, zones partition."""
    by_cluster: dict[NodeId, list[DIBS]] = {}
    for n in sorted(alive):
        d = dibs(net, n)
        assert d.va is not None and d.cl is not None and not d.detached, (n, d.status())
        by_cluster.setdefault(d.cl, []).append(d)
        if d.is_ref:
            assert d.va == "" and d.cl == n
            continue
        assert d.pred is not None
        p = dibs(net, d.pred)
        assert p.cl == d.cl and d.va == v.child_va(p.va or "", d.slot), (n, d.va, p.va)
        assert p.succ.get(n) == d.slot, (n, d.pred, p.succ)
    k = net.nodes[min(alive)].params.k  # type: ignore[attr-defined]
    for members in by_cluster.values():
        vas = [d.va for d in members]
        assert len(set(vas)) == len(vas)
        zones = sorted(z for d in members for z in d.kzone())
        assert zones[0][0] == 0 and zones[-1][1] == (1 << k) - 1
        assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(zones))
