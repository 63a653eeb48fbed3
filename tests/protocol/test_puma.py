"""PUMA and paging over the harness: a 5 x 5 grid of base stations and walking clients."""

from __future__ import annotations

import random
from typing import Any

import pytest
from backbone_world import World

from meshsub.core.api import FrameReceived, Message, MessageId
from meshsub.core.grid import Cell
from meshsub.core.params import ParameterError, parse_params
from meshsub.core.registry import get_protocol
from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.core.telemetry import make_record, validate_record
from meshsub.protocols.puma import Paging, PagingParams, Puma, PumaParams
from meshsub.protocols.puma import messages as m

C = 1000
UNIT = 10.0
CENTRE = Cell(2, 2)
CORNER = Cell(0, 0)


def world(cls: type[Any] = Puma, **params: Any) -> World:
    w = World(cls, 5, 5, unit_s=UNIT, reliable_control=False, **params) if cls is Puma \
        else World(cls, 5, 5, reliable_control=False, **params)
    w.place(C, CENTRE)
    w.net.subscribe(C, "s", parse_subscription("temp value>1"))
    w.settle(1.0)
    return w


def publish(w: World, at: Cell = CORNER, value: int = 5) -> MessageId:
    eid = w.net.publish(w.station(at), parse_event(f"temp value={value}"))
    w.settle(3.0)
    return eid


def walk_to(w: World, *cells: tuple[int, int]) -> None:
    """One cell per time unit, then just before the next unit ends."""
    for cell in cells:
        w.net.run(until=w.net.now + UNIT)
        w.place(C, cell)


def root(w: World) -> Puma:
    proto = w.node(w.station(CENTRE))
    assert isinstance(proto, Puma)
    return proto


def test_registered_with_ids_7_and_8() -> None:
    assert get_protocol("puma") is Puma and Puma.protocol_id == 7
    assert get_protocol("paging") is Paging and Paging.protocol_id == 8


def test_subscription_reaches_every_base_station_once() -> None:
    w = world()
    assert list(root(w).tracks) == [C]
    held = [w.node(w.station(Cell(x, y))).backbone for x in range(5) for y in range(5)]
    assert sum(len(h) for h in held) == 24  # everyone but the root, one entry each
    assert len(w.txs(types=frozenset({m.SUB_PROPAGATE}))) == 24  # a tree: n - 1 messages


def test_client_at_home_gets_the_event_directly() -> None:
    w = world()
    since = w.net.now
    eid = publish(w)
    assert w.net.deliveries(eid) == [(C, "s")]
    assert root(w).stats["local"] == 1
    last_mile = w.txs(since, frozenset({m.DELIVER, m.LOCAL, m.REPLY}))
    assert [tx.message.type for tx in last_mile] == [m.LOCAL, m.REPLY]


def test_hot_delivery_to_a_moved_client() -> None:
    """One unit away, west: P^1 puts 1/4 on each neighbour, th = 0.6 takes three of them
    (ties by cell: (1,2), (2,1), (2,3)); the client is in the hot set."""
    w = world(th=0.6)
    walk_to(w, (1, 2))
    since = w.net.now
    eid = publish(w)
    assert w.net.deliveries(eid) == [(C, "s")]
    assert root(w).stats["hot"] == 1 and root(w).stats["cold"] == 0
    deliver = w.txs(since, frozenset({m.DELIVER}))
    assert len(deliver) == 3  # the hot tree: three edges from the root
    assert len(w.client_txs(C, since)) == 1  # one reply
    assert root(w).tracks[C].last_cell == Cell(1, 2)  # the reply told where it is


def test_cold_delivery_when_the_hot_set_misses() -> None:
    w = world(th=0.6)
    walk_to(w, (3, 2))  # east: the one neighbour outside the hot set
    since = w.net.now
    eid = publish(w)
    assert w.net.deliveries(eid) == [(C, "s")]
    stats = root(w).stats
    assert stats["hot"] == 1 and stats["cold"] == 1 and stats["replies"] == 1
    delivers = w.txs(since, frozenset({m.DELIVER}))
    phases = [m.Deliver.decode(tx.message.body).phase for tx in delivers]
    assert phases == [m.Phase.HOT] * 3 + [m.Phase.COLD]
    assert len(w.client_txs(C, since)) == 1


def test_ald_is_a_single_round() -> None:
    w = world(th=1.0)
    walk_to(w, (3, 2))
    eid = publish(w)
    assert w.net.deliveries(eid) == [(C, "s")]
    assert root(w).stats["cold"] == 0


