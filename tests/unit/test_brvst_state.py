"""BRVST's state modules one by one: bounded tables, election rules, the zone layout, and
the grid and zone managers' tables (versions, bounds, eviction order, expiry, hand-over)."""

from __future__ import annotations

import random
from fractions import Fraction

from meshsub.core.api import MessageId
from meshsub.core.arv import Comparator
from meshsub.core.grid import Bounds, Cell
from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.protocols.brvst import messages as m
from meshsub.protocols.brvst.election import (
    Adopted,
    ManagerRecord,
    Seat,
    backoff,
    successor,
)
from meshsub.protocols.brvst.grid_manager import GridManager, Upsert
from meshsub.protocols.brvst.params import BrvstParams
from meshsub.protocols.brvst.schema import Schema
from meshsub.protocols.brvst.tables import BoundedMap
from meshsub.protocols.brvst.zone_manager import Applied, Cached, Relation, ZoneManager, ZoneSummary
from meshsub.protocols.brvst.zones import Layout, Level, Zone

SCHEMA = Schema.from_params(BrvstParams())
SAFE = Comparator.SAFE


# ------------------------------------------------------------------ tables


def test_bounded_map_caps_entries_and_bytes_and_reports_evictions() -> None:
    t: BoundedMap[str, int] = BoundedMap(3, 10, lambda v: v)
    assert t.put("a", 4) == [] and t.put("b", 4) == []
    assert t.put("c", 4) == [("a", 4)]  # bytes: the oldest goes
    assert t.put("d", 11) == [("d", 11)]  # alone above the byte cap: refused
    assert t.put("e", 1) == [] and t.put("f", 1) == [("b", 4)]  # entries: the oldest goes
    assert list(t) == ["c", "e", "f"] and t.bytes == 6
    refusing: BoundedMap[str, int] = BoundedMap(1, 10, lambda v: v, victim=lambda _t, _k: None)
    refusing.put("x", 1)
    assert refusing.put("y", 1) == [("y", 1)] and list(refusing) == ["x"]
    assert refusing.put("x", 2) == [] and refusing["x"] == 2  # a replacement needs no room


# ------------------------------------------------------------------ election


def rec(node: int, epoch: int, score: float = 10.0, at: float = 0.0) -> ManagerRecord:
    return ManagerRecord(node, epoch, (0.0, 0.0), score, at)


def test_conflict_order_epoch_then_score_then_id() -> None:
    assert rec(5, 3).beats(rec(1, 2, score=0.0))
    assert rec(5, 2, score=1.0).beats(rec(1, 2, score=2.0))
    assert rec(1, 2).beats(rec(5, 2))


def test_a_seat_keeps_its_incumbent_and_follows_newer_epochs() -> None:
    seat = Seat((Level.GRID, 0, 0))
    assert seat.adopt(rec(7, 1, score=50.0), 0.0, 2.0) is Adopted.NEW
    assert seat.adopt(rec(7, 1, score=40.0, at=1.0), 1.0, 2.0) is Adopted.REFRESHED
    # A better-placed newcomer with the same epoch is a conflict the managers settle.
    assert seat.adopt(rec(3, 1, score=1.0, at=2.0), 2.0, 2.0) is Adopted.NEW
    assert seat.adopt(rec(7, 1, score=40.0, at=3.0), 3.0, 2.0) is Adopted.IGNORED
    assert seat.adopt(rec(3, 0, at=4.0), 4.0, 2.0) is Adopted.IGNORED  # a late old copy
    assert seat.adopt(rec(9, 2, score=90.0, at=5.0), 5.0, 2.0) is Adopted.NEW
    assert seat.last_epoch == 2
    assert seat.live(11.0, 2.0) is not None and seat.live(11.1, 2.0) is None  # 3 T_ann


def test_backoff_orders_candidates_by_score() -> None:
    rng = random.Random(1)
    near = [backoff(10.0, 354.0, 2.0, rng) for _ in range(50)]
    far = [backoff(100.0, 354.0, 2.0, rng) for _ in range(50)]
    assert max(near) < min(far) and max(far) <= 2.0 * 100 / 354 + 0.1


def test_successor_is_the_best_placed_known_node_inside() -> None:
    area = Bounds(0, 0, 250, 250)
    nodes = {1: (10.0, 10.0), 2: (130.0, 120.0), 3: (126.0, 124.0), 4: (300.0, 125.0)}
    assert successor(nodes, area, (125.0, 125.0)) == 3
    assert successor({4: (300.0, 125.0)}, area, (125.0, 125.0)) is None


# ------------------------------------------------------------------ layout


