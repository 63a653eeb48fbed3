"""BRVST's state machine over the in-test harness: multi-hop grids of 250 m, 80 m radio.

Each test builds a lattice field (55 m spacing) and checks one rule of
docs/protocols/brvst.md end to end: election, exact delivery, hand-over with
state transfer, crash recovery, stale manager positions, leases, the cache,
zones, adverts and queries.
"""

from __future__ import annotations

import itertools
import math
from collections import Counter

import pytest
from brvst_field import Field, R, m

from meshsub.core.api import Message, MessageId, SendTo, TimerFired
from meshsub.core.georouting import GeoHeader, GeoMode
from meshsub.core.registry import get_protocol
from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.protocols.brvst import Brvst
from meshsub.protocols.brvst.election import Phase
from meshsub.protocols.brvst.zones import Level

SUB = parse_subscription


def delivered(f: Field, event_id: MessageId) -> Counter[tuple[int, str]]:
    return Counter((n, d.sub_id) for _t, n, d in f.net.delivered if d.event_id == event_id)


def truth(f: Field, event_text: str) -> set[tuple[int, str]]:
    """Every live (node, sub_id) whose subscription matches the event exactly."""
    event = parse_event(event_text)
    return {(n, sid) for n in f.pos if n not in f.crashed
            for sid, s in f.node(n).subscriptions.items() if s.matches(event)}


def test_registered_by_name_with_protocol_id_10() -> None:
    assert get_protocol("brvst") is Brvst and Brvst.protocol_id == 10


def test_one_manager_per_multi_hop_grid_and_zone() -> None:
    """Four 250 m grids (several hops across at 80 m) and one zone: every grid elects the node
    nearest its centre, the zone likewise, and every member follows them at epoch 1."""
    f = Field(500, 500)
    f.run(until=10.0)
    gms, zms = f.managers("gm"), f.managers("zm")
    assert set(gms) == {(0, 0), (0, 1), (1, 0), (1, 1)}
    assert all(len(v) == 1 for v in gms.values()) and list(zms) == [(0, 0)]
    for (gx, gy), (gm,) in gms.items():
        assert gm == f.nearest(125 + 250 * gx, 125 + 250 * gy)
    assert zms[(0, 0)] == [f.nearest(250, 250)]
    far = 0
    for n in f.pos:
        proto = f.node(n)
        grid, zone = proto.seats[Level.GRID], proto.seats[Level.ZONE]
        assert grid.record is not None and zone.record is not None
        assert grid.record.node == gms[tuple(proto.cell)][0] and grid.record.epoch == 1  # type: ignore[arg-type,index]
        assert zone.record.node == zms[(0, 0)][0] and zone.record.epoch == 1
        far += math.dist(f.pos[n], f.pos[grid.record.node]) > R
    assert far > 20  # most members hear their manager only through the scoped flood


def test_announcements_stay_inside_their_scope() -> None:
    """A grid's announcement is re-broadcast only by nodes within R/2 of the grid."""
    f = Field(500, 500)
    f.run(until=6.0)
    for tx in f.net.txs:
        if tx.message.type != m.ANNOUNCE or tx.dst is not None:
            continue
        ann = m.Announce.from_wire(tx.message.body)
        if ann.manager == tx.src:
            continue
        x, y = f.pos[tx.src]
        size = 250.0 if ann.level == Level.GRID else 500.0
        x0, y0 = ann.ax * size, ann.ay * size
        dx = max(x0 - x, 0.0, x - (x0 + size))
        dy = max(y0 - y, 0.0, y - (y0 + size))
        assert math.hypot(dx, dy) <= R / 2


def test_an_incumbent_is_not_pre_empted() -> None:
    f = Field(500, 500)
    f.run(until=8.0)
    (gm,) = f.managers("gm")[(0, 0)]
    other = f.nearest(30, 30)
    f.move(other, 125.0, 125.0)  # better placed than the incumbent
    f.run(until=20.0)
    assert f.managers("gm")[(0, 0)] == [gm]


def subscribe_all(f: Field) -> dict[str, int]:
    """Subscribers in every grid; one whose summary matches but whose filter does not."""
    who = {"far": f.nearest(460, 460), "near": f.nearest(40, 90), "other": f.nearest(40, 460),
           "narrow": f.nearest(460, 40), "topic": f.nearest(300, 300)}
    f.net.subscribe(who["far"], "far", SUB("t a1_lo>=10 a1_hi<=60"))
    f.net.subscribe(who["near"], "near", SUB("t a1_lo>=0 a1_hi<=100 a2_lo>=0"))
    f.net.subscribe(who["other"], "other", SUB("t a1_lo>=70"))
    f.net.subscribe(who["narrow"], "narrow", SUB("t a1_lo>=10 a1_hi<=60 note=\"x\""))
    f.net.subscribe(who["topic"], "topic", SUB("u a1_lo>=0"))
    return who


