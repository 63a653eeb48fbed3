"""PUMA (Zheng 2008, ch. 5): events follow a mobile client by predicting where it walked.

The base station where a client subscribed, its *previous broker*, keeps the
subscription (``Backbone``). When a matching event arrives there, the client
may have walked away: the broker predicts ``P^t`` from the client's last
known cell and the time units since (§5.3.1, eqs. 5.1-5.4), and delivers
hot-then-cold (HLD):

1. if the client is associated here, hand it the event (§5.3.1's trivial case);
2. else build the ALD tree (Fig. 5.1) to the *hot* cells (the fewest
   most-likely cells holding at least ``th`` of the probability) and send the
   event down it; every base station on it hands the event to the client if
   the client is in its cell;
3. the client answers every event it receives with exactly one REPLY
   (acknowledgement + its cell, the thesis's only client message), routed
   back to the previous broker, which learns the new last known cell;
4. no reply within the acknowledgement timeout: recompute ``P^t`` and send
   to the *cold* cells not yet tried (``th = 1`` is ALD: a single round);
5. no reply again (the client is off, or walked outside the model): keep the
   event in a bounded, expiring per-client queue (the thesis assumes the
   model is exact and has no such step) and deliver it straight to the
   client's cell when the broker next hears of it: its next REPLY, a
   refresh, or the HELLO it sends when it comes back into reach after
   ``rejoin_gap_s`` without any base station.

The walk the prediction assumes (4-neighbour, one cell per ``unit_s``) and
its edge rule (``walk_boundary``) should match how clients really move.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, ClassVar

from meshsub.core.api import Message, MessageId, NodeId
from meshsub.core.content import Event
from meshsub.core.grid import Cell
from meshsub.core.lattice import Boundary, Lattice
from meshsub.core.params import ProtocolParams
from meshsub.protocols.puma import messages as m
from meshsub.protocols.puma.backbone import Backbone, Track
from meshsub.protocols.puma.params import PumaParams
from meshsub.protocols.puma.predict import delivery_tree, predict, split

T_ACK = "ack:"


@dataclass
class _Pending:
    """One event on its way to one client, waiting for the client's reply."""

    client: NodeId
    event_id: MessageId
    event: Event
    published_at: float
    hop: int
    phase: int
    t: int
    tried: set[Cell] = field(default_factory=set)
    timer: str = ""


