"""The group-tree machine of Liu (2011, §3.1-3.5), as a base for protocols that route on it.

Nodes form *groups*: trees of bounded depth under a leader, built by asking
one-hop neighbours (no coordinates). A protocol subclasses
``GroupTreeProtocol``, says what a subtree *summary* is (the tree-group
protocol: a Bloom filter of subscriptions; its single-tree baseline: nothing)
and routes its own messages over ``memberships``. The machine does the rest:

- **join** (§3.1, §3.3): query the neighbours, collect replies for a random
  window, pre-match (the reply whose summary overlaps ours most), select,
  confirm; the parent admits only below ``preferred_levels`` and never a node
  already in its group (Algorithm 1);
- **leader self-election** (§3.1): after unanswered queries and a random
  back-off, a capable node founds a group and announces it;
- **summaries up** (§3.2): each node sends its parent a report: its merged
  summary, the deepest level below it (so the leader knows its curHL) and
  the gateway records of its subtree (the piggybacked gateway flag);
- **extra groups and gateways** (§3.1): a node that hears a group it is not
  linked to joins it too; the leaders keep one *active* gateway per pair of
  groups and tell the others to stand by, which then leave their extra group;
- **merge** (§3.1, Algorithm 1 line 13): the active gateway, told both
  curHLs, merges the groups when ``a + b + c <= preferred_levels`` by
  re-rooting the smaller group at itself, under locks at both leaders;
- **heartbeats and repair** (§3.5): a periodic HELLO; a lost parent makes
  the node an orphan that re-attaches to a non-descendant (the path check),
  only to anchored nodes and, within its own group, only to fresher ones
  (the leader's heartbeat counter), else leads its fragment or dissolves it;
- soft state everywhere: children and parents expire, reports are refreshed.

Transient loops (concurrent re-rootings, stale paths) are broken where they
show: a node that finds itself on its own path, or below ``maximum_levels``,
detaches and repairs. docs/protocols/tg.md lists every rule with its
section and every decision the thesis leaves open.
"""

from __future__ import annotations

from typing import TypeVar

from meshsub.core import bodies
from meshsub.core.api import Action, Input, Message, NeighborInfo, NodeId
from meshsub.core.cluster import messages as m
from meshsub.core.cluster.base import (
    REPLY_PREFIX,
    T_DISCOVER,
    T_JOIN,
    T_REFRESH,
    T_REPORT,
    T_START,
    T_TICK,
)
from meshsub.core.cluster.ids import Purpose
from meshsub.core.cluster.join import Phase
from meshsub.core.cluster.merging import Merging
from meshsub.core.content import Subscription

P = TypeVar("P")


