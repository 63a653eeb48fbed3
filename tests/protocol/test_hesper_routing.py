"""HESPER between cells (issue 21): voids, exact emptiness, hop budget, timers, expiry records.

Lattices of the in-test harness with cells left empty; each test states what the
thesis leaves open and what docs/protocols/hesper.md ("Deviations") decides.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from harness import Net
from test_hesper_protocol import TR, S, lattice, sub

from meshsub.core.api import (
    FrameReceived,
    Message,
    MessageId,
    NeighborInfo,
    NeighborUp,
    Position,
    PositionChanged,
    SendTo,
)
from meshsub.core.georouting import GeoHeader, GeoMode
from meshsub.core.grid import Cell, chebyshev
from meshsub.core.params import parse_params
from meshsub.core.syntax import parse_event
from meshsub.protocols.hesper import Hesper, HesperParams
from meshsub.protocols.hesper import messages as m
from meshsub.protocols.hesper.state import Entry, TimedBest
from meshsub.wire.frame import HOP_MAX, TTL_MAX

WALL = frozenset((gx, gy) for gx in (3, 4) for gy in range(6))
"""Columns gx = 3, 4 empty except their top cells: a wall 99 m thick (radio range 70 m)
with one gap, in an 8 x 7 lattice."""


def _sent(actions: list[Any], mtype: int) -> list[SendTo]:
    return [a for a in actions if isinstance(a, SendTo) and a.message.type == mtype]


@pytest.mark.parametrize("variant", ["I", "II"])
def test_a_wall_of_empty_cells_is_crossed_through_its_only_gap(variant: str) -> None:
    """The straight path runs into the wall; the subscription follows the wall to the gap
    (cell by cell, each taken over by a node at least as close to the region) and the
    event comes back the same way. No probe or skip of a cell is ever dropped."""
    net, cells = lattice(8, 7, skip=WALL, variant=variant, reliable_control=False)
    subscriber = cells[(7, 0)][0]
    net.subscribe(subscriber, "s", sub("temp gx=0 gy=0"))
    net.run(until=10.0)
    event = net.publish(cells[(0, 0)][4], parse_event("temp gx=0 gy=0"))
    net.run(until=15.0)
    assert net.deliveries(event) == [(subscriber, "s")]
    assert not [e for _, e in net.records("drop")
                if e.attrs["reason"] not in ("branch_expired",)]
    # One GPSR walk round the wall (about 67 radio hops), where every empty cell used to
    # cost a face tour of its own (192 SUBSCRIBE transmissions).
    assert sum(1 for tx in net.txs if tx.message.type == m.SUBSCRIBE) <= 80
    # Every broker that holds an active entry is in an occupied cell, and along the path
    # each one is nearer the region (Chebyshev cells) than the one before.
    holders = [(chebyshev(net.nodes[n].cell, (0, 0)), n) for n in net.nodes  # type: ignore[attr-defined]
               if any(e.active for st in net.nodes[n].topics.values()  # type: ignore[attr-defined]
                      for e in st.entries.values())]
    distances = sorted(d for d, _ in holders)
    assert len(distances) == len(set(distances)) and distances[0] == 0


def test_a_detour_slower_than_the_estimate_is_still_set_up() -> None:
    """Timers sized from the hops actually taken. At 0.2 s a radio hop (the configured
    per-hop RTT) the estimate from the cell distance gives a 5.6 s reply window and
    16.8 s PENDING entries, but the walk round the wall and back takes about 21 s:
    PENDING entries live as long as the hop budget lets a REPLY (and a CONFIRM) come,
    and a HESPER-II SHB opens its window again, sized from the late reply's own round
    trip."""
    for variant in ("I", "II"):
        net, cells = lattice(8, 7, skip=WALL, variant=variant, reliable_control=False,
                             per_hop_rtt_s=0.2)
        net.delay = 0.2
        subscriber = cells[(7, 0)][0]
        net.subscribe(subscriber, "s", sub("temp gx=0 gy=0"))
        net.run(until=90.0)
        event = net.publish(cells[(0, 0)][4], parse_event("temp gx=0 gy=0"))
        net.run(until=110.0)
        assert net.deliveries(event) == [(subscriber, "s")], variant
        assert not net.drops("pending_expired") and not net.drops("reply_unknown_sub")
        assert not net.drops("confirm_unknown")


def test_the_hop_budget_is_end_to_end() -> None:
    """max_hops bounds the whole subscription, not each broker-to-broker leg: five cell
    hops need more than four radio hops, each leg only one or two."""
    short, cells = lattice(6, 1, variant="I", max_hops=4, reliable_control=False)
    subscriber = cells[(5, 0)][0]
    short.subscribe(subscriber, "s", sub("temp gx=0 gy=0"))
    short.run(until=5.0)
    expired = short.drops("ttl_expired")
    assert expired and all(e.attrs["hop"] <= 4 for _, e in expired)
    event = short.publish(cells[(0, 0)][4], parse_event("temp gx=0 gy=0"))
    short.run(until=8.0)
    assert short.deliveries(event) == []
    roomy, cells = lattice(6, 1, variant="I", max_hops=20, reliable_control=False)
    roomy.subscribe(cells[(5, 0)][0], "s", sub("temp gx=0 gy=0"))
    roomy.run(until=5.0)
    event = roomy.publish(cells[(0, 0)][4], parse_event("temp gx=0 gy=0"))
    roomy.run(until=8.0)
    assert roomy.deliveries(event) == [(cells[(5, 0)][0], "s")]
    assert all(tx.message.hop + tx.message.ttl <= 20 for tx in roomy.txs)


def _node(params: HesperParams, pos: tuple[float, float],
          neighbours: dict[int, tuple[float, float]]) -> Hesper:
    node = Hesper(1, params=params)
    node.handle(PositionChanged(0.0, Position(*pos)))
    for n, (x, y) in neighbours.items():
        node.handle(NeighborUp(0.0, NeighborInfo(n, Position(x, y))))
    return node


def _subscribe_frame(hop: int, ttl: int, cell: Cell) -> Message:
    s = m.Subscribe("9/s", sub("temp gx=0 gy=0"), 9, None, "I", 1, (Cell(3, 0),), 0, False)
    env = m.Envelope(cell, "temp", None, 0, GeoHeader(), s.to_wire())
    return Message(m.SUBSCRIBE, MessageId(9, 0, 1), env.to_wire(), hop=hop, ttl=ttl)


def test_a_frame_at_the_wire_hop_limit_is_a_ttl_drop_not_an_unencodable_frame() -> None:
    """The wire's hop field is 16-bit: a frame that arrives with hop 65535 (a hostile or
    confused sender claims the largest TTL too) is never passed on as hop 65536."""
    p = HesperParams(TR=TR, area_width_m=6 * S, area_height_m=S, beacon_s=0.0,
                     reliable_control=False)
    node = _node(p, (2.5 * S, 0.5 * S), {2: (1.5 * S, 0.5 * S)})
    actions = node.handle(FrameReceived(1.0, 3, _subscribe_frame(HOP_MAX, TTL_MAX, Cell(1, 0))))
    assert not _sent(actions, m.SUBSCRIBE)
    assert node.drops["ttl_expired"] == 1
    fresh = node.handle(FrameReceived(1.0, 3, _subscribe_frame(10, TTL_MAX, Cell(1, 0))))
    (out,) = _sent(fresh, m.SUBSCRIBE)
    assert out.message.hop == 11 and out.message.hop + out.message.ttl == p.max_hops


def test_hesper_ii_relays_pass_on_only_replies_that_rank_better() -> None:
    p = HesperParams(TR=TR, area_width_m=6 * S, area_height_m=S, beacon_s=0.0,
                     reliable_control=False, variant="II")
    node = _node(p, (2.5 * S, 0.5 * S), {2: (3.5 * S, 0.5 * S)})
    st = node._state("temp")  # a PENDING entry, as forwarding the SUBSCRIBE left it
    st.entries["9/s"] = Entry("9/s", sub("temp gx=0 gy=0"), Cell(0, 0), None, False, 100.0, "II")
    route = (Cell(3, 0), Cell(2, 0))
    passed = []
    for new_links, total in ((4, 6), (5, 7), (4, 6), (3, 5)):
        r = m.Reply("9/s", 7, Cell(1, 0), m.KIND_JOINED, new_links, total, route, 1, 0, 5)
        env = m.Envelope(Cell(2, 0), "temp", None, 0, GeoHeader(), r.to_wire())
        actions = node.handle(FrameReceived(1.0, 5, Message(m.REPLY, MessageId(7, 0, new_links),
                                                            env.to_wire())))
        passed += [m.Reply.from_wire(m.Envelope.from_wire(a.message.body).payload).new_links
                   for a in _sent(actions, m.REPLY)]
    assert passed == [4, 3]
    assert node.drops["reply_superseded"] == 2


def test_every_expiry_is_a_drop_record() -> None:
    """PENDING entries whose REPLY never comes (HESPER-I) and unconfirmed HESPER-II
    branches leave drop records, as do downstream leases that run out."""
    net, cells = lattice(5, 5, variant="I", reliable_control=False, pending_ttl_s=2.0)
    net.loss = lambda src, dst, msg: msg.type == m.REPLY
    subscriber = cells[(4, 2)][0]
    net.subscribe(subscriber, "s", sub("temp gx=0 gy=0"))
    net.run(until=5.0)
    expired = net.drops("pending_expired")
    assert len(expired) == 4  # the SHB and the three brokers before the PHB
    assert {e.attrs["sub_id"] for _, e in expired} == {f"{subscriber:x}/s"}

    net, cells = lattice(7, 7, variant="II", reliable_control=False, pending_ttl_s=2.0)
    net.subscribe(cells[(6, 2)][0], "s", sub("temp gx=0 gy=0"))
    net.run(until=5.0)
    assert net.drops("branch_expired") and not net.drops("pending_expired")

    net, cells = lattice(4, 4, variant="I", sub_refresh_s=5.0, lease_s=15.0)
    a = cells[(3, 3)][0]
    net.subscribe(a, "s", sub("temp gx=0 gy=0"))
    net.run(until=10.0)
    net.nodes[a]._refresh_seq.clear()  # type: ignore[attr-defined]
    net.run(until=40.0)
    leases = net.drops("lease_expired")
    assert leases and {e.attrs["sub_id"] for _, e in leases} == {f"{a:x}/s"}


def _bare_net(positions: dict[int, tuple[float, float]], **params: Any) -> Net:
    p = parse_params(HesperParams, {"beacon_s": 0.0, "reliable_control": False, **params})
    net = Net.of(Hesper, list(positions), params=p, delay=0.001)
    for n, (x, y) in positions.items():
        net.feed(n, PositionChanged(0.0, Position(x, y)))
    tr = float(params["TR"])
    for a, pa in positions.items():
        for b, pb in positions.items():
            if a != b and math.dist(pa, pb) <= tr:
                net.adjacency.setdefault(a, set()).add(b)
                net.feed(a, NeighborUp(0.0, NeighborInfo(b, Position(*pb))))
    return net


def test_a_large_cell_is_probed_at_every_quarter_before_it_is_called_empty() -> None:
    """Wi-Fi cells (cell_side_m 80 m, TR 60 m) are wider than TR/sqrt2, so neither the hash
    point nor the cell centre proves emptiness: node 4, just outside the region's cell,
    is nearer both than the region's only node 1 (in the cell's north-west corner) and
    cannot hear it. Probing the four quarter centres reaches node 1 through 5 and 6."""
    positions = {1: (82.0, 78.0), 2: (270.0, 30.0), 3: (215.0, 30.0), 4: (161.0, 10.0),
                 5: (165.0, 68.0), 6: (125.0, 105.0)}
    net = _bare_net(positions, TR=60.0, cell_side_m=80.0, area_width_m=320.0,
                    area_height_m=160.0, variant="I")
    hesper = net.nodes[1]
    assert isinstance(hesper, Hesper) and hesper.cell == Cell(1, 0)
    for point in (hesper._point(Cell(1, 0), "temp"), hesper.grid.centre((1, 0))):
        assert math.dist(positions[4], point) < math.dist(positions[1], point)
    assert not net.linked(4, 1)
    net.subscribe(2, "s", sub("temp gx=1 gy=0"))
    net.run(until=5.0)
    event = net.publish(1, parse_event("temp gx=1 gy=0 value=1"))
    net.run(until=8.0)
    assert net.deliveries(event) == [(2, "s")]
    assert not net.records("drop")


def test_a_refresh_is_not_taken_over_by_another_cell() -> None:
    """Only a new subscription may start a path in a cell other than the one it was
    sent to; a refresh keeps to the path it renews (a refresh that finds its next cell
    emptied is dropped as ``empty_cell``, visibly)."""
    net, cells = lattice(5, 1, variant="I", reliable_control=False, sub_refresh_s=2.0,
                         lease_s=6.0)
    subscriber = cells[(4, 0)][0]
    net.subscribe(subscriber, "s", sub("temp gx=0 gy=0"))
    net.run(until=1.0)
    for n in cells[(2, 0)]:  # the middle cell's nodes all leave
        for other in list(net.adjacency.get(n, ())):
            net.unlink(n, other)
    net.run(until=3.0)
    dropped = net.drops("empty_cell")
    assert dropped and {e.attrs["msg_kind"] for _, e in dropped} == {"subscription"}
    assert {e.attrs["cell"] for _, e in dropped} == {"2,0"}


def test_hesper_ii_branches_share_one_walk_round_a_void() -> None:
    """From (7, 3) several HESPER-II branches run into the wall; a relay that carried a
    better-ranked branch round it drops the others' copies, and the best goes on."""
    net, cells = lattice(8, 7, skip=WALL, variant="II", reliable_control=False)
    subscriber = cells[(7, 3)][0]
    net.subscribe(subscriber, "s", sub("temp gx=0 gy=0"))
    net.run(until=10.0)
    assert sum(p.drops["duplicate_detour"] for p in net.nodes.values()) > 0
    event = net.publish(cells[(0, 0)][4], parse_event("temp gx=0 gy=0"))
    net.run(until=15.0)
    assert net.deliveries(event) == [(subscriber, "s")]


