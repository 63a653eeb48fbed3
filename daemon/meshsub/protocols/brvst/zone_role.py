"""The zone manager's message handlers (Li and Wang 2014, §IV-B2, §IV-C and §IV-D).

GRSVs fill the SOF and its forest; the ZRSV goes to neighbouring and
publication zones; a publication from a grid is cached, sent to the zone's
matching grids and to the zones whose ZRSV matches, and advertised by
distance band; other zones' publications reach the matching grids or are
answered as unwanted; new SOF entries and ZRSVs are matched against the
cache (bidirectional matching); idle subscriptions query zones nearby.
"""

from __future__ import annotations

from meshsub.core.api import Message
from meshsub.core.grid import Cell
from meshsub.protocols.brvst import messages as m
from meshsub.protocols.brvst.base import T_ZRSV, BrvstBase
from meshsub.protocols.brvst.grid_manager import SubKey
from meshsub.protocols.brvst.schema import PubView
from meshsub.protocols.brvst.zone_manager import (
    Applied,
    Cached,
    GmKey,
    Relation,
    ZmKey,
    ZoneManager,
    ZoneSummary,
)
from meshsub.protocols.brvst.zones import Level, Zone


class ZoneRole(BrvstBase):
    """What a node does while it is the manager of its zone."""

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
        if u.reason == m.GrsvReason.RESIGN:
            zm.drop_grid((cell, u.sender.node))
            self._zrsv_soon()
            return
        self._learn_sender(Level.GRID, u.ax, u.ay, u.sender)
        status, added = zm.apply_grsv(cell, u, self.now)
        if status is Applied.FULL:
            self.drop("sof_full", msg)
            return
        if status is not Applied.CHANGED:
            return
        key = (cell, u.sender.node)
        for cached in zm.cache_for_grid(key, added, self.mode):  # §IV-D: bidirectional
            self._pub_grid(zm, cached.pub, key, cached.origin_zone, cached.origin_grid,
                           from_cache=True)
            zm.note_sent(cached, grids=[key])
        self._zrsv_soon()

    def _zm_pub_up(self, msg: Message, env: m.Envelope) -> None:
        """§IV-C at the origin zone: cache, grids of the zone, matching zones, adverts."""
        up = m.PubUp.from_wire(env.payload)
        zm = self._zm(msg)
        if zm is None:
            return
        if zm.seen.check_and_add(("up", up.pub.event_id)):
            self.drop("duplicate_publish", msg)
            return
        view = self.schema.view(up.pub.event.attrs)
        origin = Cell(*up.origin_grid)
        cached = Cached(up.pub, view, zm.zone, origin, self.now, self.now + self.params.T_cache)
        for lost in zm.cache_insert(cached):
            self.drop("cache_evicted", event_id=str(lost.pub.event_id))
        grids = zm.grids_for(view, self.mode, exclude=[origin], now=self.now)
        for gm_key in grids:
            self._pub_grid(zm, up.pub, gm_key, zm.zone, origin, from_cache=False, hop=msg.hop)
        zones = zm.zones_for(view, self.mode, exclude=[zm.zone])
        for zm_key in zones:
            self._pub_zone(zm, up.pub, zm_key, origin, from_cache=False, hop=msg.hop)
            summary = zm.summaries.get(zm_key)
            if summary is not None:
                summary.last_match = self.now
        zm.note_sent(cached, grids=grids, zones=zones)
        self._advertise(zm, up.pub, view, {z for z, _n in zones})

    def _advertise(self, zm: ZoneManager, pub: m.Pub, view: PubView,
                   matched: set[Zone]) -> None:
        """§IV-C: a (publisher, P-ARVs) seen first, or not for d x T_adv, is advertised to the
        zones d zone-hops away that did not get the data and whose ZRSV we do not hold fresh."""
        p = self.params
        key = (pub.event_id.origin, view.advert_key())
        bands = zm.due_bands(key, self.now, p.T_adv, self.layout.max_distance)
        if not bands:
            return
        skip = set(matched)
        for (zone, _zm), summary in zm.summaries.items():
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
            self._reply_unwanted(zm, origin, d.sender)
            return
        for gm_key in grids:
            if zm.served.check_and_add((d.pub.event_id, gm_key)):
                continue
            self._pub_grid(zm, d.pub, gm_key, origin, Cell(*d.origin_grid), from_cache=False,
                           hop=msg.hop)
        if self.params.cache_remote and d.pub.event_id not in zm.cache:
            cached = Cached(d.pub, view, origin, Cell(*d.origin_grid), self.now,
                            self.now + self.params.T_cache, sent_grids=set(grids))
            for lost in zm.cache_insert(cached):
                self.drop("cache_evicted", event_id=str(lost.pub.event_id))

    def _reply_unwanted(self, zm: ZoneManager, origin: Zone, sender: m.Sender) -> None:
        last = zm.unwanted_sent.get(origin)
        if last is not None and self.now - last < self.params.T_unwanted_holddown:
            return
        zm.unwanted_sent[origin] = self.now
        self._send_zrsv(zm, origin, m.ZrsvReason.UNWANTED, to=sender)

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
        key = (zone, u.sender.node)
        if u.reason == m.ZrsvReason.RESIGN:
            zm.summaries.pop(key)
            return
        self._learn_sender(Level.ZONE, u.ax, u.ay, u.sender)
        old = zm.summaries.get(key)
        if old is not None and (u.sender.epoch, u.version) < (old.epoch, old.version):
            self.drop("stale_summary", msg)
            return
        neighbour = self.layout.distance(zone, zm.zone) == 1
        relation = Relation.NEIGHBOR if neighbour else Relation.INTERESTED
        newer_zm = old is None or u.sender.epoch > old.epoch
        summary = ZoneSummary(u.sender.node, u.sender.pos, u.sender.epoch, u.version,
                              u.entries, relation, self.now, self.now)
        for lost in zm.store_summary(key, summary, u.predecessor):
            self.drop("zone_table_full" if lost == key else "zone_table_evicted")
        if key not in zm.summaries:
            return
        if u.reason in (m.ZrsvReason.ADVERT_REPLY, m.ZrsvReason.UNWANTED):
            zm.learn_publication_zone(zone, self.now)
        for cached in zm.cache_for_zone(key, u.entries, self.mode):
            self._pub_zone(zm, cached.pub, key, cached.origin_grid, from_cache=True)
            zm.note_sent(cached, zones=[key])
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
        self._send_zrsv(zm, origin, m.ZrsvReason.ADVERT_REPLY, to=a.sender)

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
        key = (cell, h.sender.node)
        for cached in zm.cache_for_subscription(h.subscription):
            self._pub_grid(zm, cached.pub, key, cached.origin_zone, cached.origin_grid,
                           from_cache=True, for_sub=h.sub_key, to=h.sender)
            zm.note_sent(cached, grids=[key])

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
        key = (origin, q.sender.node)
        if not zm.has_neighbour_summary(origin):
            for _lost in zm.store_summary(key, ZoneSummary(
                    q.sender.node, q.sender.pos, q.sender.epoch, 0, q.entries,
                    Relation.QUERIED, self.now, self.now)):
                self.drop("zone_table_evicted")
        for cached in zm.cache_for_zone(key, q.entries, self.mode):
            self._pub_zone(zm, cached.pub, key, cached.origin_grid, from_cache=True,
                           to=q.sender)
            zm.note_sent(cached, zones=[key])

    def _pub_grid(self, zm: ZoneManager, pub: m.Pub, key: GmKey, origin_zone: Zone,
                  origin_grid: Cell, *, from_cache: bool, for_sub: SubKey | None = None,
                  hop: int = 0, to: m.Sender | None = None) -> None:
        """PUB_GRID to one grid manager (``key``): the one whose SOF entry matched."""
        body = m.PubDown(pub, (origin_zone[0], origin_zone[1]), (origin_grid[0], origin_grid[1]),
                         from_cache, for_sub, self._sender(zm.epoch))
        rec = zm.sof.get(key)
        if to is None and rec is not None:
            to = m.Sender(rec.gm, rec.pos, rec.epoch)
        self._send_area(m.PUB_GRID, self._grid_area(key[0]), body.to_wire(),
                        msg_id=pub.event_id, hop=hop, to=to)

    def _pub_zone(self, zm: ZoneManager, pub: m.Pub, key: ZmKey, origin_grid: Cell, *,
                  from_cache: bool, hop: int = 0, to: m.Sender | None = None) -> None:
        """PUB_ZONE to one zone manager (``key``): the one whose ZRSV matched."""
        body = m.PubDown(pub, (zm.zone[0], zm.zone[1]), (origin_grid[0], origin_grid[1]),
                         from_cache, None, self._sender(zm.epoch))
        summary = zm.summaries.get(key)
        if to is None and summary is not None:
            to = m.Sender(summary.zm, summary.pos, summary.epoch)
        self._send_area(m.PUB_ZONE, self._zone_area(key[0]), body.to_wire(),
                        msg_id=pub.event_id, hop=hop, to=to)

    def _zrsv_soon(self) -> None:
        """A changed ZRSV goes out after ``T_batch`` (changes coalesce), and no sooner than
        ``T_zrsv_min`` after the previous change push."""
        if T_ZRSV not in self._armed:
            self._armed.add(T_ZRSV)
            wait = self.params.T_batch
            if self._zrsv_pushed_at is not None:
                wait = max(wait, self._zrsv_pushed_at + self.params.T_zrsv_min - self.now)
            self.set_timer(T_ZRSV, wait)

    def _push_zrsv(self, reason: m.ZrsvReason, force: bool = False) -> None:
        """§IV-B2: the ZRSV goes to neighbouring and publication zones on change or period."""
        zm = self.zm
        if zm is None:
            return
        if zm.take_update(force=force) is None:
            return
        self._zrsv_pushed_at = self.now
        targets = set(self.layout.neighbours(zm.zone)) | set(zm.push)
        for zone in sorted(targets):
            self._send_zrsv(zm, zone, reason, take=False)
        zm.predecessor = None  # named to every zone pushed to: their records of it are gone

    def _send_zrsv(self, zm: ZoneManager, zone: Zone, reason: m.ZrsvReason, *,
                   take: bool = True, to: m.Sender | None = None) -> None:
        """This zone's ZRSV to ``zone``'s manager (``to``: a particular one, as a reply)."""
        if take:
            zm.take_update()
        entries = tuple(zm.last_sent or ())
        body = m.SummaryUpdate(zm.zone[0], zm.zone[1], self._sender(zm.epoch), zm.version,
                               int(reason), entries, self.cfg, zm.predecessor)
        self._zrsv_sent_at[zone] = self.now
        self._send_area(m.ZRSV_UPDATE, self._zone_area(zone), body.to_wire(), to=to)

    def _resign_zm(self) -> None:
        """Leaving the role: the zones this one pushed to forget its summary at once."""
        zm = self.zm
        if zm is None:
            return
        body = m.SummaryUpdate(zm.zone[0], zm.zone[1], self._sender(zm.epoch), zm.version + 1,
                               int(m.ZrsvReason.RESIGN), (), self.cfg).to_wire()
        for zone in sorted(set(self.layout.neighbours(zm.zone)) | set(zm.push)):
            self._send_area(m.ZRSV_UPDATE, self._zone_area(zone), body)

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
