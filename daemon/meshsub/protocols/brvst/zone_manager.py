"""A zone manager's state (Li and Wang 2014, §IV-B2, IV-C, IV-D).

- SOF: the GRSV of every grid manager of the zone, and a second-level summary
  forest over those entries whose roots are the zone's ZRSV;
- the ZRSVs of neighbouring zones and of zones learned to be interested
  (adverts answered, unwanted traffic, queries), each with its relation and
  the time of its last data match (idle ones expire);

SOF records and zone summaries are kept per (area, manager), not per area: a
grid or zone whose nodes are split (an isolated node, a gap in a sparse cell)
elects one manager per part, and a summary from the part with the higher
epoch must not replace the other part's. A record goes when its manager's
successor names it (``predecessor``) or when it falls silent.
- the push set: zones this zone keeps informed of its own ZRSV;
- the publication cache (origin zone only by default) with its fewest-hits
  eviction, and the per-(publisher, P-ARVs) advertisement times by band.

Every table is bounded in entries and bytes; what a bound refuses or evicts
is returned so the protocol counts it. This module holds state and
decisions; the protocol sends the messages.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import msgpack

from meshsub.core.api import MessageId
from meshsub.core.arv import Comparator
from meshsub.core.content import Subscription
from meshsub.core.dedup import DuplicateCache
from meshsub.core.grid import Cell, Point
from meshsub.protocols.brvst import messages as m
from meshsub.protocols.brvst.forest import Entry, Filter, Summarised, rsv_size
from meshsub.protocols.brvst.schema import PubView, Schema, SchemaError
from meshsub.protocols.brvst.tables import BoundedMap
from meshsub.protocols.brvst.zones import Zone

CACHE_OVERHEAD = 64
"""Bytes charged per cached publication besides its packed form (times, hits, origin)."""
SENT_BYTES = 4
"""Bytes charged per grid or zone a cached publication was sent to."""
TABLE_OVERHEAD = 32
SEEN_ENTRY_BYTES = 40


GmKey = tuple[Cell, int]
"""A grid manager: (its grid, its node)."""
ZmKey = tuple[Zone, int]
"""A zone manager: (its zone, its node)."""


class Relation(enum.Enum):
    NEIGHBOR = "neighbor"
    INTERESTED = "interested"
    QUERIED = "queried"


class Applied(enum.Enum):
    CHANGED = "changed"
    REFRESHED = "refreshed"
    STALE = "stale"
    FULL = "full"


@dataclass(slots=True)
class SofRecord:
    gm: int
    pos: Point
    epoch: int
    version: int
    entries: tuple[Entry, ...]
    rx: float
    last_match: float


@dataclass(slots=True)
class ZoneSummary:
    zm: int
    pos: Point
    epoch: int
    version: int
    entries: tuple[Entry, ...]
    relation: Relation
    rx: float
    last_match: float

    @property
    def size(self) -> int:
        return rsv_size(self.entries) + TABLE_OVERHEAD


@dataclass(slots=True)
class Cached:
    pub: m.Pub
    view: PubView
    origin_zone: Zone
    origin_grid: Cell
    t_insert: float
    t_expire: float
    hits: int = 0
    sent_grids: set[GmKey] = field(default_factory=set)
    sent_zones: set[ZmKey] = field(default_factory=set)
    packed: int = 0

    @property
    def size(self) -> int:
        return self.packed + CACHE_OVERHEAD + SENT_BYTES * (len(self.sent_grids)
                                                            + len(self.sent_zones))


def _cache_victim(table: BoundedMap[Any, Cached], _incoming: Any) -> Any:
    """Fewest matching hits first, then the oldest (Li and Wang 2014, §IV-D)."""
    return min(table.items(), key=lambda kv: (kv[1].hits, kv[1].t_insert))[0]


def _summary_victim(table: BoundedMap[ZmKey, ZoneSummary], _incoming: ZmKey) -> ZmKey | None:
    """A non-neighbour with the oldest data match; neighbours are never pushed out."""
    others = [(s.last_match, z) for z, s in table.items() if s.relation is not Relation.NEIGHBOR]
    return min(others)[1] if others else None


class ZoneManager(Summarised):
    def __init__(self, zone: Zone, epoch: int, schema: Schema, *, sof_max: int,
                 sof_bytes: int = 1 << 20, zones_max: int, zones_bytes: int, cache_max: int,
                 cache_bytes: int, advert_max: int, dedupe: int,
                 successor_replay: bool = True) -> None:
        super().__init__(epoch)
        self.successor_replay = successor_replay
        """True: a successor that names its predecessor is a new target for the cache
        (``replay_to_successor``); False: it inherits what was sent to the predecessor."""
        self.zone = zone
        self.schema = schema
        self.sof: dict[GmKey, SofRecord] = {}
        self.sof_max = sof_max
        self.sof_bytes = sof_bytes
        self.summaries: BoundedMap[ZmKey, ZoneSummary] = BoundedMap(
            zones_max, zones_bytes, lambda s: s.size, victim=_summary_victim)
        self.push: BoundedMap[Zone, float] = BoundedMap(zones_max, zones_max * 16,
                                                        lambda _t: 16)
        """Publication zones (learned) this zone keeps informed; neighbours are implicit."""
        self.cache: BoundedMap[MessageId, Cached] = BoundedMap(
            cache_max, cache_bytes, lambda c: c.size, victim=_cache_victim)
        self.adverts: BoundedMap[tuple[int, bytes], dict[int, float]] = BoundedMap(
            advert_max, advert_max * 128, lambda bands: 48 + 12 * len(bands))
        self.served = DuplicateCache(dedupe)
        """(pub id, grid manager) pairs already sent down, at zones the publication came to."""
        self.seen = DuplicateCache(dedupe)
        """Publications already handled as PUB_UP or PUB_ZONE (retransmissions)."""
        self.unwanted_sent: dict[Zone, float] = {}
        self.last_query = float("-inf")

    # ------------------------------------------------------------ SOF and ZRSV

    def sof_entries(self) -> int:
        return sum(len(r.entries) for r in self.sof.values())

    def sof_size(self) -> int:
        return sum(rsv_size(r.entries) + TABLE_OVERHEAD for r in self.sof.values())

    def apply_grsv(self, cell: Cell, upd: m.SummaryUpdate, now: float) -> tuple[Applied,
                                                                                list[Entry]]:
        """A GRSV_UPDATE from one grid manager: a newer (epoch, version) replaces that
        manager's entries (a diff on the forest); the same version refreshes; older is
        stale. A named predecessor's record goes (without ``successor_replay`` its entries
        and what the cache sent it pass to the successor). Returns the entries added."""
        sender = upd.sender
        key = (cell, sender.node)
        inherited: tuple[Entry, ...] = ()
        if upd.predecessor is not None and upd.predecessor != sender.node:
            pred_key = (cell, upd.predecessor)
            pred = self.drop_grid(pred_key)
            if not self.successor_replay:
                inherited = pred.entries if pred is not None else ()
                self.succeed_grid(pred_key, key)
        rec = self.sof.get(key)
        if rec is not None:
            theirs, ours = (sender.epoch, upd.version), (rec.epoch, rec.version)
            if theirs < ours:
                return Applied.STALE, []
            if theirs == ours:
                rec.rx, rec.pos = now, sender.pos
                return Applied.REFRESHED, []
        new = tuple(dict.fromkeys(upd.entries))
        old = rec.entries if rec is not None else ()
        old_size = rsv_size(old) + TABLE_OVERHEAD if rec is not None else 0
        if self.sof_entries() - len(old) + len(new) > self.sof_max or \
                self.sof_size() - old_size + rsv_size(new) + TABLE_OVERHEAD > self.sof_bytes:
            return Applied.FULL, []
        old_set, new_set = set(old), set(new)
        for entry in old:
            if entry not in new_set:
                self.forest.remove((key, entry))
        for entry in new:
            if entry not in old_set:
                self.forest.insert(Filter((key, entry), dict(entry)))
        # §IV-D replays the cache for a changed SOF: entries the predecessor already had
        # are no change (its successor holds the same subscriptions).
        known = old_set | set(inherited)
        added = [e for e in new if e not in known]
        last_match = rec.last_match if rec is not None else now
        self.sof[key] = SofRecord(sender.node, sender.pos, sender.epoch, upd.version, new, now,
                                  last_match)
        return Applied.CHANGED, added

    def succeed_grid(self, old: GmKey, new: GmKey) -> None:
        """Grid manager ``new`` took over ``old``'s subscriptions (a hand-over, or a
        conflict's merge: both name the predecessor in the GRSV): what the cache sent to
        ``old`` reached them, so it counts as sent to ``new``.

        Otherwise (``successor_replay``, the default) a hand-over looks like a new grid
        to the cache: every matching cached publication goes again to the successor and
        on to subscribers that mostly had it, a replay that grows with the cache
        (docs/benchmarks.md, "BRVST's simulation cost"). §IV-D replays the cache for a
        changed SOF or ZRSV, which a hand-over of the same subscriptions is not; but the
        replay also re-sends DELIVERs that were lost (docs/protocols/brvst.md).
        """
        self._carry_sent(old, new, lambda c: c.sent_grids)

    def succeed_zone(self, old: ZmKey, new: ZmKey) -> None:
        """Zone manager ``new`` took over ``old``'s zone (its ZRSV names the predecessor):
        publications this cache sent to ``old`` count as sent to ``new`` (``succeed_grid``)."""
        self._carry_sent(old, new, lambda c: c.sent_zones)

    def _carry_sent(self, old: Any, new: Any, sent_of: Callable[[Cached], set[Any]]) -> None:
        for pub_id, cached in self.cache.items():
            sent = sent_of(cached)
            if old in sent:
                sent.discard(old)
                sent.add(new)
                self.cache.resize(pub_id)

    def drop_grid(self, key: GmKey) -> SofRecord | None:
        """Forget one grid manager's SOF record and its forest entries; returns the record
        (None if there was none)."""
        rec = self.sof.pop(key, None)
        if rec is not None:
            for entry in rec.entries:
                self.forest.remove((key, entry))
        return rec

    # ------------------------------------------------------------ matching

    def grids_for(self, view: PubView, mode: Comparator, exclude: Iterable[Cell] = (),
                  now: float | None = None) -> list[GmKey]:
        """Grid managers of the zone with an SOF entry the publication matches (through the
        forest), except those of the ``exclude`` grids."""
        skip = set(exclude)
        found: set[GmKey] = set()
        match = self.schema.matches
        for f in self.forest.candidates(lambda summary: match(view, summary, mode)):
            key: GmKey = f.id[0]  # type: ignore[index]
            if key[0] not in skip and key not in found and match(view, f.arvs, mode):
                found.add(key)
        if now is not None:
            for key in found:
                self.sof[key].last_match = now
        return sorted(found)

    def entries_match(self, view: PubView, entries: Iterable[Entry], mode: Comparator) -> bool:
        return any(self.schema.matches(view, dict(e), mode) for e in entries)

    def zones_for(self, view: PubView, mode: Comparator, exclude: Iterable[Zone] = ()) \
            -> list[ZmKey]:
        """Zone managers whose ZRSV the publication matches, except those of ``exclude``."""
        skip = set(exclude)
        return sorted(k for k, s in self.summaries.items()
                      if k[0] not in skip and self.entries_match(view, s.entries, mode))

    def has_neighbour_summary(self, zone: Zone) -> bool:
        return any(k[0] == zone and s.relation is Relation.NEIGHBOR
                   for k, s in self.summaries.items())

    # ------------------------------------------------------------ zone summaries

    def store_summary(self, key: ZmKey, summary: ZoneSummary,
                      predecessor: int | None = None) -> list[ZmKey]:
        """Keep (or refresh) one zone manager's ZRSV; returns the keys evicted or refused."""
        if predecessor is not None and predecessor != key[1]:
            self.summaries.pop((key[0], predecessor))
            if not self.successor_replay:
                self.succeed_zone((key[0], predecessor), key)
        old = self.summaries.get(key)
        if old is not None:
            summary.last_match = max(summary.last_match, old.last_match)
            if old.relation is Relation.NEIGHBOR:
                summary.relation = Relation.NEIGHBOR
        return [k for k, _s in self.summaries.put(key, summary)]

    def learn_publication_zone(self, zone: Zone, now: float) -> list[Zone]:
        return [z for z, _t in self.push.put(zone, now)]

    # ------------------------------------------------------------ cache

    def cache_insert(self, entry: Cached) -> list[Cached]:
        entry.packed = len(msgpack.packb(entry.pub.to_wire(), use_bin_type=True))
        return [c for _k, c in self.cache.put(entry.pub.event_id, entry)]

    def note_sent(self, entry: Cached, grids: Iterable[GmKey] = (),
                  zones: Iterable[ZmKey] = ()) -> None:
        grids, zones = list(grids), list(zones)
        entry.sent_grids.update(grids)
        entry.sent_zones.update(zones)
        entry.hits += len(grids) + len(zones)
        if entry.pub.event_id in self.cache:
            self.cache.resize(entry.pub.event_id)

    def cache_for_grid(self, key: GmKey, entries: Iterable[Entry], mode: Comparator) \
            -> list[Cached]:
        """Cached publications not yet sent to grid manager ``key`` (nor from its grid) that
        one of its new entries matches."""
        entries = list(entries)
        return [c for c in self.cache.values() if key not in c.sent_grids
                and key[0] != c.origin_grid and self.entries_match(c.view, entries, mode)]

    def cache_for_zone(self, key: ZmKey, entries: Iterable[Entry], mode: Comparator) \
            -> list[Cached]:
        """Cached publications of this zone not yet sent to zone manager ``key`` that its
        entries match."""
        entries = list(entries)
        return [c for c in self.cache.values() if c.origin_zone == self.zone
                and key not in c.sent_zones and key[0] != self.zone
                and self.entries_match(c.view, entries, mode)]

    def cache_for_subscription(self, sub: Subscription) -> list[Cached]:
        """Cached publications a new subscription matches exactly (SUB_HISTORY)."""
        return [c for c in self.cache.values() if sub.matches(c.pub.event)]

    # ------------------------------------------------------------ adverts

    def due_bands(self, key: tuple[int, bytes], now: float, t_adv: float,
                  max_band: int) -> list[int]:
        """Distance bands 1..max_band whose advertisement of ``key`` is due (period d x T_adv)."""
        last = self.adverts.get(key) or {}
        return [d for d in range(1, max_band + 1)
                if d not in last or now - last[d] >= t_adv * d]

    def mark_advertised(self, key: tuple[int, bytes], bands: Iterable[int],
                        now: float) -> int:
        """Record the bands advertised now; return how many advert keys were evicted."""
        last = dict(self.adverts.get(key) or {})
        last.update({d: now for d in bands})
        return len(self.adverts.put(key, last))

    # ------------------------------------------------------------ expiry

    def sweep(self, now: float, *, t_zrsv_idle: float, t_zrsv_refresh: float,
              t_grsv_refresh: float) -> dict[str, int]:
        """Expire cache entries, idle or silent zone summaries, learned zones, silent grids."""
        counts = {"cache_expired": 0, "zrsv_idle": 0, "zrsv_silent": 0, "push_idle": 0,
                  "sof_silent": 0}
        for pub_id in [k for k, c in self.cache.items() if c.t_expire <= now]:
            self.cache.pop(pub_id)
            counts["cache_expired"] += 1
        for zm_key, s in list(self.summaries.items()):
            if s.relation is Relation.NEIGHBOR:
                if now - s.rx > 3 * t_zrsv_refresh:
                    self.summaries.pop(zm_key)
                    counts["zrsv_silent"] += 1
            elif now - s.last_match > t_zrsv_idle:
                self.summaries.pop(zm_key)
                counts["zrsv_idle"] += 1
        for zone in [z for z, t in self.push.items() if now - t > t_zrsv_idle]:
            self.push.pop(zone)
            counts["push_idle"] += 1
        for gm_key in [k for k, r in self.sof.items() if now - r.rx > 3 * t_grsv_refresh]:
            self.drop_grid(gm_key)
            counts["sof_silent"] += 1
        self.unwanted_sent = {z: t for z, t in self.unwanted_sent.items() if now - t < 600}
        return counts

    def idle_entries(self, now: float, t_idle: float) -> list[Entry]:
        """Entries of grids whose subscriptions found no data for ``t_idle`` (SUB_QUERY)."""
        out: dict[Entry, None] = {}
        for rec in self.sof.values():
            if now - rec.last_match >= t_idle:
                out.update(dict.fromkeys(rec.entries))
        return list(out)

    # ------------------------------------------------------------ hand-over

    def blob(self, now: float, budget: int) -> tuple[list[Any], int]:
        """SOF, zone summaries, push set, advert times, then the cache, within ``budget``."""
        used, left_out = 0, 0

        def fits(item: Any) -> bool:
            nonlocal used, left_out
            size = len(msgpack.packb(item, use_bin_type=True))
            if used + size > budget:
                left_out += 1
                return False
            used += size
            return True

        sof = [i for i in ([c[0], c[1], r.gm, r.pos[0], r.pos[1], r.epoch, r.version,
                            m.rsv_to_wire(r.entries), now - r.rx, now - r.last_match]
                           for (c, _gm), r in self.sof.items()) if fits(i)]
        zones = [i for i in ([z[0], z[1], s.zm, s.pos[0], s.pos[1], s.epoch, s.version,
                              s.relation.value, m.rsv_to_wire(s.entries), now - s.rx,
                              now - s.last_match]
                             for (z, _zm), s in self.summaries.items()) if fits(i)]
        push = [i for i in ([z[0], z[1], now - t] for z, t in self.push.items()) if fits(i)]
        adverts = [i for i in ([pub, key, [[d, now - t] for d, t in bands.items()]]
                               for (pub, key), bands in self.adverts.items()) if fits(i)]
        newest_first = sorted(self.cache.values(), key=lambda c: -c.t_insert)
        cache = [i for i in ([c.pub.to_wire(), c.origin_zone[0], c.origin_zone[1],
                              c.origin_grid[0], c.origin_grid[1], c.t_expire - now, c.hits,
                              [[g[0], g[1], n] for g, n in sorted(c.sent_grids)],
                              [[z[0], z[1], n] for z, n in sorted(c.sent_zones)]]
                             for c in newest_first) if fits(i)]
        return [1, sof, zones, push, adverts, cache], left_out

    def load(self, blob: list[Any] | tuple[Any, ...], now: float) -> int:
        """Install a predecessor's state (newer SOF records and summaries win); bad items.

        The blob comes off the wire (STATE_XFER): every field is read with the checks of
        a message body (``messages.Fields``), so an item with a wrong type or an infinite
        or NaN number is one bad item, never an exception (nor a record that never ages).
        """
        if len(blob) != 6 or blob[0] != 1:
            return 1
        bad = 0
        for part, loader in zip(blob[1:], (self._load_sof, self._load_zone, self._load_push,
                                           self._load_advert, self._load_cached), strict=True):
            if not isinstance(part, list | tuple):
                bad += 1
                continue
            for item in part:
                try:
                    loader(item, now)
                except (ValueError, KeyError, SchemaError):
                    bad += 1
        return bad

    def _load_sof(self, item: Any, now: float) -> None:
        f = m.Fields(item, 10, "hand-over SOF record")
        cell = Cell(f.integer(), f.integer())
        sender = m.Sender(f.node(), (f.number(), f.number()), f.counter())
        upd = m.SummaryUpdate(cell[0], cell[1], sender, f.counter(), m.GrsvReason.RESYNC,
                              m.rsv_from_wire(f.raw()), b"")
        age_rx, age_match = f.number(), f.number()
        status, _added = self.apply_grsv(cell, upd, now - age_rx)
        if status is Applied.FULL:
            raise ValueError("SOF full")
        rec = self.sof.get((cell, sender.node))
        if rec is not None:
            rec.last_match = now - age_match

    def _load_zone(self, item: Any, now: float) -> None:
        f = m.Fields(item, 11, "hand-over zone summary")
        zone = Zone(f.integer(), f.integer())
        zm, pos, epoch, version = f.node(), (f.number(), f.number()), f.counter(), f.counter()
        relation = Relation(f.text(16))
        entries, age_rx, age_match = m.rsv_from_wire(f.raw()), f.number(), f.number()
        old = self.summaries.get((zone, zm))
        if old is not None and (old.epoch, old.version) >= (epoch, version):
            return
        self.store_summary((zone, zm), ZoneSummary(zm, pos, epoch, version, entries, relation,
                                                   now - age_rx, now - age_match))

    def _load_push(self, item: Any, now: float) -> None:
        f = m.Fields(item, 3, "hand-over push entry")
        zone, age = Zone(f.integer(), f.integer()), f.number()
        self.push.put(zone, max(self.push.get(zone) or float("-inf"), now - age))

    def _load_advert(self, item: Any, now: float) -> None:
        f = m.Fields(item, 3, "hand-over advert times")
        publisher, key = f.node(), f.raw()
        if not isinstance(key, bytes):
            raise ValueError("advert key must be bytes")
        last = {}
        for band in f.items():
            b = m.Fields(band, 2, "advert band")
            d, age = b.integer(1), b.number()
            last[d] = now - age
        self.adverts.put((publisher, key), last)

    def _load_cached(self, item: Any, now: float) -> None:
        f = m.Fields(item, 9, "hand-over cached publication")
        pub = m.Pub.from_wire(f.raw())
        origin_zone, origin_grid = Zone(f.integer(), f.integer()), Cell(f.integer(), f.integer())
        ttl, hits = f.number(), f.integer(0)
        grids = {(Cell(g.integer(), g.integer()), g.node())
                 for g in (m.Fields(w, 3, "sent grid") for w in f.items())}
        zones = {(Zone(z.integer(), z.integer()), z.node())
                 for z in (m.Fields(w, 3, "sent zone") for w in f.items())}
        if pub.event_id in self.cache or ttl <= 0:
            return
        entry = Cached(pub, self.schema.view(pub.event.attrs), origin_zone, origin_grid, now,
                       now + ttl, hits, grids, zones)
        self.cache_insert(entry)

    # ------------------------------------------------------------ accounting

    def state_size(self) -> dict[str, tuple[int, int]]:
        """(entries, bytes) per structure; the cache's payload is counted apart."""
        rep = self.representative()
        sof_bytes = self.sof_size()
        payload = sum(c.packed for c in self.cache.values())
        seen = len(self.served) + len(self.seen)
        return {
            "zm_sof": (self.sof_entries(), sof_bytes),
            "zm_summaries": (len(rep), rsv_size(rep)),
            "zm_zone_table": (len(self.summaries), self.summaries.bytes),
            "zm_push": (len(self.push), self.push.bytes),
            "zm_cache_meta": (len(self.cache), self.cache.bytes - payload),
            "zm_cache_payload": (len(self.cache), payload),
            "zm_adverts": (len(self.adverts), self.adverts.bytes),
            "zm_seen": (seen, seen * SEEN_ENTRY_BYTES),
        }
