"""HESPER-I and HESPER-II (Zheng 2008, chapter 4) as one sans-I/O protocol.

Roles, all on every node: *client* (local applications subscribe and publish
through the topic's broker of the node's own cell), *relay* (carries
enveloped messages hop by hop with GPSR towards the next cell's broker) and
*broker* (per (cell, topic), elected from the topic's hash point and the
cell's membership view: routing entries, subscription processing by the sector
rules, event forwarding down the union tree, rotation).

Spec 004 §4 is followed step by step; the DECISIONs it records are marked
where they are implemented. Cost model: every hop of every message is one
unicast transmission; only the intra-cell BEACON is a broadcast.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import replace
from typing import Any, ClassVar

from meshsub.core.api import Message, MessageId, MsgKind, NeighborInfo, NodeId, Position
from meshsub.core.content import Event, Subscription
from meshsub.core.georouting import GeoHeader, GeoMode, GeoRoutingError, next_hop
from meshsub.core.grid import Bounds, Cell, CellTracker, Point, chebyshev, probe_points
from meshsub.core.hashpoint import topic_offset
from meshsub.core.params import ProtocolParams
from meshsub.core.protocol import Protocol
from meshsub.core.region import deployment_area, event_region, make_grid, subscription_region
from meshsub.protocols.hesper import messages as m
from meshsub.protocols.hesper.election import Member, claim_rank, elect
from meshsub.protocols.hesper.energy import EnergyMeter, RadioEnergyModel
from meshsub.protocols.hesper.params import HesperParams
from meshsub.protocols.hesper.sectors import next_offsets
from meshsub.protocols.hesper.state import (
    CELL_BYTES,
    Budget,
    Downstream,
    Entry,
    ReplyCandidate,
    TimedBest,
    TimedDedup,
    TopicState,
    wire_size,
)

MAX_REDIRECTS = 2
"""A message redirected this often inside its cell is handled where it is (views differ;
the beacon claims settle who keeps the state)."""

T_BEACON = "beacon"
T_ENERGY = "energy"
T_LEASE = "lease"
T_REFRESH = "refresh"
T_PENDING = "pend:"
T_REPLY = "reply:"
_SEP = "\x1f"

_CONTROL_TYPES = frozenset({m.SUBSCRIBE, m.REPLY, m.CONFIRM, m.UNSUBSCRIBE, m.BROKER_UPDATE})
_BACKWARDS = frozenset({m.REPLY, m.EVENT})
"""Messages that go from broker to broker against the SUBSCRIBE's direction: GPSR walks
voids with the left hand for them, so they keep to the side the SUBSCRIBE took."""


class Hesper(Protocol):
    """Grid, hashed brokers, sector routing of subscriptions, events down the reverse paths."""

    name: ClassVar[str] = "hesper"
    protocol_id: ClassVar[int] = 3
    Params: ClassVar[type[ProtocolParams]] = HesperParams
    message_kinds: ClassVar[dict[int, MsgKind]] = m.KINDS

    params: HesperParams

    def __init__(self, node: NodeId, **kwargs: Any) -> None:
        super().__init__(node, **kwargs)
        p = self.params
        self.grid = make_grid(p)
        self.area = deployment_area(p)
        self.tracker = CellTracker(self.grid, 0.0)
        self.energy = EnergyMeter(
            p.energy_source, p.energy_fraction, p.E_initial,
            RadioEnergyModel(p.E_elec, p.e_fs, p.e_mp, p.TR, p.TD, p.M_b),
        )
        self.cell: Cell | None = None
        self.retiring = False
        self.topics: dict[str, TopicState] = {}
        """Broker state, one per topic this node is the broker of (in its cell)."""
        self._routing = Budget(p.max_routing_entries, p.max_routing_bytes, self._routing_size)
        """What ``topics`` may hold (``_admit``)."""
        self._npos: dict[NodeId, Point] = {}
        self._beacons: dict[NodeId, tuple[m.Beacon, float]] = {}
        self._view: dict[NodeId, Member] | None = None
        self._offsets: dict[str, Point] = {}
        self._hints: OrderedDict[tuple[Cell, str], tuple[NodeId, Point]] = OrderedDict()
        """Brokers announced by BROKER_UPDATE, by (cell, topic), oldest first; at most
        ``max_hints`` of ``max_hint_bytes`` (``_hint``)."""
        self._hint_bytes = 0
        self._handed: dict[str, tuple[NodeId, float]] = {}
        """Topics handed over: new broker and end of ``handover_grace_s``."""
        self._handing: dict[int, tuple[str, NodeId]] = {}
        self._seen_subs = TimedDedup(p.dedup_size, p.dedup_s)
        self._seen_events = TimedDedup(p.dedup_size, p.dedup_s)
        self._detours = TimedBest(p.dedup_size, p.dedup_s)
        """HESPER-II: for each subscription, the best-ranked branch that went round a void
        through this node (``_detour``)."""
        self._refresh_seq: dict[str, int] = {}
        self._waiting_position: list[str] = []
        self._arrivals = 0
        self._started = False

    # ================================================================ inputs

    def on_energy(self, fraction: float | None, on_mains: bool) -> None:
        """``energy_source = "external"``: the driver's reading (the daemon's power-supply
        class, the simulator's energy model); a node on mains power never retires."""
        if self.energy.source != "external" or (fraction is None and not on_mains):
            return
        self.energy.feed(1.0 if on_mains or fraction is None else fraction)
        self._energy_check()

    def on_position(self, position: Position | None) -> None:
        if position is None:
            self.cell = None
            self.tracker.reset()
        else:
            self.cell = self.tracker.update(position.x, position.y)
        self._view = None
        if position is not None and not self._started:
            self._started = True
            p = self.params
            if p.beacon_s > 0:
                self.set_timer(T_BEACON, self.rng.uniform(0.0, p.beacon_s))
            self.set_timer(T_ENERGY, p.energy_check_s)
            self.set_timer(T_LEASE, p.sub_refresh_s)
            self.set_timer(T_REFRESH, p.sub_refresh_s)
        if self.cell is not None:
            waiting, self._waiting_position = self._waiting_position, []
            for sub_id in waiting:
                sub = self.subscriptions.get(sub_id)
                if sub is not None:
                    self._issue(sub_id, sub, refresh=False)

    def on_neighbor_up(self, info: NeighborInfo) -> None:
        self._neighbor(info)

    def on_neighbor_changed(self, info: NeighborInfo) -> None:
        self._neighbor(info)

    def _neighbor(self, info: NeighborInfo) -> None:
        if info.position is None:
            self._npos.pop(info.node, None)
        else:
            self._npos[info.node] = (info.position.x, info.position.y)
        self._view = None

    def on_neighbor_down(self, node: NodeId) -> None:
        self._npos.pop(node, None)
        self._beacons.pop(node, None)
        self._view = None

    def on_subscribe(self, sub_id: str, subscription: Subscription) -> None:
        if subscription_region(subscription) is None:
            self.drop("no_region", sub_id=sub_id, topic=subscription.topic)
            return
        if "+" in subscription.topic or "#" in subscription.topic:
            self.drop("wildcard_topic", sub_id=sub_id, topic=subscription.topic)
            return
        if self.cell is None:
            self._waiting_position.append(sub_id)
            return
        self._issue(sub_id, subscription, refresh=False)

    def on_unsubscribe(self, sub_id: str, subscription: Subscription) -> None:
        self._refresh_seq.pop(sub_id, None)
        if self.cell is None or subscription_region(subscription) is None:
            return
        payload = m.Unsubscribe(self._net_id(sub_id), subscription, m.client_target(self.node))
        self._send_env(m.UNSUBSCRIBE, self.cell, subscription.topic, payload.to_wire())

    def on_publish(self, event: Event, event_id: MessageId) -> None:
        if self.cell is None:
            self.drop("no_position", event_id=str(event_id), topic=event.topic)
            return
        named = event_region(event)
        if named is not None and named != self.cell:
            # The thesis's Region is the publisher's cell; a mismatch would root the tree
            # at a PHB that never sees the event.
            self.drop("region_mismatch", event_id=str(event_id), topic=event.topic)
            return
        payload = m.EventMsg(event, self.cell, self.node, self.now, False)
        self._send_env(m.EVENT, self.cell, event.topic, payload.to_wire(), msg_id=event_id)

    def on_frame(self, sender: NodeId, message: Message) -> None:
        self.energy.charge_rx()
        hop = message.hop + 1
        # The hop budget is end to end (max_hops, at most the wire's 16-bit hop field):
        # whatever the sender's budget, this node forwards no further than its own.
        ttl = min(message.ttl - 1, self.params.max_hops - hop)
        msg = replace(message, hop=hop, ttl=ttl, reliable_id=None)
        if message.type == m.BEACON:
            try:
                beacon = m.Beacon.from_wire(message.body)
            except ValueError:
                self.drop("malformed", message, peer=sender)
                return
            self._on_beacon(sender, beacon)
            return
        if message.type == m.STATE_TRANSFER:
            try:
                transfer = m.StateTransfer.from_wire(message.body)
            except ValueError:
                self.drop("malformed", message, peer=sender)
                return
            self._on_state_transfer(transfer, message)
            return
        if message.type not in m.ENVELOPED:
            self.drop("unknown_type", message, peer=sender)
            return
        try:
            env = m.Envelope.from_wire(message.body)
        except ValueError:
            self.drop("malformed", message, peer=sender)
            return
        self._route(msg, env)

    def on_timer(self, name: str) -> None:
        p = self.params
        if name == T_BEACON:
            self._beacon()
            self.set_timer(T_BEACON, p.beacon_s)
        elif name == T_ENERGY:
            self._energy_check()
            self.set_timer(T_ENERGY, p.energy_check_s)
        elif name == T_LEASE:
            self._sweep_leases()
            self._routing.resync(self.now)
            self.set_timer(T_LEASE, p.sub_refresh_s)
        elif name == T_REFRESH:
            for sub_id, sub in list(self.subscriptions.items()):
                if sub_id in self._refresh_seq:
                    self._issue(sub_id, sub, refresh=True)
            self.set_timer(T_REFRESH, p.sub_refresh_s)
        elif name.startswith(T_PENDING):
            topic, sub_id = name[len(T_PENDING):].split(_SEP, 1)
            self._pending_expired(topic, sub_id)
        elif name.startswith(T_REPLY):
            topic, sub_id = name[len(T_REPLY):].split(_SEP, 1)
            self._close_reply_window(topic, sub_id)

    def on_reliable_acked(self, node: NodeId, message: Message) -> None:
        if message.type == m.STATE_TRANSFER and message.reliable_id is not None:
            handing = self._handing.pop(message.reliable_id, None)
            if handing is not None:
                self._handed_over(handing[0], handing[1])

    def on_reliable_failed(self, node: NodeId, message: Message) -> None:
        if message.type == m.STATE_TRANSFER and message.reliable_id is not None:
            self._handing.pop(message.reliable_id, None)  # keep the role; retried next check

    def status(self) -> dict[str, Any]:
        return {
            **super().status(),
            "variant": self.params.variant,
            "cell": None if self.cell is None else list(self.cell),
            "energy": round(self.energy.fraction, 4),
            "retiring": self.retiring,
            "broker_of": {t: len(st.entries) for t, st in self.topics.items()},
        }

    # ============================================================ membership

    def _forget_stale_beacons(self) -> None:
        """Forget members not heard for ``member_timeout_s`` (they have left the view
        already), with the positions only their beacons gave."""
        timeout = self.params.member_timeout_s
        for node, (_beacon, at) in list(self._beacons.items()):
            if self.now - at > timeout:
                del self._beacons[node]
                if node not in self.neighbors:
                    self._npos.pop(node, None)
        self._view = None

    def _members(self) -> dict[NodeId, Member]:
        """The cell's membership view: this node, same-cell neighbours, beacon details.

        Spec §4.3.5. A neighbour never heard in a beacon counts as eligible with
        full energy; one whose last beacon is older than ``member_timeout_s``
        (with beacons on) has left the view.
        """
        if self._view is not None:
            return self._view
        view: dict[NodeId, Member] = {}
        if self.cell is None or self.position is None:
            return view
        view[self.node] = Member((self.position.x, self.position.y), self.energy.fraction,
                                 self.retiring, self.now)
        timeout = self.params.member_timeout_s
        for node, pos in self._npos.items():
            heard = self._beacons.get(node)
            if heard is not None:
                beacon, at = heard
                if self.params.beacon_s > 0 and self.now - at > timeout:
                    continue
                if beacon.cell != self.cell:
                    continue
                view[node] = Member(pos, beacon.energy, beacon.retiring, at)
            elif self.grid.locate(*pos) == self.cell:
                view[node] = Member(pos)
        self._view = view
        return view

    def _point(self, cell: Cell, topic: str) -> Point:
        """The topic's hash point in ``cell`` (§4.2: x <- H^i(topic), y <- H^j(topic), "inside
        G"; H = SHA-256, i/j from params), at the same fraction of the cell's part inside
        the deployment area: a point off the field would end every route to it with a
        tour of the field's edge."""
        off = self._offsets.get(topic)
        if off is None:
            off = topic_offset(topic, self.params.hash_i, self.params.hash_j)
            if len(self._offsets) > 4096:
                self._offsets.clear()
            self._offsets[topic] = off
        b = self._rect(cell)
        return b.x_min + off[0] * b.width, b.y_min + off[1] * b.height

    def _rect(self, cell: Cell) -> Bounds:
        return self.grid.clipped(cell, self.area)

    def broker_for(self, topic: str) -> NodeId | None:
        """This node's answer to "who is ``topic``'s broker in my cell?"."""
        if self.cell is None:
            return None
        handed = self._handed.get(topic)
        if handed is not None:
            if self.now <= handed[1] and handed[0] in self._npos:
                return handed[0]
            del self._handed[topic]
        return elect(self._members(), self._point(self.cell, topic), self.params.E_rot)

    def _on_beacon(self, sender: NodeId, beacon: m.Beacon) -> None:
        if sender not in self._beacons and len(self._beacons) >= self.params.max_beacons:
            self._forget_stale_beacons()
            if len(self._beacons) >= self.params.max_beacons:
                self.drop("beacons_full", peer=sender)
                return
        # Kept without its claims (read here only), so every kept beacon is of one size.
        self._beacons[sender] = (replace(beacon, claims=()), self.now)
        self._npos.setdefault(sender, beacon.pos)
        self._view = None
        if beacon.cell != self.cell or self.cell is None or self.position is None:
            return
        mine = Member((self.position.x, self.position.y), self.energy.fraction, self.retiring)
        theirs = Member(beacon.pos, beacon.energy, beacon.retiring)
        for topic in beacon.claims:
            if topic not in self.topics or any(t == topic for t, _ in self._handing.values()):
                continue
            point = self._point(self.cell, topic)
            e_rot = self.params.E_rot
            if claim_rank(theirs, sender, point, e_rot) < claim_rank(mine, self.node, point,
                                                                     e_rot):
                self._hand_over(topic, sender)  # conflicting views: the better claim wins

    def _beacon(self) -> None:
        if self.position is None or self.cell is None:
            return
        beacon = m.Beacon((self.position.x, self.position.y), self.cell, self.energy.fraction,
                          self.retiring, tuple(sorted(self.topics)))
        self.energy.charge_tx(self.params.TR)
        self.broadcast(Message(m.BEACON, self.new_message_id(), beacon.to_wire(), ttl=1))

    # ======================================================== rotation (§4.5.6)

    def _energy_check(self) -> None:
        retiring = self.energy.fraction < self.params.E_rot
        if retiring != self.retiring:
            self.retiring = retiring
            self._view = None
            if self.params.beacon_s > 0:
                self._beacon()  # step 1: tell the cell before handing over
        for topic in list(self.topics):
            broker = self.broker_for(topic)
            if broker is not None and broker != self.node:
                self._hand_over(topic, broker)

    def _hand_over(self, topic: str, new: NodeId) -> None:
        """Steps 3-4: send the topic's state to the new broker (per-hop reliable)."""
        st = self.topics.get(topic)
        if st is None or self.cell is None or new not in self._npos:
            return
        if any(t == topic for t, _ in self._handing.values()):
            return
        transfer = m.StateTransfer(topic, self.cell, tuple(st.to_wire(self.now)), self.epoch)
        self.energy.charge_tx(self._dist(new))
        rid = self.send_reliable(new, Message(m.STATE_TRANSFER, self.new_message_id(),
                                              transfer.to_wire(), ttl=1))
        self._handing[rid] = (topic, new)

    def _handed_over(self, topic: str, new: NodeId) -> None:
        """Step 5: BROKER_UPDATE to every upstream/downstream broker and local client."""
        st = self.topics.pop(topic, None)
        if st is None or self.cell is None:
            return
        self._handed[topic] = (new, self.now + self.params.handover_grace_s)
        self._view = None
        pos = self._npos.get(new, (0.0, 0.0))
        update = m.BrokerUpdate(self.cell, self.node, new, pos, self.epoch).to_wire()
        cells: set[Cell] = set()
        clients: set[NodeId] = set()
        for entry in st.entries.values():
            if entry.upstream is not None:
                cells.add(entry.upstream)
            for target, _sid in entry.downstream:
                if target[0] == 0:
                    cells.add(Cell(target[1], target[2]))
                elif target[1] != self.node:
                    clients.add(target[1])
        for cell in sorted(cells):
            self._send_env(m.BROKER_UPDATE, cell, topic, update)
        for client in sorted(clients):
            self._send_env(m.BROKER_UPDATE, self.cell, topic, update, dest=client)
        self.emit("broker", topic=topic, role="handed_over", peer=new)

    def _on_state_transfer(self, transfer: m.StateTransfer, message: Message) -> None:
        if transfer.cell != self.cell:
            self.drop("wrong_cell", message)
            return
        topic = transfer.topic
        if not self._admit(message, topic, None, 0, 0):
            return
        bad, full = self._state(topic).merge(
            transfer.entries, self.now,
            lambda entries, nbytes: self._routing.admit(entries, nbytes, self.now))
        self._handed.pop(topic, None)
        if bad:
            self.drop("malformed_entry", message, bytes=bad)
        if full:
            self.drop("routing_full", message, topic=topic, entries=full)

    def _on_broker_update(self, env: m.Envelope, update: m.BrokerUpdate) -> None:
        key = (update.cell, env.topic)
        if key in self._hints:
            del self._hints[key]
            self._hint_bytes -= _hint_size(env.topic)
        if update.new_broker == self.node:
            return
        p = self.params
        self._hints[key] = (update.new_broker, update.new_pos)
        self._hint_bytes += _hint_size(env.topic)
        while len(self._hints) > p.max_hints or self._hint_bytes > p.max_hint_bytes:
            (_cell, topic), (broker, _pos) = self._hints.popitem(last=False)
            self._hint_bytes -= _hint_size(topic)
            self.drop("hint_evicted", topic=topic, peer=broker)

    # ============================================================= transport

    def _send_env(self, mtype: int, cell: Cell, topic: str, payload: list[Any], *,
                  dest: NodeId | None = None, msg_id: MessageId | None = None,
                  hop: int = 0, ttl: int | None = None) -> None:
        """Send an enveloped message to ``cell``'s broker of ``topic`` (or to ``dest``).

        ``hop``/``ttl`` continue the end-to-end budget of the message this one carries
        on (a SUBSCRIBE, REPLY, CONFIRM, EVENT or UNSUBSCRIBE going on to the next
        broker); a message that starts here gets hop 0 and the full ``max_hops``.
        """
        if dest is None:
            hint = self._hints.get((cell, topic))
            if hint is not None:
                dest = hint[0]
        env = m.Envelope(cell, topic, dest, 0, GeoHeader(), payload)
        msg = Message(mtype, msg_id if msg_id is not None else self.new_message_id(),
                      env.to_wire(), hop=hop,
                      ttl=self.params.max_hops - hop if ttl is None else ttl)
        self._route(msg, env)

    def _route(self, msg: Message, env: m.Envelope) -> None:
        """One step between brokers (the thesis counts only its hops, §4.3, Theorem 4.1;
        our rules: docs/protocols/hesper.md, "Deviations").

        Process here, redirect to the broker in this cell, or go on with GPSR: towards
        the cell's hash point (stage BROKER), towards the cell's probe points (stage
        PROBE, proving it empty) or, for a SUBSCRIBE whose next cell is empty, towards
        the region (stage SKIP). A SUBSCRIBE that is skipping or detouring around a
        void (GPSR perimeter mode) is taken over by the first node whose own cell is at
        least as close to the region as the cell it was heading for.
        """
        if env.also:
            self._route_legs(msg, env)
            return
        if env.dest == self.node:
            self._process(msg, env)
            return
        if self.cell is None or self.position is None:
            self.drop("no_position", msg)
            return
        if self.cell == env.cell:
            self._in_cell(msg, env)
            return
        if env.stage == m.STAGE_SKIP and self._detour(msg, env):
            return
        target = self._target(env)
        try:
            nxt, header = next_hop(self.node, (self.position.x, self.position.y), self._npos,
                                   target, env.geo, dest=env.dest, radio_range=self.params.TR,
                                   left_hand=msg.type in _BACKWARDS)
        except GeoRoutingError:
            self.drop("no_route", msg)
            return
        if nxt is None:
            self._at_home(msg, env)
            return
        if header.mode is GeoMode.PERIMETER and msg.type == m.SUBSCRIBE \
                and env.stage != m.STAGE_SKIP and self._detour(msg, env):
            return
        self._forward(nxt, msg, replace(env, geo=header))

    def _route_legs(self, msg: Message, env: m.Envelope) -> None:
        """An envelope for several cells (an EVENT over legs round a void, ``_send_legs``).

        Each leg takes its own GPSR next hop; legs whose next hop is the same go on as
        one message, so legs walking the same stretch round a void share its hops. A
        leg that ends here or is at its cell goes on alone.
        """
        groups: dict[NodeId, list[m.Leg]] = {}
        for leg in (m.Leg(env.cell, env.stage, env.geo), *env.also):
            one = replace(env, cell=leg.cell, stage=leg.stage, geo=leg.geo, also=())
            if self.position is None or self.cell is None or self.cell == leg.cell:
                self._route(msg, one)
                continue
            try:
                nxt, header = next_hop(self.node, (self.position.x, self.position.y),
                                       self._npos, self._target(one), leg.geo,
                                       radio_range=self.params.TR,
                                       left_hand=msg.type in _BACKWARDS)
            except GeoRoutingError:
                self.drop("no_route", msg)
                continue
            if nxt is None:
                self._at_home(msg, one)
            else:
                groups.setdefault(nxt, []).append(m.Leg(leg.cell, leg.stage, header))
        for nxt, (first, *rest) in groups.items():
            self._forward(nxt, msg, replace(env, cell=first.cell, stage=first.stage,
                                            geo=first.geo, also=tuple(rest)))

    def _in_cell(self, msg: Message, env: m.Envelope) -> None:
        """In the envelope's cell: to the addressed node, the topic's broker, or here."""
        if env.dest is not None:
            if env.dest in self._npos:
                self._forward(env.dest, msg, replace(env, geo=GeoHeader()))
                return
            if self._client_addressed(msg, env):
                self.drop("unreachable", msg, peer=env.dest)
                return
        broker = self.broker_for(env.topic)
        if broker is None or broker == self.node or env.redirects >= MAX_REDIRECTS \
                or broker not in self._npos:
            self._process(msg, replace(env, stage=m.STAGE_BROKER))
            return
        self._forward(broker, msg, replace(env, dest=None, redirects=env.redirects + 1,
                                           geo=GeoHeader(), stage=m.STAGE_BROKER))

    def _target(self, env: m.Envelope) -> Point:
        """Where GPSR takes the envelope in its stage."""
        if env.stage == m.STAGE_SKIP:
            region = _region_of(env)
            if region is not None and self.grid.in_grid(region):
                return self._point(region, env.topic)
        elif env.stage >= m.STAGE_PROBE:
            probes = probe_points(self._rect(env.cell), self.params.TR)
            return probes[min(env.stage - m.STAGE_PROBE, len(probes) - 1)]
        hint = self._hints.get((env.cell, env.topic))
        if env.dest is not None and hint is not None and hint[0] == env.dest:
            return hint[1]
        return self._point(env.cell, env.topic)

    def _at_home(self, msg: Message, env: m.Envelope) -> None:
        """GPSR ended here: no reachable node is closer to the envelope's target.

        A neighbour inside the cell takes the message. Otherwise the next probe point
        of the cell is tried from here, and when the last one also ends without a
        neighbour in the cell, the cell has no reachable node (exact under the unit
        disk: ``meshsub.core.grid.probe_points``) and ``_empty_cell`` decides. A SUBSCRIBE skipping
        towards its region that ends here looks for the region's nodes the same way.
        """
        if env.stage == m.STAGE_SKIP:
            region = _region_of(env)
            if region is None or not self.grid.in_grid(region):
                self.drop("malformed", msg)
                return
            env = replace(env, cell=region, stage=m.STAGE_BROKER, dest=None)
        assert self.position is not None
        here = (self.position.x, self.position.y)
        inside = [n for n, pos in self._npos.items() if self.grid.locate(*pos) == env.cell]
        if inside:
            target = self._target(env)
            best = min(inside, key=lambda n: (_d2(self._npos[n], target), n))
            self._forward(best, msg, replace(env, geo=GeoHeader(), stage=m.STAGE_BROKER))
            return
        probes = probe_points(self._rect(env.cell), self.params.TR)
        first = 0 if env.stage < m.STAGE_PROBE else env.stage - m.STAGE_PROBE + 1
        for i in range(first, len(probes)):
            try:
                nxt, header = next_hop(self.node, here, self._npos, probes[i], GeoHeader(),
                                       radio_range=self.params.TR,
                                       left_hand=msg.type in _BACKWARDS)
            except GeoRoutingError:
                self.drop("no_route", msg)
                return
            if nxt is not None:
                probing = replace(env, dest=None, geo=header, stage=m.STAGE_PROBE + i)
                if header.mode is GeoMode.PERIMETER and msg.type == m.SUBSCRIBE \
                        and self._detour(msg, probing):
                    return
                self._forward(nxt, msg, probing)
                return
        self._empty_cell(msg, env)

    def _detour(self, msg: Message, env: m.Envelope) -> bool:
        """A new SUBSCRIBE going round a void (skipping, or in GPSR perimeter mode) is at
        this node; True if it ends here.

        It is taken over here if this node's cell is at least as close (Chebyshev cell
        distance) to the region as the cell it was heading for: cells on the way so far
        are all farther, so a subscription never comes back to a cell it was processed
        in. Otherwise, a HESPER-II copy is dropped (``duplicate_detour``) if a copy of a
        better-ranked branch (sent to a cell nearer the region, ties by cell) already
        went round a void through this node: both are on their way to the same region
        and one walk round the void is enough. The best-ranked branch is dropped
        nowhere, so one copy always goes on.
        """
        try:
            s = m.Subscribe.from_wire(env.payload)
        except ValueError:
            return False
        region = subscription_region(s.filter)
        if self.cell is None or region is None or s.refresh:
            return False
        if chebyshev(self.cell, region) <= chebyshev(env.cell, region):
            self._in_cell(msg, replace(env, cell=self.cell, dest=None, redirects=0,
                                       geo=GeoHeader(), stage=m.STAGE_BROKER))
            return True
        rank = (chebyshev(env.cell, region), env.cell[0], env.cell[1])
        if s.variant == "II" and \
                not self._detours.offer((env.topic, s.sub_id, s.seq), rank, self.now):
            self.drop("duplicate_detour", msg, sub_id=s.sub_id, topic=env.topic)
            return True
        return False

    def _client_addressed(self, msg: Message, env: m.Envelope) -> bool:
        if msg.type == m.BROKER_UPDATE:
            return True
        return msg.type == m.EVENT and len(env.payload) == 5 and env.payload[4] is True

    def _forward(self, nxt: NodeId, msg: Message, env: m.Envelope) -> None:
        if msg.ttl <= 0:
            self.drop("ttl_expired", msg, hop=msg.hop)
            return
        out = Message(msg.type, msg.id, env.to_wire(), hop=msg.hop, ttl=msg.ttl)
        self.energy.charge_tx(self._dist(nxt))
        p = self.params
        if (p.reliable_control and msg.type in _CONTROL_TYPES) or (
                p.reliable_events and msg.type == m.EVENT):
            self.send_reliable(nxt, out)
        else:
            self.send(nxt, out)

    def _empty_cell(self, msg: Message, env: m.Envelope) -> None:
        """``env.cell`` has no reachable node: a SUBSCRIBE skips it, anything else is lost.

        The SUBSCRIBE goes on as one route towards its region (stage SKIP), with no
        HESPER-II fork inside empty cells; an empty region means no publisher can be
        there (``empty_phb_cell``).
        """
        region = _region_of(env, new_only=True) if msg.type == m.SUBSCRIBE else None
        if region is None:  # an event, reply, refresh ... for a cell whose nodes are gone
            self.drop("empty_cell", msg, cell=f"{env.cell[0]},{env.cell[1]}")
            return
        if env.cell == region:
            self.drop("empty_phb_cell", msg, cell=f"{region[0]},{region[1]}")
            return
        self._route(msg, replace(env, dest=None, geo=GeoHeader(), stage=m.STAGE_SKIP))

    def _dist(self, node: NodeId) -> float:
        pos = self._npos.get(node)
        if pos is None or self.position is None:
            return self.params.TR
        return math.dist(pos, (self.position.x, self.position.y))

    # ============================================================ processing

    def _process(self, msg: Message, env: m.Envelope) -> None:
        try:
            if msg.type == m.SUBSCRIBE:
                self._on_subscribe(m.Subscribe.from_wire(env.payload), env, msg)
            elif msg.type == m.REPLY:
                self._on_reply(m.Reply.from_wire(env.payload), env, msg)
            elif msg.type == m.CONFIRM:
                self._on_confirm(m.Confirm.from_wire(env.payload), env, msg)
            elif msg.type == m.EVENT:
                self._on_event(m.EventMsg.from_wire(env.payload), env, msg)
            elif msg.type == m.UNSUBSCRIBE:
                self._on_unsubscribe(m.Unsubscribe.from_wire(env.payload), env, msg)
            elif msg.type == m.BROKER_UPDATE:
                self._on_broker_update(env, m.BrokerUpdate.from_wire(env.payload))
        except ValueError:
            self.drop("malformed", msg)

    def _routing_size(self) -> tuple[int, int]:
        """``(entries, bytes)`` the routing table holds (``Budget``'s exact measure)."""
        entries = nbytes = 0
        for st in self.topics.values():
            e, b = st.size()
            entries, nbytes = entries + e, nbytes + b
        return entries, nbytes

    def state_sizes(self) -> dict[str, tuple[int, int]]:
        sizes = super().state_sizes()
        sizes["routing"] = self._routing_size()
        sizes["broker_hints"] = (len(self._hints), self._hint_bytes)
        return sizes

    def _admit(self, msg: Message | None, topic: str, sub_id: str | None, entries: int,
               nbytes: int) -> bool:
        """Room in the routing table for ``entries`` more of ``nbytes`` (and for the
        topic, if it is new here); otherwise the message is dropped as ``routing_full``."""
        if topic not in self.topics:
            entries, nbytes = entries + 1, nbytes + len(topic.encode())
        if self._routing.admit(entries, nbytes, self.now):
            return True
        self.drop("routing_full", msg, topic=topic,
                  **({} if sub_id is None else {"sub_id": sub_id}))
        return False

    def _state(self, topic: str) -> TopicState:
        st = self.topics.get(topic)
        if st is None:
            st = self.topics[topic] = TopicState(topic)
            self.emit("broker", topic=topic, role="broker")
        return st

    def _net_id(self, sub_id: str) -> str:
        """Subscription ids are per node; on the network they are prefixed by the node id."""
        return f"{self.node:x}/{sub_id}"

    def _issue(self, sub_id: str, sub: Subscription, *, refresh: bool) -> None:
        """Client attach (§4.5.1): SUBSCRIBE to the topic's broker of this node's cell."""
        if self.cell is None:
            return
        seq = self._refresh_seq.get(sub_id, -1) + 1
        self._refresh_seq[sub_id] = seq
        payload = m.Subscribe(self._net_id(sub_id), sub, self.node, None, self.params.variant,
                              0, (), seq, refresh)
        self._send_env(m.SUBSCRIBE, self.cell, sub.topic, payload.to_wire())

    # ---------------------------------------------------------------- timers

    def _reply_wait(self, shb_cell: Cell, region: Cell) -> float:
        """The SHB's first reply window: 2 x (hop estimate x per-hop RTT), at least 0.3 s.

        The hop estimate counts two radio hops per cell hop (Theorem 4.1 gives
        1.21 and 1.56): right where cells are full. Around voids the window is
        stretched by the hops replies actually took (``_on_reply``).
        """
        p = self.params
        if p.reply_wait_s > 0:
            return p.reply_wait_s
        return max(0.3, 2 * self._hop_estimate(shb_cell, region) * p.per_hop_rtt_s)

    @staticmethod
    def _hop_estimate(shb_cell: Cell, region: Cell) -> int:
        return 2 * max(1, chebyshev(shb_cell, region))

    def _hops_time(self, hops: int) -> float:
        """How long ``hops`` radio hops may take: ``per_hop_rtt_s`` each and, with per-hop
        ACKs, every retransmission the reliable sender may make on each of them."""
        p = self.params
        per_hop = p.per_hop_rtt_s
        if p.reliable_control:
            policy = p.retransmit_policy()
            per_hop += sum(min(policy.max_rto, policy.initial_rto * policy.factor ** i)
                           for i in range(policy.max_attempts - 1))
        return max(0, hops) * per_hop

    def _pending_ttl(self, msg: Message, variant: str, shb_cell: Cell, region: Cell) -> float:
        """Lifetime of a PENDING entry: as long as its REPLY (HESPER-II: CONFIRM) can come.

        The SUBSCRIBE may take ``msg.ttl`` more hops (the end-to-end budget less the
        hops it actually took to get here) and the REPLY back at most ``max_hops``;
        HESPER-II adds the SHB's window after that reply (``_stretch_window``: at most
        ``max_hops`` per-hop RTTs) and the CONFIRM's ``max_hops``. Past that every one
        of them is dropped as ``ttl_expired``, so waiting longer is useless, and
        expiring sooner loses a reply that took a detour around a void. At least 3 x
        the first reply window (docs/protocols/hesper.md, "Deviations"), at most the
        lease.
        """
        p = self.params
        if p.pending_ttl_s:
            return p.pending_ttl_s
        hops = msg.ttl + (3 if variant == "II" else 1) * p.max_hops
        return min(p.lease_s, max(3 * self._reply_wait(shb_cell, region), self._hops_time(hops)))

    def _pending_expired(self, topic: str, sub_id: str) -> None:
        """A PENDING entry that no REPLY (HESPER-I) or CONFIRM (HESPER-II) reached.

        Always a drop record. ``pending_expired``: the subscription's path was not set
        up (HESPER-I anywhere; HESPER-II at the SHB); the client's next refresh tries
        again. ``branch_expired``: a HESPER-II branch the SHB did not choose, which is
        how HESPER-II prunes the branches (docs/protocols/hesper.md, "Deviations").
        """
        st = self.topics.get(topic)
        entry = st.entries.get(sub_id) if st is not None else None
        if st is None or entry is None or entry.active:
            return
        deadline = st.reply_deadline.get(sub_id)
        if deadline is not None and st.replies.get(sub_id):  # the SHB decides first
            self.set_timer(f"{T_PENDING}{topic}{_SEP}{sub_id}", max(0.0, deadline - self.now))
            return
        del st.entries[sub_id]
        at_shb = any(target[0] == 1 for target, _sid in entry.downstream)
        reason = "branch_expired" if entry.variant == "II" and not at_shb else "pending_expired"
        self.drop(reason, sub_id=sub_id, topic=topic)

    def _stretch_window(self, st: TopicState, sub_id: str, round_trip: int) -> None:
        """Keep the SHB's reply window open for comparable replies.

        A reply whose SUBSCRIBE and REPLY took ``round_trip`` radio hops in all tells
        how far replies are travelling; the window stays open as long again as that
        round trip takes at ``per_hop_rtt_s / 2`` a hop, so that a branch about as long
        as this one (a detour around a void) still counts. A reply after the window
        closed without any opens a window this way (at least 0.3 s).
        """
        wait = round_trip * self.params.per_hop_rtt_s / 2
        until = self.now + max(0.3 if sub_id not in st.reply_deadline else 0.0, wait)
        if until > st.reply_deadline.get(sub_id, -math.inf):
            st.reply_deadline[sub_id] = until
            self.set_timer(f"{T_REPLY}{st.topic}{_SEP}{sub_id}", until - self.now)

    # ---------------------------------------------------------- subscribing

    def _on_subscribe(self, s: m.Subscribe, env: m.Envelope, msg: Message) -> None:
        """Spec §4.5.2 at broker ``br``."""
        region = subscription_region(s.filter)
        if region is None or self.cell is None:
            self.drop("no_region", msg, sub_id=s.sub_id)
            return
        topic = s.filter.topic
        now = self.now
        lease = now + self.params.lease_s
        local = not s.route_record
        prev = m.client_target(s.client) if local else m.cell_target(s.route_record[-1])
        known = self.topics.get(topic)
        if s.refresh and known is not None:
            holder = known.holding(prev, s.sub_id)
            if holder is not None:
                self._renew(known, holder, prev, s, lease, msg)
                return
        if not s.refresh and self._seen_subs.check_and_add((topic, s.sub_id, s.seq), now):
            # step 2: the other HESPER-II branch
            self.drop("duplicate_subscribe", msg, sub_id=s.sub_id, topic=topic)
            return
        # At most an entry and a downstream pointer (or a subscription awaiting its
        # CONFIRM) with the filter each.
        if not self._admit(msg, topic, s.sub_id, 2,
                           2 * (len(s.sub_id.encode()) + wire_size(s.filter.to_wire()))):
            return
        st = self._state(topic)
        is_phb = self.cell == region
        entry = st.covering(s.filter, region)
        if entry is None and is_phb:
            entry = Entry(s.sub_id, s.filter, region, None, True, lease, s.variant)
            st.entries[s.sub_id] = entry
        if entry is not None:  # step 3: stop here
            if s.variant == "I" or local:
                entry.downstream[(prev, s.sub_id)] = Downstream(s.filter, lease)
            else:
                st.awaiting_confirm[s.sub_id] = (entry.owner, prev, s.filter)
            if not local:
                new_links = len(s.route_record)
                reply = m.Reply(s.sub_id, self.node, self.cell,
                                m.KIND_PHB if is_phb else m.KIND_JOINED, new_links,
                                new_links + chebyshev(self.cell, region), s.route_record,
                                new_links - 1, s.seq, min(msg.hop, m.HOPS_MAX))
                self._send_env(m.REPLY, s.route_record[-1], topic, reply.to_wire())
            return
        # Step 4: PENDING entry; step 5: forward by Algorithm 4.1 / 4.2.
        pending = st.entries.get(s.sub_id)
        if pending is None:
            pending = Entry(s.sub_id, s.filter, region, None, False, lease, s.variant)
            st.entries[s.sub_id] = pending
        pending.downstream[(prev, s.sub_id)] = Downstream(s.filter, lease)
        route = (*s.route_record, self.cell)
        fwd = replace(s, route_record=route, hop_count=s.hop_count + 1,
                      origin_shb=self.node if local else s.origin_shb, refresh=False)
        for dx, dy in next_offsets(self.cell[0] - region[0], self.cell[1] - region[1], s.variant):
            nxt = Cell(region[0] + dx, region[1] + dy)
            if self.grid.in_grid(nxt):
                self._send_env(m.SUBSCRIBE, nxt, topic, fwd.to_wire(), hop=msg.hop, ttl=msg.ttl)
        self.set_timer(f"{T_PENDING}{topic}{_SEP}{s.sub_id}",
                       self._pending_ttl(msg, s.variant, route[0], region))
        if local and s.variant == "II":
            st.replies.setdefault(s.sub_id, [])
            wait = self._reply_wait(route[0], region)
            st.reply_deadline[s.sub_id] = now + wait
            self.set_timer(f"{T_REPLY}{topic}{_SEP}{s.sub_id}", wait)

    def _renew(self, st: TopicState, holder: Entry, prev: m.Target, s: m.Subscribe,
               lease: float, msg: Message) -> None:
        """Soft state (§4.5.7): renew the lease, pass the refresh up the entry's own path.

        The refresh goes on upstream for the entry's owner when the refreshing
        subscription owns the entry, or when the owner itself is gone (another
        subscription now keeps the segment alive).
        """
        holder.downstream[(prev, s.sub_id)].expiry = lease
        holder.expiry = max(holder.expiry, lease)
        if holder.upstream is None or not holder.active or self.cell is None:
            return
        owner_gone = not any(sid == holder.owner for _t, sid in holder.downstream)
        if holder.owner != s.sub_id and not owner_gone:
            return
        fwd = m.Subscribe(holder.owner, holder.filter, s.client, s.origin_shb, holder.variant,
                          s.hop_count + 1, (*s.route_record, self.cell), s.seq, True)
        self._send_env(m.SUBSCRIBE, holder.upstream, st.topic, fwd.to_wire(), hop=msg.hop,
                       ttl=msg.ttl)

    def _on_reply(self, r: m.Reply, env: m.Envelope, msg: Message) -> None:
        """Step 6: the REPLY retraces the route record; HESPER-I activates on the way.

        HESPER-II relays pass a REPLY on only if it ranks better than every one they
        passed on before for the subscription (our DECISION: the SHB's choice, the
        best rank, is unchanged, at far fewer REPLY messages; docs/protocols/hesper.md).
        """
        st = self.topics.get(env.topic)
        entry = st.entries.get(r.sub_id) if st is not None else None
        if st is None or entry is None:
            self.drop("reply_unknown_sub", msg, sub_id=r.sub_id, topic=env.topic)
            return
        up = r.route_record[r.index + 1] if r.index + 1 < len(r.route_record) \
            else r.replier_cell
        if entry.variant == "I" and not entry.active:
            entry.active, entry.upstream = True, up
            self.cancel_timer(f"{T_PENDING}{env.topic}{_SEP}{r.sub_id}")
        if r.index > 0:
            if entry.variant == "II":
                rank = (r.new_links, r.total_hops)
                if entry.relayed is not None and rank >= entry.relayed:
                    self.drop("reply_superseded", msg, sub_id=r.sub_id, topic=env.topic)
                    return
                entry.relayed = rank
            self._send_env(m.REPLY, r.route_record[r.index - 1], env.topic,
                           replace(r, index=r.index - 1).to_wire(), hop=msg.hop, ttl=msg.ttl)
            return
        if entry.variant == "II":
            window = st.replies.get(r.sub_id)
            if window is None:  # a late reply (or one for a refresh): decide on it soon
                window = st.replies[r.sub_id] = []
            if not self._admit(msg, env.topic, r.sub_id, 1,
                               CELL_BYTES * (len(r.route_record) + 1)):
                return
            self._stretch_window(st, r.sub_id, r.sub_hops + msg.hop)
            self._arrivals += 1
            window.append(ReplyCandidate(r.new_links, r.total_hops, self._arrivals,
                                         r.route_record, r.replier_cell))

    def _close_reply_window(self, topic: str, sub_id: str) -> None:
        """§4.5.5: pick the reply with the fewest new links and CONFIRM its route."""
        st = self.topics.get(topic)
        if st is None:
            return
        candidates = st.replies.pop(sub_id, [])
        st.reply_deadline.pop(sub_id, None)
        entry = st.entries.get(sub_id)
        if entry is None or entry.active:
            return
        if not candidates:  # a late reply is decided when it comes (_on_reply) while
            return          # the PENDING entry lives; else it expires (pending_expired)
        best = min(candidates, key=ReplyCandidate.rank)
        confirm = m.Confirm(sub_id, best.route_record, best.replier_cell, 0, entry.filter)
        env = m.Envelope(best.route_record[0], topic, self.node, 0, GeoHeader(),
                         confirm.to_wire())
        self._on_confirm(confirm, env, None)

    def _on_confirm(self, c: m.Confirm, env: m.Envelope, msg: Message | None) -> None:
        topic = env.topic
        lease = self.now + self.params.lease_s
        region = subscription_region(c.filter)
        if region is None:
            self.drop("no_region", msg, sub_id=c.sub_id, topic=topic)
            return
        if c.index == len(c.route_record):  # the replier
            if not self._admit(msg, topic, c.sub_id, 2,
                               2 * (len(c.sub_id.encode()) + wire_size(c.filter.to_wire()))):
                return
            st = self._state(topic)
            prev = m.cell_target(c.route_record[-1])
            waiting = st.awaiting_confirm.pop(c.sub_id, None)
            entry = st.entries.get(waiting[0]) if waiting is not None else None
            if entry is None:
                entry = st.covering(c.filter, region)
            if entry is None and self.cell == region:
                entry = st.entries[c.sub_id] = Entry(c.sub_id, c.filter, region, None, True,
                                                     lease, "II")
            if entry is None:
                self.drop("confirm_unknown", msg, sub_id=c.sub_id, topic=topic)
                return
            entry.downstream[(prev, c.sub_id)] = Downstream(c.filter, lease)
            return
        known = self.topics.get(topic)
        entry = known.entries.get(c.sub_id) if known is not None else None
        if entry is None:
            self.drop("confirm_unknown", msg, sub_id=c.sub_id, topic=topic)
            return
        up = c.route_record[c.index + 1] if c.index + 1 < len(c.route_record) \
            else c.replier_cell
        if entry.active and entry.upstream != up:
            # step 5: one upstream; keep the first
            self.drop("confirm_conflict", sub_id=c.sub_id, topic=topic)
            return
        entry.active, entry.upstream = True, up
        self.cancel_timer(f"{T_PENDING}{topic}{_SEP}{c.sub_id}")
        if c.index > 0:  # keep only the previous cell of the route as downstream
            keep = m.cell_target(c.route_record[c.index - 1])
            for key in [k for k in entry.downstream if k[1] == c.sub_id and k[0] != keep]:
                del entry.downstream[key]
        hop, ttl = (0, None) if msg is None else (msg.hop, msg.ttl)
        self._send_env(m.CONFIRM, up, topic, replace(c, index=c.index + 1).to_wire(), hop=hop,
                       ttl=ttl)

    # ------------------------------------------------------------- delivery

    def _on_event(self, ev: m.EventMsg, env: m.Envelope, msg: Message) -> None:
        """§4.5.4: one copy per distinct matching downstream; then the local clients."""
        if ev.to_client:
            if env.dest == self.node:
                self.deliver_local(ev.event, msg.id, msg.hop, ev.published_at)
            return
        if self._seen_events.check_and_add((env.topic, msg.id), self.now):
            self.drop("duplicate_event", msg, topic=env.topic)
            return
        st = self.topics.get(env.topic)
        if st is None:
            return  # no subscriber of this topic behind this broker
        targets: set[m.Target] = set()
        for entry in st.entries.values():
            if entry.active and entry.region == ev.region and entry.filter.matches(ev.event):
                targets.update(entry.targets_for(ev.event))
        wire_cell = ev.to_wire()
        far = [Cell(t[1], t[2]) for t in sorted(targets) if t[0] == 0 and self._far(t, env.topic)]
        if len(far) > 1:
            self._send_legs(m.EVENT, far, env.topic, wire_cell, msg_id=msg.id, hop=msg.hop,
                            ttl=msg.ttl)
        for target in sorted(targets):
            if target[0] == 0:
                if len(far) < 2 or not self._far(target, env.topic):
                    self._send_env(m.EVENT, Cell(target[1], target[2]), env.topic, wire_cell,
                                   msg_id=msg.id, hop=msg.hop, ttl=msg.ttl)
            elif target[1] == self.node:
                self.deliver_local(ev.event, msg.id, msg.hop, ev.published_at)
            elif self.cell is not None:
                self._send_env(m.EVENT, self.cell, env.topic, replace(ev, to_client=True)
                               .to_wire(), dest=target[1], msg_id=msg.id, hop=msg.hop,
                               ttl=msg.ttl)

    def _far(self, target: m.Target, topic: str) -> bool:
        """A downstream cell that is not next to this one: a leg round a void (a
        subscription taken over across it), sent with the others of its kind at once."""
        cell = Cell(target[1], target[2])
        return self.cell is not None and chebyshev(self.cell, cell) > 1 \
            and (cell, topic) not in self._hints

    def _send_legs(self, mtype: int, cells: list[Cell], topic: str, payload: list[Any], *,
                   msg_id: MessageId, hop: int, ttl: int) -> None:
        """One message for several cells' brokers; relays split it where the legs part."""
        for i in range(0, len(cells), m.MAX_LEGS + 1):
            first, *rest = cells[i:i + m.MAX_LEGS + 1]
            env = m.Envelope(first, topic, None, 0, GeoHeader(), payload, m.STAGE_BROKER,
                             tuple(m.Leg(c, m.STAGE_BROKER, GeoHeader()) for c in rest))
            self._route(Message(mtype, msg_id, env.to_wire(), hop=hop, ttl=ttl), env)

    # -------------------------------------------------------- unsubscribing

    def _on_unsubscribe(self, u: m.Unsubscribe, env: m.Envelope, msg: Message) -> None:
        """§4.5.7: remove the pointer; an entry left without downstream goes, upstream too."""
        st = self.topics.get(env.topic)
        if st is None:
            self.drop("unsubscribe_unknown", sub_id=u.sub_id, topic=env.topic)
            return
        st.awaiting_confirm.pop(u.sub_id, None)
        for entry in st.entries.values():
            entry.downstream.pop((u.sender, u.sub_id), None)
        self._remove_empty(st, msg)

    def _remove_empty(self, st: TopicState, msg: Message | None = None) -> None:
        """Drop entries without downstream; an active one's UNSUBSCRIBE goes upstream,
        continuing the budget of ``msg`` (the UNSUBSCRIBE that emptied it), if any."""
        if self.cell is None:
            return
        hop, ttl = (0, None) if msg is None else (msg.hop, msg.ttl)
        for owner, entry in list(st.entries.items()):
            if entry.downstream:
                continue
            del st.entries[owner]
            if entry.active and entry.upstream is not None:
                unsub = m.Unsubscribe(owner, entry.filter, m.cell_target(self.cell))
                self._send_env(m.UNSUBSCRIBE, entry.upstream, st.topic, unsub.to_wire(),
                               hop=hop, ttl=ttl)

    def _sweep_leases(self) -> None:
        now = self.now
        for topic, st in list(self.topics.items()):
            for entry in st.entries.values():
                expired = [k for k, d in entry.downstream.items() if d.expiry < now]
                for key in expired:
                    del entry.downstream[key]
                    self.drop("lease_expired", sub_id=key[1], topic=topic)
            self._remove_empty(st)
            if not st.entries and not st.awaiting_confirm and not st.replies:
                del self.topics[topic]
                self.emit("broker", topic=topic, role="idle")


def _hint_size(topic: str) -> int:
    """Bytes ``max_hint_bytes`` counts for a remembered broker: its topic's name and a
    fixed part (cell, node id, position)."""
    return len(topic.encode()) + 32


def _d2(a: Point, b: Point) -> float:
    return (a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2


def _region_of(env: m.Envelope, *, new_only: bool = False) -> Cell | None:
    """The region a SUBSCRIBE envelope's payload names (``None`` if it names none, or,
    with ``new_only``, if it is a refresh: a refresh renews an existing path and never
    starts one elsewhere)."""
    try:
        s = m.Subscribe.from_wire(env.payload)
    except ValueError:
        return None
    if new_only and s.refresh:
        return None
    return subscription_region(s.filter)