def test_timed_best_keeps_the_least_value_per_key() -> None:
    best = TimedBest(capacity=2, max_age=10.0)
    assert best.offer("a", (3, 1), 0.0) and best.offer("a", (2, 5), 1.0)
    assert not best.offer("a", (3, 0), 2.0) and best.offer("a", (2, 5), 2.0)
    assert best.offer("b", (9,), 3.0) and best.offer("c", (9,), 3.0)
    assert len(best) == 2  # "a", the oldest, made room
    assert best.offer("a", (7,), 3.0)
    assert best.offer("b", (99,), 20.0)  # "b" aged out: any value is the best again


def test_event_legs_round_a_void_share_their_common_hops() -> None:
    """Six subscribers along the wall's east face are taken over west of it, so brokers
    there have several downstream cells across the wall: one EVENT goes out for all of
    them and is split where their GPSR next hops part. Everyone gets the event once."""
    net, cells = lattice(8, 7, skip=WALL, variant="I", reliable_control=False)
    subscribers = [cells[(5, gy)][0] for gy in range(6)]
    for i, n in enumerate(subscribers):
        net.subscribe(n, f"s{i}", sub("temp gx=0 gy=0"))
        net.run(until=net.now + 3.0)
    start = net.now
    event = net.publish(cells[(0, 0)][4], parse_event("temp gx=0 gy=0"))
    net.run(until=start + 5.0)
    assert sorted(net.deliveries(event)) == sorted((n, f"s{i}") for i, n in enumerate(subscribers))
    shared = [tx for tx in net.txs if tx.time >= start and tx.message.type == m.EVENT
              and m.Envelope.from_wire(tx.message.body).also]
    assert shared


