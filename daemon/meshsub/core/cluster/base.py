"""State, views, helpers and reports of the group-tree machine (Liu 2011, §3.1-3.2).

The machine is one class built in layers, each in its own module:
``base`` (what a node keeps and reports upward), ``joining`` (queries, pre-match,
admission), ``topology`` (group info down the tree, detaching, repair,
leaving), ``merging`` (the leader's gateway table, statuses, merges by
re-rooting) and ``machine`` (inputs, timers, heartbeats); see ``machine`` for
the protocol overview. A subclass says what a subtree summary is through the
hooks below.
"""

from __future__ import annotations

import hashlib
import math
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, ClassVar, Generic, TypeVar

from meshsub.core import bodies
from meshsub.core.api import Message, MsgKind, NodeId
from meshsub.core.beacon import BeaconSchedule, BeaconTable
from meshsub.core.cluster import messages as m
from meshsub.core.cluster.ids import (
    GatewayRecord,
    GroupId,
    MergeRole,
    Purpose,
    Status,
)
from meshsub.core.cluster.join import JoinState
from meshsub.core.cluster.membership import Membership, Summary
from meshsub.core.cluster.params import ClusterParams
from meshsub.core.params import ProtocolParams
from meshsub.core.protocol import Protocol
from meshsub.core.tree import TreeNode

P = TypeVar("P")

T_START = "c:start"
T_TICK = "c:tick"
T_JOIN = "c:join"
T_REPORT = "c:report"
T_REFRESH = "c:refresh"
T_DISCOVER = "c:discover"
REPLY_PREFIX = "c:reply:"
"""Timers of the machine; a subclass names its own without the ``c:`` prefix."""
MAX_HEARD = 512
"""Neighbours whose last HELLO a node remembers (a bound against floods of fake ids)."""
MAX_HEARD_BYTES = 1 << 20
"""Bytes of HELLOs a node remembers (``hello_size``); the least recently heard make room."""
MAX_PENDING_REPLIES = 64
MAX_COVERED = 64
STATUS_RESEND = 2.0
"""Heartbeats after which a leader repeats a gateway status the gateway has not acted on."""


@dataclass(slots=True)
class PendingMerge:
    """A gateway's merge in progress: both leaders' grants are needed."""

    rid: int
    small: GroupId
    big: GroupId
    a: int
    b: int
    c: int
    expires: float
    granted: set[MergeRole] = field(default_factory=set)


