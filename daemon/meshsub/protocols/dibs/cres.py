"""CRES, DIBS's routing substrate (Pham and Tran 2012, §3.1 and §3.3), sans-I/O.

The network is organised around the nodes with the ``reference`` role (the
paper's m references). Each is the root of a cluster tree built breadth
first; every node keeps its hop distance to every reference (the distance
vector) and gets a virtual address (VA) from its predecessor by the prefix
rule (``meshsub.protocols.dibs.va``). Everything is learnt from one-hop
heartbeats; nothing uses coordinates.

Rules (docs/protocols/dibs.md lists each with its section and our reasons):

- **heartbeats** (§3.1): every node, attached or not, broadcasts its VA,
  cluster, predecessor, slot, the detached flag, its distance vector and its
  successors every ``T``, and at once (rate-limited) after a change; the
  neighbour table and the send schedule are the shared one-hop beacon
  (``meshsub.core.beacon``);
- **distance vector** (§3.1, "like DSDV with m destinations"): recomputed
  from the current neighbour table with split horizon, ``MAX_HOPS`` as
  infinity; a reference's sequence number proves it alive, and a reference
  not heard of for ``ref_stale_periods`` is gone;
- **slot handshake** (§3.1 footnote 4 made explicit): a node asks a
  candidate predecessor for a slot (ATTACH_REQ); the predecessor allocates the
  smallest slot no live successor holds and none held down (ATTACH_ACK);
- **predecessor choice** (§3.3.1, §3.3.2): a neighbour of the nearest cluster, strictly
  nearer to its reference, neither in our subtree nor in the failed
  predecessor's former subtree, shortest VA first (a BFS parent; after
  ``2 T`` without one, any non-detached neighbour outside those subtrees);
- **repair** (§3.3.2): an orphan sets *detached* (its descendants copy it, so
  no orphan attaches below another), takes a new slot and keeps its own;
  its descendants re-derive ``va = va(pred) + 0^slot 1`` from heartbeats
  (re-prefixing) without new allocations;
- **cluster switch** (§3.1, a new reference): a node strictly nearer to
  another reference for ``switch_hold_periods`` moves there.

Subclasses (SPN) hear of changes through ``on_va_change`` and
``on_child_attached`` and route with ``next_hop``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from meshsub.core import bodies
from meshsub.core.api import Message, MsgKind, NodeId
from meshsub.core.beacon import BeaconSchedule, BeaconTable, Entry, Status
from meshsub.core.params import ProtocolParams
from meshsub.core.protocol import Protocol
from meshsub.protocols.dibs import va as vam
from meshsub.protocols.dibs.messages import (
    ATTACH_ACK,
    ATTACH_NAK,
    ATTACH_REQ,
    DETACH,
    DIBS_KINDS,
    HEARTBEAT,
    MAX_DIST,
    MAX_SUCC,
    AttachAck,
    AttachReq,
    DistEntry,
    Heartbeat,
    Reason,
    decode_reason,
    decode_slot,
)
from meshsub.protocols.dibs.params import DIBSParams

REFERENCE_ROLE = "reference"
T_HEARTBEAT = "dibs:hb"
T_TRIGGERED = "dibs:hb_now"
INFINITE = 1 << 30
TRIGGERED_GAP = 0.2
"""Triggered heartbeats are at least this many periods apart (ours: §3.3.2 only says a new VA
is advertised; the limit keeps a burst of changes from costing a heartbeat each)."""

Neighbour = Entry[Heartbeat]
"""A neighbour's latest heartbeat (``state``) and when it arrived."""


def heartbeat_size(hb: Heartbeat) -> int:
    """Bytes a heartbeat takes in the neighbour table: the state-size measure's estimate."""
    return 16 + 12 * len(hb.dist)


def cluster_group(ref: NodeId) -> str:
    """The ``member`` group of reference ``ref``'s cluster (its tree) in telemetry."""
    return f"dibs:{ref}"


