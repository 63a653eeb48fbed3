"""HESPER's state machine over the in-test harness: lattices of cells with known brokers."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest
from harness import Net

from meshsub.core.api import (
    EnergyChanged,
    FrameReceived,
    Message,
    MessageId,
    NeighborInfo,
    NeighborUp,
    Position,
    PositionChanged,
)
from meshsub.core.params import parse_params
from meshsub.core.registry import get_protocol
from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.protocols.hesper import Hesper, HesperParams
from meshsub.protocols.hesper import messages as m

TR = 70.0
S = TR / math.sqrt(2)
OFFSETS = [(0.15, 0.15), (0.85, 0.15), (0.15, 0.85), (0.85, 0.85), (0.5, 0.5)]


Lattice = tuple[Net, dict[tuple[int, int], list[int]]]


def lattice(cols: int, rows: int, skip: frozenset[tuple[int, int]] = frozenset(),
            **params: Any) -> Lattice:
    """Five nodes in every cell of a cols x rows grid (none in ``skip``), unit disk TR."""
    values = {"TR": TR, "area_width_m": cols * S, "area_height_m": rows * S, "beacon_s": 0.0,
              **params}
    p = parse_params(HesperParams, values)
    pos: dict[int, tuple[float, float]] = {}
    by_cell: dict[tuple[int, int], list[int]] = {}
    nid = 1
    for gx in range(cols):
        for gy in range(rows):
            if (gx, gy) in skip:
                continue
            for ox, oy in OFFSETS:
                pos[nid] = ((gx + ox) * S, (gy + oy) * S)
                by_cell.setdefault((gx, gy), []).append(nid)
                nid += 1
    net = Net.of(Hesper, list(pos), params=p, delay=0.001)
    for n, (x, y) in pos.items():
        net.feed(n, PositionChanged(0.0, Position(x, y)))
    for a in pos:
        for b in pos:
            if a < b and math.dist(pos[a], pos[b]) <= TR:
                net.adjacency.setdefault(a, set()).add(b)
                net.adjacency.setdefault(b, set()).add(a)
                for end, other in ((a, b), (b, a)):
                    x, y = pos[other]
                    net.feed(end, NeighborUp(0.0, NeighborInfo(other, Position(x, y))))
    return net, by_cell


def kinds(net: Net, kind: str, since: float = 0.0) -> int:
    proto = next(iter(net.nodes.values()))
    return sum(1 for tx in net.txs if tx.time >= since
               and proto.kind_of(tx.message.type).value == kind)


def sub(text: str) -> Any:
    return parse_subscription(text)


def test_registered_by_name_with_protocol_id_3() -> None:
    assert get_protocol("hesper") is Hesper and Hesper.protocol_id == 3


@pytest.mark.parametrize("variant", ["I", "II"])
def test_every_subscriber_gets_every_event_exactly_once(variant: str) -> None:
    net, cells = lattice(6, 6, variant=variant)
    subscribers = [cells[(5, 5)][0], cells[(5, 2)][1], cells[(2, 5)][2], cells[(3, 4)][0],
                   cells[(0, 3)][3], cells[(4, 0)][4]]
    for i, n in enumerate(subscribers):
        net.subscribe(n, f"s{i}", sub("temp gx=0 gy=0 value>10"))
    net.subscribe(cells[(5, 4)][0], "cold", sub("temp gx=0 gy=0 value<5"))
    net.run(until=5.0)
    publisher = cells[(0, 0)][4]
    ids = [net.publish(publisher, parse_event(f"temp gx=0 gy=0 value={v}")) for v in (20, 3, 30)]
    net.run(until=10.0)
    got = Counter((str(d.event_id), n, d.sub_id) for _, n, d in net.delivered)
    expected = {(str(ids[0]), n, f"s{i}") for i, n in enumerate(subscribers)} | \
        {(str(ids[2]), n, f"s{i}") for i, n in enumerate(subscribers)} | \
        {(str(ids[1]), cells[(5, 4)][0], "cold")}
    assert set(got) == expected
    assert max(got.values()) == 1
    assert not net.drops("malformed") and not net.drops("confirm_unknown")


def test_hesper_i_path_follows_algorithm_4_1_and_replies_activate_it() -> None:
    net, cells = lattice(6, 6, variant="I")
    shb_cell = (5, 2)
    net.subscribe(cells[shb_cell][0], "a", sub("temp gx=0 gy=0"))
    net.run(until=3.0)
    topic_brokers = {c: [n for n in ids if "temp" in net.nodes[n].topics]  # type: ignore[attr-defined]
                     for c, ids in cells.items()}
    on_path = {c for c, b in topic_brokers.items() if b}
    # (5,2) -> (4,2) -> (3,2) -> (2,2) -> (1,1) -> (0,0): axis steps, then the diagonal.
    assert on_path == {(5, 2), (4, 2), (3, 2), (2, 2), (1, 1), (0, 0)}
    for c in on_path:
        (broker,) = topic_brokers[c]
        st = net.nodes[broker].topics["temp"]  # type: ignore[attr-defined]
        assert all(e.active for e in st.entries.values())


def test_second_subscriber_in_a_covered_cell_costs_one_message() -> None:
    """§4.8 item 6: covered at the SHB -> 1 client->SHB message and no network hop."""
    net, cells = lattice(5, 5, variant="I")
    a, b = cells[(4, 4)][0], cells[(4, 4)][1]
    net.subscribe(a, "wide", sub("temp gx=0 gy=0 value>0"))
    net.run(until=3.0)
    before = kinds(net, "subscription")
    shb = next(n for n in cells[(4, 4)] if "temp" in net.nodes[n].topics)  # type: ignore[attr-defined]
    net.subscribe(b, "narrow", sub("temp gx=0 gy=0 value>10"))
    net.run(until=6.0)
    assert kinds(net, "subscription") - before == (0 if b == shb else 1)
    ev = net.publish(cells[(0, 0)][0], parse_event("temp gx=0 gy=0 value=11"))
    net.run(until=8.0)
    assert sorted(net.deliveries(ev)) == sorted([(a, "wide"), (b, "narrow")])


def test_hesper_ii_sends_two_branches_in_open_parts_but_confirms_one() -> None:
    net, cells = lattice(7, 7, variant="II")
    n = cells[(6, 2)][0]
    net.subscribe(n, "x", sub("temp gx=0 gy=0"))
    net.run(until=0.05)
    subs_seen = {c for c, ids in cells.items()
                 if any("temp" in net.nodes[i].topics for i in ids)}  # type: ignore[attr-defined]
    assert (5, 2) in subs_seen and (5, 1) in subs_seen  # both the axis and diagonal step
    net.run(until=10.0)
    active_cells = set()
    for c, ids in cells.items():
        for i in ids:
            st = net.nodes[i].topics.get("temp")  # type: ignore[attr-defined]
            if st is not None and any(e.active for e in st.entries.values()):
                active_cells.add(c)
    assert len(active_cells) == 7  # one shortest path of 6 cell hops, both ends included
    ev = net.publish(cells[(0, 0)][0], parse_event("temp gx=0 gy=0"))
    net.run(until=12.0)
    assert net.deliveries(ev) == [(n, "x")]


def test_unsubscribe_stops_delivery_and_prunes_the_path() -> None:
    net, cells = lattice(5, 5, variant="I")
    a = cells[(4, 3)][0]
    net.subscribe(a, "s", sub("temp gx=0 gy=0"))
    net.run(until=3.0)
    net.unsubscribe(a, "s")
    net.run(until=6.0)
    remaining = [i for i, p in net.nodes.items()
                 if any(st.entries for st in p.topics.values())]  # type: ignore[attr-defined]
    assert remaining == []
    data_before = kinds(net, "data")
    ev = net.publish(cells[(0, 0)][0], parse_event("temp gx=0 gy=0"))
    net.run(until=8.0)
    assert net.deliveries(ev) == []
    assert kinds(net, "data") - data_before <= 1  # at most publisher -> PHB


def test_leases_expire_without_refresh_and_survive_with_it() -> None:
    net, cells = lattice(4, 4, variant="I", sub_refresh_s=5.0, lease_s=15.0)
    a = cells[(3, 3)][0]
    net.subscribe(a, "s", sub("temp gx=0 gy=0"))
    net.run(until=40.0)  # refreshed every 5 s: still there
    ev = net.publish(cells[(0, 0)][0], parse_event("temp gx=0 gy=0"))
    net.run(until=41.0)
    assert net.deliveries(ev) == [(a, "s")]
    # Silence the client (it forgets the subscription without telling anyone).
    net.nodes[a]._refresh_seq.clear()  # type: ignore[attr-defined]
    net.run(until=80.0)
    assert all(not st.entries for p in net.nodes.values()
               for st in p.topics.values())  # type: ignore[attr-defined]


def test_empty_cell_is_skipped_along_the_rule() -> None:
    net, cells = lattice(5, 5, skip=frozenset({(3, 1)}), variant="I")
    a = cells[(4, 1)][0]
    net.subscribe(a, "s", sub("temp gx=0 gy=0"))
    net.run(until=3.0)
    ev = net.publish(cells[(0, 0)][0], parse_event("temp gx=0 gy=0"))
    net.run(until=5.0)
    assert net.deliveries(ev) == [(a, "s")]


def test_rotation_hands_state_over_and_delivery_continues() -> None:
    """§4.5.6 / §4.8 item 9: low energy -> STATE_TRANSFER -> BROKER_UPDATE; no loss after."""
    net, cells = lattice(4, 4, variant="I", energy_source="external", beacon_s=1.0,
                              energy_check_s=1.0)
    a = cells[(3, 3)][0]
    net.subscribe(a, "s", sub("temp gx=0 gy=0"))
    net.run(until=3.0)
    mid = next(i for i in cells[(2, 2)] if "temp" in net.nodes[i].topics)  # type: ignore[attr-defined]
    old = net.nodes[mid].topics["temp"]  # type: ignore[attr-defined]
    old_entries = {k: (e.filter, e.upstream, set(e.downstream)) for k, e in old.entries.items()}
    for action in net.nodes[mid].handle(EnergyChanged(net.now, 0.1)):
        net._act(mid, action)
    net.run(until=6.0)
    assert "temp" not in net.nodes[mid].topics  # type: ignore[attr-defined]
    new = next(i for i in cells[(2, 2)] if "temp" in net.nodes[i].topics)  # type: ignore[attr-defined]
    assert new != mid
    st = net.nodes[new].topics["temp"]  # type: ignore[attr-defined]
    assert {k: (e.filter, e.upstream, set(e.downstream)) for k, e in st.entries.items()} \
        == old_entries
    assert [e for _, e in net.records("broker") if e.attrs.get("role") == "handed_over"]
    ev = net.publish(cells[(0, 0)][0], parse_event("temp gx=0 gy=0"))
    net.run(until=8.0)
    assert net.deliveries(ev) == [(a, "s")]


def test_conflicting_claims_settle_on_one_broker() -> None:
    net, cells = lattice(3, 3, variant="I", beacon_s=1.0)
    a = cells[(2, 2)][0]
    net.subscribe(a, "s", sub("temp gx=0 gy=0"))
    net.run(until=2.0)
    real = next(i for i in cells[(1, 1)] if "temp" in net.nodes[i].topics)  # type: ignore[attr-defined]
    rogue = next(i for i in cells[(1, 1)] if i != real)
    # A view that disagreed: the rogue node holds state for the topic too.
    net.nodes[rogue]._state("temp")  # type: ignore[attr-defined]
    net.run(until=6.0)
    holders = [i for i in cells[(1, 1)] if "temp" in net.nodes[i].topics]  # type: ignore[attr-defined]
    assert holders == [real]


@pytest.mark.parametrize("body", [None, [1, 2], ["x"] * 7, [0, 0, "temp", None, 0, [9], []]])
def test_malformed_frames_are_counted_drops(body: object) -> None:
    node = Hesper(1, params=HesperParams(beacon_s=0.0))
    node.handle(PositionChanged(0.0, Position(10.0, 10.0)))
    for mtype in (m.SUBSCRIBE, m.EVENT, m.BEACON, m.STATE_TRANSFER, 99):
        node.handle(FrameReceived(1.0, 2, Message(mtype, MessageId(2, 1, 1), body)))
    assert sum(node.drops.values()) >= 5


def test_subscription_without_region_or_with_wildcard_is_dropped() -> None:
    net, _cells = lattice(2, 2)
    net.subscribe(1, "a", sub("temp value>1"))
    net.subscribe(1, "b", sub("temp/+ gx=0 gy=0"))
    assert len(net.drops("no_region")) == 1 and len(net.drops("wildcard_topic")) == 1


def test_event_naming_another_region_is_dropped() -> None:
    net, cells = lattice(2, 2)
    net.publish(cells[(1, 1)][0], parse_event("temp gx=0 gy=0 value=1"))
    assert len(net.drops("region_mismatch")) == 1


def test_messages_round_trip() -> None:
    f = sub("temp gx=1 gy=2 value>3")
    cells_ = (m.Cell(1, 2), m.Cell(1, 1))
    for obj in (
        m.Subscribe("1/s", f, 7, None, "II", 2, cells_, 3, True),
        m.Reply("1/s", 9, m.Cell(0, 0), m.KIND_PHB, 2, 3, cells_, 1, 0),
        m.Confirm("1/s", cells_, m.Cell(0, 0), 2, f),
        m.EventMsg(parse_event("temp gx=0 gy=0 v=1"), m.Cell(0, 0), 4, 1.5, False),
        m.Unsubscribe("1/s", f, m.cell_target((3, 4))),
        m.BrokerUpdate(m.Cell(1, 1), 3, 4, (1.0, 2.0), 1),
        m.StateTransfer("temp", m.Cell(1, 1), (), 1),
        m.Beacon((1.0, 2.0), m.Cell(0, 0), 0.5, False, ("temp",)),
    ):
        assert type(obj).from_wire(obj.to_wire()) == obj  # type: ignore[attr-defined]


@pytest.mark.parametrize("reliable_events", [False, True])
def test_reliable_events_survive_a_lost_hop(reliable_events: bool) -> None:
    """The first transmission of each EVENT frame is lost: with per-hop ACKs the event
    is retransmitted and arrives once; without, every event is lost at its first hop."""
    net, cells = lattice(4, 1, reliable_events=reliable_events)
    subscriber = cells[(3, 0)][0]
    net.subscribe(subscriber, "s", sub("temp gx=0 gy=0 value>10"))
    net.run(until=5.0)
    seen: set[tuple[int, int, str]] = set()

    def first_event_copy_lost(src: int, dst: int, message: Message) -> bool:
        if message.type != m.EVENT:
            return False
        key = (src, dst, str(message.id))
        if key in seen:
            return False
        seen.add(key)
        return True

    net.loss = first_event_copy_lost
    ids = [net.publish(cells[(0, 0)][4], parse_event(f"temp gx=0 gy=0 value={v}"))
           for v in (20, 30)]
    net.run(until=15.0)
    got = Counter(str(d.event_id) for _, n, d in net.delivered if n == subscriber)
    if reliable_events:
        assert got == {str(i): 1 for i in ids}
        assert len(seen) >= 2 * 3  # every hop of both events lost once: at least 3 hops each
    else:
        assert got == {}


@pytest.mark.parametrize("reliable", [True, False])
def test_a_reply_slowed_by_retransmissions_is_still_confirmed(reliable: bool) -> None:
    """On a slow lossy mesh every REPLY hop may need a retransmission (the vmesh at 10 %
    loss); with per-hop ACKs the PENDING entries wait for it and the late reply is
    confirmed, instead of the subscription waiting a refresh period."""
    net, cells = lattice(5, 5, variant="II", reliable_control=reliable)
    net.delay = 0.1
    seen: set[tuple[int, int, int | None]] = set()

    def first_reply_copy_lost(src: int, dst: int, msg: Message) -> bool:
        if msg.type != m.REPLY:
            return False
        key = (src, dst, msg.reliable_id)
        lost = key not in seen
        seen.add(key)
        return lost and reliable  # without ACKs a lost REPLY is gone: lose none

    net.loss = first_reply_copy_lost
    subscriber = cells[(4, 4)][0]
    net.subscribe(subscriber, "far", sub("temp gx=0 gy=0 value>10"))
    net.run(until=20.0)
    event = net.publish(cells[(0, 0)][4], parse_event("temp gx=0 gy=0 value=20"))
    net.run(until=30.0)
    assert [(d.event_id, n) for _, n, d in net.delivered] == [(event, subscriber)]
    assert not net.drops("pending_expired") and not net.drops("reply_unknown_sub")
