"""GIANT (Zheng 2008, ch. 6): pub/sub between brokers that never meet, carried by walking ferries.

Roles (the node's roles ``broker``/``ferry``, else the ``role`` parameter):
*brokers* sit in cells, serve local applications and never hear each other;
*ferries* random-walk and carry. All traffic is contact-driven (§6.4): when
a broker and a ferry come into range both send HELLO, and then

- the ferry hands the broker the bundles addressed to it and every
  advertisement it carries (§6.4.1 step 5, §6.4.3 step 4);
- the broker learns candidate upstream brokers from the advertisements,
  appends its own sender record and gives the updated advertisement back
  (§6.4.1 step 6: the "IDs of visited brokers");
- the broker gives the ferry its own and other advertisements the ferry lacks
  (up to ``adv_handouts`` ferries per refresh period, §6.4.1 step 3);
- the broker runs Broker_SendEvent (Function 6.2) over everything it is
  recruiting for, events and (un)subscriptions alike, and hands the ferry a
  copy for each next-hop broker that RecruitFerry (Algorithm 6.1) says still
  needs one.

Subscriptions follow advertisements (§6.4.2): a broker with a local
subscriber, or a subscription from downstream that it does not already cover,
picks an upstream broker once (Function 6.1 in ``upstream``; the Prim
baseline with ``tree = "prim"``) and sends the subscription there by ferry;
this stops at the PHB or at a broker whose subscriptions cover it. Events go
back down the reverse paths. Subscriptions are leased and refreshed, and each
issue carries a version so that an unsubscription cannot be undone by an
older subscription still on a ferry (§6.4.4 leaves this open).

Every bundle a ferry takes is acknowledged per hop (the core's reliable
send); a handover counts as a recruitment when acknowledged, a bundle leaves
a ferry when its receiver acknowledges it, and a contact that ends early
loses nothing.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from typing import Any, ClassVar

from meshsub.core import bodies
from meshsub.core.api import (
    Action,
    Input,
    Message,
    MessageId,
    MsgKind,
    NeighborInfo,
    NodeId,
    Position,
)
from meshsub.core.beacon import BeaconTable
from meshsub.core.buffer import BufferStore, Dropped
from meshsub.core.cellgrid import OwnCell, role_from_capabilities
from meshsub.core.content import Event, Subscription
from meshsub.core.grid import Cell
from meshsub.core.lattice import Boundary, Lattice, hit_probability, hit_probability_dp
from meshsub.core.leases import Upsert, VersionedLeases
from meshsub.core.params import ProtocolParams
from meshsub.core.protocol import Protocol
from meshsub.core.topics import topic_matches
from meshsub.protocols.giant import messages as m
from meshsub.protocols.giant.ferry import FerryStore
from meshsub.protocols.giant.params import ROLE_NAMES, GiantParams, Role
from meshsub.protocols.giant.recruit import recruit_ferry
from meshsub.protocols.giant.routing import (
    Downstream,
    Outgoing,
    OutKey,
    RoutingEntry,
    Unready,
    out_key,
)
from meshsub.protocols.giant.upstream import Candidate, choose_upstream

T_SWEEP = "sweep"
T_REFRESH = "refresh"
T_READVERTISE = "readvertise"
_VERSION_SHIFT = 32


@dataclass
class _Handover:
    """A bundle queued for or in flight to a ferry, tentatively counted as a recruitment."""

    key: OutKey
    bid: Cell
    ferry: NodeId
    at: float


@dataclass
class _LocalSub:
    filter: Subscription
    version: int


class Giant(Protocol):
    """GIANT brokers and ferries."""

    name: ClassVar[str] = "giant"
    protocol_id: ClassVar[int] = 9
    Params: ClassVar[type[ProtocolParams]] = GiantParams
    message_kinds: ClassVar[dict[int, MsgKind]] = m.KINDS
    buffer_store: ClassVar[bool] = True
    params: GiantParams

    def __init__(self, node: NodeId, *, store: BufferStore | None = None,
                 **kwargs: Any) -> None:
        """``store`` backs what a ferry carries (the daemon passes a persistent one)."""
        super().__init__(node, **kwargs)
        p = self.params
        self.role = role_from_capabilities(self.capabilities, ROLE_NAMES, p.role)
        self._own = OwnCell(p)
        self.grid = self._own.grid
        self.cell: Cell | None = self._own.cell
        self.lattice = Lattice(p.cols, p.rows, p.hit_boundary) \
            if p.hit_boundary is not Boundary.INFINITE else Lattice()
        self.routes: dict[tuple[str, Cell], RoutingEntry] = {}
        self.outgoing: dict[OutKey, Outgoing] = {}
        self.carried: FerryStore | None = FerryStore(
            p.buffer_size, p.drop_policy, store,
            max_lifetime=max(p.adv_ttl_s, p.event_ttl_s, p.sub_lease_s),
        ) if self.role is Role.FERRY else None
        self._local: dict[str, _LocalSub] = {}
        """A broker's local subscriptions, by network id."""
        self._versions: dict[str, int] = {}
        self._contacts: dict[NodeId, m.Hello] = {}
        """Peers in contact: heard, and the ferry in the broker's cell (``_in_cell``)."""
        self._heard: BeaconTable[m.Hello] = BeaconTable(
            max_entries=p.max_peers, max_bytes=0, evict_stalest=True)
        """Peers of the other role heard, with their latest HELLO (core/beacon.py's table:
        bounded, the least recently heard evicted and counted as ``peers_full``)."""
        self._said: dict[NodeId, Cell | None] = {}
        """The cell our latest HELLO to each neighbour gave."""
        self._outbox: dict[NodeId, deque[Message]] = {}
        """What waits for a slot of each peer's window; a peer has an entry only while
        something waits (so only peers with ``window`` sends in flight: ``max_peers``)."""
        self._inflight: dict[NodeId, int] = {}
        """Bundles and advertisements ``_pump`` sent to each peer and not yet acknowledged
        or given up (HELLOs are not counted: they do not go through the window). A peer
        has an entry only while that count is positive, and at most ``max_peers`` peers
        have one (``_pump``): acknowledgements of a peer's sends cannot grow it, nor can
        peers that never become neighbours (forged ids, a contact that ended)."""
        self._handovers: dict[MessageId, _Handover] = {}
        self.stats: dict[str, int] = {"contacts": 0, "recruited": 0, "refused": 0,
                                      "bundles_delivered": 0, "advs_learned": 0,
                                      "out_of_cell": 0, "left_cell": 0}
        self._started = False

    # ================================================================ driver inputs

    def handle(self, inp: Input) -> list[Action]:
        if not self._started:
            self._started = True
            self.now = inp.now
            self._start()
        return super().handle(inp)

    def _start(self) -> None:
        p = self.params
        self.emit("broker", role=self.role.value)
        self.set_timer(T_SWEEP, p.sweep_s)
        if self.role is Role.FERRY:
            self._sweep_ferry()
            return
        self.set_timer(T_REFRESH, p.sub_refresh_s)
        self.set_timer(T_READVERTISE, p.adv_refresh_s)
        for topic in p.adverts:
            self._advertise(topic)

    def on_position(self, position: Position | None) -> None:
        if self._own.update(position):
            self.cell = self._own.cell
            if self.role is Role.BROKER:
                for topic in self.params.adverts:
                    self._advertise(topic)
            self._changed_cell()

    def on_neighbor_up(self, info: NeighborInfo) -> None:
        if {ROLE_NAMES[c] for c in info.capabilities if c in ROLE_NAMES} == {self.role}:
            return  # a peer of our own role, by the roles it advertises: no contact (§6.2)
        self._say_hello(info.node)

    def on_neighbor_down(self, node: NodeId) -> None:
        self._heard.forget(node)
        self._said.pop(node, None)
        self._end_contact(node)
        self._inflight.pop(node, None)

    def on_timer(self, name: str) -> None:
        p = self.params
        if name == T_SWEEP:
            if self.role is Role.FERRY:
                self._sweep_ferry()
            else:
                self._sweep_broker()
            self.set_timer(T_SWEEP, p.sweep_s)
        elif name == T_REFRESH:
            self._refresh_local()
            self.set_timer(T_REFRESH, p.sub_refresh_s)
        elif name == T_READVERTISE:
            for (_topic, phb), entry in self.routes.items():
                if phb == self.cell:
                    entry.adv_expires = self.now + p.adv_ttl_s
                    entry.handed.clear()
            self.set_timer(T_READVERTISE, p.adv_refresh_s)

    def on_subscribe(self, sub_id: str, subscription: Subscription) -> None:
        if self.role is Role.FERRY:
            self.drop("ferry_has_no_clients", sub_id=sub_id, topic=subscription.topic)
            return
        net_id = self._net_id(sub_id)
        local = self._local[net_id] = _LocalSub(subscription, self._next_version(net_id))
        for entry in self.routes.values():
            if topic_matches(subscription.topic, entry.topic):
                self._accept_local(entry, net_id, local)

    def on_unsubscribe(self, sub_id: str, subscription: Subscription) -> None:
        net_id = self._net_id(sub_id)
        if self._local.pop(net_id, None) is None:
            return
        version = self._next_version(net_id)
        for entry in self.routes.values():
            if entry.downstream.remove(net_id, version,
                                       self.now + self.params.sub_lease_s) is not None:
                self._reconcile(entry)

    def on_publish(self, event: Event, event_id: MessageId) -> None:
        if self.role is Role.FERRY:
            self.drop("ferry_has_no_clients", event_id=str(event_id), topic=event.topic)
            return
        if self.cell is None:
            self.drop("no_cell", event_id=str(event_id), topic=event.topic)
            return
        self.dedup.check_and_add(event_id)
        entry = self.routes.get((event.topic, self.cell)) or self._advertise(event.topic)
        item = m.EventItem(event_id, self.cell, event.topic, event, self.now)
        self.deliver_local(event, event_id, 0, self.now)
        if entry is not None:
            self._forward_event(entry, item, came_from=None)

    def on_frame(self, sender: NodeId, message: Message) -> None:
        try:
            if message.type == m.HELLO:
                self._on_hello(sender, m.Hello.decode(message.body))
            elif message.type == m.BUNDLE:
                self._on_bundle(sender, message, m.Bundle.decode(message.body))
            elif message.type == m.ADV:
                self._on_adv(sender, message,
                             m.Adv.decode(message.body, self.params.max_senders))
            else:
                self.drop("unknown_type", message, peer=sender)
        except bodies.BodyError:
            self.drop("malformed", message, peer=sender)

    def on_reliable_acked(self, node: NodeId, message: Message) -> None:
        self._landed(node, message)
        if message.type == m.BUNDLE:
            if self.carried is not None:
                self.carried.remove(message.id)
                self.stats["bundles_delivered"] += 1
            elif (h := self._handovers.pop(message.id, None)) is not None:
                self.stats["recruited"] += 1
                self._recorded_recruit(h)
        self._pump(node)

    def on_reliable_failed(self, node: NodeId, message: Message) -> None:
        self._landed(node, message)
        self._undo_handover(message.id)
        self._pump(node)

    def _landed(self, node: NodeId, message: Message) -> None:
        """A windowed send to ``node`` ended (acknowledged or given up): free its slot,
        and the peer's entry with the last one."""
        if message.type == m.HELLO:
            return
        left = self._inflight.get(node, 0) - 1
        if left > 0:
            self._inflight[node] = left
        else:
            self._inflight.pop(node, None)

    def _recorded_recruit(self, h: _Handover) -> None:
        """One telemetry record per recruitment, so that an evaluation can count the
        ferries each event or subscription took per sender (§6.7.1's metric)."""
        kind, key = h.key
        item = {"event_id": key} if kind == m.Kind.EVENT else {"sub_id": key}
        self.emit("counter", reason="giant_recruited", peer=h.ferry, **item)

    def status(self) -> dict[str, Any]:
        out = {**super().status(), "role": self.role.value,
               "cell": None if self.cell is None else list(self.cell),
               "contacts": len(self._contacts), "stats": dict(self.stats)}
        if self.carried is not None:
            out["carried"] = len(self.carried)
        else:
            out.update(routes=len(self.routes), outgoing=len(self.outgoing),
                       upstreams=[{"topic": e.topic, "phb": list(e.phb),
                                   "upstream": list(e.upstream.upstream)}
                                  for e in self.routes.values() if e.upstream is not None])
        return out

    # ================================================================ contacts

    def _say_hello(self, peer: NodeId) -> None:
        self._said[peer] = self.cell
        hello = m.Hello(self.role is Role.FERRY, self.cell, self._adv_summary())
        self.send_reliable(peer, Message(m.HELLO, self.new_message_id(), hello.encode(),
                                         ttl=1))

    def _on_hello(self, sender: NodeId, hello: m.Hello) -> None:
        if hello.ferry == (self.role is Role.FERRY):
            return  # brokers never exchange with brokers, nor ferries with ferries (§6.2)
        if not hello.ferry and hello.cell is None:
            return  # a broker that does not know its cell yet
        for evicted in self._heard.hear(sender, hello, self.now).evicted:
            self.drop("peers_full", peer=evicted)
            self._said.pop(evicted, None)
            self._end_contact(evicted)
        if self.role is Role.BROKER and self.cell is None:
            return  # kept in _heard: taken up when the broker learns its cell (_changed_cell)
        if sender in self._said and self._said[sender] != self.cell:
            self._say_hello(sender)  # it heard us where we no longer are
        if not self._in_cell(hello):
            if self._end_contact(sender):
                self.stats["left_cell"] += 1
            else:
                self.stats["out_of_cell"] += 1
            return
        if sender in self._contacts and self._contacts[sender].cell == hello.cell:
            self._contacts[sender] = hello  # the same contact, announced again
            if self.carried is not None:
                # A broker greets a ferry when it gains it as a neighbour, so one that
                # greets a ferry still in contact has lost it meanwhile (neighbour loss is
                # not symmetric: the ferry's timeout had not run out): the ferry answers,
                # and the broker, which starts the contact on that answer, has it back.
                # Brokers never answer a repeated HELLO, so no two peers answer each
                # other without end.
                self._say_hello(sender)
            return
        self._contacts[sender] = hello
        self.stats["contacts"] += 1
        if self.carried is not None:
            self._ferry_meets_broker(sender, hello)
        else:
            self._broker_meets_ferry(sender, hello)

    def _in_cell(self, hello: m.Hello) -> bool:
        """Whether the ferry and the broker are in the same cell: the in-cell check.

        §6.2: "a broker can directly communicate only with the message ferries
        ... in the broker's hosting grid", and RecruitFerry (§6.4.3) computes a
        recruited ferry's chance to reach the next broker from the sender's
        cell. A real radio reaches further than one cell, so hearing a peer is
        not enough: a contact needs the ferry in the broker's cell (by the
        ferry's own position, in its HELLO). A ferry that does not know its
        cell cannot be checked; radio range then stands for the cell.
        """
        ferry_cell = self.cell if self.role is Role.FERRY else hello.cell
        broker_cell = hello.cell if self.role is Role.FERRY else self.cell
        return ferry_cell is None or ferry_cell == broker_cell

    def _end_contact(self, peer: NodeId) -> bool:
        """Forget a contact; what was queued for it and not yet sent is not handed over."""
        for message in self._outbox.pop(peer, deque()):
            self._undo_handover(message.id)
        return self._contacts.pop(peer, None) is not None

    def _changed_cell(self) -> None:
        """A node whose cell changed or became known says so to the peers it greeted, and
        reconsiders the peers it heard: a contact may begin or end.

        A ferry walks into another cell. A broker learns its cell from its first fix,
        which on a device can come after a ferry greeted it: it could not check that
        ferry's cell then, and the ferry ignored the broker's cell-less HELLO, so
        without this neither would start the contact before the ferry moved on.
        """
        for peer in list(self._said):
            self._say_hello(peer)
        for peer, heard in list(self._heard.items()):
            self._on_hello(peer, heard.state)

    def _enqueue(self, peer: NodeId, message: Message) -> None:
        self._outbox.setdefault(peer, deque()).append(message)
        self._pump(peer)

    def _pump(self, peer: NodeId) -> None:
        """Send what is queued for ``peer`` while fewer than ``window`` are in flight to it.

        The in-flight table is bounded by ``max_peers`` like the peers heard: a peer
        without an entry while every slot holds a peer with sends in flight has its
        contact ended and what was queued for it counted (``inflight_full``); a broker's
        handovers are undone (recruited again later), a ferry keeps its bundles."""
        queue = self._outbox.get(peer)
        if queue and peer not in self._inflight \
                and len(self._inflight) >= self.params.max_peers:
            for message in queue:
                self.drop("inflight_full", message, peer=peer)
            self._end_contact(peer)
            return
        while queue and self._inflight.get(peer, 0) < self.params.window:
            message = queue.popleft()
            self._inflight[peer] = self._inflight.get(peer, 0) + 1
            self.send_reliable(peer, message)
        if queue is not None and not queue:  # an empty queue per peer ever sent to: a leak
            del self._outbox[peer]

    def _adv_summary(self) -> tuple[MessageId, ...]:
        if self.carried is None:
            return ()
        return tuple(msg.id for msg in self.carried.advertisements())[:m.MAX_ADV_IDS]

    # ================================================================ ferry

    def _ferry_meets_broker(self, broker: NodeId, hello: m.Hello) -> None:
        assert self.carried is not None and hello.cell is not None
        for message, _bundle in list(self.carried.bundles_for(hello.cell)):
            self._enqueue(broker, message)
        for message in self.carried.advertisements():
            self._enqueue(broker, message)

    def _ferry_takes(self, sender: NodeId, message: Message, expires_at: float) -> None:
        assert self.carried is not None
        for d in self.carried.add(message, self.now, expires_at):
            self._report(d)

    def _report(self, dropped: Dropped) -> None:
        self.drop(dropped.reason, dropped.entry.message)

    def _sweep_ferry(self) -> None:
        assert self.carried is not None
        for d in self.carried.expire(self.now):
            self._report(d)

    # ================================================================ broker: advertisements

    def _advertise(self, topic: str) -> RoutingEntry | None:
        """Become the PHB of ``topic`` (§6.4.1 steps 1-2): an ADV with sender (self, 0, 0)."""
        if self.cell is None:
            return None
        key = (topic, self.cell)
        entry = self.routes.get(key)
        if entry is None:
            entry = self._new_route(topic, self.cell)
            if entry is None:
                return None
            entry.adv_id = self.new_message_id()
        entry.adv_senders = (m.SenderRecord(self.cell, 0, 0, 0, True),)
        entry.adv_expires = self.now + self.params.adv_ttl_s
        return entry

    def _new_route(self, topic: str, phb: Cell) -> RoutingEntry | None:
        if len(self.routes) >= self.params.max_routes:
            self.drop("routes_full", topic=topic)
            return None
        entry = self.routes[(topic, phb)] = RoutingEntry(
            topic, phb, VersionedLeases(self.params.max_downstream))
        for net_id, local in self._local.items():
            if topic_matches(local.filter.topic, topic):
                self._accept_local(entry, net_id, local)
        return entry

    def _broker_meets_ferry(self, ferry: NodeId, hello: m.Hello) -> None:
        assert self.cell is not None
        lacks = set(hello.advs)
        for entry in self.routes.values():
            if entry.adv_id is None or entry.adv_expires <= self.now \
                    or entry.adv_id in lacks or ferry in entry.handed \
                    or len(entry.handed) >= self.params.adv_handouts:
                continue
            entry.handed.add(ferry)
            adv = m.Adv(entry.topic, entry.phb, entry.adv_senders,
                        entry.adv_expires - self.now)
            self._enqueue(ferry, Message(m.ADV, entry.adv_id, adv.encode()))
        self._send_events(ferry)

    def _on_adv(self, sender: NodeId, message: Message, adv: m.Adv) -> None:
        if self.carried is not None:
            self._ferry_takes(sender, message, self.now + adv.remaining_s)
            return
        if self.cell is None or adv.phb == self.cell:
            return  # our own advertisement coming back
        entry = self.routes.get((adv.topic, adv.phb)) or self._new_route(adv.topic, adv.phb)
        if entry is None:
            return
        self.stats["advs_learned"] += 1
        entry.adv_id = message.id
        entry.adv_expires = max(entry.adv_expires, self.now + adv.remaining_s)
        for s in adv.senders:
            if s.cell == self.cell:
                continue
            if s.cell not in entry.candidates \
                    and len(entry.candidates) >= self.params.max_candidates:
                self.drop("candidates_full", message, peer=sender)
                continue
            held = entry.candidates.get(s.cell)
            if held is not None and held.on_tree and not s.on_tree:
                continue  # an older copy of the advertisement: a broker keeps its upstream
            entry.candidates[s.cell] = Candidate(s.cell, s.distance, s.hops, s.max_seg,
                                                 s.on_tree)
        self._reconcile(entry)
        choice = entry.upstream or choose_upstream(entry.candidates.values(), self.cell,
                                                   self.params.tree)
        senders = [s for s in adv.senders if s.cell != self.cell]
        if choice is not None:
            senders.append(m.SenderRecord(self.cell, choice.distance, choice.hops,
                                          choice.max_seg, entry.upstream is not None))
        if len(senders) > self.params.max_senders:  # keep the PHB's record, drop the oldest
            senders = senders[:1] + senders[len(senders) - self.params.max_senders + 1:]
        entry.adv_senders = tuple(senders)
        if sender in self._contacts or sender not in self._heard:
            # the ferry that brought it carries our record on; its ADV may overtake its
            # HELLO (a lost first HELLO is sent again later), and then no later contact
            # would hand the update over: the ferry already holds this ADV's id
            entry.handed.add(sender)
            back = m.Adv(adv.topic, adv.phb, entry.adv_senders, adv.remaining_s)
            self._enqueue(sender, Message(m.ADV, message.id, back.encode()))

    # ================================================================ broker: subscriptions

    def _net_id(self, sub_id: str) -> str:
        return f"{self.node:x}/{sub_id}"

    def _next_version(self, net_id: str) -> int:
        seq = self._versions.get(net_id, 0) + 1
        self._versions[net_id] = seq
        return (self.epoch << _VERSION_SHIFT) | seq

    def _accept_local(self, entry: RoutingEntry, net_id: str, local: _LocalSub) -> None:
        down = Downstream(None, local.filter, self.params.DR, 1, ())
        outcome = entry.downstream.upsert(net_id, down, local.version,
                                          self.now + self.params.sub_lease_s)
        if outcome is Upsert.FULL:
            self.drop("downstream_full", sub_id=net_id, topic=entry.topic)
        elif outcome in (Upsert.NEW, Upsert.UPDATED):
            self._reconcile(entry)

    def _refresh_local(self) -> None:
        for net_id, local in self._local.items():
            local.version = self._next_version(net_id)
            for entry in self.routes.values():
                if topic_matches(local.filter.topic, entry.topic):
                    self._accept_local(entry, net_id, local)

    def _on_sub_item(self, bundle: m.Bundle, item: m.SubItem, message: Message) -> None:
        assert self.cell is not None
        entry = self.routes.get((item.topic, item.phb)) or self._new_route(item.topic, item.phb)
        if entry is None:
            return
        if item.filter is None:  # UNSUB
            if entry.downstream.remove(item.sub_id, item.version,
                                       self.now + self.params.sub_lease_s) is not None:
                self._reconcile(entry)
            return
        if self.cell in item.path:
            self.drop("subscription_loop", message, sub_id=item.sub_id)
            return
        down = Downstream(bundle.sender, item.filter, item.DR, item.hops_total,
                          item.path[-m.MAX_PATH + 1:])
        outcome = entry.downstream.upsert(item.sub_id, down, item.version,
                                          self.now + item.lease_s)
        if outcome is Upsert.FULL:
            self.drop("downstream_full", message, sub_id=item.sub_id)
        elif outcome is Upsert.STALE:
            self.drop("stale_subscription", message, sub_id=item.sub_id)
        elif outcome is not Upsert.RENEWED:
            self._reconcile(entry)

    def _reconcile(self, entry: RoutingEntry) -> None:
        """Make what upstream holds from us equal to what we need (§6.4.2 step 3, §6.4.4).

        Only subscriptions no other held one covers go up; a refresh (newer
        version) goes up too; one no longer needed goes up as an UNSUB with
        the version last sent. The upstream is chosen once and kept (the
        thesis's "all inactive" condition would block a later uncovered
        subscription; docs/protocols/giant.md).
        """
        assert self.cell is not None
        if entry.phb == self.cell:
            return  # subscriptions stop at the PHB
        needed = dict(entry.needed())
        if needed and entry.upstream is None:
            entry.upstream = choose_upstream(entry.candidates.values(), self.cell,
                                             self.params.tree)
            if entry.upstream is None:
                return  # waits for an advertisement that names a candidate
        up = entry.upstream
        if up is None:
            return
        lease = self.params.sub_lease_s
        for sid, held in needed.items():
            sent = entry.sent_up.get(sid)
            if sent is not None and sent[0] >= held.version:
                continue
            d = held.value
            hops = d.hops_total if d.side is not None else up.hops
            item = m.SubItem(sid, held.version, entry.phb, entry.topic, d.filter, d.DR,
                             hops, lease, (*d.path, self.cell))
            self._queue_out(m.Kind.SUB, item, {up.upstream: Unready(self.params.Prob_ctrl)})
            entry.sent_up[sid] = (held.version, d.filter)
        for sid in [s for s in entry.sent_up if s not in needed]:
            version, _flt = entry.sent_up.pop(sid)
            version = max(version, entry.downstream.version(sid) or version)
            item = m.SubItem(sid, version, entry.phb, entry.topic, None, 0.0, 1, lease,
                             (self.cell,))
            self._queue_out(m.Kind.UNSUB, item, {up.upstream: Unready(self.params.Prob_ctrl)})

    # ================================================================ broker: events

    def _on_bundle(self, sender: NodeId, message: Message, bundle: m.Bundle) -> None:
        if self.carried is not None:
            hello = self._contacts.get(sender)
            if hello is not None and hello.cell == bundle.receiver:
                self.drop("wrong_receiver", message, peer=sender)  # addressed to its sender
                return
            if self.carried.carries(bundle):
                self.drop("duplicate_bundle", message, peer=sender)
                return
            self._ferry_takes(sender, message, self.now + bundle.remaining_s)
            for peer, hello in list(self._contacts.items()):  # _pump may end one
                if hello.cell == bundle.receiver and message.id in self.carried.buffer:
                    self._enqueue(peer, message)
            return
        if bundle.receiver != self.cell:
            self.drop("wrong_receiver", message, peer=sender)
            return
        if isinstance(bundle.item, m.EventItem):
            self._on_event_item(bundle, bundle.item, message)
        else:
            self._on_sub_item(bundle, bundle.item, message)

    def _on_event_item(self, bundle: m.Bundle, item: m.EventItem, message: Message) -> None:
        """§6.4.3 step 5: de-duplicate, notify local subscribers, recruit for the next hops."""
        if self.is_duplicate(item.event_id):
            self.drop("duplicate_event", message, event_id=str(item.event_id))
            return
        self.deliver_local(item.event, item.event_id, message.hop + 1, item.published_at)
        entry = self.routes.get((item.topic, item.phb))
        if entry is not None:
            self._forward_event(entry, item, came_from=bundle.sender)

    def _forward_event(self, entry: RoutingEntry, item: m.EventItem,
                       came_from: Cell | None) -> None:
        sides = {e.value.side for _k, e in entry.downstream.items()
                 if e.value.side is not None and e.value.side != came_from
                 and e.value.filter.matches(item.event)}
        if sides:
            self._queue_out(m.Kind.EVENT, item,
                            {side: Unready(entry.link_prob(side)) for side in sides})

    def _queue_out(self, kind: int, item: m.EventItem | m.SubItem,
                   targets: dict[Cell, Unready]) -> None:
        key = out_key(kind, item)
        if isinstance(item, m.SubItem):  # a newer issue replaces what is still recruiting
            for old in [k for k, o in self.outgoing.items() if k[0] != m.Kind.EVENT
                        and isinstance(o.item, m.SubItem) and o.item.sub_id == item.sub_id
                        and o.item.phb == item.phb and k != key]:
                del self.outgoing[old]
        record = self.outgoing.get(key)
        if record is None:
            if len(self.outgoing) >= self.params.max_outgoing:
                self.drop("outgoing_full", sub_id=getattr(item, "sub_id", None),
                          event_id=str(item.event_id) if isinstance(item, m.EventItem)
                          else None)
                return
            record = self.outgoing[key] = Outgoing(kind, item,
                                                   self.now + self.params.event_ttl_s)
        for bid, unready in targets.items():
            held = record.unready.get(bid)
            if held is None or held.prob < unready.prob:
                record.unready[bid] = unready if held is None else \
                    Unready(unready.prob, held.times, held.ferries)
        for peer, hello in list(self._contacts.items()):
            if hello.ferry:
                self._send_events(peer)

    def _send_events(self, ferry: NodeId) -> None:
        """Function 6.2 over every record: recruit this ferry where RecruitFerry says so."""
        assert self.cell is not None
        for key, record in list(self.outgoing.items()):
            if record.expires <= self.now:
                continue  # the sweep reports it
            for bid, unready in list(record.unready.items()):
                if ferry in unready.ferries:
                    continue
                if len(unready.times) >= self.params.max_copies:
                    del record.unready[bid]
                    self.drop("copy_limit", sub_id=getattr(record.item, "sub_id", None),
                              event_id=str(record.item.event_id)
                              if isinstance(record.item, m.EventItem) else None)
                    continue
                if not self._recruit(bid, unready):
                    del record.unready[bid]  # earlier ferries suffice (§6.4.3)
                    self.stats["refused"] += 1
                    continue
                bundle = m.Bundle(record.kind, bid, self.cell, unready.prob,
                                  record.expires - self.now, record.item)
                message = Message(m.BUNDLE, self.new_message_id(), bundle.encode())
                unready.times.append(self.now)
                unready.ferries.add(ferry)
                self._handovers[message.id] = _Handover(key, bid, ferry, self.now)
                self._enqueue(ferry, message)
            if not record.unready:
                del self.outgoing[key]

    def _recruit(self, bid: Cell, unready: Unready) -> bool:
        assert self.cell is not None
        i, j = abs(bid[0] - self.cell[0]), abs(bid[1] - self.cell[1])
        unit = self.params.unit_s
        elapsed = [math.floor((self.now - at) / unit + 1e-9) for at in unready.times]
        return recruit_ferry(i, j, elapsed, unready.prob,
                             lambda a, b_, t: self.p_hit(bid, t))

    def p_hit(self, bid: Cell, t: int) -> float:
        """P(a ferry here now visits ``bid`` within ``t`` units), by ``hit_boundary``."""
        assert self.cell is not None
        t = min(t, self.params.T_max)
        if not self.lattice.bounded:
            return hit_probability(bid[0] - self.cell[0], bid[1] - self.cell[1], t)
        if not self.lattice.contains(bid):
            return 0.0
        return hit_probability_dp(self.cell, bid, t, self.lattice)

    def _undo_handover(self, message_id: MessageId) -> None:
        """A handover that never reached the ferry: it does not count as a recruitment."""
        h = self._handovers.pop(message_id, None)
        if h is None:
            return
        record = self.outgoing.get(h.key)
        unready = record.unready.get(h.bid) if record is not None else None
        if unready is None:
            return
        unready.ferries.discard(h.ferry)
        if h.at in unready.times:
            unready.times.remove(h.at)

    # ================================================================ broker: soft state

    def _sweep_broker(self) -> None:
        now = self.now
        for key, record in list(self.outgoing.items()):
            if record.expires <= now:
                del self.outgoing[key]
                if record.unready and isinstance(record.item, m.EventItem):
                    self.drop("recruit_expired", event_id=str(record.item.event_id),
                              topic=record.item.topic)
        for route_key, entry in list(self.routes.items()):
            expired = entry.downstream.expire(now)
            for sid, _held in expired:
                self.drop("lease_expired", sub_id=sid, topic=entry.topic)
            if expired:
                self._reconcile(entry)
            own = entry.phb == self.cell
            if entry.adv_expires <= now and not own:
                entry.adv_id = None
            if not own and entry.adv_id is None and not len(entry.downstream) \
                    and not entry.sent_up:
                del self.routes[route_key]
