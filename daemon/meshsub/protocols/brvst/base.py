"""The node every BRVST role runs on: shared state, areas, and the routed transport.

Routed messages are addressed to the manager of a grid or zone (or to one
node) and carried hop by hop with GPSR (``meshsub.core.georouting``) towards
the manager's announced position, or the area's centre while none is known.
A relay that knows a newer manager of the addressed area re-targets the
message; the node where GPSR ends without finding the addressee (a stale
position reached, or no manager yet) holds it, bounded, until an
announcement of that area arrives (docs/protocols/brvst.md, "Transport").
"""

from __future__ import annotations

import hashlib
import struct
from collections import Counter, OrderedDict
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import msgpack

from meshsub.core.api import Message, MessageId, NodeId
from meshsub.core.arv import Comparator
from meshsub.core.content import Subscription
from meshsub.core.georouting import GeoHeader, GeoMode, GeoRoutingError, next_hop
from meshsub.core.grid import Cell, CellTracker, Point
from meshsub.core.protocol import Protocol
from meshsub.protocols.brvst import messages as m
from meshsub.protocols.brvst.election import (
    ManagerRecord,
    Phase,
    Seat,
    score,
)
from meshsub.protocols.brvst.grid_manager import GridManager
from meshsub.protocols.brvst.params import BrvstParams
from meshsub.protocols.brvst.schema import Schema, SchemaError
from meshsub.protocols.brvst.tables import BoundedMap
from meshsub.protocols.brvst.zone_manager import (
    ZoneManager,
)
from meshsub.protocols.brvst.zones import Area, Layout, Level, Zone

MAX_REDIRECTS = 4
"""A routed message is re-targeted to a newer manager at most this often."""
HINT_BYTES = 64
HELD_OVERHEAD = 64
HOP_LIMIT = 255
"""The frame's hop field is one byte: no leg of a journey may carry it further."""
LOOP_VISITS = 4
"""A routed leg passing one node more often than this is circling (``routing_loop``)."""
FLOOD_BACKLOG = 256
"""Re-broadcasts waiting for their jitter at most; more in 10 ms is a flood of floods."""
HINT_TTL_PERIODS = 30
"""A manager learned for another area is a routing target for 30 announcement periods."""

T_ELECT = "elect:"
T_ANN = "ann:"
T_FLOOD = "flood:"
T_SWEEP = "sweep"
T_REFRESH = "refresh"
T_GRSV = "grsv"
T_GRSV_REFRESH = "grsv_refresh"
T_ZRSV = "zrsv"
T_ZRSV_REFRESH = "zrsv_refresh"

_CONTROL = frozenset({m.SUBSCRIBE, m.UNSUBSCRIBE, m.LOCATE, m.GRSV_UPDATE, m.ZRSV_UPDATE,
                      m.SUB_HISTORY, m.STATE_XFER})
_DATA = frozenset({m.PUBLISH, m.PUB_UP, m.PUB_GRID, m.PUB_ZONE, m.DELIVER})


def config_hash(params: BrvstParams, schema: Schema) -> bytes:
    """First 4 bytes of SHA-256 over what every node must agree on (geometry, schema, alpha)."""
    geometry = struct.pack("!6dI", params.area_width_m, params.area_height_m, params.origin_x,
                           params.origin_y, params.grid_size_m, params.R, params.K)
    return hashlib.sha256(geometry + schema.config_digest()).digest()[:4]


@dataclass(slots=True)
class Held:
    """A routed message waiting for its area's manager to be known (or known again)."""

    area: Area
    message: Message
    env: m.Envelope
    deadline: float
    size: int


HeldKey = tuple[int, bool]
"""(arrival number, local): local messages outrank remote ones when the queue is full."""


def _held_victim(table: BoundedMap[HeldKey, Held], incoming: HeldKey) -> HeldKey | None:
    remote = [k for k in table if not k[1]]
    if remote:
        return min(remote)
    return min(table) if incoming[1] else None


def _hint_victim(table: BoundedMap[Area, ManagerRecord], _incoming: Area) -> Area:
    return min(table.items(), key=lambda kv: kv[1].heard_at)[0]