class ClusterBase(Protocol, Generic[P]):
    """What every layer of the machine shares; subclasses fill in the summary hooks."""

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
        self._heard: BeaconTable[m.Hello] = BeaconTable(
            max_entries=MAX_HEARD, max_bytes=MAX_HEARD_BYTES, size_of=m.hello_size,
            evict_stalest=True)
        """Each neighbour's last HELLO (§3.1: groups to join nearby), the shared one-hop beacon."""
        self.beacon = BeaconSchedule()
        self._last_frame: dict[NodeId, float] = {}
        self._replies: dict[str, tuple[NodeId, Message]] = {}
        self._repairs: list[GroupId] = []
        self._merge: PendingMerge | None = None
        self._merge_retry_at = -math.inf
        self._covered: dict[GroupId, float] = {}
        """Groups a standby drop told us are reached through another gateway, until when."""
        self._edges: frozenset[NodeId] = frozenset()
        self._recorded_groups: frozenset[GroupId] = frozenset()
        self._aliases: OrderedDict[GroupId, GroupId] = OrderedDict()
        """Recent group ids this node left for another (a merge, a repair): late messages
        naming the old id still find the membership."""

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

    def on_own_timer(self, name: str) -> None:
        """A timer of the subclass fired (names not starting with ``c:``)."""

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

    def send_data(self, targets: frozenset[NodeId], message: Message) -> None:
        """A publication to tree neighbours: acknowledged per hop if ``reliable_publish``."""
        if not self.params.reliable_publish:
            self.send_many(targets, message)
            return
        for node in sorted(targets):
            self.send_reliable(node, message)

    def _enter(self, ms: Membership[P]) -> None:
        """``ms`` is one of this node's groups now: the one place a group is entered."""
        self.memberships[ms.gid] = ms

    def _exit(self, ms: Membership[P]) -> bool:
        """``ms`` is no group of this node any more (False: it was none): the one place."""
        if self.memberships.get(ms.gid) is not ms:
            return False
        del self.memberships[ms.gid]
        return True

    def _settle(self) -> None:
        self._sync_edges()
        self._sync_member_records()
        self.on_settled()

    def group_name(self, gid: GroupId) -> str:
        """A group's name in ``member`` records: the protocol's name and the id (``tg:1f-3-0``)."""
        return f"{self.name}:{gid}"

    def _sync_member_records(self) -> None:
        """A ``member`` record for every group entered or left since the last input.

        The evaluation's ground truth for local events (``_scope = "@origin:tg"``) is
        the publisher's groups at publish time, from these records. Settling once per
        input is enough: a merge relabels a membership in place (old id left, new id
        joined), and states in between are never observable by a publication.
        """
        now = frozenset(self.memberships)
        if now == self._recorded_groups:
            return
        for gid in sorted(self._recorded_groups - now):
            self.leave_group(self.group_name(gid))
        for gid in sorted(now - self._recorded_groups):
            self.join_group(self.group_name(gid))
        self._recorded_groups = now

    def _sync_edges(self) -> None:
        edges = self.tree_neighbors()
        if edges == self._edges:
            return
        old, self._edges = self._edges, edges
        for n in sorted(old - edges):
            self.on_tree_edge(n, False)
        for n in sorted(edges - old):
            self.on_tree_edge(n, True)

    def _new_membership(self, gid: GroupId) -> Membership[P]:
        p = self.params
        tree: TreeNode[Summary[P]] = TreeNode(
            self.node, max_children=p.hard_children, max_path=p.maximum_levels,
            max_summary_bytes=m.MAX_SUMMARY + 64 * m.MAX_GW_RECORDS,
            size_of=lambda s: s.nbytes)
        return Membership(gid, tree, joined_at=self.now)

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

    def _primary(self) -> None:
        """A node in one group only holds it as its primary group."""
        if len(self.memberships) == 1:
            next(iter(self.memberships.values())).secondary = False

    def _open(self, ms: Membership[P], purpose: Purpose) -> bool:
        """Would this node take a new child in ``ms`` (Algorithm 1; tg.md, rule 2)?

        A gateway's extra group is a leaf link: a standby gateway gives it up,
        which must not dissolve anyone below it.
        """
        p = self.params
        if ms.orphan or not ms.anchored or ms.secondary:
            return False
        if purpose is Purpose.REPAIR:
            return len(ms.tree) < p.hard_children
        return ms.level < p.preferred_levels and len(ms.tree) < p.max_children

    def _memberships_wire(self, exclude: GroupId | None = None) -> tuple[tuple[GroupId, int], ...]:
        return tuple((ms.gid, ms.level) for ms in list(self.memberships.values())
                     if ms.gid != exclude)[:m.MAX_GROUPS]

    def _worth_joining(self, gid: GroupId) -> bool:
        if gid in self.memberships or gid in self._covered:
            return False
        return not any(gid in ms.linked for ms in list(self.memberships.values()))

    def summary_changed(self) -> None:
        """The local summary changed: report it in every group (coalesced)."""
        for ms in list(self.memberships.values()):
            self._report_due(ms)

    def _report_due(self, ms: Membership[P]) -> None:
        """Report ``ms`` soon; a gateway's other groups too (their records name this one).

        Reports to one parent are at least ``T_FILTER_MIN`` apart (coalesced);
        the first to a new parent goes at once.
        """
        for other in self.memberships.values():
            other.report_due = True
        ms.report_due = True
        wait = max(0.0, ms.last_report_at + self.params.T_FILTER_MIN - self.now)
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
        if r.seq == child.seq:  # a refresh of what we hold
            ms.tree.heard(sender, self.now)
            return
        if r.seq < child.seq:
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

    def state_sizes(self) -> dict[str, tuple[int, int]]:
        """What this node holds about others, by store: (entries, bytes) (thesis Fig. 5).

        Here the children's reports; TG and ST name their own stores.
        """
        entries = sum(len(ms.tree) for ms in self.memberships.values())
        nbytes = sum(ms.tree.summary_bytes() for ms in self.memberships.values())
        return {"reports": (entries, nbytes)}

    # ================================================================ done by the layers above

    def _leader_update(self, ms: Membership[P]) -> None:
        """The leader's curHL and gateway table (``merging``)."""
        raise NotImplementedError

    def _push_group_info(self, ms: Membership[P], prev: GroupId) -> None:
        """Tell the children their group, path and anchoring (``topology``)."""
        raise NotImplementedError

    def _rekey(self, ms: Membership[P], gid: GroupId) -> None:
        """Move a membership to another group id (``topology``)."""
        raise NotImplementedError

    def _repair_failed(self) -> None:
        """An orphan found no parent: promote or dissolve (``topology``)."""
        raise NotImplementedError