def test_a_publication_is_delivered_exactly_once_to_exactly_the_matching_subscribers() -> None:
    """§IV-C: the grid's forest, PUB_UP to the zone manager (always, once), PUB_GRID to the
    grids whose SOF entry matches, and the grid manager's exact check before DELIVER: the
    subscription with an extra predicate and the one on another topic get nothing."""
    f = Field(500, 500)
    f.run(until=6.0)
    who = subscribe_all(f)
    f.run(until=10.0)
    publisher = f.nearest(30, 30)
    text = "t a1_lo=20 a1_hi=30 a2_lo=5 a2_hi=6"
    eid = f.net.publish(publisher, parse_event(text))
    f.run(until=14.0)
    got = delivered(f, eid)
    assert set(got) == truth(f, text) == {(who["far"], "far"), (who["near"], "near")}
    assert max(got.values()) == 1
    pub_ups = {tx.message.id for tx in f.net.txs if tx.message.type == m.PUB_UP}
    assert pub_ups == {eid}  # every publication goes up once, whatever matched locally
    assert not f.drops()["false_positive"] and not f.drops()["malformed"]


def test_managers_subscribing_after_their_election_are_served() -> None:
    """A grid manager elected with no subscriptions of its own, and a zone manager, that
    subscribe later register with their own grid (found in a simulator run, where such
    managers received nothing: they registered only if they had subscriptions when
    elected), and keep their leases by refreshing."""
    f = Field(500, 500, T_lease=9.0)
    f.run(until=10.0)
    gm, zm = f.managers("gm")[(1, 1)][0], f.managers("zm")[(0, 0)][0]
    f.net.subscribe(gm, "g", SUB("t a1_lo>=0 a1_hi<=50"))
    f.net.subscribe(zm, "z", SUB("t a1_lo>=0 a1_hi<=50"))
    f.run(until=40.0)  # beyond three leases: only refreshes keep the subscriptions
    text = "t a1_lo=1 a1_hi=2"
    eid = f.net.publish(f.nearest(30, 30), parse_event(text))
    f.run(until=44.0)
    assert set(delivered(f, eid)) == truth(f, text) == {(gm, "g"), (zm, "z")}
    assert not f.drops()["lease_expired"]


def test_a_local_only_match_needs_no_zone_traffic_down() -> None:
    f = Field(500, 500)
    f.run(until=6.0)
    sub = f.nearest(40, 90)
    f.net.subscribe(sub, "s", SUB("t a1_lo>=0 a1_hi<=50"))
    f.run(until=10.0)
    eid = f.net.publish(f.nearest(30, 30), parse_event("t a1_lo=1 a1_hi=2"))
    f.run(until=14.0)
    assert set(delivered(f, eid)) == {(sub, "s")}
    assert f.txs_of(m.PUB_GRID) == 0 and f.txs_of(m.PUB_ZONE) == 0


def test_arv_member_check_lets_false_positives_reach_the_subscriber() -> None:
    """With gm_check = "arv" (the paper's ARV-only member test) a subscription whose summary
    matches but whose own predicates do not gets a DELIVER, dropped at the subscriber."""
    f = Field(500, 500, gm_check="arv")
    f.run(until=6.0)
    narrow = f.nearest(460, 40)
    f.net.subscribe(narrow, "narrow", SUB("t a1_lo>=10 a1_hi<=60 note=\"x\""))
    f.run(until=10.0)
    eid = f.net.publish(f.nearest(30, 30), parse_event("t a1_lo=20 a1_hi=30"))
    f.run(until=14.0)
    assert not delivered(f, eid)
    assert f.drops()["false_positive"] == 1


def test_a_grid_manager_leaving_hands_its_state_over() -> None:
    """The manager walks out of its grid: its state goes to the best-placed member it knows,
    which announces epoch 2 as inherited; subscribers do not register again, and delivery
    goes on."""
    f = Field(500, 500)
    f.run(until=6.0)
    who = subscribe_all(f)
    f.run(until=10.0)
    (old,) = f.managers("gm")[(1, 1)]
    start = f.net.now
    f.walk(old, 230.0, 357.5)  # into grid (0, 1), at 5 m/s
    f.run(until=f.net.now + 4.0)
    (new,) = f.managers("gm")[(1, 1)]
    assert new != old and f.node(new).counters["took_over"] == 1
    seat = f.node(new).seats[Level.GRID]
    assert seat.phase is Phase.MANAGER and seat.record is not None
    assert seat.record.epoch == 2 and seat.record.inherited
    gm = f.node(new).gm
    assert gm is not None and ((who["far"], "far") in gm.table)
    (zm,) = f.managers("zm")[(0, 0)]
    assert [g for c, g in f.node(zm).zm.sof if c == (1, 1)] == [new]  # type: ignore[union-attr]
    registrations = [tx for tx in f.net.txs if tx.time >= start and tx.message.type == m.SUBSCRIBE
                     and not m.SubscribeMsg.from_wire(
                         m.Envelope.from_wire(tx.message.body).payload).refresh]
    assert registrations == []  # nobody had to register again (refreshes go on as usual)
    eid = f.net.publish(f.nearest(30, 30), parse_event("t a1_lo=20 a1_hi=30 a2_lo=5 a2_hi=6"))
    f.run(until=f.net.now + 4.0)
    assert (who["far"], "far") in delivered(f, eid)


