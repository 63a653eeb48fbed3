"""Gateways and merges (Liu 2011, §3.1, Algorithm 1 lines 12-17).

A leader ranks the gateway candidates of each adjacent group, tells the best
it is active and the others to stand by (they leave their extra group), and
sends both its curHL. The active gateway, told both, merges the groups when
``a + b + c <= preferred_levels``: locks at both leaders, then the smaller
group is re-rooted at the gateway (its old root path reverses, REROOT) and
relabelled below it (GROUP_INFO). Otherwise it relays global events.
"""

from __future__ import annotations

from typing import TypeVar

from meshsub.core.api import Message, NodeId
from meshsub.core.cluster import messages as m
from meshsub.core.cluster.base import MAX_COVERED, STATUS_RESEND, PendingMerge
from meshsub.core.cluster.gateways import candidates as gateway_candidates
from meshsub.core.cluster.gateways import merge_plan
from meshsub.core.cluster.ids import (
    DetachKind,
    GroupId,
    MergeRole,
    Status,
)
from meshsub.core.cluster.membership import Membership
from meshsub.core.cluster.topology import Topology
from meshsub.core.tree import TreeError

P = TypeVar("P")


class Merging(Topology[P]):
    """The gateway and merge layer."""

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
                if told is not None and told[0] is status:
                    recent = self.now - told[2] < resend
                    if status is Status.STANDBY and recent:
                        continue  # it leaves the group: no curHL, no repeat before then
                    if status is Status.ACTIVE and told[1] == ms.cur_hl \
                            and (rec.active or recent):
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
        self.drop("no_route", peer=st.target)

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
            self._report_due(ms)
        self._consider_merge()

    def _stand_by(self, ms: Membership[P], other: Membership[P]) -> None:
        """Another node serves this pair of groups: give up the extra one (tg.md, rule 10)."""
        if ms.secondary != other.secondary:
            drop = ms if ms.secondary else other
        else:
            drop = max((ms, other), key=lambda x: (x.level, x.gid))
        keep = other if drop is ms else ms
        p = self.params
        self._covered[drop.gid] = self.now + (p.maximum_levels + 2) * p.T_HELLO
        while len(self._covered) > MAX_COVERED:
            del self._covered[min(self._covered, key=self._covered.__getitem__)]
        self.stats["standby_leaves"] += 1
        self._leave_group(drop, "standby")
        self._report_due(keep)

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
                pm = self._merge = PendingMerge(self.rng.getrandbits(32), plan.small, plan.big,
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
            self.drop("stale", peer=req.gw)
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
            self.drop("route_too_long", peer=req.gw)
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
        if route[-1] not in self.neighbors:
            self.drop("no_route", peer=route[-1])
            return
        self._send(route[-1], m.MERGE_REPLY, m.MergeReply(rep.target, rep.rid, rep.gw, rep.grant,
                                                          route).encode())

    def _on_MergeReply(self, sender: NodeId, message: Message, rep: m.MergeReply) -> None:
        """A reply comes down the way its request went up: from our parent in that group."""
        ms = self.memberships.get(rep.target)
        if ms is None or ms.parent != sender:
            self.drop("stale", message, peer=sender)
            return
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

    def _execute_merge(self, pm: PendingMerge) -> None:
        """Re-root the small group at this node, below its place in the big one (tg.md, rule 11)."""
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
        self._exit(small)
        self._primary()
        big.gw_status.pop(pm.small, None)
        self.stats["merges"] += 1
        self._report_due(big)

    def _on_Reroot(self, sender: NodeId, message: Message, rr: m.Reroot) -> None:
        """The old root path reverses: ``sender``, our child, becomes our parent (rule 11)."""
        ms = self.memberships.get(rr.old_gid)
        if ms is None or sender not in ms.tree or rr.path[-1] != sender:
            self.drop("stale", message, peer=sender)
            self._send(sender, m.LEAVE, m.Leave(rr.gid, "stale").encode())
            return
        if rr.gid != ms.gid and self._twin_conflict(ms, rr.gid, len(rr.path)):
            return
        ms.tree.remove_child(sender)
        old_parent = ms.parent if not ms.orphan else None
        try:
            ms.tree.attach(rr.path)
        except TreeError:
            self._break_loop(ms, sender, "reroot_loop")
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
        self._rekey(ms, rr.gid)
        if self.memberships.get(rr.gid) is ms:
            self._report_due(ms)
        self._end_repair(rr.gid)