def test_layout_zones_neighbours_distances() -> None:
    lay = Layout.of(1000, 1000, 250, 2)
    assert (lay.grid.cols, lay.zone_cols, lay.max_distance) == (4, 2, 1)
    assert lay.zone_of(Cell(3, 1)) == Zone(1, 0)
    assert lay.zone_cells(Zone(1, 1)) == [Cell(2, 2), Cell(2, 3), Cell(3, 2), Cell(3, 3)]
    assert lay.zone_bounds(Zone(1, 0)) == Bounds(500, 0, 1000, 500)
    assert lay.centre((Level.ZONE, 0, 0)) == (250.0, 250.0)
    assert sorted(lay.neighbours(Zone(0, 0))) == [Zone(0, 1), Zone(1, 0), Zone(1, 1)]
    strip = Layout.of(1500, 250, 250, 1)
    assert strip.max_distance == 5 and strip.distance(Zone(0, 0), Zone(4, 0)) == 4
    odd = Layout.of(750, 750, 250, 2)  # 3 x 3 grids: edge zones hold fewer grids
    assert odd.zone_cells(Zone(1, 1)) == [Cell(2, 2)]
    assert odd.zone_bounds(Zone(1, 1)) == Bounds(500, 500, 750, 750)


# ------------------------------------------------------------------ grid manager


def gm(max_subs: int = 10) -> GridManager:
    return GridManager(Cell(0, 0), 1, SCHEMA, max_subs=max_subs, max_bytes=1 << 20, dedupe=64)


def test_grid_manager_upserts_versions_and_expiry() -> None:
    g = gm(max_subs=2)
    s1, s2 = parse_subscription("t a1_lo>=0 a1_hi<=50"), parse_subscription("t a2_lo>=10")
    assert g.upsert((5, "a"), s1, (1.0, 1.0), 10.0) is Upsert.NEW
    assert g.take_update() == (1, g.representative()) and g.take_update() is None
    assert g.upsert((5, "a"), s1, (2.0, 2.0), 20.0) is Upsert.RENEWED
    assert g.take_update() is None  # a refresh changes no summary
    assert g.upsert((5, "a"), s2, (2.0, 2.0), 20.0) is Upsert.CHANGED
    assert g.take_update() is not None and g.version == 2
    assert g.upsert((6, "b"), s1, (3.0, 3.0), 5.0) is Upsert.NEW
    assert g.upsert((7, "c"), s1, (3.0, 3.0), 5.0) is Upsert.REFUSED  # N_sub_max = 2
    assert g.take_update(force=True) is not None and g.version == 3
    assert g.take_update(force=True) == (3, g.representative())  # a refresh: same version
    assert g.expire(10.0) == [(6, "b")] and len(g.forest) == 1
    assert g.locate(5, (9.0, 9.0)) == 1 and g.table[(5, "a")].pos == (9.0, 9.0)


def test_grid_manager_two_stage_match_and_exact_member_check() -> None:
    g = gm()
    g.upsert((5, "wide"), parse_subscription("t a1_lo>=0 a1_hi<=50"), (0, 0), 99.0)
    g.upsert((6, "extra"), parse_subscription("t a1_lo>=0 a1_hi<=50 note=\"x\""), (0, 0), 99.0)
    g.upsert((7, "other"), parse_subscription("t a2_lo>=0"), (0, 0), 99.0)
    event = parse_event("t a1_lo=5 a1_hi=6")
    view = SCHEMA.view(event.attrs)
    assert g.match(event, view, SAFE, exact_check=True) == {5: ["wide"]}
    assert g.match(event, view, SAFE, exact_check=False) == {5: ["wide"], 6: ["extra"]}
    assert g.match(event, view, SAFE, exact_check=True, for_sub=(7, "other")) == {}


def test_grid_manager_hand_over_round_trip_and_budget() -> None:
    g = gm()
    for i in range(5):
        g.upsert((i, "s"), parse_subscription(f"t a{i}_lo>={i}"), (float(i), 0.0), 50.0)
    blob, left_out = g.blob(10.0, 1 << 16)
    assert left_out == 0
    h = gm()
    assert h.load(m.StateXfer.from_wire(m.StateXfer(1, 0, 0, 1, 9, blob).to_wire()).blob,
                  20.0) == 0
    assert set(h.table) == set(g.table) and h.table[(3, "s")].expiry == 60.0
    assert h.representative() == g.representative()
    small, left_out = g.blob(10.0, 60)
    assert left_out > 0 and len(small[1]) == 5 - left_out
    assert h.load([0, [["bad"]]], 0.0) == 1


# ------------------------------------------------------------------ zone manager


def zm(**bounds: int) -> ZoneManager:
    args = {"sof_max": 100, "zones_max": 8, "zones_bytes": 1 << 16, "cache_max": 100,
            "cache_bytes": 1 << 20, "advert_max": 8, "dedupe": 64, **bounds}
    return ZoneManager(Zone(0, 0), 1, SCHEMA, **args)