def _copies(f: Field, mtype: int, event_id: MessageId, since: float) -> int:
    """Transmissions of ``event_id`` as ``mtype`` from ``since`` on."""
    return sum(1 for tx in f.net.txs if tx.message.type == mtype
               and tx.message.id == event_id and tx.time >= since)


@pytest.mark.parametrize("replay", [False, True])
def test_a_grid_hand_over_replays_the_cache_to_the_successor_only_if_configured(
        replay: bool) -> None:
    """§IV-D matches the cache against a *changed* SOF. A hand-over changes the grid's
    manager, not its subscriptions: with ``replay_to_successor = false`` the successor's
    GRSV names its predecessor and publications the cache sent to the predecessor count
    as sent. By default (and before the parameter existed) the zone manager replays every
    matching cached publication to each new grid manager, which delivers it again: on
    brvst-400 this traffic grows with the cache (docs/benchmarks.md)."""
    f = Field(500, 500, replay_to_successor=replay)
    f.run(until=6.0)
    sub = f.nearest(460, 460)
    f.net.subscribe(sub, "far", SUB("t a1_lo>=10 a1_hi<=60"))
    f.run(until=10.0)
    (old,) = f.managers("gm")[(1, 1)]
    assert old != sub
    eid = f.net.publish(f.nearest(30, 30), parse_event("t a1_lo=20 a1_hi=30"))
    f.run(until=14.0)
    assert delivered(f, eid) == Counter({(sub, "far"): 1})
    start = f.net.now
    f.walk(old, 230.0, 357.5)  # into grid (0, 1): the state goes to a successor
    f.run(until=f.net.now + 4.0)
    (new,) = f.managers("gm")[(1, 1)]
    assert new != old and f.node(new).counters["took_over"] == 1
    (zm,) = f.managers("zm")[(0, 0)]
    cached = f.node(zm).zm.cache[eid]  # type: ignore[union-attr]
    assert ((1, 1), new) in cached.sent_grids
    assert (((1, 1), old) in cached.sent_grids) is replay
    assert (_copies(f, m.PUB_GRID, eid, start) > 0) is replay
    assert (_copies(f, m.DELIVER, eid, start) > 0) is replay
    assert f.drops()["duplicate_deliver"] == (1 if replay else 0)
    assert delivered(f, eid) == Counter({(sub, "far"): 1})  # the subscriber's own dedup
    # A publication after the hand-over still reaches the subscriber through the successor.
    later = f.net.publish(f.nearest(30, 30), parse_event("t a1_lo=25 a1_hi=35"))
    f.run(until=f.net.now + 4.0)
    assert delivered(f, later) == Counter({(sub, "far"): 1})


@pytest.mark.parametrize("replay", [False, True])
def test_a_zone_hand_over_replays_the_neighbours_caches_only_if_configured(
        replay: bool) -> None:
    """The zone level of the rule above: the successor of a zone manager that walked out
    pushes its ZRSV naming its predecessor; without the replay the neighbouring zone's
    cache does not send it again what it sent the predecessor (with it: every matching
    cached publication, and the successor passes each on to its grids)."""
    f = Field(1000, 500, replay_to_successor=replay)
    f.run(until=8.0)
    sub = f.nearest(900, 400)
    f.net.subscribe(sub, "s", SUB("t a3_lo>=40 a3_hi<=80"))
    f.run(until=14.0)
    eid = f.net.publish(f.nearest(50, 50), parse_event("t a3_lo=50 a3_hi=60"))
    f.run(until=18.0)
    assert delivered(f, eid) == Counter({(sub, "s"): 1})
    (old,) = f.managers("zm")[(1, 0)]
    (zm0,) = f.managers("zm")[(0, 0)]
    assert old != sub
    start = f.net.now
    f.walk(old, 470.0, 240.0)  # into zone (0, 0)
    f.run(until=f.net.now + 8.0)
    (new,) = f.managers("zm")[(1, 0)]
    assert new != old and f.node(new).counters["took_over"] >= 1
    cached = f.node(zm0).zm.cache[eid]  # type: ignore[union-attr]
    assert ((1, 0), new) in cached.sent_zones
    assert (((1, 0), old) in cached.sent_zones) is replay
    assert (_copies(f, m.PUB_ZONE, eid, start) > 0) is replay
    assert (_copies(f, m.PUB_GRID, eid, start) > 0) is replay
    later = f.net.publish(f.nearest(50, 50), parse_event("t a3_lo=55 a3_hi=65"))
    f.run(until=f.net.now + 6.0)
    assert delivered(f, later) == Counter({(sub, "s"): 1})


