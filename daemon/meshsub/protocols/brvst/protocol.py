"""BRVST (Li and Wang 2014) as one sans-I/O protocol: every node a member, some managers.

Roles, all on every node:

- *member* (here and ``membership``): knows its grid and zone from its
  position (§III), follows the manager each level announces and takes part
  in electing it, registers its subscriptions with its grid manager (leases,
  refreshes, position reports), publishes through it, receives DELIVERs;
- *relay* (``base``): carries routed messages hop by hop with GPSR towards
  the addressed manager, re-targets them when it knows a newer manager of the
  area, and holds them for a while when the manager it was sent to is gone (a
  stale position reached) or not yet elected; re-broadcasts announcements in
  scope;
- *grid manager* (``grid_role`` over ``grid_manager``'s state): the summary
  forest of its grid's subscriptions, GRSV to the zone manager, two-stage
  matching, DELIVER;
- *zone manager* (``zone_role`` over ``zone_manager``'s state): SOF and its
  forest, ZRSV exchange, matching to grids and zones, the publication cache,
  advertisements, queries.

This module holds the driver inputs, the member's side and the reporting.
The paper's rules are cited by section where they are implemented; the
decisions that fill its gaps are in docs/protocols/brvst.md.
"""

from __future__ import annotations

from typing import Any, ClassVar

from meshsub.core.api import Message, MessageId, MsgKind, NeighborInfo, NodeId, Position
from meshsub.core.content import Event, Subscription
from meshsub.core.params import ProtocolParams
from meshsub.protocols.brvst import messages as m
from meshsub.protocols.brvst.base import (
    HINT_BYTES,
    T_ANN,
    T_ELECT,
    T_FLOOD,
    T_GRSV,
    T_GRSV_REFRESH,
    T_REFRESH,
    T_SWEEP,
    T_ZRSV,
    T_ZRSV_REFRESH,
)
from meshsub.protocols.brvst.grid_role import GridRole
from meshsub.protocols.brvst.membership import Membership
from meshsub.protocols.brvst.params import BrvstParams
from meshsub.protocols.brvst.schema import SchemaError
from meshsub.protocols.brvst.zone_role import ZoneRole
from meshsub.protocols.brvst.zones import Level


class Brvst(Membership, GridRole, ZoneRole):
    """Grid and zone managers with range-vector summaries; geographic routing in between."""

    name: ClassVar[str] = "brvst"
    protocol_id: ClassVar[int] = 10
    Params: ClassVar[type[ProtocolParams]] = BrvstParams
    message_kinds: ClassVar[dict[int, MsgKind]] = m.KINDS

    params: BrvstParams

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
            self.on_unsubscribe(sub_id, subscription)  # a replaced valid one is withdrawn
            return
        self._valid.add(sub_id)
        if self._registered is not None:
            self._send_subscribe(sub_id, subscription, refresh=False, history=True)

    def on_unsubscribe(self, sub_id: str, subscription: Subscription) -> None:
        if sub_id not in self._valid:
            return
        self._valid.discard(sub_id)
        self._history_zone.pop(sub_id, None)
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
        msg = message.forwarded()  # one more hop, one less TTL, no reliable id
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
                self.set_timer(name, p.ann_period(level) * self.rng.uniform(0.75, 1.25))
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

    def _send_subscribe(self, sub_id: str, sub: Subscription, *, refresh: bool,
                        history: bool) -> None:
        if self.cell is None or self.position is None:
            return
        pos = (self.position.x, self.position.y)
        self._reported = pos
        zone = self.layout.zone_of(self.cell)
        # The zone's cache is asked once per subscription and zone: a move inside the zone
        # (a new grid manager, same cache) would only replay what was delivered already.
        ask = history and self.params.want_history and self._history_zone.get(sub_id) != zone
        if ask:
            self._history_zone[sub_id] = zone
        body = m.SubscribeMsg(sub_id, sub, self.node, pos, refresh, ask)
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
            self.drop("duplicate_deliver", msg)
        else:
            self.drop("false_positive", msg)

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
            "state": {k: list(v) for k, v in self.state_sizes().items()},
        }

    def state_sizes(self) -> dict[str, tuple[int, int]]:
        """Entries and bytes of every store this node holds (the state-size measure).

        Member state is what every node keeps (its subscriptions, the managers it
        follows, routing hints, held messages); manager state comes from the roles it
        holds (stores named ``gm_*`` and ``zm_*``, so a report with one is a broker's).
        Bytes of ARV structures are their encoded sizes (docs/protocols/brvst.md,
        "Storage accounting"), the rest msgpack or a fixed charge per entry.
        """
        out = super().state_sizes()
        out.update({
            "member_managers": (len(self.seats), len(self.seats) * HINT_BYTES),
            "member_hints": (len(self.hints), self.hints.bytes),
            "held": (len(self._held), self._held.bytes),
        })
        if self.gm is not None:
            out.update(self.gm.state_size())
        if self.zm is not None:
            out.update(self.zm.state_size())
        return out


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
