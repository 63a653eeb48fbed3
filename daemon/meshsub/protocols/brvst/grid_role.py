"""The grid manager's message handlers (Li and Wang 2014, §IV-B1 and §IV-C).

Subscriptions arrive as SUBSCRIBE (an upsert with a lease), leave as
UNSUBSCRIBE or by lease expiry; the GRSV goes to the zone manager when it
changes (batched by ``T_batch``) and as a periodic refresh; a publication is
matched against the forest (roots, then members), delivered, and always sent
up as PUB_UP.
"""

from __future__ import annotations

from meshsub.core.api import Message
from meshsub.core.content import Subscription
from meshsub.core.georouting import GeoHeader
from meshsub.protocols.brvst import messages as m
from meshsub.protocols.brvst.base import T_GRSV, BrvstBase
from meshsub.protocols.brvst.grid_manager import GridManager, SubKey, Upsert
from meshsub.protocols.brvst.zones import Level


class GridRole(BrvstBase):
    """What a node does while it is the manager of its grid."""

    def _resign_gm(self) -> None:
        """Leaving the role: the zone manager forgets this grid manager's record at once."""
        gm = self.gm
        if gm is None:
            return
        body = m.SummaryUpdate(gm.cell[0], gm.cell[1], self._sender(gm.epoch), gm.version + 1,
                               int(m.GrsvReason.RESIGN), (), self.cfg)
        self._send_area(m.GRSV_UPDATE, self._zone_area(self.layout.zone_of(gm.cell)),
                        body.to_wire())

    def _gm(self, msg: Message) -> GridManager | None:
        if self.gm is None:
            self.drop("not_manager", msg)
        return self.gm

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
            self.drop("duplicate_publish", msg)
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
                               int(reason), tuple(entries), self.cfg, gm.predecessor)
        zone = self.layout.zone_of(gm.cell)
        self._send_area(m.GRSV_UPDATE, self._zone_area(zone), body.to_wire())
        if reason is not m.GrsvReason.REFRESH:
            gm.predecessor = None  # named once: the zone manager has dropped its record