def test_a_crashed_grid_manager_is_replaced_and_subscriptions_rebuilt() -> None:
    """Members time the manager out after 3 T_ann, elect a new one (epoch 2, no state), and
    every subscriber of the grid registers again; the zone manager takes the new GRSV.
    (A 300 s lease: no refresh falls inside the test, the registration must be the rule's.)"""
    f = Field(500, 500, T_lease=300.0)
    f.run(until=6.0)
    who = subscribe_all(f)
    f.run(until=10.0)
    (old,) = f.managers("gm")[(1, 1)]
    f.crash(old)
    f.run(until=22.0)
    (new,) = f.managers("gm")[(1, 1)]
    assert new != old
    rec = f.node(new).seats[Level.GRID].record
    assert rec is not None and rec.epoch == 2 and not rec.inherited
    gm = f.node(new).gm
    assert gm is not None and (who["far"], "far") in gm.table
    (zm,) = f.managers("zm")[(0, 0)]
    sof = f.node(zm).zm.sof  # type: ignore[union-attr]
    assert sof[((1, 1), new)].epoch == 2 and sof[((1, 1), new)].entries  # type: ignore[index]
    # The crashed manager's record stays until it is silent for 3 T_grsv_refresh.
    eid = f.net.publish(f.nearest(30, 30), parse_event("t a1_lo=20 a1_hi=30"))
    f.run(until=26.0)
    assert (who["far"], "far") in delivered(f, eid)


def test_a_crashed_zone_manager_is_replaced_and_its_sof_rebuilt() -> None:
    """The grid managers resync with the new zone manager (no refresh falls in the test)."""
    f = Field(500, 500, T_grsv_refresh=300.0)
    f.run(until=6.0)
    who = subscribe_all(f)
    f.run(until=10.0)
    (old,) = f.managers("zm")[(0, 0)]
    f.crash(old)
    f.run(until=10.0 + 3 * 6.0 + 6.0 + 1.0)  # 3 T_ann_zone, then at most T_ann_zone back-off
    (new,) = f.managers("zm")[(0, 0)]
    assert new != old
    zm = f.node(new).zm
    assert zm is not None and {cell for cell, _gm in zm.sof} == {(0, 0), (0, 1), (1, 0), (1, 1)}
    eid = f.net.publish(f.nearest(30, 30), parse_event("t a1_lo=20 a1_hi=30"))
    f.run(until=f.net.now + 4.0)
    assert (who["far"], "far") in delivered(f, eid)


def test_a_message_for_a_stale_manager_position_waits_for_the_next_announcement() -> None:
    """The grid manager moves 130 m inside its grid right after announcing: a publication
    routed to its old position ends at the node nearest that position, which holds it until
    the next announcement gives the new position, then delivers."""
    f = Field(500, 500, T_ann=4.0)
    f.run(until=8.0)
    sub = f.nearest(460, 460)
    f.net.subscribe(sub, "s", SUB("t a1_lo>=0"))
    f.run(until=16.0)
    (gm,) = f.managers("gm")[(0, 0)]
    f.move(gm, 15.0, 15.0)  # still grid (0, 0), but out of range of its old neighbours
    eid = f.net.publish(f.nearest(240, 30), parse_event("t a1_lo=1 a1_hi=2"))
    f.run(until=30.0)
    assert set(delivered(f, eid)) == {(sub, "s")}
    assert sum(f.node(n).counters["held"] for n in f.pos) >= 1
    assert not f.drops()["manager_unreachable"]


def test_a_perimeter_walk_taking_an_edge_twice_ends_and_the_message_is_held() -> None:
    """GPSR ends a perimeter walk that comes back to its face's first edge; with moving
    neighbours the face changes on every tour and the walk circled the field until its
    TTL ran out. A walk that would take any edge a second time has toured the face round
    its target: it ends there, and a message for an area waits for the area's next
    announcement (a manager in another radio component may be back by then)."""
    f = Field(250, 250)
    f.run(until=4.0)
    (gm,) = f.managers("gm")[(0, 0)]
    node = f.nearest(30, 30, exclude={gm})
    proto = f.node(node)
    x, y = f.pos[node]
    prev = next(p for n, p in f.pos.items() if n != node and 0 < math.dist(p, (x, y)) <= R)
    walk = GeoHeader(GeoMode.PERIMETER, lp=(x - 15.0, y - 15.0), lf=(x - 15.0, y - 15.0),
                     e0=(9998, 9999), prev=prev)
    env = m.Envelope(m.Dest.GRID, 0, 0, 999, (x - 20.0, y - 20.0), 1, 0, walk, [])
    msg = Message(m.PUBLISH, MessageId(999, 0, 7), env.to_wire(), ttl=200)
    sent = []
    for _ in range(2):
        proto._route(msg, env, local=False)
        out = proto.handle(TimerFired(f.net.now, "noop"))
        sent.append([a for a in out if isinstance(a, SendTo) and a.message.type == m.PUBLISH])
    assert len(sent[0]) == 1 and not sent[1]
    assert proto.counters["held"] == 1 and not proto.drops["routing_loop"]


