"""Joining a group (Liu 2011, §3.1, §3.3, Algorithm 1): both sides of query, reply, select, confirm.

The joiner queries its one-hop neighbours, collects replies for a random
window, pre-matches (the reply whose subtree summary shares most bits with
its own) and selects; after unanswered rounds and a random back-off a capable
node founds a group. The parent side answers only for groups it may extend
(below ``preferred_levels``, room left, anchored, not a gateway's extra group,
not a group the joiner is in) and admits by Algorithm 1.
"""

from __future__ import annotations

from typing import TypeVar

from meshsub.core import bodies
from meshsub.core.api import Message, NodeId
from meshsub.core.cluster import messages as m
from meshsub.core.cluster.base import (
    MAX_PENDING_REPLIES,
    REPLY_PREFIX,
    T_JOIN,
    ClusterBase,
)
from meshsub.core.cluster.ids import (
    GroupId,
    Purpose,
)
from meshsub.core.cluster.join import Candidate, Phase, rank
from meshsub.core.cluster.membership import Membership
from meshsub.core.tree import TreeError

P = TypeVar("P")


class Joining(ClusterBase[P]):
    """The join layer."""

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
        self._enter(ms)
        self.stats["joins"] += 1
        self._report_due(ms)
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
            self._report_due(ms)
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

    def _join_abort(self) -> None:
        self.join.reset()
        self.cancel_timer(T_JOIN)

    def _end_repair(self, gid: GroupId) -> None:
        """A repair of ``gid`` in progress is moot (the membership found a parent otherwise)."""
        j = self.join
        ms = self.memberships.get(gid)
        if j.purpose is Purpose.REPAIR and j.repair_gid == gid and (ms is None or not ms.orphan):
            self._join_abort()
            self._join_done()

    def _found_group(self) -> Membership[P]:
        """Self-election (§3.1): a new group with this node as leader, announced."""
        self._founded += 1
        gid = GroupId(self.node, self.epoch, self._founded)
        ms = self._new_membership(gid)
        self._enter(ms)
        self.stats["leaders"] += 1
        announce = m.LeaderAnnounce(gid, self.encode_summary(self.local_summary()))
        self.broadcast(self._ctl(m.LEADER_ANNOUNCE, announce.encode()))
        self._leader_update(ms)
        return ms

    def _discover(self) -> None:
        if self.join.active or len(self.memberships) >= self.params.max_groups:
            return
        if any(ms.orphan for ms in list(self.memberships.values())):
            return
        horizon = self.now - self.params.T_DEAD
        for entry in self._heard.entries():
            if entry.last_heard >= horizon and any(g.open and self._worth_joining(g.gid)
                                                   for g in entry.state.groups):
                self._start_join(Purpose.ADDITIONAL)
                return

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
