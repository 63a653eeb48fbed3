"""The tree below a node: group info, anchoring, losses, repair and leaving (Liu 2011, §3.1, §3.5).

A parent tells its children their group, path and anchoring (the thesis's
level refresh "to N's level plus one and so on"); an orphan unanchors its
subtree so that nobody below it offers the group, looks for a non-descendant
parent and, failing that, leads its fragment or dissolves it (the thesis:
the children find new parents themselves). A node never holds one group twice:
the shallower membership stays.
"""

from __future__ import annotations

from typing import TypeVar

from meshsub.core.api import Message, NodeId
from meshsub.core.cluster import messages as m
from meshsub.core.cluster.ids import (
    DetachKind,
    GroupId,
    Purpose,
)
from meshsub.core.cluster.joining import Joining
from meshsub.core.cluster.membership import Membership
from meshsub.core.cluster.params import OrphanPolicy
from meshsub.core.tree import TreeError

P = TypeVar("P")


class Topology(Joining[P]):
    """The tree-maintenance layer."""

    def _on_Leave(self, sender: NodeId, message: Message, lv: m.Leave) -> None:
        ms = self._find(lv.gid)
        if ms is not None and sender in ms.tree:
            self._child_lost(ms, sender, "leave")

    def _push_group_info(self, ms: Membership[P], prev: GroupId) -> None:
        info = m.GroupInfo(prev, ms.gid, (*ms.tree.path, self.node), ms.anchored, ms.root_seq,
                           min(ms.cur_hl, m.MAX_PATH), self._topo)
        for c in ms.tree.children():
            self._send(c.node, m.GROUP_INFO, info.encode())

    def _from_parent(self, sender: NodeId, message: Message, topo: int,
                     *gids: GroupId) -> Membership[P] | None:
        """The membership whose parent sent a state message, if that message is not stale.

        The sender's topology version orders its messages: an older one than
        already applied (a retransmission overtaken by a newer one) is dropped.
        """
        for gid in gids:
            ms = self._find(gid)
            if ms is not None and ms.parent == sender and not ms.orphan:
                if topo <= ms.parent_topo:
                    break
                ms.parent_topo = topo
                return ms
        self.drop("stale", message, peer=sender)
        return None

    def _break_loop(self, ms: Membership[P], parent: NodeId, reason: str) -> None:
        """A transient loop or too deep a branch showed up here: leave the parent, repair."""
        self.stats["loops_broken"] += 1
        self._send(parent, m.LEAVE, m.Leave(ms.gid, reason).encode())
        self._parent_lost(ms, reason)

    def _on_GroupInfo(self, sender: NodeId, message: Message, g: m.GroupInfo) -> None:
        ms = self._from_parent(sender, message, g.topo, g.prev_gid, g.gid)
        if ms is None:
            return
        if g.gid != ms.gid and self._twin_conflict(ms, g.gid, len(g.path)):
            return
        if self.node in g.path or len(g.path) > self.params.maximum_levels:
            self._break_loop(ms, sender, "loop" if self.node in g.path else "too_deep")
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
            self._break_loop(ms, sender, "loop")
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
        ms = self._from_parent(sender, message, d.topo, d.gid)
        if ms is None:
            return
        if d.kind is DetachKind.DISSOLVE:
            self._parent_lost(ms, "dissolve")
        elif ms.anchored:
            self._unanchor(ms)

    def _child_lost(self, ms: Membership[P], node: NodeId, reason: str,
                    removed: bool = False) -> None:
        """``node`` is no child of ours in ``ms`` any more (``removed``: already taken out)."""
        if ms.tree.remove_child(node) is None and not removed:
            return
        ms.child_misses.pop(node, None)
        self._report_due(ms)

    def _parent_lost(self, ms: Membership[P], reason: str) -> None:
        """Become an orphan: unanchor the subtree and look for a non-descendant parent.

        A gateway's extra group is a leaf link and is not repaired: it is left,
        and discovery links the groups again if they still touch.
        """
        if ms.orphan or ms.parent is None:
            return
        if ms.secondary and not len(ms.tree):
            self._leave_group(ms, f"lost:{reason}"[:32])
            return
        ms.repair_height = max(0, ms.tree.subtree_depth() - ms.level)
        ms.last_root_seq = ms.root_seq
        ms.tree.become_root()
        ms.orphan = True
        ms.hello_misses = 0
        ms.gw_status.clear()
        self._unanchor(ms)
        j = self.join
        if j.purpose is Purpose.REPAIR:
            if ms.gid not in self._repairs and ms.gid != j.repair_gid:
                self._repairs.append(ms.gid)
            return
        if j.active:  # an extra-group join gives way to a repair
            self._join_abort()
        self._start_join(Purpose.REPAIR, ms)

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
        """Lead the fragment under a new group id (tg.md, rule 15, ``promote``)."""
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
        if ms.parent is not None and not ms.orphan and ms.parent in self.neighbors \
                and (keep is None or keep.parent != ms.parent):
            self._send(ms.parent, m.LEAVE, m.Leave(ms.gid, reason[:32]).encode())
        self._topo += 1
        for c in ms.tree.clear_children():
            if keep is not None and c.node in keep.tree:
                continue
            self._send(c.node, m.DETACH, m.Detach(ms.gid, DetachKind.DISSOLVE,
                                                  self._topo).encode())
        self._exit(ms)
        for other in list(self.memberships.values()):
            other.gw_status.pop(ms.gid, None)
        self._primary()
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

    def _rekey(self, ms: Membership[P], gid: GroupId) -> None:
        """Move ``ms`` to ``gid``; a node never holds one group twice (keep the shallower)."""
        old = ms.gid
        self._exit(ms)
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
            self._enter(ms)
            for other in list(self.memberships.values()):
                other.gw_status.pop(old, None)
            return
        keep, drop = (twin, ms) if (twin.orphan, twin.level) <= (ms.orphan, ms.level) \
            else (ms, twin)
        self._leave_group(drop, "duplicate_group", keep=keep)
        if keep is ms:
            self._enter(ms)
        self._end_repair(gid)
        self._report_due(keep)