def test_leases_expire_when_a_subscriber_goes_silent() -> None:
    f = Field(500, 500, T_lease=9.0)
    f.run(until=6.0)
    sub = f.nearest(460, 460)
    f.net.subscribe(sub, "s", SUB("t a1_lo>=0"))
    f.run(until=9.0)
    (gm,) = f.managers("gm")[(1, 1)]
    assert len(f.node(gm).gm.table) == 1  # type: ignore[union-attr]
    f.crash(sub)
    f.run(until=30.0)
    assert len(f.node(gm).gm.table) == 0  # type: ignore[union-attr]
    assert f.drops()["lease_expired"] == 1
    (zm,) = f.managers("zm")[(0, 0)]
    assert f.node(zm).zm.sof[((1, 1), gm)].entries == ()  # type: ignore[union-attr,index]


def test_a_later_subscription_gets_a_cached_publication_once() -> None:
    """§IV-D, bidirectional matching: published before anyone subscribed, then a new
    subscription in another grid of the zone (its GRSV changes: the SOF match) and one in
    the publisher's grid (the GRSV does not change: SUB_HISTORY) both get it, once."""
    f = Field(500, 500)
    f.run(until=6.0)
    text = "t a1_lo=20 a1_hi=30"
    eid = f.net.publish(f.nearest(30, 30), parse_event(text))
    f.run(until=10.0)
    assert not delivered(f, eid)
    late, local = f.nearest(460, 460), f.nearest(90, 40)
    f.net.subscribe(late, "late", SUB("t a1_lo>=0"))
    f.net.subscribe(local, "local", SUB("t a1_lo>=10"))
    f.run(until=16.0)
    assert delivered(f, eid) == Counter({(late, "late"): 1, (local, "local"): 1})


def test_zones_exchange_summaries_and_deliver_across() -> None:
    """Two zones of 2 x 2 grids: a subscriber's zone pushes its ZRSV to the neighbouring zone,
    whose publication then travels as PUB_ZONE and is delivered."""
    f = Field(1000, 500)
    f.run(until=8.0)
    assert set(f.managers("zm")) == {(0, 0), (1, 0)}
    sub = f.nearest(900, 400)
    f.net.subscribe(sub, "s", SUB("t a3_lo>=40 a3_hi<=80"))
    f.run(until=14.0)
    eid = f.net.publish(f.nearest(50, 50), parse_event("t a3_lo=50 a3_hi=60"))
    miss = f.net.publish(f.nearest(50, 50), parse_event("t a3_lo=10 a3_hi=20"))
    f.run(until=20.0)
    assert set(delivered(f, eid)) == {(sub, "s")} and not delivered(f, miss)
    zone_copies = {tx.message.id for tx in f.net.txs if tx.message.type == m.PUB_ZONE}
    assert zone_copies == {eid}


def _zrsv_pushes(f: Field, zm: int, since: float) -> list[float]:
    """When ``zm`` originated ZRSV_UPDATEs (one instant per push to all its targets)."""
    first: dict[MessageId, float] = {}
    for tx in f.net.txs:
        if tx.src == zm and tx.message.type == m.ZRSV_UPDATE and tx.message.id.origin == zm \
                and tx.time >= since:
            first.setdefault(tx.message.id, tx.time)
    return sorted({round(t, 3) for t in first.values()})


def test_a_changing_zrsv_is_pushed_at_most_once_per_t_zrsv_min() -> None:
    """At the paper's load a zone's summary changes about once a second and each change
    went to every neighbour and publication zone (the largest share of BRVST's own
    traffic after ACKs and announcements); changes now coalesce into at most one push per
    ``T_zrsv_min``, and the last change still goes out (the subscriber gets a later
    publication from the other zone)."""
    for t_min, most in ((2.0, 6), (0.0, 30)):
        f = Field(1000, 500, T_zrsv_min=t_min, T_zrsv_refresh=100.0)
        f.run(until=8.0)
        (zm,) = f.managers("zm")[(1, 0)]
        subscriber = f.nearest(900, 400)
        t = 10.0
        for i in range(20):  # a new, wider summary every 0.5 s
            f.net.subscribe(subscriber, f"s{i}", SUB(f"t a{i % 15}_lo>={40 - i} a{i % 15}_hi<=60"))
            t += 0.5
            f.run(until=t)
        f.run(until=24.0)
        pushes = _zrsv_pushes(f, zm, 10.0)
        gaps = [b - a for a, b in itertools.pairwise(pushes)]
        assert 1 <= len(pushes) <= most, (t_min, pushes)
        if t_min:
            assert min(gaps, default=t_min) >= t_min - 1e-6
        else:
            assert len(pushes) > 6  # without the interval: a push per change
        eid = f.net.publish(f.nearest(50, 50), parse_event("t a4_lo=45 a4_hi=50"))
        f.run(until=30.0)
        assert (subscriber, "s19") in delivered(f, eid)


