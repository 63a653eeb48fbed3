"""Broker storage of BRVST and of its peer TAMA, computed from one workload (§V-B, Fig. 8-i(b)).

Li and Wang 2014 compare BRVST's broker storage with TAMA's ("60 % lower")
but describe TAMA only as ranges "at a fixed granularity" kept "in tables
without aggregation"; TAMA's own paper (Zhao and Wu, ICDCS 2011) is not part
of this repository and only its abstract was available: a *hierarchical
indexing table* whose size sets the false-positive rate. The model here is
therefore explicit about what it assumes (docs/protocols/brvst.md, "TAMA"):

- per attribute, a table of ``2**l`` cells at every level ``l = 0..levels``
  (the table size is the ``levels`` parameter);
- a subscription's range is rounded outward to the finest level's cells and
  stored as the minimal set of aligned cells covering them (the canonical
  segment-tree decomposition), one subscription id per cell entry;
- a matching event value looks up its cell at every level; the rounding is
  TAMA's only source of false positives;
- TAMA runs on BRVST's own overlay, so that the comparison isolates the
  representation and the aggregation (docs/protocols/brvst.md, "TAMA"):
  a grid's broker stores its grid's subscriptions, a zone's broker those of
  its zone and of the neighbouring zones (BRVST's zone manager keeps their
  ZRSVs), all without aggregation.

BRVST's side uses the encoded sizes of its own structures: each
subscription's S-ARVs and the GRSV at a grid manager; the SOF, the own ZRSV
and the neighbours' ZRSVs at a zone manager (the paper's accounting; the
running protocol's ``state_size`` also counts the exact filters it keeps).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from meshsub.core.arv import ARV, Domain, Interval
from meshsub.core.grid import Cell
from meshsub.protocols.brvst.forest import Entry, Filter, Forest, entry_size, rsv_size
from meshsub.protocols.brvst.schema import Schema
from meshsub.protocols.brvst.zones import Layout, Zone

ID_BYTES = 8
"""A subscription id in a table entry: (node, local number), as in a BRVST SUB_ID."""
RECORD_BYTES = ID_BYTES + 1
"""Per stored subscription: its id and its attribute count (TAMA's match counter target)."""
CELL_BYTES = 4
"""Per table cell: the head of its entry list."""


@dataclass(frozen=True, slots=True)
class Placed:
    """One active subscription of a workload snapshot: where it is and its ranges."""

    sub_id: int
    cell: Cell
    ranges: Mapping[int, Interval]


@dataclass(slots=True)
class Storage:
    """Bytes held per broker: grid brokers by cell, zone brokers by zone."""

    grid: dict[Cell, int] = field(default_factory=dict)
    zone: dict[Zone, int] = field(default_factory=dict)

    def brokers(self) -> list[int]:
        return [*self.grid.values(), *self.zone.values()]

    @property
    def mean(self) -> float:
        """Mean bytes per broker (grid and zone brokers alike)."""
        values = self.brokers()
        return sum(values) / len(values) if values else 0.0


def dyadic_cells(k_lo: int, k_hi: int, level: int) -> list[tuple[int, int]]:
    """The fewest aligned cells ``(level, index)`` whose union is cells ``k_lo..k_hi`` of
    ``level`` (a segment tree's canonical cover): ``[1, 6]`` at level 3 is
    ``(3, 1), (2, 1), (2, 2), (3, 6)``."""
    lo, hi = k_lo, k_hi + 1  # half-open in cell units
    lvl = level
    lefts: list[tuple[int, int]] = []
    rights: list[tuple[int, int]] = []
    while lo < hi:
        if lo & 1:
            lefts.append((lvl, lo))
            lo += 1
        if hi & 1:
            hi -= 1
            rights.append((lvl, hi))
        lo >>= 1
        hi >>= 1
        lvl -= 1
    return sorted(lefts + rights, key=lambda c: (c[1] << (level - c[0]), c[0]))


def tama_cells(domain: Domain, interval: Interval, levels: int) -> list[tuple[int, int]]:
    """The table cells a range occupies in a TAMA table of ``levels`` (rounded outward)."""
    k_lo, k_hi = domain.segments(levels, interval[0], interval[1])
    return dyadic_cells(k_lo, k_hi, levels)


def tama_entries(schema: Schema, ranges: Mapping[int, Interval], levels: int) -> int:
    return sum(len(tama_cells(schema.by_id[a].domain, iv, levels)) for a, iv in ranges.items())


def tama_matches(schema: Schema, sub: Mapping[int, Interval], pub: Mapping[int, Interval],
                 levels: int) -> bool:
    """TAMA's approximate test: every subscribed attribute present, and the publication's
    finest cells inside the subscription's rounded-out cells."""
    for attr, s_iv in sub.items():
        p_iv = pub.get(attr)
        if p_iv is None:
            return False
        dom = schema.by_id[attr].domain
        s_lo, s_hi = dom.segments(levels, *s_iv)
        p_lo, p_hi = dom.segments(levels, *p_iv)
        if not (s_lo <= p_lo and p_hi <= s_hi):
            return False
    return True


def _neighbourhood(layout: Layout, zone: Zone) -> list[Zone]:
    return [zone, *layout.neighbours(zone)]


def tama_storage(subs: Iterable[Placed], layout: Layout, schema: Schema, levels: int, *,
                 table_cost: bool = True) -> Storage:
    """TAMA's tables on BRVST's overlay: entries x id bytes, records, and (with
    ``table_cost``) the fixed cells of every attribute's table."""
    by_grid: dict[Cell, list[Placed]] = {}
    for s in subs:
        by_grid.setdefault(s.cell, []).append(s)
    table = CELL_BYTES * ((1 << (levels + 1)) - 1) * len(schema.specs) if table_cost else 0

    def cost(group: Iterable[Placed]) -> int:
        items = list(group)
        entries = sum(tama_entries(schema, p.ranges, levels) for p in items)
        return table + entries * ID_BYTES + len(items) * RECORD_BYTES

    out = Storage()
    for cell, group in by_grid.items():
        out.grid[cell] = cost(group)
    for zone in layout.zones():
        members = [p for z in _neighbourhood(layout, zone) for c in layout.zone_cells(z)
                   for p in by_grid.get(c, ())]
        if any(layout.zone_of(p.cell) == zone for p in members):
            out.zone[zone] = cost(members)
    return out


def brvst_storage(subs: Iterable[Placed], layout: Layout, schema: Schema) -> Storage:
    """BRVST's encoded state: grid managers (subscriptions + GRSV), zone managers (SOF +
    ZRSV + the neighbouring zones' ZRSVs), built with the real forests."""
    by_grid: dict[Cell, list[Placed]] = {}
    for s in subs:
        by_grid.setdefault(s.cell, []).append(s)
    grsv: dict[Cell, list[Entry]] = {}
    out = Storage()
    for cell, group in by_grid.items():
        forest = Forest()
        held = 0
        for p in group:
            arvs: dict[int, ARV] = schema.arvs(p.ranges)
            forest.insert(Filter(p.sub_id, arvs))
            held += entry_size(tuple(sorted(arvs.items()))) + RECORD_BYTES
        grsv[cell] = forest.representative()
        out.grid[cell] = held + rsv_size(grsv[cell])
    zrsv: dict[Zone, list[Entry]] = {}
    sof: dict[Zone, int] = {}
    for zone in layout.zones():
        forest = Forest()
        size = 0
        for cell in layout.zone_cells(zone):
            entries = grsv.get(cell, [])
            size += rsv_size(entries) if cell in grsv else 0
            for entry in entries:
                forest.insert(Filter((cell, entry), dict(entry)))
        zrsv[zone] = forest.representative()
        sof[zone] = size
    for zone in layout.zones():
        if not any(c in grsv for c in layout.zone_cells(zone)):
            continue
        others = sum(rsv_size(zrsv[z]) for z in layout.neighbours(zone)
                     if any(c in grsv for c in layout.zone_cells(z)))
        out.zone[zone] = sof[zone] + rsv_size(zrsv[zone]) + others
    return out