class BrvstBase(Protocol):
    """State and transport shared by the member, relay and manager roles."""

    params: BrvstParams
    _HANDLERS: ClassVar[dict[int, Any]] = {}
    """Message type -> handler, filled in by ``Brvst`` (the roles are separate modules)."""

    def __init__(self, node: NodeId, **kwargs: Any) -> None:
        super().__init__(node, **kwargs)
        p = self.params
        self.schema = Schema.from_params(p)
        self.mode = Comparator(p.comparator)
        self.layout = Layout.of(p.area_width_m, p.area_height_m, p.grid_size_m, p.K,
                                (p.origin_x, p.origin_y))
        self.cfg = config_hash(p, self.schema)
        self.tracker = CellTracker(self.layout.grid, p.h_margin)
        self.cell: Cell | None = None
        self.seats: dict[Level, Seat] = {}
        self.hints: BoundedMap[Area, ManagerRecord] = BoundedMap(
            p.hints_max, p.hints_max * HINT_BYTES, lambda _r: HINT_BYTES, victim=_hint_victim)
        self.gm: GridManager | None = None
        self.zm: ZoneManager | None = None
        self.counters: Counter[str] = Counter()
        """Statistics that are not drops (wasted inter-manager copies, hand-overs, ...)."""
        self._npos: dict[NodeId, Point] = {}
        self._held: BoundedMap[HeldKey, Held] = BoundedMap(
            p.hold_max, p.hold_bytes_max, lambda h: h.size, victim=_held_victim)
        self._held_seq = 0
        self._visits: OrderedDict[tuple[Any, ...], int] = OrderedDict()
        """Routed legs seen here, counted (bounded LRU): the loop guard."""
        self._edges: OrderedDict[tuple[Any, ...], None] = OrderedDict()
        """Perimeter edges taken from here per routed leg (bounded LRU): a walk's end."""
        self._flood_wait: dict[str, Message] = {}
        self._valid: set[str] = set()
        """Local subscriptions BRVST can summarise (the others were dropped with a reason)."""
        self._registered: tuple[int, int] | None = None
        """The grid manager (node, epoch) that holds this node's subscriptions."""
        self._reported: Point | None = None
        self._history_zone: dict[str, Zone] = {}
        """Per local subscription, the zone whose cache it asked for earlier publications."""
        self._armed: set[str] = set()
        self._zrsv_sent_at: dict[Zone, float] = {}
        self._zrsv_pushed_at: float | None = None
        """When this node last pushed its zone's ZRSV to every target (T_zrsv_min)."""
        self._started = False

    def _grid_area(self, cell: Cell | tuple[int, int]) -> Area:
        return (Level.GRID, int(cell[0]), int(cell[1]))

    def _zone_area(self, zone: Zone | tuple[int, int]) -> Area:
        return (Level.ZONE, int(zone[0]), int(zone[1]))

    @property
    def zone(self) -> Zone | None:
        return None if self.cell is None else self.layout.zone_of(self.cell)

    def _is_manager_level(self, level: Level) -> bool:
        seat = self.seats.get(level)
        return seat is not None and seat.phase is Phase.MANAGER

    def _is_manager(self, area: Area) -> bool:
        seat = self.seats.get(area[0])
        return seat is not None and seat.area == area and seat.phase is Phase.MANAGER

    def _manager_of(self, area: Area) -> ManagerRecord | None:
        """The manager this node would address for ``area`` (its seat, else a recent hint)."""
        seat = self.seats.get(area[0])
        if seat is not None and seat.area == area:
            live = seat.live(self.now, self.params.ann_period(area[0]))
            if live is not None:
                return live
        hint = self.hints.get(area)
        if hint is not None and self.now - hint.heard_at \
                <= HINT_TTL_PERIODS * self.params.ann_period(area[0]):
            return hint
        return None

    def _my_record(self, area: Area, epoch: int, inherited: bool) -> ManagerRecord:
        assert self.position is not None
        pos = (self.position.x, self.position.y)
        return ManagerRecord(self.node, epoch, pos, score(pos, self.layout.centre(area)),
                             self.now, inherited)

    def _learn_sender(self, level: Level, ax: int, ay: int, sender: m.Sender) -> None:
        """A manager that wrote to us: a routing hint for its area."""
        area = (level, ax, ay)
        if not self.layout.valid(area) or sender.node == self.node:
            return
        old = self.hints.get(area)
        if old is None or sender.epoch >= old.epoch:
            self._hint(area, ManagerRecord(sender.node, sender.epoch, sender.pos,
                                           old.score if old else 0.0, self.now))

    def _hint(self, area: Area, rec: ManagerRecord) -> None:
        """Remember ``rec`` as the manager of another area (a bounded routing hint)."""
        for _area, _lost in self.hints.put(area, rec):
            self.drop("hint_evicted")

    def _sender(self, epoch: int) -> m.Sender:
        pos = (0.0, 0.0) if self.position is None else (self.position.x, self.position.y)
        return m.Sender(self.node, pos, epoch)

    def _send_area(self, mtype: int, area: Area, payload: list[Any], *,
                   msg_id: MessageId | None = None, hop: int = 0,
                   to: m.Sender | None = None) -> None:
        """Originate a message for ``area``'s manager (this node's own role included):
        the one this node follows or knows of, or ``to`` (one of a partitioned area's)."""
        kind = m.Dest.GRID if area[0] is Level.GRID else m.Dest.ZONE
        dest: int | None
        if to is not None:
            dest, target, epoch = to.node, to.pos, to.epoch
        else:
            rec = self._manager_of(area)
            dest = rec.node if rec is not None else None
            target = rec.pos if rec is not None else self.layout.centre(area)
            epoch = rec.epoch if rec is not None else 0
        env = m.Envelope(kind, area[1], area[2], dest, target, epoch, 0, GeoHeader(), payload)
        self._originate(mtype, env, msg_id, hop)

    def _send_node(self, mtype: int, node: NodeId, pos: Point, payload: list[Any], *,
                   msg_id: MessageId | None = None, hop: int = 0) -> None:
        env = m.Envelope(m.Dest.NODE, 0, 0, node, pos, 0, 0, GeoHeader(), payload)
        self._originate(mtype, env, msg_id, hop)

    def _originate(self, mtype: int, env: m.Envelope, msg_id: MessageId | None,
                   hop: int) -> None:
        """Start one leg. ``hop`` counts the publication's hops so far (PUBLISH, PUB_UP,
        PUB_GRID or PUB_ZONE, DELIVER are legs of one journey).

        Every leg gets the full ``max_hops``, whatever the journey spent before: at the
        paper's density a GPSR perimeter walk round the field's outer face takes 150 to
        250 hops (bench/brvst_walks.py), and a budget shared by the journey cut such legs
        (about one in twelve at 64 hops a leg). The frame's hop field is one byte, so the
        carried journey count saturates at ``255 - max_hops`` (0 at the default 255):
        telemetry then counts at least the last leg's hops.
        """
        ttl = self.params.max_hops
        msg = Message(mtype, msg_id if msg_id is not None else self.new_message_id(),
                      env.to_wire(), hop=min(hop, HOP_LIMIT - ttl), ttl=ttl)
        self._route(msg, env, local=True)

    def on_reliable_failed(self, node: NodeId, message: Message) -> None:
        """A routed leg's next hop was given up: route the message again from here.

        The hop to ``node`` failed because it left radio range (``neighbor_down``) or
        stopped answering (retries spent). The message is not lost with that link: it
        goes on by another neighbour (GPSR from here, ``node`` left out), or is held
        for its area's next announcement, or dropped as the routing decides. A manager
        handing its grid over as it walks out of range of its successor is the case
        this serves (the state transfer's first hop is the successor itself, whose
        link breaks a moment later); the loop guard bounds the retries.
        """
        if message.type not in m.ROUTED:
            return
        try:
            env = m.Envelope.from_wire(message.body)
        except ValueError:
            return
        self.counters["rerouted"] += 1
        self._route(replace(message, reliable_id=None), replace(env, geo=GeoHeader()),
                    local=message.id.origin == self.node, avoid=node)

    def _route(self, msg: Message, env: m.Envelope, *, local: bool,
               avoid: NodeId | None = None) -> None:
        """Process here, re-target to a newer manager, forward by GPSR, or hold;
        ``avoid``: a neighbour whose hop just failed (not used as the next hop)."""
        area: Area | None = None
        if env.kind is not m.Dest.NODE:
            area = (Level(int(env.kind)), env.ax, env.ay)
            if not self.layout.valid(area):
                self.drop("malformed", msg)
                return
            if self._is_manager(area) and env.dest in (None, self.node):
                self._process(msg, env)
                return
            # Re-target only a message with no addressee, or one addressed to this node
            # that is no longer the manager: a relay cannot tell a newer manager from the
            # manager of another part of a split area, so a named addressee is kept.
            rec = self._manager_of(area)
            stale = env.dest is None or env.dest == self.node
            if rec is not None and rec.node != env.dest and env.redirects < MAX_REDIRECTS \
                    and stale:
                if rec.node == self.node:
                    self._process(msg, env)
                    return
                env = replace(env, dest=rec.node, target=rec.pos, epoch=rec.epoch,
                              redirects=env.redirects + 1, geo=GeoHeader())
            elif env.dest == self.node:
                self._hold(area, msg, replace(env, dest=None), local)
                return
            elif rec is not None and rec.node == env.dest and rec.pos != env.target \
                    and self._fresh(area, rec):
                # The same manager, seen more recently here: aim at where it is now.
                env = replace(env, target=rec.pos, geo=GeoHeader())
        elif env.dest == self.node:
            self._process(msg, env)
            return
        if self._looping(msg, env):
            self.drop("routing_loop", msg)
            return
        if self.position is None:
            self.drop("no_position", msg)
            return
        npos = self._npos
        if avoid is not None and avoid in npos:
            npos = {n: p for n, p in npos.items() if n != avoid}
        if env.dest is not None and env.dest in npos:
            self._forward(env.dest, msg, env.with_geo(GeoHeader()))
            return
        try:
            nxt, header = next_hop(self.node, (self.position.x, self.position.y), npos,
                                   env.target, env.geo, dest=env.dest,
                                   radio_range=self.params.R)
        except GeoRoutingError:
            self.drop("no_route", msg)
            return
        if nxt is not None and header.mode is GeoMode.PERIMETER and self._walked(msg, env, nxt):
            nxt = None  # the face round the target toured without finding it: GPSR's end
        if nxt is not None:
            self._forward(nxt, msg, env.with_geo(header))
        elif area is None:
            self.drop("unreachable", msg, peer=env.dest)  # a node not where it was reported
        else:
            self._hold(area, msg, replace(env, geo=GeoHeader()), local)

    def _fresh(self, area: Area, rec: ManagerRecord) -> bool:
        """True if ``rec`` was heard within one announcement period (this node is in the
        area's flood, so its view of the manager's position is the newest around)."""
        return self.now - rec.heard_at <= self.params.ann_period(area[0])

    def _looping(self, msg: Message, env: m.Envelope) -> bool:
        """True once the same leg (message, addressee) passes this node a fifth time.

        GPSR's face walk may pass a node twice, but with neighbours that move
        between position updates a walk can circle until its TTL ends; cutting it
        here saves the rest of the TTL's transmissions.
        """
        key = (msg.id, msg.type, int(env.kind), env.ax, env.ay, env.dest, env.target)
        seen = self._visits.get(key, 0) + 1
        self._visits[key] = seen
        self._visits.move_to_end(key)
        if len(self._visits) > self.params.dedupe_size:
            self._visits.popitem(last=False)
        return seen > LOOP_VISITS

    def _walked(self, msg: Message, env: m.Envelope, nxt: NodeId) -> bool:
        """True if this leg's perimeter walk already took the edge here -> ``nxt``.

        GPSR ends a walk that is about to take its face's first edge again: the face
        round the target was toured and no node on it is closer, so the addressee is
        not reachable from here now (at the paper's density, a manager in another
        radio component). With neighbours that move between position updates the
        face changes a little on every tour, the first edge rarely comes back, and
        the walk circled round the field until ``routing_loop`` or its TTL ended it
        (most of the lost deliveries of the first results page). Any edge taken
        twice means the same: the message is then held for the area's next
        announcement, or dropped as ``unreachable`` if it is addressed to a node.
        """
        key = (msg.id, msg.type, int(env.kind), env.ax, env.ay, env.dest, env.target, nxt)
        if key in self._edges:
            return True
        self._edges[key] = None
        if len(self._edges) > self.params.dedupe_size:
            self._edges.popitem(last=False)
        return False

    def _forward(self, nxt: NodeId, msg: Message, env: m.Envelope) -> None:
        if msg.ttl <= 0:
            self.drop("ttl_expired", msg)
            return
        out = Message(msg.type, msg.id, env.to_wire(), hop=msg.hop, ttl=msg.ttl)
        p = self.params
        if (p.reliable_control and msg.type in _CONTROL) or (p.reliable_data
                                                             and msg.type in _DATA):
            self.send_reliable(nxt, out)
        else:
            self.send(nxt, out)

    def _hold(self, area: Area, msg: Message, env: m.Envelope, local: bool) -> None:
        """Wait (bounded) for an announcement of ``area``: its manager is gone or unknown.

        Only a node inside the area's flood scope hears its announcements; a node
        outside (a stale position just past the border) sends the message on towards
        the area's centre instead, once.
        """
        centre = self.layout.centre(area)
        if self.position is not None and env.target != centre and not \
                self.layout.bounds(area).contains(self.position.x, self.position.y,
                                                  self.params.scope_margin):
            self._route(msg, replace(env, dest=None, target=centre, geo=GeoHeader()), local=local)
            return
        self._held_seq += 1
        held = Held(area, msg, env, self.now + self.params.hold_for(area[0]),
                    _packed(env) + HELD_OVERHEAD)
        for _key, lost in self._held.put((self._held_seq, local), held):
            self.drop("hold_full", lost.message)
        self.counters["held"] += 1

    def _release_held(self, area: Area) -> None:
        if not any(h.area == area for h in self._held.values()):
            return
        mine = [(k, h) for k, h in self._held.items() if h.area == area]
        for key, _held in mine:
            self._held.pop(key)
        for key, held in mine:
            env = replace(held.env, dest=None, redirects=0, geo=GeoHeader())
            # A new leg towards the announced manager: the whole hop budget again.
            ttl = self.params.max_hops
            msg = replace(held.message, ttl=ttl, hop=min(held.message.hop, HOP_LIMIT - ttl))
            self._route(msg, env, local=key[1])

    def _process(self, msg: Message, env: m.Envelope) -> None:
        handler = self._HANDLERS.get(msg.type)
        if handler is None:
            self.drop("unknown_type", msg)
            return
        try:
            handler(self, msg, env)
        except (ValueError, SchemaError) as exc:
            reason = exc.reason if isinstance(exc, SchemaError) else "malformed"
            self.drop(reason, msg)

    # ------------------------------------------------------------ provided by the roles

    def _send_subscribe(self, sub_id: str, sub: Subscription, *, refresh: bool,
                        history: bool) -> None:
        raise NotImplementedError

    def _on_deliver(self, msg: Message, env: m.Envelope) -> None:
        raise NotImplementedError

    def _grsv_soon(self) -> None:
        raise NotImplementedError

    def _send_grsv(self, reason: m.GrsvReason, force: bool = False) -> None:
        raise NotImplementedError

    def _zrsv_soon(self) -> None:
        raise NotImplementedError

    def _push_zrsv(self, reason: m.ZrsvReason, force: bool = False) -> None:
        raise NotImplementedError

    def _resign_gm(self) -> None:
        raise NotImplementedError

    def _resign_zm(self) -> None:
        raise NotImplementedError


def _packed(env: m.Envelope) -> int:
    return len(msgpack.packb(env.to_wire(), use_bin_type=True))
