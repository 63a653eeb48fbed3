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
from dataclasses import replace
from typing import Any, ClassVar

from meshsub.core.api import Message, MessageId, MsgKind, NeighborInfo, NodeId, Position
from meshsub.core.content import Event, Subscription
from meshsub.core.georouting import GeoHeader, GeoRoutingError, next_hop
from meshsub.core.grid import Cell, CellTracker, Point, chebyshev
from meshsub.core.hashpoint import topic_offset
from meshsub.core.params import ProtocolParams
from meshsub.core.protocol import Protocol
from meshsub.core.region import event_region, make_grid, subscription_region
from meshsub.protocols.hesper import messages as m
from meshsub.protocols.hesper.election import Member, claim_rank, elect
from meshsub.protocols.hesper.energy import EnergyMeter, RadioEnergyModel
from meshsub.protocols.hesper.params import HesperParams
from meshsub.protocols.hesper.sectors import next_offsets
from meshsub.protocols.hesper.state import (
    Downstream,
    Entry,
    ReplyCandidate,
    TimedDedup,
    TopicState,
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
        self.tracker = CellTracker(self.grid, 0.0)
        self.energy = EnergyMeter(
            p.energy_source, p.energy_fraction, p.E_initial,
            RadioEnergyModel(p.E_elec, p.e_fs, p.e_mp, p.TR, p.TD, p.M_b),
        )
        self.cell: Cell | None = None
        self.retiring = False
        self.topics: dict[str, TopicState] = {}
        """Broker state, one per topic this node is the broker of (in its cell)."""
        self._npos: dict[NodeId, Point] = {}
        self._beacons: dict[NodeId, tuple[m.Beacon, float]] = {}
        self._view: dict[NodeId, Member] | None = None
        self._offsets: dict[str, Point] = {}
        self._hints: dict[tuple[Cell, str], tuple[NodeId, Point]] = {}
        """Brokers announced by BROKER_UPDATE, by (cell, topic)."""
        self._handed: dict[str, tuple[NodeId, float]] = {}
        """Topics handed over: new broker and end of ``handover_grace_s``."""
        self._handing: dict[int, tuple[str, NodeId]] = {}
        self._seen_subs = TimedDedup(p.dedup_size, p.dedup_s)
        self._seen_events = TimedDedup(p.dedup_size, p.dedup_s)
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
        msg = replace(message, hop=message.hop + 1, ttl=message.ttl - 1, reliable_id=None)
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
            self.set_timer(T_LEASE, p.sub_refresh_s)
        elif name == T_REFRESH:
            for sub_id, sub in list(self.subscriptions.items()):
                if sub_id in self._refresh_seq:
                    self._issue(sub_id, sub, refresh=True)
            self.set_timer(T_REFRESH, p.sub_refresh_s)
        elif name.startswith(T_PENDING):
            topic, sub_id = name[len(T_PENDING):].split(_SEP, 1)
            st = self.topics.get(topic)
            entry = st.entries.get(sub_id) if st is not None else None
            if st is not None and entry is not None and not entry.active:
                del st.entries[sub_id]  # HESPER-II branch not chosen (our path choice)
                self.drop("pending_expired", sub_id=sub_id, topic=topic)
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
        """The topic's hash point in ``cell`` (Zheng 2008, §4.2; H = SHA-256, i/j from params)."""
        off = self._offsets.get(topic)
        if off is None:
            off = topic_offset(topic, self.params.hash_i, self.params.hash_j)
            if len(self._offsets) > 4096:
                self._offsets.clear()
            self._offsets[topic] = off
        b = self.grid.bounds(cell)
        s = self.grid.cell_size
        return b.x_min + off[0] * s, b.y_min + off[1] * s

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
        self._beacons[sender] = (beacon, self.now)
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
        bad = self._state(transfer.topic).merge(transfer.entries, self.now)
        self._handed.pop(transfer.topic, None)
        if bad:
            self.drop("malformed_entry", message, bytes=bad)

    def _on_broker_update(self, env: m.Envelope, update: m.BrokerUpdate) -> None:
        if update.new_broker == self.node:
            self._hints.pop((update.cell, env.topic), None)
        else:
            self._hints[(update.cell, env.topic)] = (update.new_broker, update.new_pos)

    # ============================================================= transport

    def _send_env(self, mtype: int, cell: Cell, topic: str, payload: list[Any], *,
                  dest: NodeId | None = None, msg_id: MessageId | None = None,
                  hop: int = 0) -> None:
        """Originate an enveloped message for ``cell``'s broker of ``topic`` (or ``dest``)."""
        if dest is None:
            hint = self._hints.get((cell, topic))
            if hint is not None:
                dest = hint[0]
        env = m.Envelope(cell, topic, dest, 0, GeoHeader(), payload)
        msg = Message(mtype, msg_id if msg_id is not None else self.new_message_id(),
                      env.to_wire(), hop=hop, ttl=self.params.max_hops)
        self._route(msg, env)

    def _route(self, msg: Message, env: m.Envelope) -> None:
        """One step between cell brokers: process here, redirect in the cell, or GPSR onwards."""
        if env.dest == self.node:
            self._process(msg, env)
            return
        if self.cell is None or self.position is None:
            self.drop("no_position", msg)
            return
        if self.cell == env.cell:
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
                self._process(msg, env)
                return
            self._forward(broker, msg, replace(env, dest=None, redirects=env.redirects + 1,
                                               geo=GeoHeader()))
            return
        hint = self._hints.get((env.cell, env.topic))
        if env.dest is not None and hint is not None and hint[0] == env.dest:
            target = hint[1]
        else:
            target = self._point(env.cell, env.topic)
        try:
            nxt, header = next_hop(self.node, (self.position.x, self.position.y), self._npos,
                                   target, env.geo, dest=env.dest, radio_range=self.params.TR)
        except GeoRoutingError:
            self.drop("no_route", msg)
            return
        if nxt is not None:
            self._forward(nxt, msg, replace(env, geo=header))
            return
        # Home: no node is closer to the hash point. Hand over to a node of the cell if one
        # is in range, otherwise the cell is empty (our rule; the thesis assumes no empty cell).
        inside = [n for n, pos in self._npos.items() if self.grid.locate(*pos) == env.cell]
        if inside:
            best = min(inside, key=lambda n: (_d2(self._npos[n], target), n))
            self._forward(best, msg, replace(env, geo=GeoHeader()))
        else:
            self._empty_cell(msg, env)

    def _client_addressed(self, msg: Message, env: m.Envelope) -> bool:
        if msg.type == m.BROKER_UPDATE:
            return True
        return msg.type == m.EVENT and len(env.payload) == 5 and env.payload[4] is True

    def _forward(self, nxt: NodeId, msg: Message, env: m.Envelope) -> None:
        if msg.ttl <= 0:
            self.drop("ttl_expired", msg)
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
        """A SUBSCRIBE skips an empty cell along the same rule; anything else is dropped."""
        if msg.type != m.SUBSCRIBE:
            self.drop("empty_cell", msg)
            return
        try:
            sub = m.Subscribe.from_wire(env.payload)
        except ValueError:
            self.drop("malformed", msg)
            return
        region = subscription_region(sub.filter)
        if region is None or env.cell == region:
            self.drop("empty_phb_cell", msg)
            return
        offsets = next_offsets(env.cell[0] - region[0], env.cell[1] - region[1], sub.variant)
        for dx, dy in offsets:
            nxt = Cell(region[0] + dx, region[1] + dy)
            if self.grid.in_grid(nxt):
                self._route(msg, replace(env, cell=nxt, dest=None, geo=GeoHeader()))

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
                self._on_reply(m.Reply.from_wire(env.payload), env)
            elif msg.type == m.CONFIRM:
                self._on_confirm(m.Confirm.from_wire(env.payload), env)
            elif msg.type == m.EVENT:
                self._on_event(m.EventMsg.from_wire(env.payload), env, msg)
            elif msg.type == m.UNSUBSCRIBE:
                self._on_unsubscribe(m.Unsubscribe.from_wire(env.payload), env)
            elif msg.type == m.BROKER_UPDATE:
                self._on_broker_update(env, m.BrokerUpdate.from_wire(env.payload))
        except ValueError:
            self.drop("malformed", msg)

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

    def _reply_wait(self, shb_cell: Cell, region: Cell) -> float:
        """The SHB's reply window: 2 x (hop estimate x per-hop RTT), at least 0.3 s.

        The hop estimate counts two radio hops per cell hop (Theorem 4.1 gives
        1.21 and 1.56). Intermediate brokers compute the same value from the
        SHB's cell (first in the route record), so that their PENDING entries
        outlive the SHB's window.
        """
        p = self.params
        if p.reply_wait_s > 0:
            return p.reply_wait_s
        return max(0.3, 2 * self._hop_estimate(shb_cell, region) * p.per_hop_rtt_s)

    @staticmethod
    def _hop_estimate(shb_cell: Cell, region: Cell) -> int:
        return 2 * max(1, chebyshev(shb_cell, region))

    def _pending_ttl(self, shb_cell: Cell, region: Cell) -> float:
        """3 x the reply window; with per-hop ACKs also the reliable sender's
        retransmissions on every hop of SUBSCRIBE and REPLY, so that a reply slowed by
        loss still finds its PENDING entries and is decided late (``_on_reply``) rather
        than waiting a refresh period: the vmesh at 10 % loss showed replies 3 s late."""
        p = self.params
        if p.pending_ttl_s:
            return p.pending_ttl_s
        ttl = 3 * self._reply_wait(shb_cell, region)
        if p.reliable_control:
            policy = p.retransmit_policy()
            retries = sum(min(policy.max_rto, policy.initial_rto * policy.factor ** i)
                          for i in range(policy.max_attempts - 1))
            ttl += 2 * self._hop_estimate(shb_cell, region) * retries
        return ttl

    def _on_subscribe(self, s: m.Subscribe, env: m.Envelope, msg: Message) -> None:
        """Spec §4.5.2 at broker ``br``."""
        region = subscription_region(s.filter)
        if region is None or self.cell is None:
            self.drop("no_region", msg, sub_id=s.sub_id)
            return
        topic = s.filter.topic
        now = self.now
        lease = now + self.params.lease_s
        st = self._state(topic)
        local = not s.route_record
        prev = m.client_target(s.client) if local else m.cell_target(s.route_record[-1])
        if s.refresh:
            holder = st.holding(prev, s.sub_id)
            if holder is not None:
                self._renew(st, holder, prev, s, lease)
                return
        elif self._seen_subs.check_and_add((topic, s.sub_id, s.seq), now):
            # step 2: the other HESPER-II branch
            self.drop("duplicate_subscribe", msg, sub_id=s.sub_id, topic=topic)
            return
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
                                new_links - 1, s.seq)
                self._send_env(m.REPLY, s.route_record[-1], topic, reply.to_wire(),
                               hop=msg.hop)
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
                self._send_env(m.SUBSCRIBE, nxt, topic, fwd.to_wire(), hop=msg.hop)
        self.set_timer(f"{T_PENDING}{topic}{_SEP}{s.sub_id}", self._pending_ttl(route[0], region))
        if local and s.variant == "II":
            st.replies.setdefault(s.sub_id, [])
            self.set_timer(f"{T_REPLY}{topic}{_SEP}{s.sub_id}", self._reply_wait(route[0], region))

    def _renew(self, st: TopicState, holder: Entry, prev: m.Target, s: m.Subscribe,
               lease: float) -> None:
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
        self._send_env(m.SUBSCRIBE, holder.upstream, st.topic, fwd.to_wire())

    def _on_reply(self, r: m.Reply, env: m.Envelope) -> None:
        """Step 6: the REPLY retraces the route record; HESPER-I activates on the way."""
        st = self.topics.get(env.topic)
        entry = st.entries.get(r.sub_id) if st is not None else None
        if st is None or entry is None:
            self.drop("reply_unknown_sub", sub_id=r.sub_id, topic=env.topic)
            return
        up = r.route_record[r.index + 1] if r.index + 1 < len(r.route_record) \
            else r.replier_cell
        if entry.variant == "I" and not entry.active:
            entry.active, entry.upstream = True, up
            self.cancel_timer(f"{T_PENDING}{env.topic}{_SEP}{r.sub_id}")
        if r.index > 0:
            self._send_env(m.REPLY, r.route_record[r.index - 1], env.topic,
                           replace(r, index=r.index - 1).to_wire())
            return
        if entry.variant == "II":
            window = st.replies.get(r.sub_id)
            if window is None:  # a late reply (or one for a refresh): decide on it now
                window = st.replies[r.sub_id] = []
                self.set_timer(f"{T_REPLY}{env.topic}{_SEP}{r.sub_id}",
                               self._reply_wait(r.route_record[0], entry.region))
            self._arrivals += 1
            window.append(ReplyCandidate(r.new_links, r.total_hops, self._arrivals,
                                         r.route_record, r.replier_cell))

    def _close_reply_window(self, topic: str, sub_id: str) -> None:
        """§4.5.5: pick the reply with the fewest new links and CONFIRM its route."""
        st = self.topics.get(topic)
        if st is None:
            return
        candidates = st.replies.pop(sub_id, [])
        entry = st.entries.get(sub_id)
        if entry is None or entry.active:
            return
        if not candidates:  # a late reply is decided when it comes (_on_reply) while
            return          # the PENDING entry lives; else it expires (pending_expired)
        best = min(candidates, key=ReplyCandidate.rank)
        confirm = m.Confirm(sub_id, best.route_record, best.replier_cell, 0, entry.filter)
        env = m.Envelope(best.route_record[0], topic, self.node, 0, GeoHeader(),
                         confirm.to_wire())
        self._on_confirm(confirm, env)

    def _on_confirm(self, c: m.Confirm, env: m.Envelope) -> None:
        topic = env.topic
        st = self._state(topic)
        lease = self.now + self.params.lease_s
        region = subscription_region(c.filter)
        if region is None:
            self.drop("no_region", sub_id=c.sub_id, topic=topic)
            return
        if c.index == len(c.route_record):  # the replier
            prev = m.cell_target(c.route_record[-1])
            waiting = st.awaiting_confirm.pop(c.sub_id, None)
            entry = st.entries.get(waiting[0]) if waiting is not None else None
            if entry is None:
                entry = st.covering(c.filter, region)
            if entry is None and self.cell == region:
                entry = st.entries[c.sub_id] = Entry(c.sub_id, c.filter, region, None, True,
                                                     lease, "II")
            if entry is None:
                self.drop("confirm_unknown", sub_id=c.sub_id, topic=topic)
                return
            entry.downstream[(prev, c.sub_id)] = Downstream(c.filter, lease)
            return
        entry = st.entries.get(c.sub_id)
        if entry is None:
            self.drop("confirm_unknown", sub_id=c.sub_id, topic=topic)
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
        self._send_env(m.CONFIRM, up, topic, replace(c, index=c.index + 1).to_wire())

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
        for target in sorted(targets):
            if target[0] == 0:
                self._send_env(m.EVENT, Cell(target[1], target[2]), env.topic, wire_cell,
                               msg_id=msg.id, hop=msg.hop)
            elif target[1] == self.node:
                self.deliver_local(ev.event, msg.id, msg.hop, ev.published_at)
            elif self.cell is not None:
                self._send_env(m.EVENT, self.cell, env.topic, replace(ev, to_client=True)
                               .to_wire(), dest=target[1], msg_id=msg.id, hop=msg.hop)

    def _on_unsubscribe(self, u: m.Unsubscribe, env: m.Envelope) -> None:
        """§4.5.7: remove the pointer; an entry left without downstream goes, upstream too."""
        st = self.topics.get(env.topic)
        if st is None:
            self.drop("unsubscribe_unknown", sub_id=u.sub_id, topic=env.topic)
            return
        st.awaiting_confirm.pop(u.sub_id, None)
        for entry in st.entries.values():
            entry.downstream.pop((u.sender, u.sub_id), None)
        self._remove_empty(st)

    def _remove_empty(self, st: TopicState) -> None:
        if self.cell is None:
            return
        for owner, entry in list(st.entries.items()):
            if entry.downstream:
                continue
            del st.entries[owner]
            if entry.active and entry.upstream is not None:
                unsub = m.Unsubscribe(owner, entry.filter, m.cell_target(self.cell))
                self._send_env(m.UNSUBSCRIBE, entry.upstream, st.topic, unsub.to_wire())

    def _sweep_leases(self) -> None:
        now = self.now
        for topic, st in list(self.topics.items()):
            for entry in st.entries.values():
                expired = [k for k, d in entry.downstream.items() if d.expiry < now]
                for key in expired:
                    del entry.downstream[key]
                    self.drop("lease_expired", topic=topic)
            self._remove_empty(st)
            if not st.entries and not st.awaiting_confirm and not st.replies:
                del self.topics[topic]
                self.emit("broker", topic=topic, role="idle")


def _d2(a: Point, b: Point) -> float:
    return (a[0] - b[0]) ** 2 + (a[1] - b[1]) ** 2
