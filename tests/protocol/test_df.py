"""The DF baseline: per-subscriber geographic paths, events down the gradients."""

from __future__ import annotations

import math
import random
from collections import Counter

import pytest
from harness import Net

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
from meshsub.core.params import parse_params
from meshsub.core.registry import get_protocol
from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.protocols.df import DF, EVENT, SUBSCRIBE, DFParams
from meshsub.wire.frame import HOP_MAX, TTL_MAX

TR = 70.0
SIDE = 300.0


def _explicit_net(pos: dict[int, tuple[float, float]], tr: float, **params: object) -> Net:
    p = parse_params(DFParams, {"TR": tr, **params})
    net = Net.of(DF, list(pos), params=p, delay=0.001)
    for i, (x, y) in pos.items():
        net.feed(i, PositionChanged(0.0, Position(x, y)))
    for a in pos:
        for b in pos:
            if a != b and math.dist(pos[a], pos[b]) <= tr:
                net.adjacency.setdefault(a, set()).add(b)
                net.feed(a, NeighborUp(0.0, NeighborInfo(b, Position(*pos[b]))))
    return net


def random_net(n: int = 150, seed: int = 1) -> tuple[Net, dict[int, tuple[float, float]]]:
    rng = random.Random(seed)
    s = TR / math.sqrt(2)
    pos = {1: (s / 2, s / 2)}  # the publisher at the centre of cell (0, 0)
    for i in range(2, n + 1):
        pos[i] = (rng.uniform(0, SIDE), rng.uniform(0, SIDE))
    return _explicit_net(pos, TR, area_width_m=SIDE, area_height_m=SIDE), pos


def test_registered_by_name_with_protocol_id_6() -> None:
    assert get_protocol("df") is DF and DF.protocol_id == 6


def test_every_subscriber_gets_every_matching_event_once() -> None:
    net, pos = random_net()
    subs = [n for n in pos if n % 9 == 0]
    for n in subs:
        net.subscribe(n, "s", parse_subscription("temp gx=0 gy=0 value>10"))
    net.subscribe(140, "cold", parse_subscription("temp gx=0 gy=0 value<5"))
    net.run(until=2.0)
    hot = net.publish(1, parse_event("temp gx=0 gy=0 value=20"))
    cold = net.publish(1, parse_event("temp gx=0 gy=0 value=1"))
    net.run(until=4.0)
    got = Counter((d.event_id, n, d.sub_id) for _, n, d in net.delivered)
    assert set(got) == {(hot, n, "s") for n in subs} | {(cold, 140, "cold")}
    assert max(got.values()) == 1


def test_each_subscription_travels_its_own_full_path() -> None:
    """No stop at a covering entry: two identical subscriptions cost two full paths."""
    net, _ = random_net()
    a, b = 90, 91
    net.subscribe(a, "s", parse_subscription("temp gx=0 gy=0"))
    net.run(until=1.0)
    first = sum(1 for tx in net.txs if tx.message.type == SUBSCRIBE)
    net.subscribe(b, "s", parse_subscription("temp gx=0 gy=0"))
    net.run(until=2.0)
    second = sum(1 for tx in net.txs if tx.message.type == SUBSCRIBE) - first
    assert first >= 1 and second >= 1
    # The node at the region's centre (the publisher) holds both roots.
    assert len(net.nodes[1].gradients) == 2  # type: ignore[attr-defined]


def test_unsubscribe_removes_the_gradients() -> None:
    net, _ = random_net()
    net.subscribe(77, "s", parse_subscription("temp gx=0 gy=0"))
    net.run(until=1.0)
    net.unsubscribe(77, "s")
    net.run(until=2.0)
    assert all(not p.gradients for p in net.nodes.values())  # type: ignore[attr-defined]
    ev = net.publish(1, parse_event("temp gx=0 gy=0"))
    net.run(until=3.0)
    assert net.deliveries(ev) == []


@pytest.mark.parametrize("body", [None, [1], ["a", ["temp"], [7]], [["t"], [0], 1.0, 5, [0]]])
def test_malformed_frames_are_counted_drops(body: object) -> None:
    node = DF(1)
    node.handle(PositionChanged(0.0, Position(10.0, 10.0)))
    for mtype in (16, 17, 18, 40):
        node.handle(FrameReceived(1.0, 2, Message(mtype, MessageId(2, 1, 1), body)))
    assert node.drops["malformed"] + node.drops["unknown_type"] == 4


def test_subscription_without_region_is_dropped() -> None:
    net, _ = random_net(20)
    net.subscribe(5, "s", parse_subscription("temp value>1"))
    assert len(net.drops("no_region")) == 1


def test_a_subscription_leaving_a_dead_end_leaves_no_loop_behind() -> None:
    """GPSR leads the subscription from S into the dead end E and back (perimeter mode),
    then round to the region: S -> E -> S -> B -> C -> D -> A. S adds no downstream for
    the way back and unsubscribes E, so events take 4 hops, not 6 (S -> E -> S), and no
    gradient outlives an unsubscription."""
    s, e, b, c, d, a = 1, 2, 3, 4, 5, 6
    pos = {s: (200.0, 0.0), e: (170.0, 80.0), b: (100.0, 0.0), c: (0.0, 0.0),
           d: (0.0, 80.0), a: (20.0, 170.0)}
    net = _explicit_net(pos, 100.0, area_width_m=300.0, area_height_m=220.0)
    net.subscribe(s, "s", parse_subscription("temp gx=0 gy=2"))
    net.run(until=1.0)
    path = [tx.src for tx in net.txs if tx.message.type == SUBSCRIBE]
    assert path == [s, e, s, b, c, d]
    ev = net.publish(a, parse_event("temp gx=0 gy=2 value=1"))
    net.run(until=2.0)
    assert net.deliveries(ev) == [(s, "s")]
    assert sum(1 for tx in net.txs if tx.message.type == EVENT and tx.time >= 1.0) == 4
    net.unsubscribe(s, "s")
    net.run(until=3.0)
    assert all(not p.gradients for p in net.nodes.values())  # type: ignore[attr-defined]


def test_the_hop_budget_is_end_to_end_and_never_overflows_the_wire() -> None:
    node = DF(1, params=DFParams(TR=70.0, area_width_m=300.0, area_height_m=300.0))
    node.handle(PositionChanged(0.0, Position(10.0, 10.0)))
    node.handle(NeighborUp(0.0, NeighborInfo(2, Position(60.0, 60.0))))
    sub = parse_subscription("temp gx=2 gy=2")
    budget = node.params.max_hops
    for hop, forwarded in ((budget - 1, False), (budget, False), (HOP_MAX, False),
                           (100, True)):
        body = [f"x/{hop}", sub.to_wire(), [0]]
        out = node.handle(FrameReceived(1.0, 3, Message(SUBSCRIBE, MessageId(3, 0, hop), body,
                                                        hop=hop, ttl=TTL_MAX)))
        sent = [a for a in out if isinstance(a, SendTo)]
        assert bool(sent) == forwarded
        for action in sent:
            assert action.message.hop + action.message.ttl <= budget
    assert node.drops["ttl_expired"] == 3
