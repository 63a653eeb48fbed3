"""Group-tree networks over the harness: random static topologies and the invariants of a snapshot.

The invariants are those of the tree-group protocol after quiescence (Liu
2011, §3.1-3.5; docs/protocols/tg.md, "Invariants"): one leader per group at
level 0, parent pointers that reach it in ``level`` steps without a cycle,
paths that equal the ancestors, symmetric parent/child links, levels within
the bounds, curHL at the leader, summaries that cover every descendant, at
most one active gateway per pair of groups with both leaders agreeing, and a
connected group graph on a connected topology.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from harness import Net

from meshsub.core.cluster.ids import GroupId
from meshsub.core.cluster.machine import GroupTreeProtocol
from meshsub.core.params import ProtocolParams
from meshsub.core.tags import Mode, Scope, delivery_group, tag_event, tag_subscriptions

Edge = tuple[int, int]


def geometric(n: int, seed: int, radius: float = 0.3, connected: bool = True) -> list[Edge]:
    """A random geometric graph on ``n`` nodes in the unit square (ids 1..n), kept connected.

    With ``connected``, nodes are placed one at a time within ``radius`` of an
    earlier node, so the graph is connected whatever the seed.
    """
    rnd = random.Random(seed)
    pts: dict[int, tuple[float, float]] = {1: (rnd.random(), rnd.random())}
    for i in range(2, n + 1):
        while True:
            p = (rnd.random(), rnd.random())
            if not connected or any((p[0] - q[0]) ** 2 + (p[1] - q[1]) ** 2 < radius ** 2
                                    for q in pts.values()):
                pts[i] = p
                break
    return [(a, b) for a in pts for b in pts
            if a < b and (pts[a][0] - pts[b][0]) ** 2 + (pts[a][1] - pts[b][1]) ** 2
            < radius ** 2]


class Walkers:
    """Random-waypoint walkers in the unit square; links are the pairs within ``radius``."""

    def __init__(self, n: int, seed: int, radius: float, step: float = 0.01) -> None:
        self.rnd = random.Random(seed)
        self.radius = radius
        self.step = step
        self.pos = {i: (self.rnd.random(), self.rnd.random()) for i in range(1, n + 1)}
        self.goal = {i: (self.rnd.random(), self.rnd.random()) for i in self.pos}

    def edges(self) -> set[Edge]:
        p = self.pos
        r2 = self.radius ** 2
        return {(a, b) for a in p for b in p
                if a < b and (p[a][0] - p[b][0]) ** 2 + (p[a][1] - p[b][1]) ** 2 < r2}

    def move(self) -> None:
        for i, (x, y) in self.pos.items():
            gx, gy = self.goal[i]
            d = ((gx - x) ** 2 + (gy - y) ** 2) ** 0.5
            if d < self.step:
                self.goal[i] = (self.rnd.random(), self.rnd.random())
            else:
                self.pos[i] = (x + (gx - x) / d * self.step, y + (gy - y) / d * self.step)

    def walk(self, w: World, until: float, tick: float = 0.5) -> None:
        """Move every ``tick`` seconds of ``w``'s clock until ``until``, links following."""
        current = set(w.edges)
        while w.net.now < until:
            self.move()
            new = self.edges()
            for a, b in sorted(current - new):
                w.net.unlink(a, b)
            for a, b in sorted(new - current):
                w.net.link(a, b)
            current = new
            w.edges = sorted(current)
            w.run(w.net.now + tick)


def components(nodes: Iterable[int], edges: Iterable[Edge]) -> list[set[int]]:
    adj: dict[int, set[int]] = {n: set() for n in nodes}
    for a, b in edges:
        adj[a].add(b)
        adj[b].add(a)
    seen: set[int] = set()
    out = []
    for n in adj:
        if n in seen:
            continue
        comp = {n}
        stack = [n]
        while stack:
            for x in adj[stack.pop()]:
                if x not in comp:
                    comp.add(x)
                    stack.append(x)
        seen |= comp
        out.append(comp)
    return out


