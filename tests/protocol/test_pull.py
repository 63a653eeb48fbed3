"""PULL over the in-test harness: one hop from producers, exact interests, no relays."""

from __future__ import annotations

from typing import Any

import pytest
from harness import Net

from meshsub.core.api import FrameReceived, Message, MessageId, MsgKind, NeighborInfo, NeighborUp
from meshsub.core.params import ParameterError, parse_params
from meshsub.core.registry import get_protocol
from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.protocols.pull import DATA, INTEREST, Pull, PullParams

SUB = parse_subscription("news level>=2")


def pull_net(ids: list[int], delay: float = 0.01, **values: Any) -> Net:
    return Net.of(Pull, ids, params=parse_params(PullParams, values), delay=delay)


def meet(net: Net, a: int, b: int, duration: float = 5.0) -> None:
    net.link(a, b)
    net.run(until=net.now + duration)
    net.unlink(a, b)


def data_txs(net: Net) -> list[Any]:
    return [tx for tx in net.txs if tx.message.type == DATA]


def test_registered() -> None:
    assert get_protocol("pull") is Pull
    p = Pull(1)
    assert p.protocol_id == 5
    assert p.kind_of(DATA) is MsgKind.DATA and p.kind_of(INTEREST) is MsgKind.SUBSCRIPTION
    with pytest.raises(ParameterError):
        parse_params(PullParams, {"TTL": -1})


def test_one_hop_only_and_exact_matching() -> None:
    net = pull_net([1, 2, 3])
    net.subscribe(2, "s", SUB)
    net.subscribe(3, "s", SUB)
    hit = net.publish(1, parse_event("news level=3"))
    miss = net.publish(1, parse_event("news level=1"))
    meet(net, 1, 2)
    assert net.deliveries(hit) == [(2, "s")] and net.deliveries(miss) == []
    meet(net, 2, 3)  # 2 is not the producer: it relays nothing
    assert net.deliveries(hit) == [(2, "s")]
    meet(net, 1, 3)
    assert sorted(net.deliveries(hit)) == [(2, "s"), (3, "s")]
    assert len(data_txs(net)) == 2  # one transmission per delivery: nothing wasted
    meet(net, 1, 3)  # never sent twice to the same node
    assert len(data_txs(net)) == 2


def test_contact_cut_then_delivered_later_once() -> None:
    net = pull_net([1, 2], delay=0.05)
    net.subscribe(2, "s", SUB)
    mid = net.publish(1, parse_event("news level=5"))
    net.link(1, 2)
    for _ in range(100):
        if data_txs(net):
            break
        net.run(until=net.now + 0.01)
    net.unlink(1, 2)  # the DATA is still in flight: lost with the contact
    net.run(until=net.now + 5)
    assert net.deliveries(mid) == []
    meet(net, 1, 2)
    assert net.deliveries(mid) == [(2, "s")]


def test_published_during_a_contact_goes_at_once_and_ttl_holds() -> None:
    net = pull_net([1, 2], TTL=50.0)
    net.subscribe(2, "s", SUB)
    net.link(1, 2)
    net.run(until=1.0)
    mid = net.publish(1, parse_event("news level=2"))
    net.run(until=2.0)
    assert net.deliveries(mid) == [(2, "s")]
    net.unlink(1, 2)
    old = net.publish(1, parse_event("news level=9"))
    net.run(until=100.0)
    meet(net, 1, 2)
    assert net.deliveries(old) == []


def test_malformed_frames_are_counted() -> None:
    p = Pull(1)
    for mtype, body in ((INTEREST, "x"), (INTEREST, [["+bad+"]]), (DATA, [1]), (77, None)):
        p.handle(FrameReceived(0.0, 2, Message(mtype, MessageId(2, 1, 1), body)))
    assert p.drops["malformed"] == 3 and p.drops["unknown_type"] == 1


def test_a_producer_that_sees_the_link_last_still_sends_what_the_consumer_wants() -> None:
    """The early-frame ordering that cost B-SUB a delivery in the virtual mesh: the
    consumer detects the link first, so its INTEREST reaches the producer before the
    producer's own NeighborUp. The offer is queued then (the peer is not yet a
    neighbour, so nothing is sent); the NeighborUp must send it, since no ACK will."""
    net = pull_net([1, 2])
    net.subscribe(2, "s", SUB)
    mid = net.publish(1, parse_event("news level=3"))
    net.link(1, 2, announce=[2])  # only the consumer sees the link at first
    net.run(until=net.now + 1.0)  # its INTEREST arrives and is acknowledged
    assert net.deliveries(mid) == []
    net.feed(1, NeighborUp(net.now, NeighborInfo(2)))  # ...and now the producer too
    net.run(until=net.now + 1.0)
    assert net.deliveries(mid) == [(2, "s")]