class GroupTreeProtocol(Merging[P]):
    """Base of protocols routing over depth-bounded group trees; see the module docstring."""

    def handle(self, inp: Input) -> list[Action]:
        if not self._started:
            self._started = True
            self.now = inp.now
            self.set_timer(T_START, self.rng.uniform(0.0, self.params.T_START_JITTER))
            self.set_timer(T_TICK, self._hello_delay())
            self.set_timer(T_REFRESH, self.params.T_FILTER_REFRESH)
        return super().handle(inp)

    def _hello_delay(self) -> float:
        return self.beacon.interval(self.params.T_HELLO, self.rng)

    def on_frame(self, sender: NodeId, message: Message) -> None:
        if sender in self.neighbors:
            self._last_frame[sender] = self.now
        if message.type >= m.FIRST_OWN_TYPE:
            self.on_own_frame(sender, message)
            self._settle()
            return
        decode = m.DECODERS.get(message.type)
        if decode is None:
            self.drop("unknown_type", message, peer=sender)
            return
        try:
            body = bodies.shared_decode(decode, message.body)
        except bodies.BodyError:
            self.drop("malformed", message, peer=sender)
            return
        handler = getattr(self, f"_on_{type(body).__name__}")
        handler(sender, message, body)
        self._settle()

    def on_neighbor_up(self, info: NeighborInfo) -> None:
        self._last_frame.setdefault(info.node, self.now)

    def on_neighbor_down(self, node: NodeId) -> None:
        self._last_frame.pop(node, None)
        self._heard.forget(node)
        for ms in list(self.memberships.values()):
            if not self._live(ms):
                continue
            if ms.parent == node and not ms.orphan:
                self._parent_lost(ms, "neighbor_down")
            elif node in ms.tree:
                self._child_lost(ms, node, "neighbor_down")
        j = self.join
        j.candidates = [c for c in j.candidates if c.sender != node]
        if j.phase is Phase.SELECT and j.selected is not None and j.selected.sender == node:
            self._select_next()
        self._settle()

    def on_reliable_failed(self, node: NodeId, message: Message) -> None:
        if message.type == m.JOIN_SELECT:
            j = self.join
            if j.phase is Phase.SELECT and j.selected is not None and j.selected.sender == node:
                self._select_next()
            return
        if message.type in (m.MERGE_REQUEST, m.MERGE_REPLY):
            return  # the gateway's pending merge times out
        for ms in list(self.memberships.values()):
            if not self._live(ms):
                continue
            if ms.parent == node and not ms.orphan:
                self._parent_lost(ms, "parent_unreachable")
            elif node in ms.tree:
                self._child_lost(ms, node, "child_unreachable")
        self._settle()

    def on_subscribe(self, sub_id: str, subscription: Subscription) -> None:
        self.summary_changed()
        self._settle()

    def on_unsubscribe(self, sub_id: str, subscription: Subscription) -> None:
        self.summary_changed()
        self._settle()

    def on_timer(self, name: str) -> None:
        if name == T_START:
            if not self.memberships and not self.join.active:
                self._start_join(Purpose.INITIAL)
        elif name == T_TICK:
            self._tick()
            self.set_timer(T_TICK, self._hello_delay())
        elif name == T_JOIN:
            self._join_timer()
        elif name == T_REPORT:
            self._flush_reports()
        elif name == T_REFRESH:
            for ms in list(self.memberships.values()):
                if ms.parent is not None and not ms.orphan:
                    self._send_report(ms, refresh=True)
            self.set_timer(T_REFRESH, self.params.T_FILTER_REFRESH)
        elif name == T_DISCOVER:
            self._discover()
        elif name.startswith(REPLY_PREFIX):
            pending = self._replies.pop(name, None)
            if pending is not None:
                self.send(*pending)
        else:
            self.on_own_timer(name)
        self._settle()

    def _tick(self) -> None:
        p = self.params
        now = self.now
        for ms in list(self.memberships.values()):
            if not self._live(ms):
                continue
            if ms.is_leader:
                ms.root_seq = (ms.root_seq + 1) & m.U32
            parent = ms.parent
            if parent is not None and not ms.orphan \
                    and now - self._last_frame.get(parent, ms.joined_at) > p.T_DEAD:
                self._parent_lost(ms, "parent_silent")
                continue
            for child in ms.tree.expire(now, p.T_DEAD):
                self._child_lost(ms, child.node, "child_silent", removed=True)
            if ms.is_leader and self._live(ms):
                self._leader_update(ms)
            if ms.lock_small is not None and ms.lock_small[1] <= now:
                ms.lock_small = None
        self._heard.expire(now, p.T_DEAD)  # too old for _discover: of no use, only room taken
        if self.memberships:
            self.broadcast(self._ctl(m.HELLO, self._hello().encode()))
        if self._merge is not None and self._merge.expires <= now:
            self._merge = None
        self._consider_merge()
        for gid in [g for g, until in self._covered.items() if until <= now]:
            del self._covered[gid]

    def _hello(self) -> m.Hello:
        groups = []
        for ms in list(self.memberships.values())[:m.MAX_GROUPS]:
            groups.append(m.HelloGroup(ms.gid, ms.level, ms.parent, ms.anchored,
                                       self._open(ms, Purpose.ADDITIONAL), ms.root_seq,
                                       min(ms.cur_hl, m.MAX_PATH),
                                       tuple(sorted(ms.linked))[:m.MAX_LINKED],
                                       tuple(sorted(ms.tree))[:m.MAX_CHILDREN]))
        return m.Hello(self.params.leader_capable, tuple(groups))

    def _on_Hello(self, sender: NodeId, message: Message, hello: m.Hello) -> None:
        for evicted in self._heard.hear(sender, hello, self.now).evicted:
            self.drop("heard_table_full", peer=evicted)
        by_gid = {g.gid: g for g in hello.groups}
        for ms in list(self.memberships.values()):
            if ms.parent != sender or ms.orphan:
                continue
            hg = by_gid.get(ms.gid)
            if hg is None or self.node not in hg.children \
                    or (hg.anchored and hg.level + 1 != ms.level):
                ms.hello_misses += 1
                if ms.hello_misses >= 2:
                    self._parent_lost(ms, "parent_disowns")
                continue
            ms.hello_misses = 0
            if hg.root_seq > ms.root_seq:
                ms.root_seq = hg.root_seq
            ms.cur_hl = hg.cur_hl
            ms.linked = frozenset(hg.linked)
            if not hg.anchored and ms.anchored:
                self._unanchor(ms)
        for ms in list(self.memberships.values()):
            if sender not in ms.tree or not self._live(ms):
                continue
            hg = by_gid.get(ms.gid)
            if hg is not None and hg.parent == self.node:
                ms.child_misses.pop(sender, None)
                ms.tree.heard(sender, self.now)
                continue
            ms.child_misses[sender] = ms.child_misses.get(sender, 0) + 1
            if ms.child_misses[sender] >= 2:
                self._child_lost(ms, sender, "child_disowns")
        self._hello_discovery(hello)

    def _hello_discovery(self, hello: m.Hello) -> None:
        """React to a neighbour's groups: an initial joiner re-queries, a member may join more."""
        p = self.params
        offers = [g for g in hello.groups if g.open]
        if not offers:
            return
        j = self.join
        if j.purpose is Purpose.INITIAL and j.phase in (Phase.BACKOFF, Phase.WAIT):
            self._start_join(Purpose.INITIAL)
            return
        if j.active or not self.memberships or len(self.memberships) >= p.max_groups:
            return
        if any(self._worth_joining(g.gid) for g in offers):
            self.set_timer(T_DISCOVER, self.rng.uniform(0.0, p.T_DISCOVER))