@dataclass
class World:
    net: Net
    edges: list[Edge]

    @classmethod
    def build(cls, protocol: type[GroupTreeProtocol[Any]], edges: list[Edge],
              params: ProtocolParams, seed: int = 1, delay: float = 0.002,
              extra: dict[int, dict[str, Any]] | None = None,
              ids: Iterable[int] = ()) -> World:
        ids = sorted({n for e in edges for n in e} | set(ids))
        net = Net({n: protocol(n, params=params, seed=seed, **(extra or {}).get(n, {}))
                   for n in ids}, delay=delay)
        for a, b in edges:
            net.link(a, b)
        return cls(net, list(edges))

    def node(self, n: int) -> GroupTreeProtocol[Any]:
        proto = self.net.nodes[n]
        assert isinstance(proto, GroupTreeProtocol)
        return proto

    def run(self, until: float) -> None:
        self.net.run(until=until)

    def cut(self, a: int, b: int) -> None:
        self.net.unlink(a, b)
        self.edges = [e for e in self.edges if set(e) != {a, b}]

    def remove(self, n: int) -> None:
        """Take node ``n`` off the air (every link of it goes down)."""
        for a, b in list(self.edges):
            if n in (a, b):
                self.cut(a, b)

    def alive(self) -> list[int]:
        ends = {x for e in self.edges for x in e}
        return sorted(ends)

    def groups(self) -> dict[GroupId, dict[int, dict[str, Any]]]:
        """gid -> node -> that node's membership state."""
        out: dict[GroupId, dict[int, dict[str, Any]]] = defaultdict(dict)
        for n in self.alive():
            for g in self.node(n).dump_state():
                out[g["gid"]][n] = g
        return dict(out)

    def group_of(self, n: int) -> set[GroupId]:
        return {g["gid"] for g in self.node(n).dump_state()}


def check_invariants(w: World, repairs: bool = False,
                     covers: Callable[[Any, Any], bool] | None = None) -> None:
    """Assert every snapshot invariant; ``repairs`` allows levels down to ``maximum_levels``."""
    groups = w.groups()
    alive = w.alive()
    p = w.node(alive[0]).params
    for n in alive:
        proto = w.node(n)
        assert proto.memberships, f"node {n} belongs to no group"
        assert not proto.join.active or proto.join.purpose is not None
        assert len(proto.memberships) <= p.max_groups
    for gid, members in groups.items():
        roots = [n for n, g in members.items() if g["level"] == 0]
        assert roots == [gid.leader], f"{gid}: level-0 members {roots}"
        leader = members[gid.leader]
        for n, g in members.items():
            assert not g["orphan"] and g["anchored"], f"{n} in {gid}: {g}"
            # the chain of parents reaches the leader in exactly `level` steps, no cycle
            chain = [n]
            while chain[-1] != gid.leader:
                parent = members[chain[-1]]["parent"]
                assert parent is not None and parent in members, f"{n}: broken chain {chain}"
                assert parent not in chain, f"{gid}: cycle {[*chain, parent]}"
                chain.append(parent)
            assert len(chain) - 1 == g["level"], f"{n} in {gid}: level {g['level']}, {chain}"
            assert tuple(reversed(chain[1:])) == g["path"], f"{n}: path {g['path']} vs {chain}"
            if g["parent"] is not None:
                assert n in members[g["parent"]]["children"], f"{n} not a child of its parent"
            for c in g["children"]:
                assert c in members and members[c]["parent"] == n, f"{c}: not {n}'s child"
            bound = p.maximum_levels if repairs or proto_secondary(w, n, gid) \
                else p.preferred_levels
            assert g["level"] <= bound, f"{n} in {gid}: level {g['level']} > {bound}"
        assert leader["cur_hl"] == max(g["level"] for g in members.values()), \
            f"{gid}: curHL {leader['cur_hl']}"
    check_summaries(w, covers)
    check_gateways(w)


def proto_secondary(w: World, n: int, gid: GroupId) -> bool:
    ms = w.node(n).memberships.get(gid)
    return ms is not None and ms.secondary