class Puma(Backbone):
    """PUMA: location-predicting last-mile delivery over a mesh backbone."""

    name: ClassVar[str] = "puma"
    protocol_id: ClassVar[int] = 7
    Params: ClassVar[type[ProtocolParams]] = PumaParams
    params: PumaParams

    def __init__(self, node: NodeId, **kwargs: Any) -> None:
        super().__init__(node, **kwargs)
        p = self.params
        self.lattice = Lattice(p.cols, p.rows, p.walk_boundary) \
            if p.walk_boundary is not Boundary.INFINITE else Lattice()
        self.pending: dict[tuple[NodeId, MessageId], _Pending] = {}
        self._by_timer: dict[str, tuple[NodeId, MessageId]] = {}
        self._replied: OrderedDict[MessageId, int] = OrderedDict()
        """Client: events answered, and the delivery round answered."""
        self._rounds: dict[tuple[NodeId, MessageId], int] = {}
        """Queued rounds already sent per (client, event)."""
        self.stats: dict[str, int] = {"local": 0, "hot": 0, "cold": 0, "queued": 0,
                                      "requeued": 0, "replies": 0, "late_replies": 0}

    def _client_replies(self) -> bool:
        return True

    def status(self) -> dict[str, Any]:
        return {**super().status(), "pending": len(self.pending), "stats": dict(self.stats)}

    # ================================================================ previous broker

    def elapsed_units(self, track: Track) -> int:
        """Time units since the client's last known cell (§5.3.1's t)."""
        return round((self.now - track.last_time) / self.params.unit_s)

    def _deliver_to_client(self, track: Track, event: Event, event_id: MessageId,
                           published_at: float, hop: int) -> None:
        key = (track.client, event_id)
        if key in self.pending or any(q[0] == event_id for q in track.queue):
            return  # several of the client's subscriptions match: one delivery
        if len(self.pending) >= self.params.max_pending:
            self.drop("pending_full", event_id=str(event_id), peer=track.client)
            self._enqueue(track, event_id, event, published_at)
            return
        t = self.elapsed_units(track)
        pending = _Pending(track.client, event_id, event, published_at, hop, m.Phase.HOT, t)
        if self.client_present(track.client):
            assert self.cell is not None
            self.stats["local"] += 1
            self._send_phase(pending, [self.cell])
            return
        if t > self.params.t_max:
            self._enqueue(track, event_id, event, published_at)
            return
        targets = split(predict(track.last_cell, t, self.lattice), self.params.threshold(t),
                        self.contains).hot
        self.stats["hot"] += 1
        self._send_phase(pending, targets)

    def _send_phase(self, pending: _Pending, targets: list[Cell] | tuple[Cell, ...]) -> None:
        assert self.cell is not None
        pending.tried.update(targets)
        tree = delivery_tree(self.cell, targets)
        deliver = m.Deliver(pending.client, self.node, self.cell, pending.phase,
                            pending.published_at, pending.event,
                            m.DeliveryTree.decode(m.encode_tree(tree)))
        self._run_tree(deliver, pending.event_id, pending.hop)
        key = (pending.client, pending.event_id)
        self.pending[key] = pending
        pending.timer = f"{T_ACK}{pending.client:x}:{pending.event_id}"
        self._by_timer[pending.timer] = key
        self.set_timer(pending.timer, self._ack_timeout(deliver.tree.depth()))

    def _ack_timeout(self, depth: int) -> float:
        p = self.params
        if p.ack_timeout_s > 0:
            return p.ack_timeout_s
        return max(p.ack_timeout_min_s, 2 * depth * p.per_hop_s + p.client_rtt_s)

    def _on_own_timer(self, name: str) -> None:
        key = self._by_timer.pop(name, None)
        if key is None:
            return
        pending = self.pending.pop(key, None)
        track = self.tracks.get(key[0])
        if pending is None or track is None:
            return
        if pending.phase == m.Phase.HOT:
            t = self.elapsed_units(track)
            if t <= self.params.t_max:
                s = split(predict(track.last_cell, t, self.lattice), 1.0, self.contains)
                cold = [c for c in s.hot if c not in pending.tried]
                if cold:
                    pending.phase, pending.t = m.Phase.COLD, t
                    self.stats["cold"] += 1
                    self._send_phase(pending, cold)
                    return
        if pending.phase >= m.Phase.QUEUED:
            self.stats["requeued"] += 1
        self._enqueue(track, pending.event_id, pending.event, pending.published_at)

    def _enqueue(self, track: Track, event_id: MessageId, event: Event,
                 published_at: float) -> None:
        """Fallback (docs/protocols/puma.md): keep it until we hear where the client is."""
        self._expire_queue(track)
        if len(track.queue) >= self.params.queue_size:
            old_id, old, _at, _exp = track.queue.popleft()
            self.drop("queue_full", event_id=str(old_id), topic=old.topic, peer=track.client)
        track.queue.append((event_id, event, published_at, self.now + self.params.queue_ttl_s))
        self.stats["queued"] += 1

    def _flush_queue(self, track: Track) -> None:
        """Send queued events straight to the cell the client just spoke from."""
        self._expire_queue(track)
        queued, track.queue = list(track.queue), type(track.queue)()
        for event_id, event, published_at, _exp in queued:
            key = (track.client, event_id)
            if key in self.pending:
                continue
            rounds = self._rounds.get(key, 0)
            self._rounds[key] = rounds + 1
            while len(self._rounds) > 4 * self.params.max_pending:  # expired events' counts
                self._rounds.pop(next(iter(self._rounds)))
            phase = min(m.Phase.LAST, m.Phase.QUEUED + rounds)
            pending = _Pending(track.client, event_id, event, published_at, 0, phase,
                               self.elapsed_units(track))
            self._send_phase(pending, [track.last_cell])

    def _on_routed_here(self, message: Message, routed: m.Routed, track: Track | None) -> bool:
        if message.type == m.REPLY:
            event_id = m.decode_reply(routed.inner)
            if track is None:
                self.drop("unknown_client", message, peer=routed.client)
                return True
            pending = self.pending.pop((routed.client, event_id), None)
            self._rounds.pop((routed.client, event_id), None)
            if pending is not None:
                self._by_timer.pop(pending.timer, None)
                self.cancel_timer(pending.timer)
                self.stats["replies"] += 1
            else:  # the reply came after its round timed out: no longer queued either
                self.stats["late_replies"] += 1
                remaining = [q for q in track.queue if q[0] != event_id]
                track.queue.clear()
                track.queue.extend(remaining)
            if track.queue:
                self._flush_queue(track)
            return True
        if message.type == m.HELLO:
            m.decode_empty(routed.inner, "HELLO")
            if track is None:
                self.drop("unknown_client", message, peer=routed.client)
            elif track.queue:
                self._flush_queue(track)
            return True
        return False

    def _forget_client(self, client: NodeId) -> None:
        for key in [k for k in self._rounds if k[0] == client]:
            del self._rounds[key]
        for key in [k for k in self.pending if k[0] == client]:
            pending = self.pending.pop(key)
            self._by_timer.pop(pending.timer, None)
            self.cancel_timer(pending.timer)
            self.drop("client_gone", event_id=str(pending.event_id), peer=client)

    # ================================================================ client

    def _on_local(self, sender: NodeId, message: Message, local: m.Local) -> None:
        """Deliver once; reply once per event (§5.4.1), again only to a later round.

        Copies of one round (two base stations that both see the client) get
        one reply. A copy from a later round means the broker never got the
        reply (lost on a lossy link), so it is answered again; under the
        thesis's model that never happens and the client sends exactly one
        message per event.
        """
        self.deliver_local(local.event, message.id, message.hop + 1, local.published_at)
        answered = self._replied.get(message.id)
        if not local.reply or (answered is not None and answered >= local.phase):
            return
        self._replied[message.id] = local.phase
        self._replied.move_to_end(message.id)
        while len(self._replied) > self.params.dedup_size:
            self._replied.popitem(last=False)
        cell = self.cell if self.cell is not None else local.root
        routed = m.Routed(local.root, self.node, cell, sender, m.reply_inner(message.id))
        self._client_transmit(sender, Message(m.REPLY, self.new_message_id(), routed.encode()))

    def _on_base_changed(self, gap: float) -> None:
        if gap < self.params.rejoin_gap() or self.base is None:
            return
        for root, _root_node in sorted(self._client_roots()):
            self._client_transmit(self.base, self._routed_from_client(m.HELLO, root, ()))