def test_envelopes_and_replies_round_trip_and_read_older_frames() -> None:
    perimeter = GeoHeader(GeoMode.PERIMETER, lp=(1.0, 2.0), lf=(1.5, 2.5), e0=(3, 4),
                          prev=(0.5, 0.5))
    env = m.Envelope(Cell(2, 3), "temp", None, 1, perimeter, [1, "x"], m.STAGE_PROBE + 3,
                     (m.Leg(Cell(5, 5), m.STAGE_BROKER, GeoHeader()),
                      m.Leg(Cell(6, 1), m.STAGE_SKIP, perimeter)))
    assert m.Envelope.from_wire(env.to_wire()) == env
    old = env.to_wire()[:7]  # a node without stages or legs
    assert m.Envelope.from_wire(old) == m.Envelope(Cell(2, 3), "temp", None, 1, perimeter,
                                                   [1, "x"])
    assert m.Envelope.from_wire(env.to_wire()[:8]).stage == m.STAGE_PROBE + 3
    too_many = env.to_wire()
    too_many[8] = [[1, 1, 0, [0]]] * (m.MAX_LEGS + 1)
    with pytest.raises(ValueError):
        m.Envelope.from_wire(too_many)
    r = m.Reply("1/s", 9, Cell(0, 0), m.KIND_PHB, 2, 3, (Cell(1, 2), Cell(1, 1)), 1, 0, 40)
    assert m.Reply.from_wire(r.to_wire()) == r
    assert m.Reply.from_wire(r.to_wire()[:9]).sub_hops == 0