class Cres(Protocol):
    """The CRES substrate; DIBS (SPN) subclasses it."""

    Params: ClassVar[type[ProtocolParams]] = DIBSParams
    message_kinds: ClassVar[dict[int, MsgKind]] = DIBS_KINDS
    params: DIBSParams

    def __init__(self, node: NodeId, **kwargs: Any) -> None:
        super().__init__(node, **kwargs)
        p = self.params
        self.is_ref = REFERENCE_ROLE in self.capabilities
        self.va: str | None = "" if self.is_ref else None
        self.cl: NodeId | None = node if self.is_ref else None
        self.pred: NodeId | None = None
        self.slot = 0
        self.succ: dict[NodeId, int] = {}
        self.detached = False
        self.period = p.hb_period
        self.dist: dict[NodeId, tuple[int, NodeId | None]] = {node: (0, None)} if self.is_ref \
            else {}
        self.nbs: BeaconTable[Heartbeat] = BeaconTable(
            max_entries=p.max_neighbors, max_bytes=p.max_neighbor_bytes, size_of=heartbeat_size)
        self.beacon = BeaconSchedule(min_gap=TRIGGERED_GAP)
        self._ref_seq: dict[NodeId, tuple[int, float]] = {}
        """Per reference: the highest sequence number seen and when it last grew."""
        self._own_seq = 0
        self._held: dict[int, float] = {}
        """Freed slots and when they may be handed out again."""
        self._child_since: dict[NodeId, float] = {}
        self._orphan = False
        """Top of a detached subtree: looking for a new predecessor."""
        self._dead: tuple[NodeId | None, str] | None = None
        """The failed predecessor's (cluster, VA): its former subtree is no candidate."""
        self._dead_since = 0.0
        self._pending: tuple[NodeId, float, Reason] | None = None
        self._refused: dict[NodeId, float] = {}
        self._no_candidate_since: float | None = None
        self._unregistered_since: float | None = None
        self._nearer_since: float | None = None
        self._pred_worse_since: float | None = None
        self.stats: dict[str, int] = {"va_changes": 0, "attaches": 0, "repairs": 0,
                                      "switches": 0}

    # ================================================================ hooks for SPN

    def on_va_change(self, old_va: str | None, old_cl: NodeId | None) -> None:
        """Our VA or cluster changed (attach, re-prefix, switch)."""

    def on_child_attached(self, child: NodeId, child_va: str) -> None:
        """A successor took a slot: it owns ``pzone(child_va)`` now (§3.3.1 handover)."""

    def on_tree_changed(self) -> None:
        """Successors came or went (our key zone changed)."""

    def _moved(self, old_va: str | None, old_cl: NodeId | None) -> None:
        """Our VA or cluster changed: count it, record a cluster move, tell SPN.

        A move between clusters is a ``member`` record (leave the old cluster's
        group, join the new one's), so the telemetry shows who was in which
        reference's tree when: the evaluation's view of the tree and its repairs.
        """
        self.stats["va_changes"] += 1
        if old_cl != self.cl:
            if old_cl is not None:
                self.leave_group(cluster_group(old_cl))
            if self.cl is not None:
                self.join_group(cluster_group(self.cl))
        self.on_va_change(old_va, old_cl)

    # ================================================================ state views

    @property
    def attached(self) -> bool:
        return self.va is not None and not self._orphan

    def slots(self) -> list[int]:
        return list(self.succ.values())

    def kzone(self) -> list[vam.Interval]:
        return [] if self.va is None else vam.kzone(self.va, self.slots(), self.params.k)

    def hops_to(self, ref: NodeId) -> int:
        entry = self.dist.get(ref)
        return INFINITE if entry is None else entry[0]

    def nearest_reference(self) -> NodeId | None:
        if not self.dist:
            return None
        return min(self.dist, key=lambda r: (self.dist[r][0], r != self.cl, r))

    def references(self) -> list[NodeId]:
        return sorted(self.dist)

    # ================================================================ heartbeats

    def on_start(self) -> None:
        if self.is_ref:
            self.join_group(cluster_group(self.node))
        self.set_timer(T_HEARTBEAT, self.beacon.phase(self.period, self.rng))

    def on_timer(self, name: str) -> None:
        if name == T_HEARTBEAT:
            self._maintain()
            self._send_heartbeat()
            self.set_timer(T_HEARTBEAT, self.beacon.interval(self.period, self.rng))
        elif name == T_TRIGGERED:
            self._send_heartbeat()
        else:
            self.on_dibs_timer(name)

    def on_dibs_timer(self, name: str) -> None:
        """A timer of the subclass."""

    def trigger_heartbeat(self) -> None:
        """A heartbeat soon after a change, at most one per ``0.2 T`` (one due carries it too)."""
        delay = self.beacon.trigger(self.now, self.period, self.rng)
        if delay is not None:
            self.set_timer(T_TRIGGERED, delay)

    def _send_heartbeat(self) -> None:
        if self.is_ref:
            self._own_seq += 1
            self._ref_seq[self.node] = (self._own_seq, self.now)
        entries = []
        for ref, (hops, via) in sorted(self.dist.items(), key=lambda kv: kv[1][0])[:MAX_DIST]:
            seq = self._ref_seq.get(ref, (0, 0.0))[0]
            entries.append(DistEntry(ref, hops, via, seq))
        hb = Heartbeat(self.is_ref, self.va, self.cl, self.pred, self.slot, self.detached,
                       tuple(entries), tuple(sorted(self.succ.items()))[:MAX_SUCC],
                       self.period)
        self.broadcast(Message(HEARTBEAT, self.new_message_id(), hb.encode(), ttl=1))

    def _on_heartbeat(self, sender: NodeId, hb: Heartbeat) -> None:
        if hb.va is not None and len(hb.va) > self.params.max_va_bits:
            self.drop("va_too_long", peer=sender)
            return
        heard = self.nbs.hear(sender, hb, self.now)
        if not heard.kept:
            self.drop("neighbor_table_full" if heard.status is Status.FULL
                      else "heartbeat_too_big", peer=sender)
            return
        for d in hb.dist:
            self._note_ref_seq(d.ref, d.seq)
        if sender == self.pred:
            self._follow_predecessor(sender, hb)
        elif sender in self.succ and hb.pred != self.node \
                and self.now - self._child_since.get(sender, self.now) > 2 * self.period:
            self._lose_child(sender)  # it moved away without telling us
        elif hb.pred == self.node and sender not in self.succ:
            self._stale_child(sender, hb)
        self._recompute_distances()
        self._maybe_attach()

    def _note_ref_seq(self, ref: NodeId, seq: int) -> None:
        known = self._ref_seq.get(ref)
        if known is None:
            if len(self._ref_seq) >= 4 * self.params.max_references:
                self.drop("reference_table_full", peer=ref)
                return
            self._ref_seq[ref] = (seq, self.now)
        elif seq > known[0]:
            self._ref_seq[ref] = (seq, self.now)

    def _recompute_distances(self) -> None:
        """Bellman-Ford over the neighbour table, split horizon, ``MAX_HOPS`` as infinity."""
        p = self.params
        me, now, limit = self.node, self.now, p.MAX_HOPS
        stale_after = p.ref_stale_periods * self.period
        # Run on every heartbeat heard (the simulator's hot path at m = 10): the
        # references still alive and the current next hops, looked up once.
        alive = {ref for ref, (_, grew) in self._ref_seq.items() if now - grew <= stale_after}
        kept_via = {ref: via for ref, (_, via) in self.dist.items()}
        best: dict[NodeId, tuple[int, NodeId | None]] = {}
        if self.is_ref:
            best[me] = (0, None)
        nbs = self.nbs
        for nb_id, nb in sorted(nbs.items()):
            for d in nb.state.dist:
                ref, hops = d.ref, d.hops + 1
                if ref == me or d.via == me or hops >= limit or ref not in alive:
                    continue
                cur = best.get(ref)
                if cur is None or hops < cur[0] or (hops == cur[0] and nb_id == kept_via.get(ref)):
                    best[ref] = (hops, nb_id)
        if len(best) > p.max_references:
            kept = sorted(best, key=lambda r: (best[r][0], r))[:p.max_references]
            self.drop("reference_table_full", entries=len(best) - len(kept))
            best = {r: best[r] for r in kept}
        if best != self.dist:
            self.dist = best
            self.trigger_heartbeat()

    # ================================================================ the tree

    def _follow_predecessor(self, pred: NodeId, hb: Heartbeat) -> None:
        """Re-derive VA, cluster and detached from the predecessor (§3.3.2, re-prefixing)."""
        if hb.va is None or hb.cl is None:
            self._lose_predecessor(pred)
            return
        new_va = vam.child_va(hb.va, self.slot)
        if len(new_va) > self.params.max_va_bits:
            self.drop("va_too_long", peer=pred)
            self._lose_predecessor(pred)
            return
        if self.node in dict(hb.succ):
            self._unregistered_since = None
        elif self._unregistered_since is None:
            self._unregistered_since = self.now
        elif self.now - self._unregistered_since > 2 * self.period and self._pending is None:
            self._request(pred, Reason.REPAIR)  # our registration was lost
        if (new_va, hb.cl, hb.detached) == (self.va, self.cl, self.detached):
            return
        old_va, old_cl = self.va, self.cl
        self.va, self.cl, self.detached = new_va, hb.cl, hb.detached
        self.period = hb.hb_period
        self.trigger_heartbeat()
        if (old_va, old_cl) != (new_va, hb.cl):
            self._moved(old_va, old_cl)

    def _lose_predecessor(self, pred: NodeId) -> None:
        if self.is_ref or self.pred != pred:
            return
        if self.va is not None:
            self._dead = (self.cl, self.va[:len(self.va) - self.slot - 1])
            self._dead_since = self.now
        self.pred = None
        self._orphan = True
        self.detached = True
        self.stats["repairs"] += 1
        self.trigger_heartbeat()

    def _lose_child(self, child: NodeId) -> None:
        slot = self.succ.pop(child, None)
        self._child_since.pop(child, None)
        if slot is not None:
            self._held[slot] = self.now + self.params.slot_hold_periods * self.period
            self.trigger_heartbeat()
            self.on_tree_changed()

    def _stale_child(self, child: NodeId, hb: Heartbeat) -> None:
        """A neighbour names us its predecessor but we do not list it (§3.3.2 registration)."""
        if self.va is None or hb.va is None or hb.cl != self.cl:
            return
        taken = hb.slot in self.succ.values() or hb.slot in self._held
        if not taken and hb.va == vam.child_va(self.va, hb.slot) \
                and len(self.succ) < self.params.max_successors:
            self.succ[child] = hb.slot
            self._child_since[child] = self.now
            self.trigger_heartbeat()
            self.on_tree_changed()
        elif taken and self.succ.get(child) != hb.slot:
            self.send(child, Message(DETACH, self.new_message_id(), [hb.slot], ttl=1))

    def on_neighbor_down(self, node: NodeId) -> None:
        self._forget(node)

    def _forget(self, node: NodeId) -> None:
        self.nbs.forget(node)
        if node == self.pred:
            self._lose_predecessor(node)
        if node in self.succ:
            self._lose_child(node)
        if self._pending is not None and self._pending[0] == node:
            self._pending = None
        self._recompute_distances()
        self._maybe_attach()

    def _maintain(self) -> None:
        p = self.params
        dead_after = p.dead_periods * self.period
        for node in self.nbs.silent(self.now, dead_after):
            self._forget(node)  # one at a time: each loss is seen with the others still listed
        for slot in [s for s, until in self._held.items() if until <= self.now]:
            del self._held[slot]
        for node in [n for n, until in self._refused.items() if until <= self.now]:
            del self._refused[node]
        if self._pending is not None and self.now > self._pending[1]:
            self._refused[self._pending[0]] = self.now + 2 * self.period
            self._pending = None
        self._recompute_distances()
        self._check_predecessor()
        self._check_switch()
        self._maybe_attach()

    def _check_predecessor(self) -> None:
        """Leave a predecessor no nearer the reference than we are, after ``2 T``.

        A detached predecessor waits for its subtree's root to re-attach; if
        that root's only way out is through this subtree (a descendant next to
        an attached node), everyone would wait for good. The descendant whose
        predecessor is no nearer than itself leaves it and attaches where the
        distance vector leads; then the waiting root can attach below it.
        """
        if self.is_ref or self.pred is None or self.cl is None:
            self._pred_worse_since = None
            return
        nb = self.nbs.get(self.pred)
        d = nb.state.dist_to(self.cl) if nb is not None else None
        if d is not None and d.hops < self.hops_to(self.cl):
            self._pred_worse_since = None
            return
        if self._pred_worse_since is None:
            self._pred_worse_since = self.now
        elif self.now - self._pred_worse_since > 2 * self.period:
            self._pred_worse_since = None
            pred = self.pred
            self.send(pred, Message(DETACH, self.new_message_id(), [self.slot], ttl=1))
            self._lose_predecessor(pred)

    # ---------------------------------------------------------------- attaching

    def _excluded(self, nb: Neighbour) -> bool:
        """Our own subtree and the failed predecessor's former subtree (D3's prefix test)."""
        hb = nb.state
        if hb.va is None or hb.pred == self.node:
            return True
        if self.succ and self.va is not None and hb.cl == self.cl and hb.va.startswith(self.va):
            return True  # without successors we have no subtree: a longer VA is someone else's
        # the lost predecessor itself stays a candidate: it is alive when it was lost to a
        # DETACH (its subtree but not it; a lost reference would exclude its whole cluster)
        # Only while its predecessor holds the failed node's slot down: after that a new
        # node may take the same VA, and nodes below it would be excluded for good.
        return self._dead is not None and hb.cl == self._dead[0] \
            and self.now - self._dead_since < self.params.slot_hold_periods * self.period \
            and hb.va.startswith(self._dead[1]) and hb.va != self._dead[1]

    def candidates(self, relaxed: bool = False) -> list[NodeId]:
        """Possible predecessors, best first (§3.3.1: shortest VA; a BFS parent unless relaxed)."""
        target = self.nearest_reference()
        if target is None:
            return []
        mine = self.hops_to(target)
        ranked: list[tuple[int, int, float, NodeId]] = []
        for node, nb in self.nbs.items():
            hb = nb.state
            if node in self._refused or hb.detached or self._excluded(nb):
                continue
            assert hb.va is not None
            d = hb.dist_to(target)
            hops = d.hops if d is not None else INFINITE
            if not relaxed and (hb.cl != target or hops >= mine):
                continue
            if len(hb.va) + 1 > self.params.max_va_bits:
                continue
            ranked.append((len(hb.va), hops, self.rng.random(), node))
        return [node for *_, node in sorted(ranked)]

    def _maybe_attach(self) -> None:
        if self.is_ref or self.attached or self._pending is not None:
            return
        found = self.candidates()
        if not found:
            if self._no_candidate_since is None:
                self._no_candidate_since = self.now
            if self.now - self._no_candidate_since > 2 * self.period:
                found = self.candidates(relaxed=True)
        if found:
            self._request(found[0], Reason.REPAIR if self.va is not None else Reason.INITIAL)

    def _check_switch(self) -> None:
        """Move to a strictly nearer reference after ``switch_hold_periods`` (§3.1)."""
        if self.is_ref or not self.attached or self._pending is not None:
            return
        target = self.nearest_reference()
        if target is None or target == self.cl \
                or self.hops_to(target) >= self.hops_to(self.cl if self.cl is not None else -1):
            self._nearer_since = None
            return
        if self._nearer_since is None:
            self._nearer_since = self.now
            return
        if self.now - self._nearer_since < self.params.switch_hold_periods * self.period:
            return
        found = self.candidates()
        if found:
            self._request(found[0], Reason.SWITCH)

    def _request(self, candidate: NodeId, reason: Reason) -> None:
        self._pending = (candidate, self.now + 2 * self.period, reason)
        # our old VA lets the candidate refuse to attach us below ourselves; without
        # successors we have no subtree, and a stale VA would refuse unrelated nodes
        req = AttachReq(reason, self.cl, self.va if self.succ else None)
        self.send_reliable(candidate, Message(ATTACH_REQ, self.new_message_id(), req.encode(),
                                              ttl=1))

    def _on_attach_req(self, child: NodeId, req: AttachReq) -> None:
        """Allocate a slot (§3.1's prefix rule; the predecessor chooses, so joiners never clash)."""
        refuse = None
        if self.va is None or self._orphan or self.detached:
            refuse = "unattached"
        elif req.old_va is not None and req.old_cl == self.cl and self.va.startswith(req.old_va):
            refuse = "ancestor"
        elif child not in self.succ and len(self.succ) >= self.params.max_successors:
            refuse = "full"
        elif len(self.va) + 1 > self.params.max_va_bits:
            refuse = "va_too_long"
        if refuse is not None:
            self.drop(f"attach_refused_{refuse}", peer=child)
            self.send(child, Message(ATTACH_NAK, self.new_message_id(), [refuse], ttl=1))
            return
        assert self.va is not None and self.cl is not None
        slot = self.succ.get(child)
        if slot is None:
            used = set(self.succ.values()) | set(self._held)
            slot = next(i for i in range(len(used) + 1) if i not in used)
            self.succ[child] = slot
            self._child_since[child] = self.now
            self.on_tree_changed()
        self.send_reliable(child, Message(ATTACH_ACK, self.new_message_id(),
                                          AttachAck(slot, self.va, self.cl).encode(), ttl=1))
        self.trigger_heartbeat()
        self.on_child_attached(child, vam.child_va(self.va, slot))

    def _on_attach_ack(self, parent: NodeId, ack: AttachAck) -> None:
        pending = self._pending
        if pending is None or pending[0] != parent:
            self.drop("stale_attach_ack", peer=parent)
            self.send(parent, Message(DETACH, self.new_message_id(), [ack.slot], ttl=1))
            return
        new_va = vam.child_va(ack.va, ack.slot)
        if len(new_va) > self.params.max_va_bits:
            self.drop("va_too_long", peer=parent)
            self.send(parent, Message(DETACH, self.new_message_id(), [ack.slot], ttl=1))
            self._pending = None
            return
        old_pred, reason = self.pred, pending[2]
        if old_pred is not None and old_pred != parent:
            self.send(old_pred, Message(DETACH, self.new_message_id(), [self.slot], ttl=1))
        old_va, old_cl = self.va, self.cl
        self.pred, self.slot, self.va, self.cl = parent, ack.slot, new_va, ack.cl
        self.detached = self._orphan = False
        self._pending = self._dead = self._no_candidate_since = None
        self._unregistered_since = self._nearer_since = None
        self.stats["attaches"] += 1
        if reason is Reason.SWITCH:
            self.stats["switches"] += 1
        nb = self.nbs.get(parent)
        if nb is not None:
            self.period = nb.state.hb_period
        self.trigger_heartbeat()
        if (old_va, old_cl) != (new_va, ack.cl):
            self._moved(old_va, old_cl)

    def _on_detach(self, sender: NodeId, slot: int) -> None:
        if sender == self.pred and slot == self.slot:
            self._lose_predecessor(sender)
        elif self.succ.get(sender) == slot:
            self._lose_child(sender)

    # ================================================================ dispatch

    def on_frame(self, sender: NodeId, message: Message) -> None:
        t = message.type
        try:
            if t == HEARTBEAT:
                self._on_heartbeat(sender, Heartbeat.decode(message.body))
            elif t == ATTACH_REQ:
                self._on_attach_req(sender, AttachReq.decode(message.body))
            elif t == ATTACH_ACK:
                self._on_attach_ack(sender, AttachAck.decode(message.body))
            elif t == ATTACH_NAK:
                decode_reason(message.body)
                if self._pending is not None and self._pending[0] == sender:
                    self._refused[sender] = self.now + 2 * self.period
                    self._pending = None
                    self._maybe_attach()
            elif t == DETACH:
                self._on_detach(sender, decode_slot(message.body, "DETACH"))
            else:
                self.on_spn_frame(sender, message)
        except bodies.BodyError:
            self.drop("malformed", message, peer=sender)

    def on_spn_frame(self, sender: NodeId, message: Message) -> None:
        self.drop("unknown_type", message, peer=sender)

    def on_reliable_failed(self, node: NodeId, message: Message) -> None:
        if message.type == ATTACH_REQ and self._pending is not None \
                and self._pending[0] == node:
            self._refused[node] = self.now + 2 * self.period
            self._pending = None

    # ================================================================ routing

    def next_hop(self, target_cl: NodeId, dst: str) -> NodeId | None:
        """The next hop towards ``dst`` (a key's bits or a VA) in cluster ``target_cl`` (§3.1.3).

        Outside the cluster: the shortest-path phase, to the neighbour nearest
        the target reference. Inside: the neighbour of the same cluster with
        the smallest tree metric, if smaller than ours (tree neighbours first
        on ties, then the lowest id).
        """
        if self.cl != target_cl or self.va is None:
            mine = self.hops_to(target_cl)
            best: tuple[int, bool, NodeId] | None = None
            for node, nb in self.nbs.items():
                d = nb.state.dist_to(target_cl)
                if d is None or d.hops >= mine:
                    continue
                cand = (d.hops, nb.state.cl != target_cl, node)
                if best is None or cand < best:
                    best = cand
            return None if best is None else best[2]
        here = vam.tree_metric(self.va, dst)
        best_t: tuple[int, bool, NodeId] | None = None
        for node, nb in self.nbs.items():
            hb = nb.state
            if hb.cl != target_cl or hb.va is None:
                continue
            t = vam.tree_metric(hb.va, dst)
            if t >= here:
                continue
            cand = (t, not (node == self.pred or node in self.succ), node)
            if best_t is None or cand < best_t:
                best_t = cand
        return None if best_t is None else best_t[2]

    def status(self) -> dict[str, Any]:
        return {**super().status(), "reference": self.is_ref, "va": self.va, "cl": self.cl,
                "pred": self.pred, "slot": self.slot, "detached": self.detached,
                "successors": dict(sorted(self.succ.items())),
                "dist": {r: h for r, (h, _) in sorted(self.dist.items())},
                "kzone": [[format(a, "x"), format(b, "x")] for a, b in self.kzone()],
                "cres": dict(self.stats)}
