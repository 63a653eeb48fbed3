"""Membership: a node's grid and zone, the managers it follows, and manager election.

Li and Wang 2014 leave election to existing schemes (§III); the rules here
(``meshsub.protocols.brvst.election``) work over multi-hop cells: scoped
flooding of ANNOUNCE, score-based back-off, incumbency, epochs, hand-over
with state transfer when a manager leaves its area, and time-outs when one
crashes.
"""

from __future__ import annotations

import math
from typing import Any

from meshsub.core.api import Message, NodeId
from meshsub.core.grid import Cell, Point
from meshsub.protocols.brvst import messages as m
from meshsub.protocols.brvst.base import (
    FLOOD_BACKLOG,
    T_ANN,
    T_ELECT,
    T_FLOOD,
    T_GRSV_REFRESH,
    T_ZRSV_REFRESH,
    BrvstBase,
)
from meshsub.protocols.brvst.election import (
    Adopted,
    ManagerRecord,
    Phase,
    Seat,
    backoff,
    score,
    successor,
)
from meshsub.protocols.brvst.grid_manager import GridManager
from meshsub.protocols.brvst.zone_manager import ZoneManager
from meshsub.protocols.brvst.zones import Area, Level, Zone


class Membership(BrvstBase):
    """Following, electing and handing over the managers of this node's grid and zone."""

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
        if hint is not None and hint.alive(self.now, self.params.ann_period(level)):
            seat.record, seat.phase, seat.last_epoch = hint, Phase.WATCH, hint.epoch
            self._watch(level, hint)
        else:
            if hint is not None:
                seat.last_epoch = hint.epoch
            self.set_timer(f"{T_ELECT}{int(level)}", self.params.ann_period(level))
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

    def _election_timer(self, level: Level) -> None:
        seat = self.seats.get(level)
        if seat is None or seat.phase is Phase.MANAGER or self.position is None:
            return
        t_ann = self.params.ann_period(level)
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
        if seat.last_epoch > 0 and not self._hears_area(seat.area):
            # Cut off from an area that has a manager somewhere: this node cannot tell a
            # crash from its own isolation, and standing would split the area. It routes
            # to the area's manager as an outsider would, and tries again later.
            self.counters["isolated_abstained"] += 1
            self.set_timer(f"{T_ELECT}{int(level)}", t_ann)
            return
        self._become_manager(level, seat.last_epoch + 1, inherited=False)

    def _hears_area(self, area: Area) -> bool:
        """True if a neighbour is inside the area's flood scope (announcements can reach us)."""
        bounds, margin = self.layout.bounds(area), self.params.scope_margin
        return any(bounds.contains(x, y, margin) for x, y in self._npos.values())

    def _watch(self, level: Level, rec: ManagerRecord) -> None:
        """Re-arm the level's election timer for the moment ``rec`` would be timed out."""
        delay = rec.expires_at(self.params.ann_period(level)) - self.now
        self.set_timer(f"{T_ELECT}{int(level)}", max(0.0, delay) + 1e-6)

    def _become_manager(self, level: Level, epoch: int, *, inherited: bool,
                        blob: list[Any] | tuple[Any, ...] | None = None,
                        predecessor: int | None = None) -> None:
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
            self.gm.predecessor = predecessor
            self.emit("broker", role="grid_manager", peer=None)
            self.set_timer(T_GRSV_REFRESH, p.T_grsv_refresh)
            self._grsv_soon()
        else:
            self.zm = ZoneManager(Zone(ax, ay), epoch, self.schema, sof_max=p.sof_entries_max,
                                  sof_bytes=p.sof_bytes_max,
                                  zones_max=p.zrsv_zones_max, zones_bytes=p.zrsv_bytes_max,
                                  cache_max=p.N_cache_max, cache_bytes=p.C_max,
                                  advert_max=p.advert_max, dedupe=p.dedupe_size,
                                  successor_replay=p.replay_to_successor)
            bad = self.zm.load(blob, self.now) if blob is not None else 0
            self.zm.predecessor = predecessor
            self.emit("broker", role="zone_manager", peer=None)
            self.set_timer(T_ZRSV_REFRESH, p.T_zrsv_refresh)
            self._zrsv_soon()
            if self.gm is not None:  # this node's own grid reports to its new zone manager
                self._send_grsv(m.GrsvReason.RESYNC, force=True)
        for _ in range(bad):
            self.drop("xfer_bad_item")
        self._announce(level)
        self.set_timer(f"{T_ANN}{int(level)}",
                       p.ann_period(level) * self.rng.uniform(0.75, 1.25))
        self._release_held(seat.area)
        if level is Level.GRID:  # registered with itself, subscriptions now or later
            self._on_new_manager(Level.GRID, seat.record)

    def _release_role(self, level: Level) -> None:
        """Stop managing: tell the manager above (or the zones around) first."""
        if level is Level.GRID:
            self._resign_gm()
        else:
            self._resign_zm()
        seat = self.seats[level]
        seat.phase, seat.record = Phase.LISTEN, None
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
            xfer = m.StateXfer(int(level), area[1], area[2], epoch, self.node, blob)
            self._send_node(m.STATE_XFER, succ, candidates[succ], xfer.to_wire())
            spos = candidates[succ]
            self._hint(area, ManagerRecord(succ, epoch + 1, spos,
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
        """A conflict lost (docs/protocols/brvst.md, "Managers"): the state goes to the winner."""
        seat = self.seats[level]
        state = self.gm if level is Level.GRID else self.zm
        assert state is not None and seat.record is not None
        blob, left_out = state.blob(self.now, self.params.xfer_max_bytes)
        for _ in range(left_out):
            self.drop("xfer_truncated")
        xfer = m.StateXfer(int(level), seat.area[1], seat.area[2], seat.record.epoch,
                           self.node, blob)
        self._send_node(m.STATE_XFER, winner.node, winner.pos, xfer.to_wire())
        self._release_role(level)
        seat.phase, seat.record = Phase.WATCH, winner
        self._watch(level, winner)
        self.counters["conflict_lost"] += 1

    def _on_flood(self, sender: NodeId, msg: Message) -> None:
        if msg.id in self.dedup:
            self.drop("duplicate_flood", msg, peer=sender)
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
        if len(self._flood_wait) >= FLOOD_BACKLOG:
            self.drop("flood_backlog", msg)
            return
        name = f"{T_FLOOD}{msg.id}"
        self._flood_wait[name] = msg
        self.set_timer(name, self.rng.uniform(0.0, self.params.flood_jitter))

    def _on_announce(self, level: Level, area: Area, ann: m.Announce) -> None:
        rec = ManagerRecord(ann.manager, ann.epoch, ann.pos, ann.score, self.now, ann.inherited)
        if ann.manager != self.node:
            old = self.hints.get(area)
            period = self.params.ann_period(level)
            if old is None or old.node == rec.node or not old.alive(self.now, period) \
                    or rec.beats(old):
                self._hint(area, rec)
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
                adopted = seat.adopt(rec, self.now, self.params.ann_period(level))
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
            wait = self.params.ann_period(level) if res.successor is not None else 0.0
            self.set_timer(f"{T_ELECT}{int(level)}", wait)

    def _on_new_manager(self, level: Level, rec: ManagerRecord) -> None:
        """Members re-register with a manager that did not inherit the state (a crash)."""
        if level is Level.GRID:
            first = self._registered is None
            self._registered = (rec.node, rec.epoch)
            self._reported = None
            if rec.inherited and not first:
                return
            subs = self.subscriptions
            for sub_id in sorted(self._valid):
                if sub_id in subs:
                    self._send_subscribe(sub_id, subs[sub_id], refresh=not first, history=True)
        elif self.gm is not None:
            self._send_grsv(m.GrsvReason.RESYNC, force=True)

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
            state.predecessor = x.manager  # its summary goes when ours names it
            if level is Level.GRID:
                self._send_grsv(m.GrsvReason.RESYNC, force=True)
            else:
                self._push_zrsv(m.ZrsvReason.CHANGE, force=True)
            return
        self._become_manager(level, max(seat.last_epoch, x.epoch) + 1, inherited=True,
                             blob=x.blob, predecessor=x.manager)
        self.counters["took_over"] += 1