def test_unwanted_traffic_is_answered_with_the_current_summary() -> None:
    """A PUB_ZONE sent on a stale ZRSV (the subscription just left) matches no SOF entry:
    the receiving zone answers with its current ZRSV (reason UNWANTED)."""
    f = Field(1000, 500, T_batch=2.0)
    f.run(until=8.0)
    sub = f.nearest(900, 400)
    f.net.subscribe(sub, "s", SUB("t a3_lo>=40 a3_hi<=80"))
    f.run(until=16.0)
    f.net.unsubscribe(sub, "s")
    # T_batch = 2 s: the GRSV leaves at 18 s, the new ZRSV at 20 s; in between the remote
    # zone's SOF has no entry left while the publisher's zone still holds the old ZRSV.
    f.run(until=19.0)
    f.net.publish(f.nearest(50, 50), parse_event("t a3_lo=50 a3_hi=60"))
    f.run(until=19.8)
    (zm,) = f.managers("zm")[(1, 0)]
    assert f.node(zm).counters["pub_zone_unwanted"] == 1
    unwanted = [tx for tx in f.net.txs if tx.message.type == m.ZRSV_UPDATE
                and m.SummaryUpdate.from_wire(m.Envelope.from_wire(tx.message.body).payload)
                .reason == m.ZrsvReason.UNWANTED]
    assert unwanted


def strip(**params: object) -> Field:
    """Six zones of one grid each in a row (1500 m x 250 m): zone distances up to 5."""
    return Field(1500, 250, K=1, **params)  # type: ignore[arg-type]


def test_adverts_reach_far_zones_by_distance_band() -> None:
    """§IV-C: zones beyond the neighbours hold no ZRSV of the publisher's zone; the
    publication's ARVs are advertised to every band, the far zone whose SOF matches answers
    with its ZRSV, and the cached publication follows as PUB_ZONE."""
    f = strip()
    f.run(until=8.0)
    far = f.nearest(900, 125)  # zone (3, 0): three zone hops from zone (0, 0)
    f.net.subscribe(far, "s", SUB("t a1_lo>=0 a1_hi<=50"))
    f.run(until=14.0)
    eid = f.net.publish(f.nearest(100, 125), parse_event("t a1_lo=10 a1_hi=20"))
    f.run(until=22.0)
    assert set(delivered(f, eid)) == {(far, "s")}
    adverts = [m.Envelope.from_wire(tx.message.body) for tx in f.net.txs
               if tx.message.type == m.PUB_ADVERT and tx.message.hop == 0]
    assert {e.ax for e in adverts} == {2, 3, 4, 5}  # zone 1 is a neighbour with a fresh ZRSV
    replies = [tx for tx in f.net.txs if tx.message.type == m.ZRSV_UPDATE
               and m.SummaryUpdate.from_wire(m.Envelope.from_wire(tx.message.body).payload)
               .reason == m.ZrsvReason.ADVERT_REPLY]
    assert replies
    (zm0,) = f.managers("zm")[(0, 0)]
    bands = next(iter(f.node(zm0).zm.adverts.values()))  # type: ignore[union-attr]
    assert sorted(bands) == [1, 2, 3, 4, 5]


def test_a_query_finds_a_cached_publication_two_zones_away() -> None:
    """§IV-C: a zone whose subscriptions found no data for T_query_idle asks the zones
    within k_query hops; a cached publication there is sent to it."""
    f = strip(k_query=2, T_query_idle=10.0, T_adv=600.0)
    f.run(until=8.0)
    eid = f.net.publish(f.nearest(100, 125), parse_event("t a1_lo=10 a1_hi=20"))
    f.run(until=10.0)
    sub = f.nearest(600, 125)  # zone (2, 0): two hops from the publisher's zone
    f.net.subscribe(sub, "s", SUB("t a1_lo>=0 a1_hi<=50"))
    f.run(until=40.0)
    assert set(delivered(f, eid)) == {(sub, "s")}
    assert sum(f.node(n).counters["queries"] for n in f.pos) >= 1