def check_summaries(w: World, covers: Callable[[Any, Any], bool] | None) -> None:
    """Each parent holds what each child would report now; the leader covers every member."""
    for n in w.alive():
        proto = w.node(n)
        for ms in proto.memberships.values():
            for child in ms.tree.children():
                cms = w.node(child.node).memberships.get(ms.gid)
                assert cms is not None
                assert child.summary is not None, f"{child.node} never reported to {n}"
                assert child.summary.payload == w.node(child.node).merged(cms), \
                    f"{n} holds a stale summary of {child.node}"
                assert child.depth == cms.tree.subtree_depth()
            if covers is not None and ms.is_leader:
                top = proto.merged(ms)
                for m_id in w.groups()[ms.gid]:
                    assert covers(top, w.node(m_id).local_summary()), \
                        f"leader of {ms.gid} does not cover {m_id}"


def check_gateways(w: World) -> None:
    """At most one active gateway per pair, and the two leaders agree on it."""
    active: dict[tuple[GroupId, GroupId], set[int]] = defaultdict(set)
    for n in w.alive():
        proto = w.node(n)
        for ms in proto.memberships.values():
            for there in proto.memberships:
                if there != ms.gid and proto.is_active_gateway(ms.gid, there):
                    active[(ms.gid, there)].add(n)
    for (here, there), nodes in active.items():
        assert len(nodes) == 1, f"{here}->{there}: active gateways {nodes}"
        assert active.get((there, here)) == nodes, f"leaders of {here}, {there} disagree"


def group_graph(w: World) -> tuple[set[GroupId], set[frozenset[GroupId]]]:
    """Groups and the pairs linked by an active gateway."""
    gids = set(w.groups())
    links: set[frozenset[GroupId]] = set()
    for n in w.alive():
        proto = w.node(n)
        for a in proto.memberships:
            for b in proto.memberships:
                if a != b and proto.is_active_gateway(a, b):
                    links.add(frozenset((a, b)))
    return gids, links


def group_graph_connected(w: World) -> bool:
    gids, links = group_graph(w)
    if not gids:
        return True
    start = next(iter(gids))
    seen = {start}
    stack = [start]
    while stack:
        g = stack.pop()
        for link in links:
            if g in link:
                for h in link:
                    if h not in seen:
                        seen.add(h)
                        stack.append(h)
    return seen == gids


TAGS = [f"t{i}" for i in range(10)]


def subscribe_randomly(w: World, rnd: random.Random) -> dict[tuple[int, str], Any]:
    subs = {}
    for n in w.alive():
        for j in range(rnd.randint(0, 2)):
            mode = rnd.choice([Mode.OR, Mode.AND, Mode.SINGLE])
            tags = rnd.sample(TAGS, 1 if mode is Mode.SINGLE else rnd.randint(1, 3))
            for sid, sub in tag_subscriptions(f"s{j}", "news", mode, tags):
                w.net.subscribe(n, sid, sub)
                subs[(n, sid)] = sub
    return subs


def check_exact_delivery(w: World, subs: dict[tuple[int, str], Any], rnd: random.Random,
                         events: int, scoped: bool) -> int:
    """Publish from random nodes; every matching member gets each event once, nobody else."""
    comp = {n: c for c in components(w.alive(), w.edges) for n in c}
    expected_pairs = 0
    for _ in range(events):
        publisher = rnd.choice(w.alive())
        scope = rnd.choice([Scope.GLOBAL, Scope.LOCAL]) if scoped else Scope.GLOBAL
        event = tag_event("news", rnd.sample(TAGS, rnd.randint(1, 3)), scope)
        home = w.group_of(publisher)
        eid = w.net.publish(publisher, event)
        w.run(w.net.now + 2.0)
        got = [(n, delivery_group(sid)) for n, sid in w.net.deliveries(eid)]
        want = {(n, delivery_group(sid)) for (n, sid), s in subs.items()
                if s.matches(event) and n in comp[publisher]
                and (scope is Scope.GLOBAL or w.group_of(n) & home)}
        assert len(got) == len(set(got)), f"duplicate deliveries of {event}"
        assert set(got) == want, f"{event} from {publisher}: {set(got) ^ want}"
        expected_pairs += len(want)
    return expected_pairs
