"""The mesh backbone PUMA and its paging baseline share (Zheng 2008, §5.2).

One base station per grid cell talks only to the base stations of its four
axis-neighbour cells; a client talks only to the base station of the cell it
is in. This module is everything but the last mile:

- **Roles and cells.** The node's roles (a scenario's node group, the
  daemon's ``node.roles``: ``base_station`` or ``client``) say what it is,
  else the ``role`` parameter. A base station's cell is configured or comes from its
  position; it announces the cell in a one-hop BEACON (when a neighbour
  appears, and every ``beacon_s``), from which base stations learn which node
  serves each neighbouring cell and clients learn which base station they are
  with. A client's cell is its base station's cell.
- **Presence.** A base station sees a client as present while the driver
  lists it as a neighbour (link-layer association) and, when the driver knows
  the client's position, while that position is in the station's cell. The
  client sends nothing to be present: the thesis's client sends one message
  per event and no location updates.
- **Broker tree (AUG) and SIENA-style routing.** The brokers form an acyclic
  graph; the thesis says only "such as a spanning tree". Here it is a tree
  every station computes from the grid alone (no messages): cells join the
  middle row along their column, and the middle row joins the middle cell.
  A previous broker spreads each of its clients' subscriptions over the tree
  with a lease; stations keep them per tree side and forward events only
  towards sides with a matching subscription (reverse-path forwarding), so an
  event published anywhere reaches every previous broker of a matching
  client. Covering is not used to prune the spreading (a deviation: only
  subscription traffic grows).
- **Routed messages.** A client's reply, refresh, unsubscription, paging
  report or re-association HELLO goes to its current base station, which
  stamps the client's cell and passes it cell by cell (x first, then y, the
  other axis where a station is missing) to the previous broker's cell.
- **Clients.** Subscribe through the base station of the current cell (it
  becomes the *previous broker* of that subscription), publish through it,
  unsubscribe and refresh towards the previous broker; while no base station
  is in reach these wait in a bounded queue.

Subclasses implement the last mile: ``_deliver_to_client`` (what a previous
broker does with an event for a client that is not necessarily present),
``_on_local`` (what a client does on receiving an event) and the routed types
they add.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field
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
from meshsub.core.cellgrid import OwnCell, role_from_capabilities
from meshsub.core.content import Event, Subscription
from meshsub.core.grid import Cell
from meshsub.core.leases import Upsert, VersionedLeases
from meshsub.core.params import ProtocolParams
from meshsub.core.protocol import Protocol
from meshsub.protocols.puma import messages as m
from meshsub.protocols.puma.params import ROLE_NAMES, BackboneParams, Role

T_BEACON = "beacon"
T_REFRESH = "refresh"
T_CLIENT_REFRESH = "client_refresh"
_VERSION_SHIFT = 32


@dataclass
class ClientSub:
    filter: Subscription
    version: int


@dataclass
class Track:
    """What a previous broker knows of one client (docs/protocols/puma.md)."""

    client: NodeId
    last_cell: Cell
    last_time: float
    """When ``last_cell`` was learned (the client's last message or reply)."""
    last_base: NodeId
    subs: dict[str, ClientSub] = field(default_factory=dict)
    queue: deque[tuple[MessageId, Event, float, float]] = field(default_factory=deque)
    """Events both delivery rounds missed: (id, event, published_at, expires_at)."""


@dataclass
class _BackboneSub:
    side: Cell
    """The tree neighbour the subscription came from (events for it go back there)."""
    filter: Subscription
    root: Cell


@dataclass
class _ClientSubState:
    """A client's own record of one subscription: which previous broker holds it."""

    filter: Subscription
    version: int
    root: Cell | None = None
    root_node: NodeId | None = None


class Backbone(Protocol):
    """Base stations and clients on a grid backbone; subclasses add the last mile."""

    message_kinds: ClassVar[dict[int, MsgKind]] = m.KINDS
    Params: ClassVar[type[ProtocolParams]] = BackboneParams
    params: BackboneParams

    def __init__(self, node: NodeId, **kwargs: Any) -> None:
        super().__init__(node, **kwargs)
        p = self.params
        self.role = role_from_capabilities(self.capabilities, ROLE_NAMES, p.role)
        self._own = OwnCell(p)
        self.grid = self._own.grid
        self.cell: Cell | None = self._own.cell if self.role is Role.BASE else None
        self._stations: OrderedDict[NodeId, Cell] = OrderedDict()
        """Neighbouring base stations heard in a BEACON (in order of appearance)."""
        self.backbone: VersionedLeases[str, _BackboneSub] = VersionedLeases(p.max_subscriptions)
        self.tracks: dict[NodeId, Track] = {}
        """Previous-broker state, by client."""
        self._removed: OrderedDict[tuple[NodeId, str], int] = OrderedDict()
        """Unsubscribed (client, sub id) -> version: an older SUBSCRIBE cannot bring one
        back, even after the client's track is gone (bounded, oldest forgotten first)."""
        self._own_net: dict[str, tuple[Subscription, int]] = {}
        """Subscriptions this station spreads as their root: net id -> (filter, version)."""
        self._net_seq = 0
        # client state
        self.base: NodeId | None = None
        """The base station this client is with."""
        self._lost_base_at: float | None = None
        self._client_subs: dict[str, _ClientSubState] = {}
        self._versions: dict[str, int] = {}
        self._waiting: deque[tuple[str, Any]] = deque()
        self._handler_table: dict[int, Any] | None = None
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
        if self.role is Role.BASE:
            if self.cell is not None:
                self.emit("broker", role="base")
            if p.beacon_s > 0:
                self.set_timer(T_BEACON, self.rng.uniform(0.0, p.beacon_s))
            self.set_timer(T_REFRESH, p.sub_refresh_s)
        elif p.client_refresh_s > 0:
            self.set_timer(T_CLIENT_REFRESH, p.client_refresh_s)

    def on_position(self, position: Position | None) -> None:
        if self.role is Role.CLIENT:
            self._choose_base()
        elif self._own.update(position):
            self.cell = self._own.cell
            self.emit("broker", role="base")
            self._beacon_all()

    def on_neighbor_up(self, info: NeighborInfo) -> None:
        if self.role is Role.BASE and self.cell is not None:
            self.send(info.node, Message(m.BEACON, self.new_message_id(),
                                         m.Beacon(self.cell).encode(), ttl=1))
        elif self.role is Role.CLIENT and info.node in self._stations:
            # the daemon may hand us a station's BEACON before its discovery beacon
            # makes it a neighbour: associate now that it is one
            self._choose_base()

    def on_neighbor_down(self, node: NodeId) -> None:
        self._stations.pop(node, None)
        if self.role is Role.CLIENT and node == self.base:
            self.base = None
            self._lost_base_at = self.now
            self._choose_base()

    def on_timer(self, name: str) -> None:
        p = self.params
        if name == T_BEACON:
            self._beacon_all()
            self.set_timer(T_BEACON, p.beacon_s)
        elif name == T_REFRESH:
            self._refresh_backbone()
            self.set_timer(T_REFRESH, p.sub_refresh_s)
        elif name == T_CLIENT_REFRESH:
            self._client_refresh()
            self.set_timer(T_CLIENT_REFRESH, p.client_refresh_s)
        else:
            self._on_own_timer(name)

    def on_subscribe(self, sub_id: str, subscription: Subscription) -> None:
        if self.role is Role.BASE:
            self._spread_own(self._local_net_id(sub_id), subscription)
            return
        version = self._next_version(sub_id)
        self._client_subs[sub_id] = _ClientSubState(subscription, version)
        self._client_send("subscribe", sub_id)

    def on_unsubscribe(self, sub_id: str, subscription: Subscription) -> None:
        if self.role is Role.BASE:
            self._withdraw_own(self._local_net_id(sub_id))
            return
        state = self._client_subs.pop(sub_id, None)
        if state is None or state.root is None:
            return  # never reached a previous broker; nothing to undo
        version = self._next_version(sub_id)
        self._client_send("unsubscribe", (sub_id, version, state.root))

    def on_publish(self, event: Event, event_id: MessageId) -> None:
        if self.role is Role.BASE:
            if self.cell is None:
                self.drop("no_cell", event_id=str(event_id), topic=event.topic)
                return
            self.dedup.check_and_add(event_id)
            self._route_event(event, event_id, self.now, None, 0)
            return
        self._client_send("publish", (event, event_id, self.now))

    def on_frame(self, sender: NodeId, message: Message) -> None:
        if self._handler_table is None:
            self._handler_table = self._handlers()
        handler = self._handler_table.get(message.type)
        if handler is None:
            self.drop("unknown_type", message, peer=sender)
            return
        try:
            handler(sender, message)
        except bodies.BodyError:
            self.drop("malformed", message, peer=sender)

    def _handlers(self) -> dict[int, Any]:
        base = self.role is Role.BASE
        table: dict[int, Any] = {m.BEACON: self._on_beacon}
        if base:
            table.update({
                m.SUBSCRIBE: self._on_subscribe_msg,
                m.PUBLISH: self._on_publish_msg,
                m.SUB_PROPAGATE: self._on_sub_propagate,
                m.UNSUB_PROPAGATE: self._on_unsub_propagate,
                m.EVENT: self._on_event_msg,
                m.DELIVER: self._on_deliver,
            })
            for t in m.ROUTED:
                table[t] = self._on_routed
        else:
            table[m.LOCAL] = self._on_local_msg
        table.update(self._extra_handlers())
        return table

    def _extra_handlers(self) -> dict[int, Any]:
        return {}

    def status(self) -> dict[str, Any]:
        out = {**super().status(), "role": self.role.value,
               "cell": None if self.cell is None else list(self.cell)}
        if self.role is Role.BASE:
            out.update(stations=len(self._stations), backbone_subs=len(self.backbone),
                       clients=len(self.tracks))
        else:
            out.update(base=self.base, subscriptions=len(self._client_subs))
        return out

    # ================================================================ subclass hooks

    def _deliver_to_client(self, track: Track, event: Event, event_id: MessageId,
                           published_at: float, hop: int) -> None:
        raise NotImplementedError

    def _on_local(self, sender: NodeId, message: Message, local: m.Local) -> None:
        self.deliver_local(local.event, message.id, message.hop + 1, local.published_at)

    def _on_routed_here(self, message: Message, routed: m.Routed, track: Track | None) -> bool:
        """A routed message reached the previous broker; True if the subclass took it."""
        return False

    def _on_own_timer(self, name: str) -> None:
        """Timers of the subclass."""

    def _on_base_changed(self, gap: float) -> None:
        """A client associated with a (new) base station after ``gap`` seconds without one."""

    # ================================================================ stations and cells

    def _beacon_all(self) -> None:
        if self.role is Role.BASE and self.cell is not None:
            self.broadcast(Message(m.BEACON, self.new_message_id(),
                                   m.Beacon(self.cell).encode(), ttl=1))

    def _on_beacon(self, sender: NodeId, message: Message) -> None:
        beacon = m.Beacon.decode(message.body)
        if not self.grid.in_grid(beacon.cell):
            self.drop("cell_outside_grid", message, peer=sender)
            return
        known = self._stations.get(sender)
        self._stations[sender] = beacon.cell
        if self.role is Role.CLIENT and known is None:
            self._choose_base()

    def station_for(self, cell: Cell) -> NodeId | None:
        """The neighbouring base station that serves ``cell`` (lowest id if several claim it)."""
        found = [n for n, c in self._stations.items() if c == cell and n in self.neighbors]
        return min(found) if found else None

    def is_station(self, node: NodeId) -> bool:
        return node in self._stations

    def client_present(self, client: NodeId) -> bool:
        """True while ``client`` is associated here (see the module docstring)."""
        if self.cell is None or client not in self.neighbors or client in self._stations:
            return False
        pos = self.neighbors[client].position
        return pos is None or self.grid.locate(pos.x, pos.y) == self.cell

    def contains(self, cell: Cell) -> bool:
        return self.grid.in_grid(cell)

    # ------------------------------------------------------------- the broker tree (AUG)

    def tree_neighbours(self, cell: Cell) -> list[Cell]:
        """The cell's neighbours in the broker tree: its parent and its children."""
        out = []
        parent = self._tree_parent(cell)
        if parent is not None:
            out.append(parent)
        for nxt in self.grid.neighbours(cell, diagonal=False):
            if self._tree_parent(nxt) == cell:
                out.append(nxt)
        return sorted(out)

    def _tree_parent(self, cell: Cell) -> Cell | None:
        mid_x, mid_y = self.grid.cols // 2, self.grid.rows // 2
        x, y = cell
        if y != mid_y:
            return Cell(x, y + (1 if y < mid_y else -1))
        if x != mid_x:
            return Cell(x + (1 if x < mid_x else -1), y)
        return None

    def _send_tree(self, side: Cell, message: Message) -> bool:
        node = self.station_for(side)
        if node is None:
            self.drop("no_station", message)
            return False
        if self.params.reliable_control and message.type in (m.SUB_PROPAGATE,
                                                             m.UNSUB_PROPAGATE):
            self.send_reliable(node, message)
        else:
            self.send(node, message)
        return True

    def _local_net_id(self, sub_id: str) -> str:
        return f"{self.node:x}/{self.node:x}/{sub_id}"

    def _track_net_id(self, client: NodeId, sub_id: str) -> str:
        return f"{self.node:x}/{client:x}/{sub_id}"

    def _spread_own(self, net_id: str, flt: Subscription) -> None:
        """Spread (or re-spread) a subscription rooted here over the whole tree."""
        if self.cell is None:
            self.drop("no_cell", sub_id=net_id, topic=flt.topic)
            return
        self._net_seq += 1
        version = (self.epoch << _VERSION_SHIFT) | self._net_seq
        self._own_net[net_id] = (flt, version)
        body = m.SubPropagate(net_id, version, flt, self.cell, self.params.sub_lease_s).encode()
        for side in self.tree_neighbours(self.cell):
            self._send_tree(side, Message(m.SUB_PROPAGATE, self.new_message_id(), body))

    def _withdraw_own(self, net_id: str) -> None:
        if self._own_net.pop(net_id, None) is None or self.cell is None:
            return
        self._net_seq += 1
        version = (self.epoch << _VERSION_SHIFT) | self._net_seq
        body = m.UnsubPropagate(net_id, version).encode()
        for side in self.tree_neighbours(self.cell):
            self._send_tree(side, Message(m.UNSUB_PROPAGATE, self.new_message_id(), body))

    def _refresh_backbone(self) -> None:
        """Renew our own subscriptions' leases, forget expired ones, forget silent clients."""
        for key, entry in self.backbone.expire(self.now):
            self.drop("lease_expired", sub_id=key, topic=entry.value.filter.topic)
        ttl = self.params.client_track_ttl()
        for client, track in list(self.tracks.items()):
            if self.now - track.last_time > ttl:
                self._forget_track(client, "track_expired")
            else:
                self._expire_queue(track)
        for net_id, (flt, _version) in list(self._own_net.items()):
            self._spread_own(net_id, flt)

    def _on_sub_propagate(self, sender: NodeId, message: Message) -> None:
        sp = m.SubPropagate.decode(message.body)
        side = self._stations.get(sender)
        if side is None or self.cell is None or side not in self.tree_neighbours(self.cell):
            self.drop("not_tree_neighbour", message, peer=sender)
            return
        outcome = self.backbone.upsert(sp.net_id, _BackboneSub(side, sp.filter, sp.root),
                                       sp.version, self.now + sp.lease_s)
        if outcome is Upsert.FULL:
            self.drop("backbone_full", message, sub_id=sp.net_id)
            return
        if outcome in (Upsert.STALE, Upsert.RENEWED):
            return  # nothing new to tell the rest of the tree
        for other in self.tree_neighbours(self.cell):
            if other != side:
                self._send_tree(other, Message(m.SUB_PROPAGATE, message.id, message.body,
                                               hop=message.hop + 1))

    def _on_unsub_propagate(self, sender: NodeId, message: Message) -> None:
        up = m.UnsubPropagate.decode(message.body)
        side = self._stations.get(sender)
        if side is None or self.cell is None or side not in self.tree_neighbours(self.cell):
            self.drop("not_tree_neighbour", message, peer=sender)
            return
        known = self.backbone.version(up.net_id)
        self.backbone.remove(up.net_id, up.version, self.now + self.params.sub_lease_s)
        if known is not None and known >= up.version:
            return  # older than what we hold: stop here
        for other in self.tree_neighbours(self.cell):
            if other != side:
                self._send_tree(other, Message(m.UNSUB_PROPAGATE, message.id, message.body,
                                               hop=message.hop + 1))

    # ------------------------------------------------------------- events over the tree

    def _on_publish_msg(self, sender: NodeId, message: Message) -> None:
        pub = m.Publish.decode(message.body)
        if self.cell is None:
            self.drop("no_cell", message, peer=sender)
            return
        if self.is_duplicate(message.id):
            return  # a retransmission whose ACK was lost
        self._route_event(pub.event, message.id, pub.published_at, None, message.hop + 1)

    def _on_event_msg(self, sender: NodeId, message: Message) -> None:
        ev = m.EventMsg.decode(message.body)
        side = self._stations.get(sender)
        if side is None:
            self.drop("not_tree_neighbour", message, peer=sender)
            return
        if self.is_duplicate(message.id):
            self.drop("duplicate_event", message, peer=sender)
            return
        self._route_event(ev.event, message.id, ev.published_at, side, message.hop + 1)

    def _route_event(self, event: Event, event_id: MessageId, published_at: float,
                     came_from: Cell | None, hop: int) -> None:
        """Reverse-path forwarding: towards every other side with a matching subscription."""
        sides = {entry.value.side for _k, entry in self.backbone.items()
                 if entry.value.side != came_from and entry.value.filter.matches(event)}
        body = m.EventMsg(event, published_at).encode()
        for side in sorted(sides):
            message = Message(m.EVENT, event_id, body, hop=hop)
            if self.params.reliable_events:
                node = self.station_for(side)
                if node is None:
                    self.drop("no_station", message)
                else:
                    self.send_reliable(node, message)
            else:
                self._send_tree(side, message)
        self.deliver_local(event, event_id, hop, published_at)
        for track in list(self.tracks.values()):
            if any(s.filter.matches(event) for s in track.subs.values()):
                self._deliver_to_client(track, event, event_id, published_at, hop)

    # ------------------------------------------------------------- delivery trees

    def _send_down(self, deliver: m.Deliver, tree_wire: list[list[int]], event_id: MessageId,
                   hop: int) -> None:
        """Run a delivery tree that starts at this station's cell (as if received)."""
        tree = m.DeliveryTree.decode(tree_wire)
        self._run_tree(m.Deliver(deliver.client, deliver.root_node, deliver.root,
                                 deliver.phase, deliver.published_at, deliver.event, tree),
                       event_id, hop)

    def _on_deliver(self, sender: NodeId, message: Message) -> None:
        d = m.Deliver.decode(message.body)
        if d.tree.start != self.cell:
            self.drop("wrong_cell", message, peer=sender)
            return
        self._run_tree(d, message.id, message.hop + 1)

    def _run_tree(self, d: m.Deliver, event_id: MessageId, hop: int) -> None:
        if self.client_present(d.client):
            local = m.Local(d.root_node, d.root, d.phase, d.published_at, d.event,
                            self._client_replies())
            self.send(d.client, Message(m.LOCAL, event_id, local.encode(), hop=hop))
        for child, sub_wire in d.tree.child_subtrees().items():
            node = self.station_for(child)
            message = Message(m.DELIVER, event_id, d.encode_with(sub_wire), hop=hop)
            if node is None:
                self.drop("no_station", message)
            elif self.params.reliable_events:
                self.send_reliable(node, message)
            else:
                self.send(node, message)

    def _client_replies(self) -> bool:
        return False

    # ------------------------------------------------------------- routed messages

    def route(self, message: Message, dest: Cell, reliable: bool | None = None) -> None:
        """Pass ``message`` one cell closer to ``dest`` (x first, the other axis if missing).

        ``reliable`` (default: ``reliable_control``) asks for per-hop ACKs.
        """
        if self.cell is None:
            self.drop("no_cell", message)
            return
        x, y = self.cell
        steps = []
        if dest[0] != x:
            steps.append(Cell(x + (1 if dest[0] > x else -1), y))
        if dest[1] != y:
            steps.append(Cell(x, y + (1 if dest[1] > y else -1)))
        for step in steps:
            node = self.station_for(step)
            if node is not None:
                if self.params.reliable_control if reliable is None else reliable:
                    self.send_reliable(node, message)
                else:
                    self.send(node, message)
                return
        self.drop("no_route", message)

    def _on_routed(self, sender: NodeId, message: Message) -> None:
        routed = m.Routed.decode(message.body)
        if self.cell is None:
            self.drop("no_cell", message, peer=sender)
            return
        if not self.is_station(sender):  # first hop: the client's cell is ours
            routed = m.Routed(routed.dest, sender, self.cell, self.node, routed.inner)
            message = Message(message.type, message.id, routed.encode(), hop=message.hop)
        if routed.dest != self.cell:
            self.route(Message(message.type, message.id, message.body, hop=message.hop + 1),
                       routed.dest)
            return
        track = self.tracks.get(routed.client)
        if track is not None:
            self._locate(track, routed.cell, routed.base)
        if self._on_routed_here(message, routed, track):
            return
        if message.type == m.REFRESH:
            self._on_refresh(message, routed)
        elif message.type == m.UNSUBSCRIBE:
            self._on_client_unsubscribe(message, routed, track)
        else:
            self.drop("unexpected_type", message, peer=sender)

    def _locate(self, track: Track, cell: Cell, base: NodeId) -> None:
        """The client spoke through ``base`` in ``cell`` just now."""
        track.last_cell, track.last_base, track.last_time = cell, base, self.now

    # ------------------------------------------------------------- previous-broker state

    def _on_subscribe_msg(self, sender: NodeId, message: Message) -> None:
        s = m.Subscribe.decode(message.body)
        if self.cell is None:
            self.drop("no_cell", message, peer=sender)
            return
        self._accept_client_sub(sender, s.sub_id, s.version, s.filter, self.cell, self.node,
                                message)

    def _on_refresh(self, message: Message, routed: m.Routed) -> None:
        sub_id, version, flt = m.decode_refresh(routed.inner)
        self._accept_client_sub(routed.client, sub_id, version, flt, routed.cell, routed.base,
                                message)

    def _accept_client_sub(self, client: NodeId, sub_id: str, version: int, flt: Subscription,
                           cell: Cell, base: NodeId, message: Message) -> None:
        track = self.tracks.get(client)
        if track is None:
            if len(self.tracks) >= self.params.max_clients:
                self.drop("clients_full", message, peer=client)
                return
            track = self.tracks[client] = Track(client, cell, self.now, base)
        self._locate(track, cell, base)
        if self._removed.get((client, sub_id), -1) >= version:
            self.drop("stale_subscribe", message, sub_id=sub_id)
            if not track.subs and not track.queue:
                self._forget_track(client, None)
            return
        held = track.subs.get(sub_id)
        if held is not None and held.version >= version:
            return  # a repeat
        if held is None and len(track.subs) >= self.params.max_client_subs:
            self.drop("client_subs_full", message, sub_id=sub_id)
            return
        track.subs[sub_id] = ClientSub(flt, version)
        net_id = self._track_net_id(client, sub_id)
        if held is None or held.filter != flt:
            self._spread_own(net_id, flt)

    def _on_client_unsubscribe(self, message: Message, routed: m.Routed,
                               track: Track | None) -> None:
        sub_id, version = m.decode_unsubscribe(routed.inner)
        if track is None:
            self.drop("unknown_client", message, sub_id=sub_id)
            return
        held = track.subs.get(sub_id)
        if held is not None and held.version > version:
            self.drop("stale_unsubscribe", message, sub_id=sub_id)
            return
        track.subs.pop(sub_id, None)
        key = (routed.client, sub_id)
        self._removed[key] = max(version, self._removed.get(key, -1))
        self._removed.move_to_end(key)
        while len(self._removed) > 4 * self.params.max_clients:
            self._removed.popitem(last=False)
        self._withdraw_own(self._track_net_id(routed.client, sub_id))
        if not track.subs and not track.queue:
            self._forget_track(routed.client, None)

    def _forget_track(self, client: NodeId, reason: str | None) -> None:
        track = self.tracks.pop(client, None)
        if track is None:
            return
        for sub_id in track.subs:
            self._withdraw_own(self._track_net_id(client, sub_id))
            if reason is not None:
                self.drop(reason, sub_id=sub_id, peer=client)
        for event_id, _e, _at, _exp in track.queue:
            self.drop("client_gone", event_id=str(event_id), peer=client)
        self._forget_client(client)

    def _forget_client(self, client: NodeId) -> None:
        """Subclass state of a client that is forgotten."""

    def _expire_queue(self, track: Track) -> None:
        while track.queue and track.queue[0][3] <= self.now:
            event_id, event, _at, _exp = track.queue.popleft()
            self.drop("queue_expired", event_id=str(event_id), topic=event.topic,
                      peer=track.client)

    # ================================================================ client side

    def _choose_base(self) -> None:
        """Associate with the station of our own cell if we know it, else the newest one."""
        candidates = [n for n in self._stations if n in self.neighbors]
        if not candidates:
            return
        chosen = candidates[-1]
        if self.position is not None:
            own = self.grid.locate(self.position.x, self.position.y)
            mine = [n for n in candidates if self._stations[n] == own]
            if mine:
                chosen = mine[-1]
        if chosen == self.base:
            return
        gap = 0.0 if self._lost_base_at is None else self.now - self._lost_base_at
        self.base = chosen
        self._lost_base_at = None
        self.cell = self._stations[chosen]
        self._flush_waiting()
        self._on_base_changed(gap)

    def _next_version(self, sub_id: str) -> int:
        seq = self._versions.get(sub_id, 0) + 1
        self._versions[sub_id] = seq
        return (self.epoch << _VERSION_SHIFT) | seq

    def _client_send(self, what: str, payload: Any) -> None:
        """Send now through our base station, or wait (bounded) until we have one."""
        if self.base is None:
            if len(self._waiting) >= self.params.max_waiting:
                dropped, data = self._waiting.popleft()
                self.drop("waiting_full",
                          event_id=str(data[1]) if dropped == "publish" else None)
            self._waiting.append((what, payload))
            return
        self._client_out(what, payload)

    def _flush_waiting(self) -> None:
        waiting, self._waiting = self._waiting, deque()
        for what, payload in waiting:
            self._client_send(what, payload)

    def _client_out(self, what: str, payload: Any) -> None:
        assert self.base is not None and self.cell is not None
        base = self.base
        if what == "subscribe":
            state = self._client_subs.get(payload)
            if state is None:
                return  # unsubscribed while waiting
            state.root, state.root_node = self.cell, base
            body = m.Subscribe(payload, state.version, state.filter).encode()
            self._client_transmit(base, Message(m.SUBSCRIBE, self.new_message_id(), body))
        elif what == "unsubscribe":
            sub_id, version, root = payload
            routed = m.Routed(root, self.node, self.cell, base,
                              m.unsubscribe_inner(sub_id, version))
            self._client_transmit(base, Message(m.UNSUBSCRIBE, self.new_message_id(),
                                                routed.encode()))
        elif what == "publish":
            event, event_id, at = payload
            self._client_transmit(base, Message(m.PUBLISH, event_id,
                                                m.Publish(event, at).encode()))
        elif what == "refresh":
            sub_id = payload
            state = self._client_subs.get(sub_id)
            if state is None or state.root is None:
                return
            inner = m.refresh_inner(sub_id, state.version, state.filter)
            self._client_transmit(base, self._routed_from_client(m.REFRESH, state.root, inner))
        else:
            self._client_out_extra(what, payload)

    def _client_out_extra(self, what: str, payload: Any) -> None:
        raise ValueError(f"unknown client message {what!r}")  # pragma: no cover

    def _client_transmit(self, base: NodeId, message: Message) -> None:
        if self.params.reliable_control:
            self.send_reliable(base, message)
        else:
            self.send(base, message)

    def on_reliable_failed(self, node: NodeId, message: Message) -> None:
        if self.role is not Role.CLIENT:
            return
        # The base station went away before acknowledging: try again through the next one.
        if message.type == m.SUBSCRIBE:
            sub_id = message.body[0]
            if sub_id in self._client_subs:
                self._client_send("subscribe", sub_id)
        elif message.type == m.PUBLISH:
            pub = m.Publish.decode(message.body)
            self._client_send("publish", (pub.event, message.id, pub.published_at))

    def _client_refresh(self) -> None:
        for sub_id, state in self._client_subs.items():
            if state.root is None:
                continue
            state.version = self._next_version(sub_id)
            self._client_send("refresh", sub_id)

    def _routed_from_client(self, mtype: int, dest: Cell, inner: tuple[Any, ...]) -> Message:
        assert self.base is not None and self.cell is not None
        routed = m.Routed(dest, self.node, self.cell, self.base, inner)
        return Message(mtype, self.new_message_id(), routed.encode())

    def _client_roots(self) -> set[tuple[Cell, NodeId]]:
        return {(s.root, s.root_node) for s in self._client_subs.values()
                if s.root is not None and s.root_node is not None}

    def _on_local_msg(self, sender: NodeId, message: Message) -> None:
        local = m.Local.decode(message.body)
        self._on_local(sender, message, local)