def test_two_stations_that_both_see_the_client_get_one_reply() -> None:
    w = world(th=1.0)
    walk_to(w, (1, 2))
    w.net.link(C, w.station((2, 1)))  # in range of a second base station (positions unknown)
    w.settle()
    since = w.net.now
    eid = publish(w)
    assert w.net.deliveries(eid) == [(C, "s")]  # exactly once to the application
    locals_ = w.txs(since, frozenset({m.LOCAL}))
    assert len(locals_) == 2
    assert len(w.client_txs(C, since)) == 1  # and one reply


def test_acknowledgement_timeout_leads_to_the_cold_round() -> None:
    """The hot round's reply is lost: the broker times out and tries the cold cells.

    The cold round skips the cells already tried, so it misses the client
    too and the event is queued; the next word from the client (here its
    reply to the next event) brings it again in a later round, which the
    client answers although it has answered the event before.
    """
    w = world(th=0.6)
    walk_to(w, (1, 2))
    lost: list[int] = []

    def loss(src: int, dst: int, msg: Message) -> bool:
        if msg.type == m.REPLY and src == C and not lost:
            lost.append(1)
            return True
        return False
    w.net.loss = loss
    since = w.net.now
    eid = publish(w)
    stats = root(w).stats
    assert stats["hot"] == 1 and stats["cold"] == 1 and stats["replies"] == 0
    assert [q[0] for q in root(w).tracks[C].queue] == [eid]
    assert w.net.deliveries(eid) == [(C, "s")]
    second = publish(w, value=6)
    assert w.net.deliveries(second) == [(C, "s")]
    assert w.net.deliveries(eid) == [(C, "s")]  # still once for the application
    assert not root(w).tracks[C].queue and not root(w).pending
    assert len(w.client_txs(C, since)) == 3  # lost reply, reply to the next, re-reply


def test_fallback_queue_and_re_association() -> None:
    """Out of reach during both rounds: the event waits, then follows the HELLO."""
    w = world(th=0.6)
    walk_to(w, (1, 2))
    w.place(C, None)
    eid = publish(w)
    assert not w.net.deliveries(eid)
    track = root(w).tracks[C]
    assert [q[0] for q in track.queue] == [eid] and root(w).stats["queued"] == 1
    w.net.run(until=w.net.now + 3 * UNIT)  # away longer than the rejoin gap
    since = w.net.now
    w.place(C, (4, 4))
    w.settle(2.0)
    assert w.net.deliveries(eid) == [(C, "s")]
    sent = [tx.message.type for tx in w.client_txs(C, since)]
    assert sent == [m.HELLO, m.REPLY]
    assert not track.queue and root(w).tracks[C].last_cell == Cell(4, 4)


def test_queued_event_follows_the_next_reply() -> None:
    w = world(th=0.6)
    walk_to(w, (1, 2))
    w.place(C, None)
    first = publish(w)
    w.place(C, (1, 2))  # back at once: no HELLO (shorter than the rejoin gap)
    second = publish(w, value=6)
    w.settle(2.0)
    assert w.net.deliveries(first) == [(C, "s")] and w.net.deliveries(second) == [(C, "s")]
    assert not root(w).tracks[C].queue


def test_unsubscribe_reaches_the_previous_broker_from_elsewhere() -> None:
    w = world()
    walk_to(w, (3, 2), (4, 2))
    w.net.unsubscribe(C, "s")
    w.settle(1.0)
    assert C not in root(w).tracks
    assert all(len(w.node(w.station(Cell(x, y))).backbone) == 0
               for x in range(5) for y in range(5))
    eid = publish(w)
    assert not w.net.deliveries(eid)


def test_events_published_by_a_client_travel_the_tree() -> None:
    w = world()
    w.net.nodes[1001] = Puma(1001, params=parse_params(PumaParams, {
        "role": "client", "cols": 5, "rows": 5, "beacon_s": 0.0, "reliable_control": False}))
    w.where[1001] = None
    w.net.link(1001, w.station((4, 0)))
    w.settle()
    eid = w.net.publish(1001, parse_event("temp value=9"))
    w.settle(2.0)
    assert w.net.deliveries(eid) == [(C, "s")]


