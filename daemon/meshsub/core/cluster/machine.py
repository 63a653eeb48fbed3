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

import hashlib
import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from meshsub.core import bodies
from meshsub.core.api import Action, Input, Message, MsgKind, NeighborInfo, NodeId
from meshsub.core.cluster import messages as m
from meshsub.core.cluster.gateways import candidates as gateway_candidates
from meshsub.core.cluster.gateways import merge_plan
from meshsub.core.cluster.ids import (
    DetachKind,
    GatewayRecord,
    GroupId,
    MergeRole,
    Purpose,
    Status,
)
from meshsub.core.cluster.join import Candidate, JoinState, Phase, rank
from meshsub.core.cluster.membership import Membership, Summary
from meshsub.core.cluster.params import ClusterParams, OrphanPolicy
from meshsub.core.content import Subscription
from meshsub.core.params import ProtocolParams
from meshsub.core.protocol import Protocol
from meshsub.core.tree import TreeError, TreeNode

P = TypeVar("P")

T_START = "c:start"
T_TICK = "c:tick"
T_JOIN = "c:join"
T_REPORT = "c:report"
T_REFRESH = "c:refresh"
T_DISCOVER = "c:discover"
REPLY_PREFIX = "c:reply:"
MAX_HEARD = 512
"""Neighbours whose last HELLO a node remembers (a bound against floods of fake ids)."""
MAX_PENDING_REPLIES = 64
STATUS_RESEND = 2.0
"""Heartbeats after which a leader repeats a gateway status the gateway has not acted on."""


@dataclass(slots=True)
class _PendingMerge:
    rid: int
    small: GroupId
    big: GroupId
    a: int
    b: int
    c: int
    expires: float
    granted: set[MergeRole] = field(default_factory=set)