def grsv(version: int, epoch: int, *subs: str, node: int = 9,
         predecessor: int | None = None) -> m.SummaryUpdate:
    g = gm()
    for i, text in enumerate(subs):
        g.upsert((i, "s"), parse_subscription(text), (0, 0), 99.0)
    return m.SummaryUpdate(0, 0, m.Sender(node, (1.0, 1.0), epoch), version, 0,
                           tuple(g.representative()), b"", predecessor)


def test_zone_manager_applies_grsvs_by_epoch_and_version() -> None:
    z = zm(sof_max=2)
    cell = Cell(0, 0)
    status, added = z.apply_grsv(cell, grsv(1, 1, "t a1_lo>=0"), 0.0)
    assert status is Applied.CHANGED and len(added) == 1
    assert z.apply_grsv(cell, grsv(1, 1, "t a1_lo>=0"), 5.0)[0] is Applied.REFRESHED
    assert z.sof[(cell, 9)].rx == 5.0
    assert z.apply_grsv(cell, grsv(0, 1, "t a2_lo>=0"), 6.0)[0] is Applied.STALE
    status, added = z.apply_grsv(cell, grsv(1, 2, "t a2_lo>=0"), 7.0)  # its next epoch
    assert status is Applied.CHANGED and added[0][0][0] == 2
    assert z.apply_grsv(cell, grsv(2, 2, "t a1_lo>=0", "t a3_lo>=0", "t a4_lo>=0"),
                        8.0)[0] is Applied.FULL
    view = SCHEMA.view(parse_event("t a2_lo=1 a2_hi=2").attrs)
    assert z.grids_for(view, SAFE) == [(cell, 9)]
    z.forest.check()


def test_a_split_grid_keeps_one_sof_record_per_manager() -> None:
    """An isolated node of a grid elects itself with a higher epoch: its GRSV must not
    replace the main part's manager's (which would send the grid's publications to it).
    A successor that names its predecessor replaces the predecessor's record."""
    z = zm()
    cell = Cell(0, 0)
    z.apply_grsv(cell, grsv(4, 2, "t a1_lo>=0", node=9), 0.0)
    z.apply_grsv(cell, grsv(1, 3, "t a2_lo>=0", node=30), 1.0)  # the isolated part
    assert set(z.sof) == {(cell, 9), (cell, 30)}
    one = SCHEMA.view(parse_event("t a1_lo=1 a1_hi=2").attrs)
    two = SCHEMA.view(parse_event("t a2_lo=1 a2_hi=2").attrs)
    assert z.grids_for(one, SAFE) == [(cell, 9)] and z.grids_for(two, SAFE) == [(cell, 30)]
    z.apply_grsv(cell, grsv(1, 3, "t a1_lo>=0", node=12, predecessor=9), 2.0)  # hand-over
    assert set(z.sof) == {(cell, 12), (cell, 30)} and z.grids_for(one, SAFE) == [(cell, 12)]
    z.forest.check()


def cached(n: int, t: float, hits: int = 0) -> Cached:
    pub = m.Pub(MessageId(1, 0, n), parse_event(f"t a1_lo={n} a1_hi={n + 1}"), t)
    return Cached(pub, SCHEMA.view(pub.event.attrs), Zone(0, 0), Cell(0, 0), t, t + 100.0,
                  hits)


def test_cache_evicts_fewest_hits_then_oldest() -> None:
    z = zm(cache_max=3)
    for n, t, hits in ((1, 0.0, 2), (2, 1.0, 0), (3, 2.0, 0)):
        assert z.cache_insert(cached(n, t, hits)) == []
    (lost,) = z.cache_insert(cached(4, 3.0))
    assert lost.pub.event_id.seq == 2  # 0 hits, older than #3
    z.note_sent(z.cache[MessageId(1, 0, 3)], grids=[(Cell(1, 1), 4)])
    (lost,) = z.cache_insert(cached(5, 4.0))
    assert lost.pub.event_id.seq == 4
    assert z.sweep(150.0, t_zrsv_idle=300, t_zrsv_refresh=30, t_grsv_refresh=30)[
        "cache_expired"] == 3