def test_malformed_and_foreign_frames_are_counted_drops() -> None:
    f = Field(250, 250)
    f.run(until=4.0)
    n = f.nearest(125, 125)
    proto = f.node(n)
    from meshsub.core.api import FrameReceived

    bad = [
        Message(m.ANNOUNCE, MessageId(9, 0, 1), ["x"]),
        Message(m.PUBLISH, MessageId(9, 0, 2), [0, 0, 0]),
        Message(99, MessageId(9, 0, 3), []),
        Message(m.ANNOUNCE, MessageId(9, 0, 4),
                m.Announce(1, 0, 0, 9, 1, (1.0, 1.0), 0.0, False, b"zzzz").to_wire()),
    ]
    for msg in bad:
        f.net.feed(n, FrameReceived(f.net.now, 9, msg))
    assert proto.drops["malformed"] == 2
    assert proto.drops["unknown_type"] == 1 and proto.drops["config_mismatch"] == 1


def test_content_brvst_cannot_summarise_is_refused_with_a_reason() -> None:
    f = Field(250, 250)
    f.run(until=4.0)
    n = f.nearest(125, 125)
    f.net.subscribe(n, "none", SUB("t note=\"x\""))
    f.net.subscribe(n, "empty", SUB("t a1_lo>=60 a1_hi<=40"))
    f.net.publish(n, parse_event("t a1_lo=5 a1_hi=5"))
    drops = f.drops()
    assert drops["no_attribute"] == 1 and drops["empty_range"] == 1 and drops["bad_range"] == 1


def test_a_subscriber_moving_to_another_grid_re_registers_there() -> None:
    """§IV-B1 (grid changes): the new grid manager gets the subscription, the old one lets
    it go; the zone's cache is not asked again for a move inside the zone."""
    f = Field(500, 500)
    f.run(until=6.0)
    sub = f.nearest(200, 200)  # grid (0, 0)
    f.net.subscribe(sub, "s", SUB("t a1_lo>=0"))
    f.run(until=10.0)
    (gm00,) = f.managers("gm")[(0, 0)]
    histories = f.txs_of(m.SUB_HISTORY)
    f.walk(sub, 300.0, 200.0)  # into grid (1, 0)
    f.run(until=f.net.now + 3.0)
    (gm10,) = f.managers("gm")[(1, 0)]
    assert (sub, "s") in f.node(gm10).gm.table  # type: ignore[union-attr]
    assert (sub, "s") not in f.node(gm00).gm.table  # type: ignore[union-attr]
    assert f.txs_of(m.SUB_HISTORY) == histories
    eid = f.net.publish(f.nearest(30, 30), parse_event("t a1_lo=1 a1_hi=2"))
    f.run(until=f.net.now + 3.0)
    assert delivered(f, eid) == Counter({(sub, "s"): 1})


def test_a_subscriber_moving_inside_its_grid_reports_where_deliveries_find_it() -> None:
    f = Field(500, 500, T_lease=900.0)  # no refresh in the test: the position report must do
    f.run(until=6.0)
    sub = f.nearest(30, 30)
    f.net.subscribe(sub, "s", SUB("t a1_lo>=0"))
    f.run(until=10.0)
    f.walk(sub, 200.0, 230.0)  # across grid (0, 0), far from where it subscribed
    assert f.txs_of(m.LOCATE) > 0
    eid = f.net.publish(f.nearest(460, 460), parse_event("t a1_lo=1 a1_hi=2"))
    f.run(until=f.net.now + 3.0)
    assert delivered(f, eid) == Counter({(sub, "s"): 1})


def test_a_subscription_replaced_by_one_brvst_cannot_summarise_is_withdrawn() -> None:
    f = Field(500, 500)
    f.run(until=6.0)
    sub = f.nearest(460, 460)
    f.net.subscribe(sub, "s", SUB("t a1_lo>=0"))
    f.run(until=10.0)
    (gm,) = f.managers("gm")[(1, 1)]
    assert (sub, "s") in f.node(gm).gm.table  # type: ignore[union-attr]
    f.net.subscribe(sub, "s", SUB("t note=\"x\""))  # the same id, no schema attribute
    f.run(until=12.0)
    assert (sub, "s") not in f.node(gm).gm.table  # type: ignore[union-attr]
    assert f.drops()["no_attribute"] == 1