class GroupTreeProtocol(Protocol, Generic[P]):
    """Base of protocols routing over depth-bounded group trees; see the module docstring."""

    Params: ClassVar[type[ProtocolParams]] = ClusterParams
    message_kinds: ClassVar[dict[int, MsgKind]] = m.KINDS
    params: ClusterParams

    def __init__(self, node: NodeId, **kwargs: Any) -> None:
        super().__init__(node, **kwargs)
        self.memberships: dict[GroupId, Membership[P]] = {}
        self.join = JoinState()
        self.stats: dict[str, int] = {"joins": 0, "leaders": 0, "repairs": 0, "promotions": 0,
                                      "dissolves": 0, "merges": 0, "loops_broken": 0,
                                      "standby_leaves": 0}
        self._started = False
        self._founded = 0
        self._topo = 0
        self._heard: OrderedDict[NodeId, tuple[float, m.Hello]] = OrderedDict()
        self._last_frame: dict[NodeId, float] = {}
        self._replies: dict[str, tuple[NodeId, Message]] = {}
        self._repairs: list[GroupId] = []
        self._merge: _PendingMerge | None = None
        self._merge_retry_at = -math.inf
        self._covered: dict[GroupId, float] = {}
        """Groups a standby drop told us are reached through another gateway, until when."""
        self._edges: frozenset[NodeId] = frozenset()
        self._aliases: OrderedDict[GroupId, GroupId] = OrderedDict()
        """Recent group ids this node left for another (a merge, a repair): late messages
        naming the old id still find the membership."""

    # ================================================================ summary hooks

    def local_summary(self) -> P:
        """The summary of this node's own subscriptions."""
        raise NotImplementedError

    def combine(self, a: P, b: P) -> P:
        """The summary of the union (the thesis's bitwise OR)."""
        raise NotImplementedError

    def encode_summary(self, summary: P) -> bytes:
        raise NotImplementedError

    def decode_summary(self, data: bytes) -> P:
        """Raise ``BodyError`` for a malformed or incompatible summary."""
        raise NotImplementedError

    def summary_empty(self, summary: P) -> bool:
        raise NotImplementedError

    def prematch_score(self, own: P, offered: P) -> int:
        """How much ``offered`` (a candidate parent's subtree) shares with ``own`` (§3.3)."""
        return 0

    def on_own_frame(self, sender: NodeId, message: Message) -> None:
        """A message of the subclass (type >= ``FIRST_OWN_TYPE``) arrived."""
        self.drop("unknown_type", message, peer=sender)

    def on_tree_edge(self, node: NodeId, up: bool) -> None:
        """``node`` became (``up``) or stopped being a parent or child in some group."""

    def on_settled(self) -> None:
        """After every input: flush what the subclass derives from the trees."""

    # ================================================================ views

    def merged(self, ms: Membership[P]) -> P:
        """This node's subtree summary in ``ms``: own summary OR the children's (§3.2)."""
        out = self.local_summary()
        for c in ms.tree.children():
            if c.summary is not None:
                out = self.combine(out, c.summary.payload)
        return out

    @property
    def edges(self) -> frozenset[NodeId]:
        """The tree neighbours as of the end of the last input (``on_tree_edge`` follows it)."""
        return self._edges

    def tree_neighbors(self) -> frozenset[NodeId]:
        """Every parent and child this node has, in all its groups."""
        out: set[NodeId] = set()
        for ms in list(self.memberships.values()):
            if ms.tree.parent is not None:
                out.add(ms.tree.parent)
            out.update(ms.tree)
        return frozenset(out)

    def own_records(self, ms: Membership[P]) -> list[GatewayRecord]:
        """This node's gateway records for ``ms``: one per other group it belongs to."""
        out = []
        for other in list(self.memberships.values()):
            if other is ms or other.orphan or ms.orphan:
                continue
            status = ms.gw_status.get(other.gid)
            out.append(GatewayRecord(self.node, ms.gid, ms.level, other.gid, other.level,
                                     status is not None and status[0] is Status.ACTIVE))
        return out

    def subtree_records(self, ms: Membership[P]) -> list[GatewayRecord]:
        records = set(self.own_records(ms))
        for c in ms.tree.children():
            if c.summary is not None:
                records.update(r for r in c.summary.gw_records if r.here == ms.gid)
        return sorted(records, key=GatewayRecord.rank)[:m.MAX_GW_RECORDS]

    def is_active_gateway(self, here: GroupId, there: GroupId) -> bool:
        ms = self.memberships.get(here)
        if ms is None or there not in self.memberships:
            return False
        status = ms.gw_status.get(there)
        return status is not None and status[0] is Status.ACTIVE

    def dump_state(self) -> list[dict[str, Any]]:
        """Every membership as plain values (invariant checks, ``meshsubctl status``)."""
        out = []
        for ms in list(self.memberships.values()):
            out.append({
                "gid": ms.gid, "leader": ms.gid.leader, "level": ms.level,
                "parent": ms.parent, "path": ms.tree.path, "children": sorted(ms.tree),
                "anchored": ms.anchored, "orphan": ms.orphan, "cur_hl": ms.cur_hl,
                "root_seq": ms.root_seq, "linked": sorted(ms.linked),
                "depth": ms.tree.subtree_depth(),
                "gw_status": {g: s.name for g, (s, _) in ms.gw_status.items()},
            })
        return out

    def status(self) -> dict[str, Any]:
        groups = [{k: (str(v) if isinstance(v, GroupId) else v) for k, v in g.items()
                   if k in ("gid", "level", "parent", "anchored", "orphan", "cur_hl")}
                  | {"children": len(g["children"])} for g in self.dump_state()]
        return {**super().status(), "groups": groups, "join": self.join.phase.value,
                "stats": dict(self.stats)}

    # ================================================================ driver

    def handle(self, inp: Input) -> list[Action]:
        if not self._started:
            self._started = True
            self.now = inp.now
            self.set_timer(T_START, self.rng.uniform(0.0, self.params.T_START_JITTER))
            self.set_timer(T_TICK, self._hello_delay())
            self.set_timer(T_REFRESH, self.params.T_FILTER_REFRESH)
        return super().handle(inp)

    def _hello_delay(self) -> float:
        return self.params.T_HELLO * self.rng.uniform(0.9, 1.1)

    def on_frame(self, sender: NodeId, message: Message) -> None:
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
            body = decode(message.body)
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
        self._heard.pop(node, None)
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

    def summary_changed(self) -> None:
        """The local summary changed: report it in every group (coalesced)."""
        for ms in list(self.memberships.values()):
            self._report_due(ms)

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

    def on_own_timer(self, name: str) -> None:
        """A timer of the subclass fired (names not starting with ``c:``)."""

    # ================================================================ sending

    def _find(self, gid: GroupId) -> Membership[P] | None:
        """The membership of ``gid``, following recent renamings."""
        for _ in range(len(self._aliases) + 1):
            ms = self.memberships.get(gid)
            if ms is not None or gid not in self._aliases:
                return ms
            gid = self._aliases[gid]
        return None

    def _live(self, ms: Membership[P]) -> bool:
        """``ms`` is still one of this node's memberships (handlers may drop one mid-loop)."""
        return self.memberships.get(ms.gid) is ms

    def _ctl(self, kind: int, body: Any) -> Message:
        return Message(kind, self.new_message_id(), body, ttl=1)

    def _send(self, node: NodeId, kind: int, body: Any, reliable: bool = True) -> None:
        message = self._ctl(kind, body)
        if reliable:
            self.send_reliable(node, message)
        else:
            self.send(node, message)

    def _emit_group(self, action: str, ms: Membership[P]) -> None:
        self.emit("cluster", action=action, gid=str(ms.gid), level=ms.level,
                  parent=ms.parent, groups=",".join(str(g) for g in sorted(self.memberships)))

    def _settle(self) -> None:
        self._sync_edges()
        self.on_settled()

    def _sync_edges(self) -> None:
        edges = self.tree_neighbors()
        if edges == self._edges:
            return
        old, self._edges = self._edges, edges
        for n in sorted(old - edges):
            self.on_tree_edge(n, False)
        for n in sorted(edges - old):
            self.on_tree_edge(n, True)

    # ================================================================ heartbeat

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
                self._child_gone(ms, child.node, "child_silent")
            if ms.is_leader and self._live(ms):
                self._leader_update(ms)
            if ms.lock_small is not None and ms.lock_small[1] <= now:
                ms.lock_small = None
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

    def _open(self, ms: Membership[P], purpose: Purpose) -> bool:
        """Would this node take a new child in ``ms`` (Algorithm 1's admission, spec 5.2)?

        A gateway's extra group is a leaf link: a standby gateway gives it up,
        which must not dissolve anyone below it.
        """
        p = self.params
        if ms.orphan or not ms.anchored or ms.secondary:
            return False
        if purpose is Purpose.REPAIR:
            return len(ms.tree) < p.hard_children
        return ms.level < p.preferred_levels and len(ms.tree) < p.max_children

    def _on_Hello(self, sender: NodeId, message: Message, hello: m.Hello) -> None:
        self._heard[sender] = (self.now, hello)
        self._heard.move_to_end(sender)
        while len(self._heard) > MAX_HEARD:
            self._heard.popitem(last=False)
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
                self._child_gone(ms, sender, "child_disowns")
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

    def _worth_joining(self, gid: GroupId) -> bool:
        if gid in self.memberships or gid in self._covered:
            return False
        return not any(gid in ms.linked for ms in list(self.memberships.values()))

    def _discover(self) -> None:
        if self.join.active or len(self.memberships) >= self.params.max_groups:
            return
        if any(ms.orphan for ms in list(self.memberships.values())):
            return
        horizon = self.now - self.params.T_DEAD
        for when, hello in self._heard.values():
            if when >= horizon and any(g.open and self._worth_joining(g.gid)
                                       for g in hello.groups):
                self._start_join(Purpose.ADDITIONAL)
                return

    # ================================================================ join: joiner side

    def _memberships_wire(self, exclude: GroupId | None = None) -> tuple[tuple[GroupId, int], ...]:
        return tuple((ms.gid, ms.level) for ms in list(self.memberships.values())
                     if ms.gid != exclude)[:m.MAX_GROUPS]

    def _start_join(self, purpose: Purpose, ms: Membership[P] | None = None) -> None:
        j = self.join
        j.reset()
        j.purpose = purpose
        j.seek_more = False
        if purpose is Purpose.REPAIR:
            assert ms is not None
            j.repair_gid = ms.gid
            j.subtree_height = min(ms.repair_height, m.MAX_PATH)
            j.last_root_seq = ms.last_root_seq
        self._query()

    def _query(self) -> None:
        j = self.join
        assert j.purpose is not None
        j.nonce = self.rng.getrandbits(32)
        j.phase = Phase.QUERY
        j.rounds += 1
        q = m.JoinQuery(j.purpose, j.nonce, self._memberships_wire(j.repair_gid), j.repair_gid,
                        j.subtree_height, j.last_root_seq)
        self.broadcast(self._ctl(m.JOIN_QUERY, q.encode()))
        self.set_timer(T_JOIN, self.params.T_QUERY)

    def _join_timer(self) -> None:
        p = self.params
        j = self.join
        if j.phase is Phase.QUERY:
            if j.purpose is Purpose.INITIAL:
                if j.rounds < p.N_QUERY:
                    self._query()
                else:
                    j.phase = Phase.BACKOFF
                    self.set_timer(T_JOIN, self.rng.uniform(0.0, p.T_LEADER_BACKOFF))
            elif j.purpose is Purpose.REPAIR:
                if j.rounds < p.repair_rounds:
                    self._query()
                else:
                    self._repair_failed()
            else:
                self._join_done()
        elif j.phase is Phase.BACKOFF:
            self._query()
            j.phase = Phase.FINAL
        elif j.phase is Phase.FINAL:
            if p.leader_capable:
                self._found_group()
                self._join_done()
            else:
                j.phase = Phase.WAIT
                self.set_timer(T_JOIN, p.T_RETRY)
        elif j.phase is Phase.WAIT:
            self._start_join(Purpose.INITIAL)
        elif j.phase in (Phase.COLLECT, Phase.SELECT):
            self._select_next()

    def _candidate_ok(self, c: Candidate) -> bool:
        p = self.params
        j = self.join
        if c.sender == self.node or self.node in c.path:
            return False
        if j.purpose is Purpose.REPAIR:
            ms = self.memberships.get(j.repair_gid) if j.repair_gid is not None else None
            if ms is None or ms.tree.would_loop(c.sender, c.path[:-1]):
                return False
            if c.level + 1 + j.subtree_height > p.maximum_levels:
                return False
            if c.gid == j.repair_gid:
                return c.root_seq > j.last_root_seq
            return c.gid not in self.memberships
        if j.purpose is Purpose.ADDITIONAL:
            return c.level < p.preferred_levels and self._worth_joining(c.gid)
        return c.level < p.preferred_levels and c.gid not in self.memberships

    def _add_candidate(self, c: Candidate) -> None:
        j = self.join
        if not self._candidate_ok(c):
            return
        try:
            self.decode_summary(c.summary)
        except bodies.BodyError:
            self.drop("malformed_summary", peer=c.sender)
            return
        j.candidates = [x for x in j.candidates if (x.sender, x.gid) != (c.sender, c.gid)]
        j.candidates.append(c)
        if j.phase in (Phase.QUERY, Phase.BACKOFF, Phase.FINAL, Phase.WAIT):
            j.phase = Phase.COLLECT
            self.set_timer(T_JOIN, self.rng.uniform(self.params.W_MIN, self.params.W_MAX))

    def _on_JoinReply(self, sender: NodeId, message: Message, r: m.JoinReply) -> None:
        j = self.join
        if not j.active or r.nonce != j.nonce or r.path[-1] != sender:
            return
        self._add_candidate(Candidate(sender, r.gid, r.path, r.summary, r.root_seq, r.cur_hl))

    def _on_LeaderAnnounce(self, sender: NodeId, message: Message, a: m.LeaderAnnounce) -> None:
        j = self.join
        if a.gid.leader != sender:
            self.drop("malformed", message, peer=sender)
            return
        if j.purpose in (Purpose.INITIAL, Purpose.ADDITIONAL) and j.phase is not Phase.SELECT:
            if j.phase is Phase.WAIT:
                j.phase = Phase.QUERY
            self._add_candidate(Candidate(sender, a.gid, (sender,), a.summary, 0, 0))

    def _own_summary_for_join(self) -> P:
        j = self.join
        if j.purpose is Purpose.REPAIR and j.repair_gid in self.memberships:
            return self.merged(self.memberships[j.repair_gid])
        return self.local_summary()

    def _select_next(self) -> None:
        j = self.join
        if j.selected is not None:
            j.candidates = [c for c in j.candidates if c is not j.selected]
            j.selected = None
        valid = [c for c in j.candidates if self._candidate_ok(c)]
        if not valid:
            if j.purpose is Purpose.INITIAL:
                self._start_join(Purpose.INITIAL)
            elif j.purpose is Purpose.REPAIR and j.rounds < self.params.repair_rounds:
                self._query()
            elif j.purpose is Purpose.REPAIR:
                self._repair_failed()
            else:
                self._join_done()
            return
        own = self._own_summary_for_join()

        def score(c: Candidate) -> int:
            return self.prematch_score(own, self.decode_summary(c.summary))

        ranked = rank(valid, score, lambda n: self.neighbors[n].link_quality
                      if n in self.neighbors else 0.0)
        best = ranked[0]
        if j.purpose is not Purpose.REPAIR and best.score == 0 \
                and not self.summary_empty(own):
            j.seek_more = True
        j.candidates = ranked
        j.selected = best
        j.phase = Phase.SELECT
        assert j.purpose is not None
        sel = m.JoinSelect(j.nonce, best.gid, j.purpose, self._memberships_wire(j.repair_gid),
                           j.subtree_height)
        self._send(best.sender, m.JOIN_SELECT, sel.encode())
        self.set_timer(T_JOIN, 2 * self.params.T_CONFIRM)

    def _on_JoinReject(self, sender: NodeId, message: Message, r: m.JoinReject) -> None:
        j = self.join
        if j.phase is Phase.SELECT and j.selected is not None and j.selected.sender == sender \
                and r.nonce == j.nonce:
            self._select_next()

    def _on_JoinConfirm(self, sender: NodeId, message: Message, c: m.JoinConfirm) -> None:
        j = self.join
        sel = j.selected
        if not (j.phase is Phase.SELECT and sel is not None and sel.sender == sender
                and c.nonce == j.nonce and c.gid == sel.gid and c.path[-1] == sender):
            current = self.memberships.get(c.gid)
            if current is None or current.parent != sender:
                self._send(sender, m.LEAVE, m.Leave(c.gid, "unwanted").encode())
            return
        if j.purpose is Purpose.REPAIR:
            self._repaired(sender, c)
            return
        if c.gid in self.memberships or len(self.memberships) >= self.params.max_groups:
            self._send(sender, m.LEAVE, m.Leave(c.gid, "unwanted").encode())
            self._join_done()
            return
        ms = self._new_membership(c.gid)
        try:
            ms.tree.attach(c.path)
        except TreeError:
            self._send(sender, m.LEAVE, m.Leave(c.gid, "loop").encode())
            self._join_done()
            return
        ms.root_seq, ms.cur_hl = c.root_seq, c.cur_hl
        ms.secondary = j.purpose is Purpose.ADDITIONAL
        ms.parent_topo = -1
        self.memberships[c.gid] = ms
        self.stats["joins"] += 1
        self._emit_group("join", ms)
        self._report_due(ms, at_once=True)
        for other in list(self.memberships.values()):
            if other is not ms:
                self._report_due(other)
        self._join_done()

    def _repaired(self, parent: NodeId, c: m.JoinConfirm) -> None:
        j = self.join
        ms = self.memberships.get(j.repair_gid) if j.repair_gid is not None else None
        if ms is None or not ms.orphan:
            self._send(parent, m.LEAVE, m.Leave(c.gid, "unwanted").encode())
            self._join_done()
            return
        if c.gid != ms.gid and c.gid in self.memberships:
            self._send(parent, m.LEAVE, m.Leave(c.gid, "unwanted").encode())
            self._select_next()
            return
        try:
            ms.tree.attach(c.path)
        except TreeError:
            self._send(parent, m.LEAVE, m.Leave(c.gid, "loop").encode())
            self._select_next()
            return
        self._new_parent(ms)
        ms.root_seq, ms.cur_hl = c.root_seq, c.cur_hl
        self.stats["repairs"] += 1
        old = ms.gid
        self._topo += 1
        if c.gid != old:
            self._rekey(ms, c.gid)
        if self.memberships.get(ms.gid) is ms:
            self._push_group_info(ms, old)
            self._emit_group("repair", ms)
            self._report_due(ms, at_once=True)
        self._join_done()

    def _join_done(self) -> None:
        j = self.join
        seek_more = j.seek_more
        j.reset()
        j.seek_more = False
        self.cancel_timer(T_JOIN)
        while self._repairs:
            gid = self._repairs.pop(0)
            ms = self.memberships.get(gid)
            if ms is not None and ms.orphan:
                self._start_join(Purpose.REPAIR, ms)
                return
        if not self.memberships:
            self._start_join(Purpose.INITIAL)
        elif seek_more:
            self._discover()

    def _found_group(self) -> Membership[P]:
        """Self-election (§3.1): a new group with this node as leader, announced."""
        self._founded += 1
        gid = GroupId(self.node, self.epoch, self._founded)
        ms = self._new_membership(gid)
        self.memberships[gid] = ms
        self.stats["leaders"] += 1
        self._emit_group("lead", ms)
        announce = m.LeaderAnnounce(gid, self.encode_summary(self.local_summary()))
        self.broadcast(self._ctl(m.LEADER_ANNOUNCE, announce.encode()))
        self._leader_update(ms)
        return ms

    def _new_parent(self, ms: Membership[P], topo: int = -1) -> None:
        """Bookkeeping when ``ms`` gets a parent: fresh liveness, a full report due at once."""
        ms.orphan = False
        ms.anchored = True
        ms.parent_topo = topo
        ms.hello_misses = 0
        ms.joined_at = self.now
        ms.last_report_at = -math.inf
        ms.last_digest = b""
        ms.lock_small = None
        ms.lock_big_until = -math.inf
        ms.told.clear()

    def _new_membership(self, gid: GroupId) -> Membership[P]:
        p = self.params
        tree: TreeNode[Summary[P]] = TreeNode(
            self.node, max_children=p.hard_children, max_path=p.maximum_levels,
            max_summary_bytes=m.MAX_SUMMARY + 64 * m.MAX_GW_RECORDS,
            size_of=lambda s: s.nbytes)
        return Membership(gid, tree, joined_at=self.now)

    # ================================================================ join: parent side

    def _on_JoinQuery(self, sender: NodeId, message: Message, q: m.JoinQuery) -> None:
        p = self.params
        theirs = {g for g, _ in q.memberships}
        for ms in sorted(self.memberships.values(), key=lambda x: (x.level, x.gid)):
            if ms.gid in theirs or not self._open(ms, q.purpose):
                continue
            if q.purpose is Purpose.REPAIR:
                if sender in ms.tree.path or ms.level + 1 + q.subtree_height > p.maximum_levels:
                    continue
                if ms.gid == q.repair_gid and ms.root_seq <= q.last_root_seq:
                    continue
            if len(self._replies) >= MAX_PENDING_REPLIES:
                self.drop("reply_backlog", message, peer=sender)
                return
            reply = m.JoinReply(q.nonce, ms.gid, (*ms.tree.path, self.node),
                                self.encode_summary(self.merged(ms)), ms.root_seq,
                                min(ms.cur_hl, m.MAX_PATH))
            name = f"{REPLY_PREFIX}{sender}:{ms.gid}"
            self._replies[name] = (sender, self._ctl(m.JOIN_REPLY, reply.encode()))
            self.set_timer(name, self.rng.uniform(0.0, p.T_REPLY_JITTER))

    def _reject(self, node: NodeId, nonce: int, reason: str) -> None:
        self._send(node, m.JOIN_REJECT, m.JoinReject(nonce, reason).encode(), reliable=False)

    def _on_JoinSelect(self, sender: NodeId, message: Message, s: m.JoinSelect) -> None:
        """Algorithm 1 (Table 1), the admission half: the merge half is the gateway's."""
        p = self.params
        ms = self.memberships.get(s.gid)
        if ms is None:
            self._reject(sender, s.nonce, "no_group")
            return
        if ms.orphan or not ms.anchored:
            self._reject(sender, s.nonce, "unanchored")
            return
        if ms.secondary:
            self._reject(sender, s.nonce, "secondary")
            return
        if sender in ms.tree:  # a retransmission, or a child that lost its state
            self._confirm(sender, s.nonce, ms)
            return
        if s.gid in {g for g, _ in s.memberships}:
            self._reject(sender, s.nonce, "same_group")
            return
        if s.purpose is Purpose.REPAIR:
            if sender in ms.tree.path or sender == self.node:
                self._reject(sender, s.nonce, "loop")
                return
            if ms.level + 1 + s.subtree_height > p.maximum_levels:
                self._reject(sender, s.nonce, "too_deep")
                return
        elif ms.level >= p.preferred_levels:
            self._reject(sender, s.nonce, "max_level")
            return
        depth = ms.level + 1 + (s.subtree_height if s.purpose is Purpose.REPAIR else 0)
        if not ms.tree.add_child(sender, self.now, depth=depth):
            self._reject(sender, s.nonce, "full")
            return
        self._confirm(sender, s.nonce, ms)
        self._report_due(ms)

    def _confirm(self, node: NodeId, nonce: int, ms: Membership[P]) -> None:
        c = m.JoinConfirm(nonce, ms.gid, (*ms.tree.path, self.node), ms.root_seq,
                          min(ms.cur_hl, m.MAX_PATH))
        self._send(node, m.JOIN_CONFIRM, c.encode())

    def _on_Leave(self, sender: NodeId, message: Message, lv: m.Leave) -> None:
        ms = self._find(lv.gid)
        if ms is not None and sender in ms.tree:
            self._child_gone(ms, sender, "leave")

    # ================================================================ reports (§3.2)

    def _report_due(self, ms: Membership[P], at_once: bool = False) -> None:
        """Report ``ms`` soon; a gateway's other groups too (their records name this one)."""
        for other in self.memberships.values():
            other.report_due = True
        ms.report_due = True
        wait = 0.0 if at_once else max(0.0, ms.last_report_at + self.params.T_FILTER_MIN
                                       - self.now)
        if wait <= 0.0:
            self._flush_reports()
        else:
            self.set_timer(T_REPORT, wait)

    def _flush_reports(self) -> None:
        later = math.inf
        for ms in list(self.memberships.values()):
            if not ms.report_due or not self._live(ms):
                continue
            ready = ms.last_report_at + self.params.T_FILTER_MIN
            if ready > self.now and ms.last_report_at > -math.inf:
                later = min(later, ready)
                continue
            ms.report_due = False
            if ms.is_leader:
                self._leader_update(ms)
            elif not ms.orphan:
                self._send_report(ms, refresh=False)
        if later < math.inf:
            self.set_timer(T_REPORT, later - self.now)

    def _send_report(self, ms: Membership[P], refresh: bool) -> None:
        parent = ms.parent
        if parent is None:
            return
        summary = self.encode_summary(self.merged(ms))
        records = tuple(self.subtree_records(ms))
        depth = min(ms.tree.subtree_depth(), m.MAX_PATH)
        digest = hashlib.sha256(repr((summary, depth, records)).encode()).digest()[:8]
        if not refresh:
            if digest == ms.last_digest:
                return
            ms.report_seq = (ms.report_seq + 1) & m.U32
            ms.last_digest = digest
            ms.last_report_at = self.now
        report = m.Report(ms.gid, ms.report_seq, summary, depth, records, refresh)
        self._send(parent, m.REPORT, report.encode(), reliable=not refresh)

    def _on_Report(self, sender: NodeId, message: Message, r: m.Report) -> None:
        ms = self._find(r.gid)
        child = ms.tree.child(sender) if ms is not None else None
        if ms is None or child is None:
            self.drop("not_child", message, peer=sender)
            return
        if r.seq == child.seq:
            return  # a refresh of what we hold (the frame already counted as heard)
        if r.seq < child.seq and child.seq - r.seq < (1 << 31):
            self.drop("stale", message, peer=sender)
            return
        try:
            payload = self.decode_summary(r.summary)
        except bodies.BodyError:
            self.drop("malformed_summary", message, peer=sender)
            return
        summary = Summary(payload, r.gw_records, len(r.summary) + 40 * len(r.gw_records))
        if not ms.tree.report(sender, self.now, summary, r.depth, r.seq):
            self.drop("report_refused", message, peer=sender)
            return
        self._report_due(ms)

    # ================================================================ leader: curHL, gateways

    def _leader_update(self, ms: Membership[P]) -> None:
        """The leader's view of its group: curHL, the gateway table, who is active (§3.1)."""
        ms.cur_hl = ms.tree.subtree_depth()
        table = gateway_candidates(ms.gid, self.subtree_records(ms))
        ms.linked = frozenset(table)
        live: set[tuple[NodeId, GroupId]] = set()
        resend = STATUS_RESEND * self.params.T_HELLO
        for adjacent, recs in table.items():
            for i, rec in enumerate(recs):
                status = Status.ACTIVE if i == 0 else Status.STANDBY
                key = (rec.gw, adjacent)
                live.add(key)
                told = ms.told.get(key)
                acted = status is Status.ACTIVE and rec.active
                if told is not None and told[:2] == (status, ms.cur_hl) \
                        and (acted or self.now - told[2] < resend):
                    continue
                ms.told[key] = (status, ms.cur_hl, self.now)
                self._route_status(ms, m.GatewayStatus(ms.gid, rec.gw, adjacent, status,
                                                       min(ms.cur_hl, m.MAX_PATH)))
        for key in [k for k in ms.told if k not in live]:
            del ms.told[key]

    def _route_status(self, ms: Membership[P], st: m.GatewayStatus) -> None:
        if st.target == self.node:
            self._apply_status(ms, st)
            return
        for c in ms.tree.children():
            if c.summary is not None and any(r.gw == st.target and r.there == st.adjacent
                                             for r in c.summary.gw_records):
                self._send(c.node, m.GATEWAY_STATUS, st.encode())
                return
        self.drop("no_route", gid=str(st.gid), peer=st.target)

    def _on_GatewayStatus(self, sender: NodeId, message: Message, st: m.GatewayStatus) -> None:
        ms = self.memberships.get(st.gid)
        if ms is None or ms.parent != sender:
            self.drop("stale", message, peer=sender)
            return
        self._route_status(ms, st)

    def _apply_status(self, ms: Membership[P], st: m.GatewayStatus) -> None:
        other = self.memberships.get(st.adjacent)
        if other is None:
            return  # no longer in that group: the next report withdraws the record
        before = ms.gw_status.get(st.adjacent)
        ms.gw_status[st.adjacent] = (st.status, st.cur_hl)
        if st.status is Status.STANDBY:
            self._stand_by(ms, other)
            return
        if before is None or before[0] is not Status.ACTIVE:
            self._report_due(ms, at_once=True)
        self._consider_merge()

    def _stand_by(self, ms: Membership[P], other: Membership[P]) -> None:
        """Another node serves this pair of groups: give up the extra one (spec 5.7 step 5)."""
        if ms.secondary != other.secondary:
            drop = ms if ms.secondary else other
        else:
            drop = max((ms, other), key=lambda x: (x.level, x.gid))
        keep = other if drop is ms else ms
        self._covered[drop.gid] = self.now + (self.params.maximum_levels + 2) * self.params.T_HELLO
        self.stats["standby_leaves"] += 1
        self._leave_group(drop, "standby")
        self._report_due(keep)

    # ================================================================ merge (§3.1)

    def _consider_merge(self) -> None:
        """An active gateway told both curHLs merges when a + b + c <= L (Algorithm 1)."""
        if self._merge is not None or self.now < self._merge_retry_at:
            return
        groups = [ms for ms in list(self.memberships.values()) if not ms.orphan and ms.anchored]
        for i, g1 in enumerate(groups):
            for g2 in groups[i + 1:]:
                s1 = g1.gw_status.get(g2.gid)
                s2 = g2.gw_status.get(g1.gid)
                if s1 is None or s2 is None or s1[0] is not Status.ACTIVE \
                        or s2[0] is not Status.ACTIVE:
                    continue
                plan = merge_plan(g1.gid, g1.level, s1[1], g2.gid, g2.level, s2[1])
                if plan.depth > self.params.preferred_levels:
                    continue
                pm = self._merge = _PendingMerge(self.rng.getrandbits(32), plan.small, plan.big,
                                                 plan.a, plan.b, plan.c,
                                                 self.now + self.params.T_MERGE_LOCK)
                for role, target in ((MergeRole.SMALL, plan.small), (MergeRole.BIG, plan.big)):
                    if self._merge is not pm:
                        break  # denied (or done) at once by a leader role of this node
                    req = m.MergeRequest(target, role, plan.small, plan.big, plan.a, plan.b,
                                         plan.c, self.node, pm.rid, (self.node,))
                    self._route_merge_request(req)
                return

    def _route_merge_request(self, req: m.MergeRequest) -> None:
        ms = self.memberships.get(req.target)
        if ms is None or ms.orphan:
            self.drop("stale", gid=str(req.target))
            return
        if ms.is_leader:
            grant = self._decide_merge(ms, req)
            self._route_merge_reply(m.MergeReply(req.target, req.rid, req.gw, grant,
                                                 req.route))
            return
        parent = ms.parent
        assert parent is not None
        up = m.MergeRequest(req.target, req.role, req.small, req.big, req.a, req.b, req.c,
                            req.gw, req.rid, req.route if req.route[-1] == self.node
                            else (*req.route, self.node))
        if len(up.route) > m.MAX_PATH:
            self.drop("route_too_long", gid=str(req.target))
            return
        self._send(parent, m.MERGE_REQUEST, up.encode())

    def _on_MergeRequest(self, sender: NodeId, message: Message, req: m.MergeRequest) -> None:
        ms = self.memberships.get(req.target)
        if ms is None or sender not in ms.tree or req.route[-1] != sender:
            self.drop("stale", message, peer=sender)
            return
        if self.node in req.route:
            self.drop("loop", message, peer=sender)
            return
        self._route_merge_request(req)

    def _decide_merge(self, ms: Membership[P], req: m.MergeRequest) -> bool:
        now = self.now
        if ms.lock_small is not None and ms.lock_small[1] > now:
            return ms.lock_small[0] == req.gw and req.role is MergeRole.SMALL
        if req.role is MergeRole.SMALL:
            if ms.lock_big_until > now or ms.tree.subtree_depth() != req.c:
                return False
            ms.lock_small = (req.gw, now + self.params.T_MERGE_LOCK)
            return True
        ms.lock_big_until = max(ms.lock_big_until, now + self.params.T_MERGE_LOCK)
        return True

    def _route_merge_reply(self, rep: m.MergeReply) -> None:
        route = rep.route
        while route and route[-1] == self.node:
            route = route[:-1]
        if not route:
            if rep.gw == self.node:
                self._merge_answer(rep)
            return
        self._send(route[-1], m.MERGE_REPLY, m.MergeReply(rep.target, rep.rid, rep.gw, rep.grant,
                                                          route).encode())

    def _on_MergeReply(self, sender: NodeId, message: Message, rep: m.MergeReply) -> None:
        self._route_merge_reply(rep)

    def _merge_answer(self, rep: m.MergeReply) -> None:
        pm = self._merge
        if pm is None or pm.rid != rep.rid:
            return
        if not rep.grant:
            self._merge = None
            self._merge_retry_at = self.now + self.rng.uniform(1.0, 3.0) * self.params.T_HELLO
            return
        pm.granted.add(MergeRole.SMALL if rep.target == pm.small else MergeRole.BIG)
        if pm.granted == {MergeRole.SMALL, MergeRole.BIG}:
            self._merge = None
            self._execute_merge(pm)

    def _execute_merge(self, pm: _PendingMerge) -> None:
        """Re-root the small group at this node, below its place in the big one (spec 5.8)."""
        small = self.memberships.get(pm.small)
        big = self.memberships.get(pm.big)
        if small is None or big is None or small.orphan or big.orphan \
                or big.level != pm.a or small.level != pm.b:
            return
        self._topo += 1
        path = (*big.tree.path, self.node)
        parent = small.parent
        for c in small.tree.clear_children():
            depth = c.depth - small.level + big.level
            if not big.tree.add_child(c.node, self.now, depth=depth, summary=c.summary):
                self._send(c.node, m.DETACH, m.Detach(pm.small, DetachKind.DISSOLVE,
                                                      self._topo).encode())
                continue
            info = m.GroupInfo(pm.small, pm.big, path, big.anchored, big.root_seq,
                               min(big.cur_hl, m.MAX_PATH), self._topo)
            self._send(c.node, m.GROUP_INFO, info.encode())
        if parent is not None:
            if big.tree.add_child(parent, self.now, depth=big.level + 1):
                rr = m.Reroot(pm.small, pm.big, path, big.root_seq, min(big.cur_hl, m.MAX_PATH),
                              self._topo)
                self._send(parent, m.REROOT, rr.encode())
            else:
                self._send(parent, m.LEAVE, m.Leave(pm.small, "full").encode())
        del self.memberships[pm.small]
        self._primary()
        big.gw_status.pop(pm.small, None)
        self.stats["merges"] += 1
        self._emit_group("merge", big)
        self._report_due(big, at_once=True)

    def _on_Reroot(self, sender: NodeId, message: Message, rr: m.Reroot) -> None:
        """The old root path reverses: ``sender`` (our child) becomes our parent (spec 5.8)."""
        ms = self.memberships.get(rr.old_gid)
        if ms is None or sender not in ms.tree or rr.path[-1] != sender:
            self.drop("stale", message, peer=sender)
            self._send(sender, m.LEAVE, m.Leave(rr.gid, "stale").encode())
            return
        if rr.gid != ms.gid and self._twin_conflict(ms, rr.gid, len(rr.path)):
            return
        was_leader = ms.is_leader
        ms.tree.remove_child(sender)
        old_parent = ms.parent if not ms.orphan else None
        try:
            ms.tree.attach(rr.path)
        except TreeError:
            self.stats["loops_broken"] += 1
            self._send(sender, m.LEAVE, m.Leave(rr.gid, "loop").encode())
            self._parent_lost(ms, "reroot_loop")
            return
        self._topo += 1
        self._new_parent(ms, rr.topo)
        ms.root_seq, ms.cur_hl = rr.root_seq, rr.cur_hl
        ms.gw_status.clear()
        path = (*rr.path, self.node)
        if old_parent is not None and ms.tree.add_child(old_parent, self.now,
                                                        depth=ms.level + 1):
            self._send(old_parent, m.REROOT, m.Reroot(rr.old_gid, rr.gid, path, rr.root_seq,
                                                      rr.cur_hl, self._topo).encode())
        elif old_parent is not None:
            self._send(old_parent, m.LEAVE, m.Leave(rr.old_gid, "full").encode())
        for c in ms.tree.children():
            if c.node != old_parent:
                info = m.GroupInfo(rr.old_gid, rr.gid, path, True, rr.root_seq, rr.cur_hl,
                                   self._topo)
                self._send(c.node, m.GROUP_INFO, info.encode())
        if was_leader:
            self._emit_group("absorbed", ms)
        self._rekey(ms, rr.gid)
        if self.memberships.get(rr.gid) is ms:
            self._report_due(ms, at_once=True)

    # ================================================================ group info, detach

    def _push_group_info(self, ms: Membership[P], prev: GroupId) -> None:
        info = m.GroupInfo(prev, ms.gid, (*ms.tree.path, self.node), ms.anchored, ms.root_seq,
                           min(ms.cur_hl, m.MAX_PATH), self._topo)
        for c in ms.tree.children():
            self._send(c.node, m.GROUP_INFO, info.encode())

    def _on_GroupInfo(self, sender: NodeId, message: Message, g: m.GroupInfo) -> None:
        ms = self._find(g.prev_gid)
        if ms is None or ms.parent != sender or ms.orphan:
            ms = self.memberships.get(g.gid)
            if ms is None or ms.parent != sender or ms.orphan:
                self.drop("stale", message, peer=sender)
                return
        if g.topo <= ms.parent_topo:
            self.drop("stale", message, peer=sender)
            return
        ms.parent_topo = g.topo
        if g.gid != ms.gid and self._twin_conflict(ms, g.gid, len(g.path)):
            return
        if self.node in g.path or len(g.path) > self.params.maximum_levels:
            self.stats["loops_broken"] += 1
            self._send(sender, m.LEAVE, m.Leave(ms.gid, "loop").encode())
            self._parent_lost(ms, "loop" if self.node in g.path else "too_deep")
            return
        changed = (g.gid != ms.gid or g.path != ms.tree.path or g.anchored != ms.anchored)
        ms.root_seq = max(ms.root_seq, g.root_seq) if g.gid == ms.gid else g.root_seq
        ms.cur_hl = g.cur_hl
        if not changed:
            return
        prev = ms.gid
        try:
            ms.tree.attach(g.path)
        except TreeError:
            self.stats["loops_broken"] += 1
            self._send(sender, m.LEAVE, m.Leave(ms.gid, "loop").encode())
            self._parent_lost(ms, "loop")
            return
        ms.anchored = g.anchored
        self._topo += 1
        if g.gid != prev:
            ms.gw_status.clear()
            ms.told.clear()
            ms.last_digest = b""
            self._rekey(ms, g.gid)
            if self.memberships.get(g.gid) is not ms:
                return
        self._push_group_info(ms, prev)
        self._report_due(ms)

    def _unanchor(self, ms: Membership[P]) -> None:
        ms.anchored = False
        self._topo += 1
        for c in ms.tree.children():
            self._send(c.node, m.DETACH, m.Detach(ms.gid, DetachKind.UNANCHOR,
                                                  self._topo).encode())

    def _on_Detach(self, sender: NodeId, message: Message, d: m.Detach) -> None:
        ms = self._find(d.gid)
        if ms is None or ms.parent != sender or ms.orphan:
            self.drop("stale", message, peer=sender)
            return
        if d.topo <= ms.parent_topo:
            self.drop("stale", message, peer=sender)
            return
        ms.parent_topo = d.topo
        if d.kind is DetachKind.DISSOLVE:
            self._parent_lost(ms, "dissolve")
        elif ms.anchored:
            self._unanchor(ms)

    # ================================================================ losses and repair (§3.5)

    def _child_lost(self, ms: Membership[P], node: NodeId, reason: str) -> None:
        if ms.tree.remove_child(node) is not None:
            self._after_child_removed(ms, node, reason)

    def _child_gone(self, ms: Membership[P], node: NodeId, reason: str) -> None:
        ms.tree.remove_child(node)
        self._after_child_removed(ms, node, reason)

    def _after_child_removed(self, ms: Membership[P], node: NodeId, reason: str) -> None:
        ms.child_misses.pop(node, None)
        self.emit("cluster", action="child_lost", gid=str(ms.gid), peer=node, reason=reason)
        self._report_due(ms)

    def _parent_lost(self, ms: Membership[P], reason: str) -> None:
        """Become an orphan: unanchor the subtree and look for a non-descendant parent."""
        if ms.orphan or ms.parent is None:
            return
        ms.repair_height = max(0, ms.tree.subtree_depth() - ms.level)
        ms.last_root_seq = ms.root_seq
        ms.tree.become_root()
        ms.orphan = True
        ms.hello_misses = 0
        ms.gw_status.clear()
        self._emit_group(f"orphan:{reason}", ms)
        self._unanchor(ms)
        j = self.join
        if j.purpose is Purpose.REPAIR:
            if ms.gid not in self._repairs and ms.gid != j.repair_gid:
                self._repairs.append(ms.gid)
            return
        if j.active:  # an extra-group join gives way to a repair
            self._join_abort()
        self._start_join(Purpose.REPAIR, ms)

    def _join_abort(self) -> None:
        self.join.reset()
        self.cancel_timer(T_JOIN)

    def _repair_failed(self) -> None:
        j = self.join
        ms = self.memberships.get(j.repair_gid) if j.repair_gid is not None else None
        if ms is not None and ms.orphan:
            if self.params.orphan_policy is OrphanPolicy.PROMOTE and self.params.leader_capable:
                self._promote(ms)
            else:
                self._dissolve(ms)
        self._join_done()

    def _promote(self, ms: Membership[P]) -> None:
        """Lead the fragment under a new group id (spec 5.13 step 5, ``promote``)."""
        prev = ms.gid
        self._founded += 1
        gid = GroupId(self.node, self.epoch, self._founded)
        ms.orphan = False
        ms.anchored = True
        ms.root_seq = 0
        ms.cur_hl = ms.repair_height
        ms.told.clear()
        self._topo += 1
        self.stats["promotions"] += 1
        self._rekey(ms, gid)
        self._push_group_info(ms, prev)
        self._emit_group("promote", ms)
        announce = m.LeaderAnnounce(gid, self.encode_summary(self.local_summary()))
        self.broadcast(self._ctl(m.LEADER_ANNOUNCE, announce.encode()))
        self._leader_update(ms)

    def _dissolve(self, ms: Membership[P]) -> None:
        """The thesis's behaviour: the children look for new parents themselves (§3.5)."""
        self.stats["dissolves"] += 1
        self._leave_group(ms, "dissolve")

    def _leave_group(self, ms: Membership[P], reason: str,
                     keep: Membership[P] | None = None) -> None:
        """Drop a membership: tell the parent, dissolve below (except children ``keep`` has)."""
        if ms.parent is not None and not ms.orphan \
                and (keep is None or keep.parent != ms.parent):
            self._send(ms.parent, m.LEAVE, m.Leave(ms.gid, reason[:32]).encode())
        self._topo += 1
        for c in ms.tree.clear_children():
            if keep is not None and c.node in keep.tree:
                continue
            self._send(c.node, m.DETACH, m.Detach(ms.gid, DetachKind.DISSOLVE,
                                                  self._topo).encode())
        if self.memberships.get(ms.gid) is ms:
            del self.memberships[ms.gid]
        for other in list(self.memberships.values()):
            other.gw_status.pop(ms.gid, None)
        self._primary()
        self._emit_group(f"leave:{reason}", ms)
        if keep is not None:
            return
        if self.join.purpose is Purpose.REPAIR and self.join.repair_gid == ms.gid:
            self._join_abort()
            self._join_done()
        elif not self.memberships and not self.join.active:
            self._start_join(Purpose.INITIAL)

    def _twin_conflict(self, ms: Membership[P], gid: GroupId, level: int) -> bool:
        """Before ``ms`` moves into ``gid`` at ``level``: a node holds a group once.

        If another membership is already in ``gid``, the shallower one stays;
        returns True if that is the other one (``ms`` is gone then).
        """
        twin = self.memberships.get(gid)
        if twin is None or twin is ms:
            return False
        if (twin.orphan, twin.level) <= (False, level):
            self._leave_group(ms, "duplicate_group", keep=twin)
            self._report_due(twin)
            return True
        self._leave_group(twin, "duplicate_group", keep=ms)
        return False

    def _primary(self) -> None:
        """A node in one group only holds it as its primary group."""
        if len(self.memberships) == 1:
            next(iter(self.memberships.values())).secondary = False

    def _rekey(self, ms: Membership[P], gid: GroupId) -> None:
        """Move ``ms`` to ``gid``; a node never holds one group twice (keep the shallower)."""
        old = ms.gid
        if self.memberships.get(old) is ms:
            del self.memberships[old]
        if old != gid:
            self._aliases[old] = gid
            self._aliases.pop(gid, None)
            while len(self._aliases) > 16:
                self._aliases.popitem(last=False)
        if self.join.repair_gid == old:
            self.join.repair_gid = gid
        self._repairs = [gid if g == old else g for g in self._repairs]
        ms.gid = gid
        twin = self.memberships.get(gid)
        if twin is None:
            self.memberships[gid] = ms
            for other in list(self.memberships.values()):
                other.gw_status.pop(old, None)
            return
        keep, drop = (twin, ms) if (twin.orphan, twin.level) <= (ms.orphan, ms.level) \
            else (ms, twin)
        self._leave_group(drop, "duplicate_group", keep=keep)
        self.memberships[gid] = keep
        if self.join.repair_gid == gid and not keep.orphan:
            self._join_abort()
            self._join_done()
        self._report_due(keep)

    # ================================================================ memory

    def state_size(self) -> dict[str, int]:
        """Subscription state about other nodes held here: entries and bytes (thesis Fig. 5)."""
        entries = 0
        nbytes = 0
        for ms in list(self.memberships.values()):
            entries += len(ms.tree)
            nbytes += ms.tree.summary_bytes()
        return {"entries": entries, "bytes": nbytes}
