"""BRVST (Li and Wang 2014) as one sans-I/O protocol: every node a member, some managers.

Roles, all on every node:

- *member*: knows its grid and zone from its position (§III), follows the
  manager each level announces (``election``), registers its subscriptions
  with its grid manager (leases, refreshes, position reports), publishes
  through it, and receives DELIVERs;
- *relay*: carries routed messages hop by hop with GPSR towards the addressed
  manager, re-targets them when it knows a newer manager of the area, and
  holds them for a while when the manager it was sent to is gone (a stale
  position reached) or not yet elected; re-broadcasts announcements in scope;
- *grid manager* (``grid_manager``): the summary forest of its grid's
  subscriptions, GRSV to the zone manager, two-stage matching, DELIVER;
- *zone manager* (``zone_manager``): SOF and its forest, ZRSV exchange,
  matching to grids and zones, the publication cache, advertisements,
  queries.

The paper's rules are cited by section where they are implemented; the
decisions that fill its gaps are in docs/protocols/brvst.md.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections import Counter
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import msgpack

from meshsub.core.api import Message, MessageId, MsgKind, NeighborInfo, NodeId, Position
from meshsub.core.arv import Comparator
from meshsub.core.content import Event, Subscription
from meshsub.core.georouting import GeoHeader, GeoRoutingError, next_hop
from meshsub.core.grid import Cell, CellTracker, Point
from meshsub.core.params import ProtocolParams
from meshsub.core.protocol import Protocol
from meshsub.protocols.brvst import messages as m
from meshsub.protocols.brvst.election import (
    Adopted,
    ManagerRecord,
    Phase,
    Seat,
    backoff,
    score,
    successor,
)
from meshsub.protocols.brvst.grid_manager import GridManager, SubKey, Upsert
from meshsub.protocols.brvst.params import BrvstParams
from meshsub.protocols.brvst.schema import PubView, Schema, SchemaError
from meshsub.protocols.brvst.tables import BoundedMap
from meshsub.protocols.brvst.zone_manager import (
    Applied,
    Cached,
    Relation,
    ZoneManager,
    ZoneSummary,
)
from meshsub.protocols.brvst.zones import Area, Layout, Level, Zone

MAX_REDIRECTS = 4
"""A routed message is re-targeted to a newer manager at most this often."""
HINT_BYTES = 64
HELD_OVERHEAD = 64
HINT_TTL_PERIODS = 30
"""A manager learned for another area is used as a routing target for 30 T_ann."""

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


class Brvst(Protocol):
    """Grid and zone managers with range-vector summaries; geographic routing in between."""

    name: ClassVar[str] = "brvst"
    protocol_id: ClassVar[int] = 10
    Params: ClassVar[type[ProtocolParams]] = BrvstParams
    message_kinds: ClassVar[dict[int, MsgKind]] = m.KINDS

    params: BrvstParams

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
        self._flood_wait: dict[str, Message] = {}
        self._valid: set[str] = set()
        """Local subscriptions BRVST can summarise (the others were dropped with a reason)."""
        self._registered: tuple[int, int] | None = None
        """The grid manager (node, epoch) that holds this node's subscriptions."""
        self._reported: Point | None = None
        self._armed: set[str] = set()
        self._zrsv_sent_at: dict[Zone, float] = {}
        self._started = False

    # ================================================================ inputs

    def on_position(self, position: Position | None) -> None:
        if position is None:
            return  # keep the last cell: a manager without a fix keeps its role (stale)
        pos = (position.x, position.y)
        new = self.tracker.update(*pos)
        if not self._started:
            self._started = True
            p = self.params
            self.set_timer(T_SWEEP, p.T_sweep * self.rng.uniform(0.5, 1.0))
            self.set_timer(T_REFRESH, p.T_lease / 3 * self.rng.uniform(0.5, 1.0))
        if new != self.cell:
            self._change_cell(self.cell, new)
        elif new is not None:
            self._maybe_locate(pos)

    def on_neighbor_up(self, info: NeighborInfo) -> None:
        self._neighbor(info)

    def on_neighbor_changed(self, info: NeighborInfo) -> None:
        self._neighbor(info)

    def _neighbor(self, info: NeighborInfo) -> None:
        if info.position is None:
            self._npos.pop(info.node, None)
        else:
            self._npos[info.node] = (info.position.x, info.position.y)

    def on_neighbor_down(self, node: NodeId) -> None:
        self._npos.pop(node, None)

    def on_subscribe(self, sub_id: str, subscription: Subscription) -> None:
        try:
            self.schema.subscription_ranges(subscription)
        except SchemaError as exc:
            self.drop(exc.reason, sub_id=sub_id, topic=subscription.topic)
            return
        self._valid.add(sub_id)
        if self._registered is not None:
            self._send_subscribe(sub_id, subscription, refresh=False, history=True)

    def on_unsubscribe(self, sub_id: str, subscription: Subscription) -> None:
        if sub_id not in self._valid:
            return
        self._valid.discard(sub_id)
        if self.cell is not None:
            self._send_area(m.UNSUBSCRIBE, self._grid_area(self.cell),
                            m.UnsubscribeMsg(sub_id, self.node).to_wire())

    def on_publish(self, event: Event, event_id: MessageId) -> None:
        """§IV-C: the publisher sends its data with the P-ARVs to its grid manager."""
        if self.cell is None:
            self.drop("no_position", event_id=str(event_id), topic=event.topic)
            return
        try:
            self.schema.view(event.attrs)
        except SchemaError as exc:
            self.drop(exc.reason, event_id=str(event_id), topic=event.topic)
            return
        up = m.PubUp(m.Pub(event_id, event, self.now), (self.cell[0], self.cell[1]))
        self._send_area(m.PUBLISH, self._grid_area(self.cell), up.to_wire(), msg_id=event_id)

    def on_frame(self, sender: NodeId, message: Message) -> None:
        msg = replace(message, hop=message.hop + 1, ttl=message.ttl - 1, reliable_id=None)
        if message.type in m.FLOODED:
            self._on_flood(sender, msg)
            return
        if message.type not in m.ROUTED:
            self.drop("unknown_type", message, peer=sender)
            return
        try:
            env = m.Envelope.from_wire(message.body)
        except ValueError:
            self.drop("malformed", message, peer=sender)
            return
        self._route(msg, env, local=False)

    def on_timer(self, name: str) -> None:
        p = self.params
        if name.startswith(T_ELECT):
            self._election_timer(Level(int(name[len(T_ELECT):])))
        elif name.startswith(T_ANN):
            level = Level(int(name[len(T_ANN):]))
            if self._is_manager_level(level):
                self._announce(level)
                self.set_timer(name, p.T_ann * self.rng.uniform(0.75, 1.25))
        elif name.startswith(T_FLOOD):
            copy = self._flood_wait.pop(name, None)
            if copy is not None:
                self.broadcast(copy)
        elif name == T_SWEEP:
            self._sweep()
            self.set_timer(T_SWEEP, p.T_sweep)
        elif name == T_REFRESH:
            self._refresh_subscriptions()
            self.set_timer(T_REFRESH, p.T_lease / 3 * self.rng.uniform(0.9, 1.0))
        elif name == T_GRSV:
            self._armed.discard(T_GRSV)
            self._send_grsv(m.GrsvReason.CHANGE)
        elif name == T_GRSV_REFRESH and self.gm is not None:
            self._send_grsv(m.GrsvReason.REFRESH, force=True)
            self.set_timer(T_GRSV_REFRESH, p.T_grsv_refresh)
        elif name == T_ZRSV:
            self._armed.discard(T_ZRSV)
            self._push_zrsv(m.ZrsvReason.CHANGE)
        elif name == T_ZRSV_REFRESH and self.zm is not None:
            self._push_zrsv(m.ZrsvReason.PERIODIC, force=True)
            self.set_timer(T_ZRSV_REFRESH, p.T_zrsv_refresh)

    # ================================================================ areas

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
            live = seat.live(self.now, self.params.T_ann)
            if live is not None:
                return live
        hint = self.hints.get(area)
        if hint is not None and self.now - hint.heard_at <= HINT_TTL_PERIODS * self.params.T_ann:
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
            self.hints.put(area, ManagerRecord(sender.node, sender.epoch, sender.pos,
                                               old.score if old else 0.0, self.now))

    # ================================================================ movement

    def _change_cell(self, old: Cell | None, new: Cell | None) -> None:
        """§IV-B1: leaving a grid (and maybe a zone) moves subscriptions and hands roles over."""
        old_zone = None if old is None else self.layout.zone_of(old)
        new_zone = None if new is None else self.layout.zone_of(new)
        if old is not None and self._is_manager(self._grid_area(old)):
            self._hand_over(Level.GRID)
        if old_zone is not None and old_zone != new_zone \
                and self._is_manager(self._zone_area(old_zone)):
            self._hand_over(Level.ZONE)
        if old is not None and self._valid:
            for sub_id in sorted(self._valid):  # best effort: the old lease covers a loss
                self._send_area(m.UNSUBSCRIBE, self._grid_area(old),
                                m.UnsubscribeMsg(sub_id, self.node).to_wire())
        self.cell = new
        self._registered = None
        self._reported = None
        if new is None:
            self.seats.clear()
            return
        self._take_seat(Level.GRID, self._grid_area(new))
        if new_zone != old_zone or Level.ZONE not in self.seats:
            self._take_seat(Level.ZONE, self._zone_area(new_zone))  # type: ignore[arg-type]
        grid_seat = self.seats[Level.GRID]
        if grid_seat.phase is Phase.WATCH and grid_seat.record is not None:
            self._on_new_manager(Level.GRID, grid_seat.record)

    def _take_seat(self, level: Level, area: Area) -> None:
        """Arrive in ``area``: follow a known live manager, else listen for one T_ann."""
        seat = Seat(area)
        hint = self.hints.get(area)
        if hint is not None and hint.alive(self.now, self.params.T_ann):
            seat.record, seat.phase, seat.last_epoch = hint, Phase.WATCH, hint.epoch
            self._watch(level, hint)
        else:
            if hint is not None:
                seat.last_epoch = hint.epoch
            self.set_timer(f"{T_ELECT}{int(level)}", self.params.T_ann)
        self.seats[level] = seat

    def _maybe_locate(self, pos: Point) -> None:
        """A subscriber that moved far enough tells its grid manager where deliveries find it."""
        if not self._valid or self._registered is None or self.cell is None:
            return
        if self._reported is not None and math.dist(pos, self._reported) \
                < self.params.position_update_m:
            return
        self._reported = pos
        if self._is_manager(self._grid_area(self.cell)):
            return
        self._send_area(m.LOCATE, self._grid_area(self.cell), m.Locate(self.node, pos).to_wire())

    # ================================================================ election

    def _election_timer(self, level: Level) -> None:
        seat = self.seats.get(level)
        if seat is None or seat.phase is Phase.MANAGER or self.position is None:
            return
        t_ann = self.params.T_ann
        live = seat.live(self.now, t_ann)
        if live is not None:
            seat.phase = Phase.WATCH
            self._watch(level, live)
            return
        if seat.record is not None and seat.record.node != self.node:
            self.counters[f"manager_timeout_{level.name.lower()}"] += 1
            seat.record = None
        if seat.phase is not Phase.BACKOFF:
            seat.phase = Phase.BACKOFF
            pos = (self.position.x, self.position.y)
            mine = score(pos, self.layout.centre(seat.area))
            delay = backoff(mine, self.layout.diagonal(seat.area), t_ann, self.rng)
            self.set_timer(f"{T_ELECT}{int(level)}", delay)
            return
        self._become_manager(level, seat.last_epoch + 1, inherited=False)

    def _watch(self, level: Level, rec: ManagerRecord) -> None:
        """Re-arm the level's election timer for the moment ``rec`` would be timed out."""
        delay = rec.expires_at(self.params.T_ann) - self.now
        self.set_timer(f"{T_ELECT}{int(level)}", max(0.0, delay) + 1e-6)

    def _become_manager(self, level: Level, epoch: int, *, inherited: bool,
                        blob: list[Any] | tuple[Any, ...] | None = None) -> None:
        seat = self.seats[level]
        p = self.params
        seat.phase = Phase.MANAGER
        seat.last_epoch = max(seat.last_epoch, epoch)
        seat.record = self._my_record(seat.area, epoch, inherited)
        _level, ax, ay = seat.area
        if level is Level.GRID:
            self.gm = GridManager(Cell(ax, ay), epoch, self.schema, max_subs=p.N_sub_max,
                                  max_bytes=p.sub_bytes_max, dedupe=p.dedupe_size)
            bad = self.gm.load(blob, self.now) if blob is not None else 0
            self.emit("broker", role="grid_manager", peer=None)
            self.set_timer(T_GRSV_REFRESH, p.T_grsv_refresh)
            self._grsv_soon()
        else:
            self.zm = ZoneManager(Zone(ax, ay), epoch, self.schema, sof_max=p.sof_entries_max,
                                  zones_max=p.zrsv_zones_max, zones_bytes=p.zrsv_bytes_max,
                                  cache_max=p.N_cache_max, cache_bytes=p.C_max,
                                  advert_max=p.advert_max, dedupe=p.dedupe_size)
            bad = self.zm.load(blob, self.now) if blob is not None else 0
            self.emit("broker", role="zone_manager", peer=None)
            self.set_timer(T_ZRSV_REFRESH, p.T_zrsv_refresh)
            self._zrsv_soon()
            if self.gm is not None:  # this node's own grid reports to its new zone manager
                self._send_grsv(m.GrsvReason.RESYNC, force=True)
        for _ in range(bad):
            self.drop("xfer_bad_item")
        self._announce(level)
        self.set_timer(f"{T_ANN}{int(level)}", p.T_ann * self.rng.uniform(0.75, 1.25))
        self._release_held(seat.area)
        if level is Level.GRID and self._valid:
            self._on_new_manager(Level.GRID, seat.record)

    def _release_role(self, level: Level) -> None:
        if level is Level.GRID:
            self.gm = None
            self.cancel_timer(T_GRSV_REFRESH)
            self.emit("broker", role="grid_manager_end")
        else:
            self.zm = None
            self.cancel_timer(T_ZRSV_REFRESH)
            self.emit("broker", role="zone_manager_end")
        self.cancel_timer(f"{T_ANN}{int(level)}")

    def _announce(self, level: Level) -> None:
        """A manager's claim, flooded in its area (every T_ann, and at once on election)."""
        seat = self.seats[level]
        if self.position is None or seat.record is None:
            return
        rec = self._my_record(seat.area, seat.record.epoch, seat.record.inherited)
        seat.record = rec
        ann = m.Announce(int(level), seat.area[1], seat.area[2], self.node, rec.epoch, rec.pos,
                         rec.score, rec.inherited, self.cfg)
        msg = Message(m.ANNOUNCE, self.new_message_id(), ann.to_wire(), ttl=self.params.max_hops)
        self.is_duplicate(msg.id)
        self.broadcast(msg)

    def _hand_over(self, level: Level) -> None:
        """The manager leaves its area: state to the best-placed member it knows, RESIGN."""
        seat = self.seats[level]
        state = self.gm if level is Level.GRID else self.zm
        assert seat.record is not None and state is not None
        area, epoch = seat.area, seat.record.epoch
        candidates = dict(self._npos)
        if self.gm is not None and level is Level.GRID:
            candidates.update(self.gm.subscribers())
        candidates.pop(self.node, None)
        succ = successor(candidates, self.layout.bounds(area), self.layout.centre(area))
        if succ is not None:
            blob, left_out = state.blob(self.now, self.params.xfer_max_bytes)
            for _ in range(left_out):
                self.drop("xfer_truncated")
            xfer = m.StateXfer(int(level), area[1], area[2], epoch, blob)
            self._send_node(m.STATE_XFER, succ, candidates[succ], xfer.to_wire())
            spos = candidates[succ]
            self.hints.put(area, ManagerRecord(succ, epoch + 1, spos,
                                               score(spos, self.layout.centre(area)), self.now))
            self.counters["handover"] += 1
        else:
            self.counters["handover_no_successor"] += 1
        resign = m.Resign(int(level), area[1], area[2], self.node, epoch, succ)
        msg = Message(m.RESIGN, self.new_message_id(), resign.to_wire(), ttl=self.params.max_hops)
        self.is_duplicate(msg.id)
        self.broadcast(msg)
        self._release_role(level)
        self.emit("broker", role="handed_over", peer=succ)

    def _step_down(self, level: Level, winner: ManagerRecord) -> None:
        """A conflict lost (§5.15 step 4 of the reference spec): the state goes to the winner."""
        seat = self.seats[level]
        state = self.gm if level is Level.GRID else self.zm
        assert state is not None and seat.record is not None
        blob, left_out = state.blob(self.now, self.params.xfer_max_bytes)
        for _ in range(left_out):
            self.drop("xfer_truncated")
        xfer = m.StateXfer(int(level), seat.area[1], seat.area[2], seat.record.epoch, blob)
        self._send_node(m.STATE_XFER, winner.node, winner.pos, xfer.to_wire())
        self._release_role(level)
        seat.phase, seat.record = Phase.WATCH, winner
        self._watch(level, winner)
        self.counters["conflict_lost"] += 1

    # ------------------------------------------------------------ floods

    def _on_flood(self, sender: NodeId, msg: Message) -> None:
        if msg.id in self.dedup:
            self.drops["duplicate_flood"] += 1  # the rx records already show every copy
            return
        try:
            if msg.type == m.ANNOUNCE:
                ann = m.Announce.from_wire(msg.body)
                level, area = Level(ann.level), (Level(ann.level), ann.ax, ann.ay)
            else:
                res = m.Resign.from_wire(msg.body)
                level, area = Level(res.level), (Level(res.level), res.ax, res.ay)
        except ValueError:
            self.drop("malformed", msg, peer=sender)
            return
        if not self.layout.valid(area):
            self.drop("malformed", msg, peer=sender)
            return
        self.is_duplicate(msg.id)
        if msg.type == m.ANNOUNCE:
            if ann.cfg != self.cfg:
                self.drop("config_mismatch", msg, peer=sender)
                return
            self._on_announce(level, area, ann)
        else:
            self._on_resign(level, area, res)
        self._reflood(area, msg)

    def _reflood(self, area: Area, msg: Message) -> None:
        """Re-broadcast once if this node is inside the area grown by the scope margin."""
        if self.position is None or msg.ttl <= 0:
            return
        if not self.layout.bounds(area).contains(self.position.x, self.position.y,
                                                 self.params.scope_margin):
            return
        if self.params.flood_jitter <= 0:
            self.broadcast(msg)
            return
        name = f"{T_FLOOD}{msg.id}"
        self._flood_wait[name] = msg
        self.set_timer(name, self.rng.uniform(0.0, self.params.flood_jitter))

    def _on_announce(self, level: Level, area: Area, ann: m.Announce) -> None:
        rec = ManagerRecord(ann.manager, ann.epoch, ann.pos, ann.score, self.now, ann.inherited)
        if ann.manager != self.node:
            old = self.hints.get(area)
            if old is None or old.node == rec.node or not old.alive(self.now, self.params.T_ann) \
                    or rec.beats(old):
                self.hints.put(area, rec)
        seat = self.seats.get(level)
        if seat is not None and seat.area == area and ann.manager != self.node:
            if seat.phase is Phase.MANAGER:
                assert seat.record is not None
                mine = self._my_record(area, seat.record.epoch, seat.record.inherited)
                if rec.beats(mine):
                    self._step_down(level, rec)
                else:
                    seat.last_epoch = max(seat.last_epoch, rec.epoch)
                    self.counters["conflict_won"] += 1
            else:
                adopted = seat.adopt(rec, self.now, self.params.T_ann)
                if adopted is not Adopted.IGNORED:
                    seat.phase = Phase.WATCH
                    self._watch(level, rec)
                if adopted is Adopted.NEW:
                    self._on_new_manager(level, rec)
        self._release_held(area)

    def _on_resign(self, level: Level, area: Area, res: m.Resign) -> None:
        hint = self.hints.get(area)
        if hint is not None and hint.node == res.manager and hint.epoch <= res.epoch:
            self.hints.pop(area)
        seat = self.seats.get(level)
        if seat is None or seat.area != area or seat.phase is Phase.MANAGER:
            return
        seat.last_epoch = max(seat.last_epoch, res.epoch)
        if seat.record is not None and seat.record.node == res.manager:
            seat.record = None
            seat.phase = Phase.LISTEN
            # A named successor announces first; without one, elect after the back-off.
            wait = self.params.T_ann if res.successor is not None else 0.0
            self.set_timer(f"{T_ELECT}{int(level)}", wait)

    def _on_new_manager(self, level: Level, rec: ManagerRecord) -> None:
        """§5.16 of the reference spec: members re-register with a manager that lost the state."""
        if level is Level.GRID:
            first = self._registered is None
            self._registered = (rec.node, rec.epoch)
            self._reported = None
            if rec.inherited and not first:
                return
            subs = self.subscriptions
            for sub_id in sorted(self._valid):
                if sub_id in subs:
                    self._send_subscribe(sub_id, subs[sub_id], refresh=not first, history=first)
        elif self.gm is not None:
            self._send_grsv(m.GrsvReason.RESYNC, force=True)

    # ================================================================ transport

    def _send_area(self, mtype: int, area: Area, payload: list[Any], *,
                   msg_id: MessageId | None = None, hop: int = 0) -> None:
        """Originate a message for ``area``'s manager (this node's own role included)."""
        rec = self._manager_of(area)
        kind = m.Dest.GRID if area[0] is Level.GRID else m.Dest.ZONE
        target = rec.pos if rec is not None else self.layout.centre(area)
        env = m.Envelope(kind, area[1], area[2], rec.node if rec else None, target,
                         rec.epoch if rec else 0, 0, GeoHeader(), payload)
        msg = Message(mtype, msg_id if msg_id is not None else self.new_message_id(),
                      env.to_wire(), hop=hop, ttl=self.params.max_hops)
        self._route(msg, env, local=True)

    def _send_node(self, mtype: int, node: NodeId, pos: Point, payload: list[Any], *,
                   msg_id: MessageId | None = None, hop: int = 0) -> None:
        env = m.Envelope(m.Dest.NODE, 0, 0, node, pos, 0, 0, GeoHeader(), payload)
        msg = Message(mtype, msg_id if msg_id is not None else self.new_message_id(),
                      env.to_wire(), hop=hop, ttl=self.params.max_hops)
        self._route(msg, env, local=True)

    def _route(self, msg: Message, env: m.Envelope, *, local: bool) -> None:
        """Process here, re-target to a newer manager, forward by GPSR, or hold."""
        area: Area | None = None
        if env.kind is not m.Dest.NODE:
            area = (Level(int(env.kind)), env.ax, env.ay)
            if not self.layout.valid(area):
                self.drop("malformed", msg)
                return
            if self._is_manager(area):
                self._process(msg, env)
                return
            rec = self._manager_of(area)
            stale = env.dest is None or env.dest == self.node
            if rec is not None and rec.node != env.dest and env.redirects < MAX_REDIRECTS \
                    and (stale or rec.epoch > env.epoch):
                env = replace(env, dest=rec.node, target=rec.pos, epoch=rec.epoch,
                              redirects=env.redirects + 1, geo=GeoHeader())
            elif env.dest == self.node:
                self._hold(area, msg, replace(env, dest=None), local)
                return
        elif env.dest == self.node:
            self._process(msg, env)
            return
        if self.position is None:
            self.drop("no_position", msg)
            return
        if env.dest is not None and env.dest in self._npos:
            self._forward(env.dest, msg, replace(env, geo=GeoHeader()))
            return
        try:
            nxt, header = next_hop(self.node, (self.position.x, self.position.y), self._npos,
                                   env.target, env.geo, dest=env.dest,
                                   radio_range=self.params.R)
        except GeoRoutingError:
            self.drop("no_route", msg)
            return
        if nxt is not None:
            self._forward(nxt, msg, replace(env, geo=header))
        elif area is None:
            self.drop("unreachable", msg, peer=env.dest)  # a node not where it was reported
        else:
            self._hold(area, msg, replace(env, geo=GeoHeader()), local)

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
        """Wait (bounded) for an announcement of ``area``: its manager is gone or unknown."""
        self._held_seq += 1
        held = Held(area, msg, env, self.now + self.params.hold_s,
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
            self._route(held.message, env, local=key[1])

    # ================================================================ processing

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

    # ------------------------------------------------------------ member side

    def _send_subscribe(self, sub_id: str, sub: Subscription, *, refresh: bool,
                        history: bool) -> None:
        if self.cell is None or self.position is None:
            return
        pos = (self.position.x, self.position.y)
        self._reported = pos
        body = m.SubscribeMsg(sub_id, sub, self.node, pos, refresh,
                              history and self.params.want_history)
        self._send_area(m.SUBSCRIBE, self._grid_area(self.cell), body.to_wire())

    def _refresh_subscriptions(self) -> None:
        """Soft state: every T_lease / 3 each subscription is sent again (an idempotent upsert)."""
        if self._registered is None:
            return
        subs = self.subscriptions
        for sub_id in sorted(self._valid):
            if sub_id in subs:
                self._send_subscribe(sub_id, subs[sub_id], refresh=True, history=False)

    def _on_deliver(self, msg: Message, env: m.Envelope) -> None:
        d = m.DeliverMsg.from_wire(env.payload)
        if self.deliver_local(d.pub.event, d.pub.event_id, msg.hop, d.pub.published_at):
            return
        if any(s.matches(d.pub.event) for s in self.subscriptions.values()):
            self.drops["duplicate_deliver"] += 1  # the deliver records show the first copy
        else:
            self.drop("false_positive", msg)

    # ------------------------------------------------------------ grid manager (§IV-B1, IV-C)

    def _gm_subscribe(self, msg: Message, env: m.Envelope) -> None:
        s = m.SubscribeMsg.from_wire(env.payload)
        gm = self._gm(msg)
        if gm is None:
            return
        key = (s.subscriber, s.sub_id)
        status = gm.upsert(key, s.subscription, s.pos, self.now + self.params.T_lease)
        if status is Upsert.REFUSED:
            self.drop("gm_table_full", msg, sub_id=s.sub_id, peer=s.subscriber)
            return
        if status in (Upsert.NEW, Upsert.CHANGED):
            self._grsv_soon()
            if s.want_history:
                self._sub_history(gm, key, s.subscription)

    def _gm_unsubscribe(self, msg: Message, env: m.Envelope) -> None:
        u = m.UnsubscribeMsg.from_wire(env.payload)
        gm = self._gm(msg)
        if gm is not None and gm.remove((u.subscriber, u.sub_id)):
            self._grsv_soon()

    def _gm_locate(self, msg: Message, env: m.Envelope) -> None:
        loc = m.Locate.from_wire(env.payload)
        gm = self._gm(msg)
        if gm is not None:
            gm.locate(loc.subscriber, loc.pos)

    def _gm_publish(self, msg: Message, env: m.Envelope) -> None:
        """§IV-C: match the grid's forest, deliver, and always send the data up to the ZM."""
        up = m.PubUp.from_wire(env.payload)
        gm = self._gm(msg)
        if gm is None:
            return
        if gm.seen.check_and_add(up.pub.event_id):
            self.drops["duplicate_publish"] += 1
            return
        view = self.schema.view(up.pub.event.attrs)
        self._deliver(gm, up.pub, gm.match(up.pub.event, view, self.mode,
                                           exact_check=self.params.gm_check == "exact"),
                      msg.hop)
        zone = self.layout.zone_of(gm.cell)
        self._send_area(m.PUB_UP, self._zone_area(zone),
                        m.PubUp(up.pub, (gm.cell[0], gm.cell[1])).to_wire(),
                        msg_id=up.pub.event_id, hop=msg.hop)

    def _gm_pub_grid(self, msg: Message, env: m.Envelope) -> None:
        d = m.PubDown.from_wire(env.payload)
        gm = self._gm(msg)
        if gm is None:
            return
        self._learn_sender(Level.ZONE, d.origin_zone[0], d.origin_zone[1], d.sender)
        view = self.schema.view(d.pub.event.attrs)
        matched = gm.match(d.pub.event, view, self.mode,
                           exact_check=self.params.gm_check == "exact", for_sub=d.for_sub)
        if not self._deliver(gm, d.pub, matched, msg.hop):
            self.counters["pub_grid_no_delivery"] += 1  # an inter-manager false positive

    def _deliver(self, gm: GridManager, pub: m.Pub, matched: dict[int, list[str]],
                 hop: int) -> int:
        """One DELIVER per subscriber node with its new (publication, subscription) pairs."""
        sent = 0
        for node, sids in sorted(matched.items()):
            fresh = [s for s in sids if not gm.served.check_and_add((pub.event_id, (node, s)))]
            if not fresh:
                continue
            sent += len(fresh)
            body = m.DeliverMsg(pub, tuple(fresh)).to_wire()
            if node == self.node:
                env = m.Envelope(m.Dest.NODE, 0, 0, node, (0.0, 0.0), 0, 0, GeoHeader(), body)
                self._on_deliver(Message(m.DELIVER, pub.event_id, env.to_wire(), hop=hop), env)
                continue
            rec = gm.table.get((node, fresh[0]))
            pos = rec.pos if rec is not None else gm.subscribers().get(node, (0.0, 0.0))
            self._send_node(m.DELIVER, node, pos, body, msg_id=pub.event_id, hop=hop)
        return sent

    def _sub_history(self, gm: GridManager, key: SubKey, sub: Subscription) -> None:
        """Gap G1 of the paper: a subscription absorbed by an unchanged GRSV still gets the
        zone's cached publications (docs/protocols/brvst.md)."""
        zone = self.layout.zone_of(gm.cell)
        hist = m.SubHistory((gm.cell[0], gm.cell[1]), self._sender(gm.epoch), key, sub)
        self._send_area(m.SUB_HISTORY, self._zone_area(zone), hist.to_wire())

    def _grsv_soon(self) -> None:
        if T_GRSV not in self._armed:
            self._armed.add(T_GRSV)
            self.set_timer(T_GRSV, self.params.T_batch)

    def _send_grsv(self, reason: m.GrsvReason, force: bool = False) -> None:
        """§IV-B1: the GRSV goes to the zone manager only when it changed (plus refreshes)."""
        gm = self.gm
        if gm is None:
            return
        update = gm.take_update(force=force)
        if update is None:
            return
        version, entries = update
        body = m.SummaryUpdate(gm.cell[0], gm.cell[1], self._sender(gm.epoch), version,
                               int(reason), tuple(entries), self.cfg)
        zone = self.layout.zone_of(gm.cell)
        self._send_area(m.GRSV_UPDATE, self._zone_area(zone), body.to_wire())

    def _gm(self, msg: Message) -> GridManager | None:
        if self.gm is None:
            self.drop("not_manager", msg)
        return self.gm

    def _sender(self, epoch: int) -> m.Sender:
        pos = (0.0, 0.0) if self.position is None else (self.position.x, self.position.y)
        return m.Sender(self.node, pos, epoch)

    # ------------------------------------------------------------ zone manager (§IV-B2, C, D)

    def _zm(self, msg: Message) -> ZoneManager | None:
        if self.zm is None:
            self.drop("not_manager", msg)
        return self.zm

    def _zm_grsv(self, msg: Message, env: m.Envelope) -> None:
        u = m.SummaryUpdate.from_wire(env.payload)
        zm = self._zm(msg)
        if zm is None:
            return
        cell = Cell(u.ax, u.ay)
        if not self.layout.grid.in_grid(cell) or self.layout.zone_of(cell) != zm.zone:
            self.drop("wrong_zone", msg)
            return
        if u.cfg != self.cfg:
            self.drop("config_mismatch", msg)
            return
        self._learn_sender(Level.GRID, u.ax, u.ay, u.sender)
        status, added = zm.apply_grsv(cell, u, self.now)
        if status is Applied.FULL:
            self.drop("sof_full", msg)
            return
        if status is not Applied.CHANGED:
            return
        for cached in zm.cache_for_grid(cell, added, self.mode):  # §IV-D: bidirectional
            self._pub_grid(zm, cached.pub, cell, cached.origin_zone, cached.origin_grid,
                           from_cache=True)
            zm.note_sent(cached, grids=[cell])
        self._zrsv_soon()

    def _zm_pub_up(self, msg: Message, env: m.Envelope) -> None:
        """§IV-C at the origin zone: cache, grids of the zone, matching zones, adverts."""
        up = m.PubUp.from_wire(env.payload)
        zm = self._zm(msg)
        if zm is None:
            return
        if zm.seen.check_and_add(("up", up.pub.event_id)):
            self.drops["duplicate_publish"] += 1
            return
        view = self.schema.view(up.pub.event.attrs)
        origin = Cell(*up.origin_grid)
        cached = Cached(up.pub, view, zm.zone, origin, self.now, self.now + self.params.T_cache,
                        sent_grids={origin})
        for lost in zm.cache_insert(cached):
            self.drop("cache_evicted", event_id=str(lost.pub.event_id))
        grids = zm.grids_for(view, self.mode, exclude=[origin], now=self.now)
        for cell in grids:
            self._pub_grid(zm, up.pub, cell, zm.zone, origin, from_cache=False, hop=msg.hop)
        zones = zm.zones_for(view, self.mode, exclude=[zm.zone])
        for zone in zones:
            self._pub_zone(zm, up.pub, zone, origin, from_cache=False, hop=msg.hop)
            summary = zm.summaries.get(zone)
            if summary is not None:
                summary.last_match = self.now
        zm.note_sent(cached, grids=grids, zones=zones)
        self._advertise(zm, up.pub, view, zones)

    def _advertise(self, zm: ZoneManager, pub: m.Pub, view: PubView,
                   matched: list[Zone]) -> None:
        """§IV-C: a (publisher, P-ARVs) seen first, or not for d x T_adv, is advertised to the
        zones d zone-hops away that did not get the data and whose ZRSV we do not hold fresh."""
        p = self.params
        key = (pub.event_id.origin, view.advert_key())
        bands = zm.due_bands(key, self.now, p.T_adv, self.layout.max_distance)
        if not bands:
            return
        skip = set(matched)
        for zone, summary in zm.summaries.items():
            if summary.relation is Relation.NEIGHBOR \
                    and self.now - summary.rx <= 3 * p.T_zrsv_refresh:
                skip.add(zone)  # its ZRSV is current: the match above already used it
        advert = m.Advert((zm.zone[0], zm.zone[1]), self._sender(zm.epoch), pub.event_id,
                          self.schema.raw_attrs(pub.event.attrs)).to_wire()
        for zone in self.layout.zones():
            if zone == zm.zone or zone in skip:
                continue
            if self.layout.distance(zm.zone, zone) in bands:
                self._send_area(m.PUB_ADVERT, self._zone_area(zone), advert)
                self.counters["adverts"] += 1
        for _ in range(zm.mark_advertised(key, bands, self.now)):
            self.drop("advert_table_full")

    def _zm_pub_zone(self, msg: Message, env: m.Envelope) -> None:
        """§IV-C at a matching zone: to its matching grids; nothing matched is unwanted."""
        d = m.PubDown.from_wire(env.payload)
        zm = self._zm(msg)
        if zm is None:
            return
        origin = Zone(*d.origin_zone)
        self._learn_sender(Level.ZONE, origin[0], origin[1], d.sender)
        for _lost in zm.learn_publication_zone(origin, self.now):
            self.drop("push_set_full")
        view = self.schema.view(d.pub.event.attrs)
        grids = zm.grids_for(view, self.mode, now=self.now)
        if not grids:
            self.counters["pub_zone_unwanted"] += 1
            self._reply_unwanted(zm, origin)
            return
        for cell in grids:
            if zm.served.check_and_add((d.pub.event_id, cell)):
                continue
            self._pub_grid(zm, d.pub, cell, origin, Cell(*d.origin_grid), from_cache=False,
                           hop=msg.hop)
        if self.params.cache_remote and d.pub.event_id not in zm.cache:
            cached = Cached(d.pub, view, origin, Cell(*d.origin_grid), self.now,
                            self.now + self.params.T_cache, sent_grids=set(grids))
            for lost in zm.cache_insert(cached):
                self.drop("cache_evicted", event_id=str(lost.pub.event_id))

    def _reply_unwanted(self, zm: ZoneManager, origin: Zone) -> None:
        last = zm.unwanted_sent.get(origin)
        if last is not None and self.now - last < self.params.T_unwanted_holddown:
            return
        zm.unwanted_sent[origin] = self.now
        self._send_zrsv(zm, origin, m.ZrsvReason.UNWANTED)

    def _zm_zrsv(self, msg: Message, env: m.Envelope) -> None:
        """§IV-B2: keep other zones' ZRSVs; a new or changed one is matched against the cache."""
        u = m.SummaryUpdate.from_wire(env.payload)
        zm = self._zm(msg)
        if zm is None:
            return
        zone = Zone(u.ax, u.ay)
        if not self.layout.in_layout(zone) or zone == zm.zone:
            self.drop("wrong_zone", msg)
            return
        if u.cfg != self.cfg:
            self.drop("config_mismatch", msg)
            return
        self._learn_sender(Level.ZONE, u.ax, u.ay, u.sender)
        old = zm.summaries.get(zone)
        if old is not None and (u.sender.epoch, u.version) < (old.epoch, old.version):
            self.drop("stale_summary", msg)
            return
        neighbour = self.layout.distance(zone, zm.zone) == 1
        relation = Relation.NEIGHBOR if neighbour else Relation.INTERESTED
        newer_zm = old is None or u.sender.epoch > old.epoch
        summary = ZoneSummary(u.sender.node, u.sender.pos, u.sender.epoch, u.version,
                              u.entries, relation, self.now, self.now)
        for lost in zm.store_summary(zone, summary):
            self.drop("zone_table_full" if lost == zone else "zone_table_evicted")
        if zone not in zm.summaries:
            return
        if u.reason in (m.ZrsvReason.ADVERT_REPLY, m.ZrsvReason.UNWANTED):
            zm.learn_publication_zone(zone, self.now)
        for cached in zm.cache_for_zone(zone, u.entries, self.mode):
            self._pub_zone(zm, cached.pub, zone, cached.origin_grid, from_cache=True)
            zm.note_sent(cached, zones=[zone])
        if newer_zm and (neighbour or zone in zm.push):
            last = self._zrsv_sent_at.get(zone)
            if last is None or self.now - last >= self.params.T_zrsv_refresh / 2:
                self._send_zrsv(zm, zone, m.ZrsvReason.CHANGE)

    def _zm_advert(self, msg: Message, env: m.Envelope) -> None:
        """§IV-C: a zone whose summaries match an advertised publication sends its ZRSV."""
        a = m.Advert.from_wire(env.payload)
        zm = self._zm(msg)
        if zm is None:
            return
        origin = Zone(*a.origin_zone)
        if not self.layout.in_layout(origin) or origin == zm.zone:
            self.drop("wrong_zone", msg)
            return
        self._learn_sender(Level.ZONE, origin[0], origin[1], a.sender)
        view = self.schema.view(dict(a.attrs))
        if not zm.grids_for(view, self.mode):  # the SOF: finer than the zone's own ZRSV
            self.counters["advert_ignored"] += 1
            return
        zm.learn_publication_zone(origin, self.now)
        self._send_zrsv(zm, origin, m.ZrsvReason.ADVERT_REPLY)

    def _zm_history(self, msg: Message, env: m.Envelope) -> None:
        h = m.SubHistory.from_wire(env.payload)
        zm = self._zm(msg)
        if zm is None:
            return
        cell = Cell(*h.grid)
        if not self.layout.grid.in_grid(cell) or self.layout.zone_of(cell) != zm.zone:
            self.drop("wrong_zone", msg)
            return
        self._learn_sender(Level.GRID, cell[0], cell[1], h.sender)
        for cached in zm.cache_for_subscription(h.subscription):
            self._pub_grid(zm, cached.pub, cell, cached.origin_zone, cached.origin_grid,
                           from_cache=True, for_sub=h.sub_key)
            zm.note_sent(cached, grids=[cell])

    def _zm_query(self, msg: Message, env: m.Envelope) -> None:
        """§IV-C: a zone searching for publishers: matching cached publications go to it."""
        q = m.SubQuery.from_wire(env.payload)
        zm = self._zm(msg)
        if zm is None:
            return
        origin = Zone(*q.origin_zone)
        if not self.layout.in_layout(origin) or origin == zm.zone:
            self.drop("wrong_zone", msg)
            return
        self._learn_sender(Level.ZONE, origin[0], origin[1], q.sender)
        held = zm.summaries.get(origin)
        if held is None or held.relation is not Relation.NEIGHBOR:
            for _lost in zm.store_summary(origin, ZoneSummary(
                    q.sender.node, q.sender.pos, q.sender.epoch, 0, q.entries,
                    Relation.QUERIED, self.now, self.now)):
                self.drop("zone_table_evicted")
        for cached in zm.cache_for_zone(origin, q.entries, self.mode):
            self._pub_zone(zm, cached.pub, origin, cached.origin_grid, from_cache=True)
            zm.note_sent(cached, zones=[origin])

    def _pub_grid(self, zm: ZoneManager, pub: m.Pub, cell: Cell, origin_zone: Zone,
                  origin_grid: Cell, *, from_cache: bool, for_sub: SubKey | None = None,
                  hop: int = 0) -> None:
        body = m.PubDown(pub, (origin_zone[0], origin_zone[1]), (origin_grid[0], origin_grid[1]),
                         from_cache, for_sub, self._sender(zm.epoch))
        self._send_area(m.PUB_GRID, self._grid_area(cell), body.to_wire(), msg_id=pub.event_id,
                        hop=hop)

    def _pub_zone(self, zm: ZoneManager, pub: m.Pub, zone: Zone, origin_grid: Cell, *,
                  from_cache: bool, hop: int = 0) -> None:
        body = m.PubDown(pub, (zm.zone[0], zm.zone[1]), (origin_grid[0], origin_grid[1]),
                         from_cache, None, self._sender(zm.epoch))
        self._send_area(m.PUB_ZONE, self._zone_area(zone), body.to_wire(), msg_id=pub.event_id,
                        hop=hop)

    def _zrsv_soon(self) -> None:
        if T_ZRSV not in self._armed:
            self._armed.add(T_ZRSV)
            self.set_timer(T_ZRSV, self.params.T_batch)

    def _push_zrsv(self, reason: m.ZrsvReason, force: bool = False) -> None:
        """§IV-B2: the ZRSV goes to neighbouring and publication zones on change or period."""
        zm = self.zm
        if zm is None:
            return
        if zm.take_update(force=force) is None:
            return
        targets = set(self.layout.neighbours(zm.zone)) | set(zm.push)
        for zone in sorted(targets):
            self._send_zrsv(zm, zone, reason, take=False)

    def _send_zrsv(self, zm: ZoneManager, zone: Zone, reason: m.ZrsvReason, *,
                   take: bool = True) -> None:
        if take:
            zm.take_update()
        entries = tuple(zm.last_sent or ())
        body = m.SummaryUpdate(zm.zone[0], zm.zone[1], self._sender(zm.epoch), zm.version,
                               int(reason), entries, self.cfg)
        self._zrsv_sent_at[zone] = self.now
        self._send_area(m.ZRSV_UPDATE, self._zone_area(zone), body.to_wire())

    def _query(self, zm: ZoneManager) -> None:
        """§IV-C: subscriptions that found no data for T_query_idle ask zones k hops away."""
        p = self.params
        if p.k_query <= 0 or self.now - zm.last_query < p.T_query_idle:
            return
        idle = zm.idle_entries(self.now, p.T_query_idle)
        if not idle:
            return
        zm.last_query = self.now
        body = m.SubQuery((zm.zone[0], zm.zone[1]), self._sender(zm.epoch),
                          tuple(idle[:m.MAX_RSV_ENTRIES])).to_wire()
        for zone in self.layout.zones():
            if 1 <= self.layout.distance(zm.zone, zone) <= p.k_query:
                self._send_area(m.SUB_QUERY, self._zone_area(zone), body)
                self.counters["queries"] += 1

    # ------------------------------------------------------------ state transfer

    def _on_xfer(self, msg: Message, env: m.Envelope) -> None:
        x = m.StateXfer.from_wire(env.payload)
        level = Level(x.level)
        area = (level, x.ax, x.ay)
        seat = self.seats.get(level)
        if seat is None or seat.area != area:
            self.drop("xfer_wrong_area", msg)
            return
        if seat.phase is Phase.MANAGER:  # a conflict's loser: merge its state into ours
            state = self.gm if level is Level.GRID else self.zm
            assert state is not None
            for _ in range(state.load(x.blob, self.now)):
                self.drop("xfer_bad_item")
            if level is Level.GRID:
                self._grsv_soon()
            else:
                self._zrsv_soon()
            return
        self._become_manager(level, max(seat.last_epoch, x.epoch) + 1, inherited=True,
                             blob=x.blob)
        self.counters["took_over"] += 1

    # ------------------------------------------------------------ sweeps

    def _sweep(self) -> None:
        p = self.params
        for key, held in list(self._held.items()):
            if held.deadline <= self.now:
                self._held.pop(key)
                self.drop("manager_unreachable", held.message)
        if self.gm is not None:
            for sub_key in self.gm.expire(self.now):
                self.drop("lease_expired", sub_id=sub_key[1], peer=sub_key[0])
                self._grsv_soon()
        if self.zm is not None:
            counts = self.zm.sweep(self.now, t_zrsv_idle=p.T_zrsv_idle,
                                   t_zrsv_refresh=p.T_zrsv_refresh,
                                   t_grsv_refresh=p.T_grsv_refresh)
            for reason, n in counts.items():
                for _ in range(n):
                    self.drop(reason)
            if counts["sof_silent"]:
                self._zrsv_soon()
            self._query(self.zm)

    # ================================================================ reporting

    def status(self) -> dict[str, Any]:
        seats = {level.name.lower(): {"area": list(s.area[1:]), "phase": s.phase.value,
                                      "manager": None if s.record is None else s.record.node,
                                      "epoch": None if s.record is None else s.record.epoch}
                 for level, s in self.seats.items()}
        return {
            **super().status(),
            "cell": None if self.cell is None else list(self.cell),
            "seats": seats,
            "grid_manager": self.gm is not None,
            "zone_manager": self.zm is not None,
            "held": len(self._held),
            "counters": dict(self.counters),
            "state": {k: list(v) for k, v in self.state_size().items()},
        }

    def state_size(self) -> dict[str, tuple[int, int]]:
        """Entries and bytes of every structure this node holds (the state-size measure).

        Member state is what every node keeps (seats, hints, its own
        subscriptions, held messages); manager state comes from the roles it
        holds. Bytes are the encoded sizes of docs/protocols/brvst.md
        ("Storage accounting"), so the figures compare across nodes and runs.
        """
        own = sum(len(s.key) for sid, s in self.subscriptions.items() if sid in self._valid)
        out: dict[str, tuple[int, int]] = {
            "member_managers": (len(self.seats), len(self.seats) * HINT_BYTES),
            "member_hints": (len(self.hints), self.hints.bytes),
            "member_subscriptions": (len(self._valid), own),
            "held": (len(self._held), self._held.bytes),
        }
        if self.gm is not None:
            out.update(self.gm.state_size())
        if self.zm is not None:
            out.update(self.zm.state_size())
        return out

    _HANDLERS: ClassVar[dict[int, Any]] = {}


def _packed(env: m.Envelope) -> int:
    return len(msgpack.packb(env.to_wire(), use_bin_type=True))


Brvst._HANDLERS = {
    m.SUBSCRIBE: Brvst._gm_subscribe,
    m.UNSUBSCRIBE: Brvst._gm_unsubscribe,
    m.LOCATE: Brvst._gm_locate,
    m.PUBLISH: Brvst._gm_publish,
    m.PUB_GRID: Brvst._gm_pub_grid,
    m.DELIVER: Brvst._on_deliver,
    m.GRSV_UPDATE: Brvst._zm_grsv,
    m.PUB_UP: Brvst._zm_pub_up,
    m.PUB_ZONE: Brvst._zm_pub_zone,
    m.ZRSV_UPDATE: Brvst._zm_zrsv,
    m.PUB_ADVERT: Brvst._zm_advert,
    m.SUB_HISTORY: Brvst._zm_history,
    m.SUB_QUERY: Brvst._zm_query,
    m.STATE_XFER: Brvst._on_xfer,
}