def test_a_circling_leg_is_cut_and_every_leg_gets_the_full_hop_budget() -> None:
    """A routed leg that passes one node a fifth time is dropped (``routing_loop``) rather
    than circling until its TTL ends. Every leg of a journey gets the whole ``max_hops``
    however many hops the legs before it took (a perimeter walk round the outer face of
    the paper's field takes 150-250 hops: bench/brvst_walks.py); the journey count the
    frame carries saturates instead, so the one-byte hop field never overflows."""
    f = Field(250, 250)
    f.run(until=4.0)
    proto = f.node(f.nearest(30, 30))
    env = m.Envelope(m.Dest.NODE, 0, 0, 999, (5.0, 5.0), 0, 0, GeoHeader(), [])
    msg = Message(m.DELIVER, MessageId(999, 0, 1), env.to_wire(), ttl=9)
    assert [proto._looping(msg, env) for _ in range(5)] == [False] * 4 + [True]
    assert proto.params.max_hops == 255
    for journey in (250, 255):
        proto._send_node(m.DELIVER, 2, f.pos[2], [], hop=journey)
        out = proto.handle(TimerFired(f.net.now, "noop"))  # hands over the queued actions
        sends = [a for a in out if isinstance(a, SendTo) and a.message.type == m.DELIVER]
        assert len(sends) == 1
        assert sends[0].message.ttl == 255 and sends[0].message.hop == 0
    assert proto.drops["ttl_expired"] == 0
    small = Field(250, 250, max_hops=200)
    small.run(until=4.0)
    node = small.node(small.nearest(30, 30))
    node._send_node(m.DELIVER, 2, small.pos[2], [], hop=250)
    out = node.handle(TimerFired(small.net.now, "noop"))
    sends = [a for a in out if isinstance(a, SendTo) and a.message.type == m.DELIVER]
    assert [(s.message.ttl, s.message.hop) for s in sends] == [(200, 55)]


def test_a_split_grid_has_a_manager_per_part_and_both_parts_are_served() -> None:
    """A node of grid (1, 1) that hears none of its grid-mates (every node within radio
    range of it is out of the grid's flood scope) elects itself with a higher epoch. The
    zone manager keeps both managers' GRSVs and sends each publication to the manager whose
    entry matched, so both parts' subscribers get theirs (the unit test
    ``test_a_split_grid_keeps_one_sof_record_per_manager`` shows the override a summary
    per grid would allow)."""
    f = Field(500, 500)
    f.run(until=6.0)
    lonely = f.nearest(30, 470)  # moved from grid (0, 1) to the west edge of grid (1, 1)
    spot = (256.0, 400.0)  # 6 m into the grid: past the 5 m hysteresis
    lo, hi = 250.0 - R / 4, 500.0 + R / 4  # the grid's flood scope
    for other in list(f.pos):  # a gap: nobody in the scope within range of the spot
        x, y = f.pos[other]
        if other != lonely and lo <= x <= hi and lo <= y <= hi \
                and math.dist((x, y), spot) <= R:
            f.crash(other)
    f.move(lonely, *spot)
    far = f.nearest(460, 460)
    f.net.subscribe(far, "far", SUB("t a1_lo>=0 a1_hi<=50"))
    f.net.subscribe(lonely, "lonely", SUB("t a2_lo>=0"))
    f.run(until=24.0)
    gms = f.managers("gm")[(1, 1)]
    assert lonely in gms and len(gms) == 2
    (zm,) = f.managers("zm")[(0, 0)]
    assert {gm for cell, gm in f.node(zm).zm.sof if cell == (1, 1)} == set(gms)  # type: ignore[union-attr]
    publisher = f.nearest(30, 30)
    main = f.net.publish(publisher, parse_event("t a1_lo=10 a1_hi=20"))
    alone = f.net.publish(publisher, parse_event("t a2_lo=10 a2_hi=20"))
    f.run(until=30.0)
    assert set(delivered(f, main)) == {(far, "far")}
    assert set(delivered(f, alone)) == {(lonely, "lonely")}


def test_a_member_cut_off_from_its_managed_grid_does_not_stand() -> None:
    """A member that followed its grid's manager and then hears none of its grid-mates
    cannot tell a crash from its own isolation: it does not elect itself (which would split
    the grid) and keeps reaching the manager by routing, as an outsider would."""
    f = Field(500, 500)
    f.run(until=6.0)
    cut = f.nearest(302.5, 412.5)  # a member of grid (1, 1)
    sub = f.nearest(40, 40)
    f.net.subscribe(sub, "s", SUB("t a1_lo>=0"))
    f.run(until=10.0)
    spot = (256.0, 400.0)
    lo, hi = 250.0 - R / 4, 500.0 + R / 4
    for other in list(f.pos):
        x, y = f.pos[other]
        if other != cut and lo <= x <= hi and lo <= y <= hi \
                and math.dist((x, y), spot) <= R:
            f.crash(other)
    f.move(cut, *spot)
    f.run(until=30.0)
    assert f.node(cut).gm is None and f.node(cut).counters["isolated_abstained"] > 0
    assert len(f.managers("gm")[(1, 1)]) == 1
    eid = f.net.publish(cut, parse_event("t a1_lo=5 a1_hi=6"))
    f.run(until=34.0)
    assert set(delivered(f, eid)) == {(sub, "s")}