def test_zone_summaries_expire_by_relation() -> None:
    z = zm(zones_max=2)
    entries = grsv(1, 1, "t a1_lo>=0").entries

    def summary(node: int, relation: Relation, last_match: float) -> ZoneSummary:
        return ZoneSummary(node, (0, 0), 1, 1, entries, relation, 0, last_match)

    z.store_summary((Zone(1, 0), 5), summary(5, Relation.NEIGHBOR, 0))
    z.store_summary((Zone(3, 0), 6), summary(6, Relation.INTERESTED, 10.0))
    # Full: a newcomer pushes out the non-neighbour with the oldest data match, never the
    # neighbour.
    assert z.store_summary((Zone(4, 0), 7), summary(7, Relation.QUERIED, 20.0)) == \
        [(Zone(3, 0), 6)]
    counts = z.sweep(95.0, t_zrsv_idle=300, t_zrsv_refresh=30, t_grsv_refresh=30)
    assert counts["zrsv_silent"] == 1 and list(z.summaries) == [(Zone(4, 0), 7)]
    counts = z.sweep(321.0, t_zrsv_idle=300, t_zrsv_refresh=30, t_grsv_refresh=30)
    assert counts["zrsv_idle"] == 1 and not z.summaries
    # A zone's new manager that names its predecessor replaces its summary.
    z.store_summary((Zone(1, 0), 5), summary(5, Relation.NEIGHBOR, 0))
    z.store_summary((Zone(1, 0), 8), summary(8, Relation.NEIGHBOR, 0), predecessor=5)
    assert list(z.summaries) == [(Zone(1, 0), 8)]


def test_advert_bands_are_due_at_d_times_t_adv() -> None:
    z = zm()
    key = (7, b"k")
    assert z.due_bands(key, 0.0, 60.0, 3) == [1, 2, 3]
    z.mark_advertised(key, [1, 2, 3], 0.0)
    assert z.due_bands(key, 61.0, 60.0, 3) == [1]
    assert z.due_bands(key, 125.0, 60.0, 3) == [1, 2]
    assert z.due_bands(key, 180.0, 60.0, 3) == [1, 2, 3]


def test_zone_manager_hand_over_round_trip() -> None:
    z = zm()
    z.apply_grsv(Cell(0, 1), grsv(3, 2, "t a1_lo>=0", "t a2_lo>=5"), 1.0)
    z.store_summary((Zone(1, 0), 5), ZoneSummary(5, (1, 2), 1, 4,
                                                 grsv(1, 1, "t a3_lo>=0").entries,
                                                 Relation.NEIGHBOR, 2.0, 3.0))
    z.learn_publication_zone(Zone(1, 1), 4.0)
    z.mark_advertised((7, b"k"), [1], 5.0)
    z.cache_insert(cached(1, 6.0, hits=2))
    blob, left_out = z.blob(10.0, 1 << 16)
    assert left_out == 0
    y = zm()
    wire = m.StateXfer.from_wire(m.StateXfer(2, 0, 0, 2, 9, blob).to_wire())
    assert y.load(wire.blob, 10.0) == 0
    assert y.sof[(Cell(0, 1), 9)].version == 3 and y.representative() == z.representative()
    assert y.summaries[(Zone(1, 0), 5)].relation is Relation.NEIGHBOR
    assert list(y.push) == [Zone(1, 1)] and y.due_bands((7, b"k"), 10.0, 60.0, 1) == []
    (c,) = y.cache.values()
    assert c.hits == 2 and c.t_expire == 106.0 and c.pub.event_id == MessageId(1, 0, 1)
    assert y.load([1, "x", [], [], [], []], 0.0) == 1


def test_alpha_is_the_decimal_written() -> None:
    assert SCHEMA.alpha == Fraction(9, 10)


def test_the_sof_is_bounded_in_bytes_too() -> None:
    wide = grsv(1, 1, "t a1_lo>=0 a1_hi<=33", "t a2_lo>=0 a2_hi<=33")  # 2 long entries
    z = zm(sof_bytes=40)
    assert z.apply_grsv(Cell(0, 0), wide, 0.0)[0] is Applied.FULL and not z.sof
    assert zm(sof_bytes=1 << 16).apply_grsv(Cell(0, 0), wide, 0.0)[0] is Applied.CHANGED


def test_bad_parameters_are_one_error_naming_the_key() -> None:
    import pytest

    from meshsub.core.params import ParameterError, parse_params

    for values, key in (({"T_ann": 0}, "T_ann"), ({"hold_max": 0}, "hold_max"),
                        ({"alpha": 1.5}, "alpha"), ({"attributes": ["a:5"]}, "attributes"),
                        ({"attributes": ["a", "a"]}, "attributes"),
                        ({"comparator": "fuzzy"}, "comparator"), ({"h_margin": 200}, "h_margin"),
                        ({"K": 0}, "K"), ({"scope_margin_m": -2}, "scope_margin_m")):
        with pytest.raises(ParameterError) as err:
            parse_params(BrvstParams, values)
        assert err.value.key == key
    assert parse_params(BrvstParams, {"attributes": ["t:-40:60:0.5"]}).attributes == \
        ("t:-40:60:0.5",)