def test_client_waits_for_a_base_station_before_subscribing() -> None:
    w = World(Puma, 3, 3, unit_s=UNIT, reliable_control=False)
    w.net.subscribe(C, "s", parse_subscription("temp"))
    eid_early = w.net.publish(C, parse_event("temp value=1"))
    w.place(C, (1, 1))
    w.settle(1.0)
    assert list(w.node(w.station((1, 1))).tracks) == [C]
    assert w.net.deliveries(eid_early) == [(C, "s")]  # its own publication, once subscribed


def test_client_sends_one_message_per_event_on_a_walk() -> None:
    """§5.4.2: the client's message cost is exactly one per event, on any walk."""
    rng = random.Random(7)
    for th in (0.4, 0.8):
        w = world(th=th)
        since = w.net.now
        events = []
        for _unit in range(8):
            w.net.run(until=w.net.now + UNIT)
            w.step(C, rng)
            events.append(publish(w))
        assert all(w.net.deliveries(e) == [(C, "s")] for e in events)
        assert len(w.client_txs(C, since)) == len(events)


def test_reliable_control_survives_a_lossy_hop() -> None:
    w = World(Puma, 5, 5, unit_s=UNIT, reliable_control=True)
    w.place(C, CENTRE)
    dropped: list[int] = []

    def loss(src: int, dst: int, msg: Message) -> bool:
        if msg.type == m.SUBSCRIBE and not dropped:
            dropped.append(1)
            return True
        return False
    w.net.loss = loss
    w.net.subscribe(C, "s", parse_subscription("temp"))
    w.settle(2.0)
    assert list(root(w).tracks) == [C]


def test_stale_subscribe_cannot_undo_an_unsubscribe() -> None:
    w = world()
    base = root(w)
    old = Message(m.SUBSCRIBE, MessageId(C, 0, 99),
                  m.Subscribe("s", 1, parse_subscription("temp value>1")).encode())
    w.net.unsubscribe(C, "s")
    w.settle()
    w.net.feed(w.station(CENTRE), FrameReceived(w.net.now, C, old))
    assert C not in base.tracks or "s" not in base.tracks[C].subs


# ---------------------------------------------------------------------------- paging


def test_paging_reports_every_dist_cells_and_floods_the_area() -> None:
    w = world(Paging, dist=2)
    since = w.net.now
    walk_to(w, (3, 2))
    assert not w.client_txs(C, since)  # one cell: no report yet
    walk_to(w, (3, 3))
    assert [tx.message.type for tx in w.client_txs(C, since)] == [m.REPORT]
    assert w.node(w.station(CENTRE)).tracks[C].last_cell == Cell(3, 3)
    walk_to(w, (4, 3))
    since = w.net.now
    eid = publish(w)
    assert w.net.deliveries(eid) == [(C, "s")]
    types = [tx.message.type for tx in w.txs(since, frozenset({m.PAGE, m.DELIVER, m.LOCAL}))]
    # 2 hops to (3, 3), then the area within 1 cell: 4 more stations, then the client
    assert types.count(m.PAGE) == 2 and types.count(m.DELIVER) == 4 and types.count(m.LOCAL) == 1
    assert not w.client_txs(C, since)  # paging clients never reply


def test_paging_beyond_rule_reports_later() -> None:
    w = world(Paging, dist=1, dist_rule="beyond")
    since = w.net.now
    walk_to(w, (3, 2))
    assert not w.client_txs(C, since)
    walk_to(w, (4, 2))
    assert len(w.client_txs(C, since)) == 1


def test_parameters_are_validated() -> None:
    with pytest.raises(ParameterError):
        parse_params(PumaParams, {"th": 0.0})
    with pytest.raises(ParameterError):
        parse_params(PumaParams, {"role": "mayor"})
    with pytest.raises(ParameterError):
        parse_params(PumaParams, {"cell_x": 3})
    with pytest.raises(ParameterError):
        parse_params(PagingParams, {"dist": 0})
    p = parse_params(PumaParams, {"th_mode": "adaptive"})
    assert [p.threshold(t) for t in (2, 3, 4, 5, 9)] == [0.6, 0.6, 0.7, 0.8, 0.8]


def test_every_telemetry_record_is_valid() -> None:
    w = world()
    walk_to(w, (3, 2))
    publish(w)
    w.place(C, None)
    publish(w)
    for _at, node, emit in w.net.emitted:
        validate_record(make_record(run="r", node=node, protocol="puma", ts_ns=1,
                                    event=emit.event, attrs=emit.attrs))
