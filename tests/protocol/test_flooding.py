"""Flooding over the in-test harness: exact, once-only delivery within the TTL."""

from __future__ import annotations

from collections import Counter

import pytest
from harness import Net

from meshsub.core.api import (
    Deliver,
    FrameReceived,
    LocalSubscribe,
    Message,
    MessageId,
    MsgKind,
    SetTimer,
)
from meshsub.core.params import ParameterError, parse_params
from meshsub.core.registry import get_protocol
from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.protocols.flooding import DATA, Flooding, FloodingParams, decode_body


def flooding_net(n: int, **params: object) -> Net:
    return Net.of(Flooding, range(1, n + 1), params=parse_params(FloodingParams, params))


def test_registered_by_name() -> None:
    assert get_protocol("flooding") is Flooding
    assert Flooding.protocol_id == 1
    assert Flooding(1).kind_of(DATA) is MsgKind.DATA


def test_line_delivers_once_to_every_matching_subscriber_and_never_to_others() -> None:
    net = flooding_net(6)
    net.line([1, 2, 3, 4, 5, 6])
    hot = parse_subscription("sensors/temp value>=20")
    cold = parse_subscription("sensors/temp value<20")
    other = parse_subscription("sensors/humidity value>=0")
    for node in (2, 4, 6):
        net.subscribe(node, "hot", hot)
    net.subscribe(3, "cold", cold)
    net.subscribe(5, "other", other)
    net.subscribe(1, "own", hot)

    eid = net.publish(1, parse_event("sensors/temp value=25"))
    net.run()

    assert sorted(net.deliveries(eid)) == [(1, "own"), (2, "hot"), (4, "hot"), (6, "hot")]
    hops = {n: d.hop for _, n, d in net.delivered}
    assert hops == {1: 0, 2: 1, 4: 3, 6: 5}
    # every node transmits the message exactly once
    senders = Counter(tx.src for tx in net.txs if tx.message.type == DATA)
    assert senders == Counter({n: 1 for n in range(1, 7)})


def test_grid_with_many_events_is_exact() -> None:
    net = flooding_net(25, jitter=0.005)
    rows = net.grid(5, 5)
    subs = {
        "a": parse_subscription("t/x level>=5"),
        "b": parse_subscription("t/x level<3"),
        "c": parse_subscription("t/y level>=0"),
    }
    plan = {}
    for i, node in enumerate(n for row in rows for n in row):
        name = "abc"[i % 3]
        net.subscribe(node, name, subs[name])
        plan[node] = name
    events = [parse_event(f"t/x level={v}") for v in range(8)] + [parse_event("t/y level=1")]
    ids = []
    for i, event in enumerate(events):
        net.run(until=i * 1.0)
        ids.append((net.publish(1 + (7 * i) % 25, event), event))
    net.run()
    for eid, event in ids:
        expected = sorted((n, s) for n, s in plan.items() if subs[s].matches(event))
        assert sorted(net.deliveries(eid)) == expected
    assert net.nodes[13].drops["duplicate"] > 0  # duplicates are counted ...
    recorded: Counter[int] = Counter()  # ... and recorded: summaries adding up to it
    for n, e in net.drops("duplicate"):
        recorded[n] += int(e.attrs["count"])  # type: ignore[arg-type]
    assert all(recorded[n] == net.nodes[n].drops["duplicate"] for n in net.nodes)


@pytest.mark.parametrize("ttl", [1, 2, 4])
def test_ttl_limits_reach(ttl: int) -> None:
    net = flooding_net(8, ttl=ttl, jitter=0.0)
    net.line(list(range(1, 9)))
    for node in range(1, 9):
        net.subscribe(node, "s", parse_subscription("a b=1"))
    eid = net.publish(1, parse_event("a b=1"))
    net.run()
    assert sorted(n for n, _ in net.deliveries(eid)) == list(range(1, ttl + 2))
    # the last node reached cannot relay: a counted drop with a record
    assert [n for n, _ in net.drops("ttl_expired")] == [ttl + 1]


def test_jitter_delays_rebroadcast_with_timers() -> None:
    net = flooding_net(3, jitter=0.5)
    net.line([1, 2, 3])
    net.subscribe(3, "s", parse_subscription("a"))
    eid = net.publish(1, parse_event("a b=1"))
    net.run()
    relay = [tx for tx in net.txs if tx.src == 2]
    assert len(relay) == 1 and 0.0 <= relay[0].time <= 0.5
    assert net.deliveries(eid) == [(3, "s")]
    assert net.nodes[2].status()["waiting_rebroadcasts"] == 0


def test_malformed_and_unknown_frames_are_counted_drops() -> None:
    proto = Flooding(9)
    mid = MessageId(1, 0, 1)
    for body in (None, [1], ["x", 0.0], [["t", []], "late"], [["t", []], float("nan")]):
        proto.handle(FrameReceived(0.0, 1, Message(DATA, mid, body)))
        mid = MessageId(1, 0, mid.seq + 1)
    proto.handle(FrameReceived(0.0, 1, Message(DATA + 5, mid, None)))
    assert proto.drops["malformed"] == 5
    assert proto.drops["unknown_type"] == 1
    # a malformed copy does not shadow a good copy of the same message
    good = Message(DATA, MessageId(1, 0, 1), [parse_event("t a=1").to_wire(), 0.0])
    actions = proto.handle(FrameReceived(0.0, 1, good))
    assert any(isinstance(a, SetTimer) for a in actions) and proto.drops["duplicate"] == 0


def test_body_survives_msgpack_and_reaches_the_subscriber() -> None:
    import msgpack

    event = parse_event("x/y v=3")
    body = msgpack.unpackb(msgpack.packb([event.to_wire(), 4.5]))
    assert decode_body(body) == (event, 4.5)
    proto = Flooding(1)
    proto.handle(LocalSubscribe(0.0, "s", parse_subscription("x/y v=3")))
    actions = proto.handle(FrameReceived(9.0, 2, Message(DATA, MessageId(2, 0, 1), body, hop=2)))
    (deliver,) = [a for a in actions if isinstance(a, Deliver)]
    assert (deliver.event, deliver.hop, deliver.published_at) == (event, 3, 4.5)


@pytest.mark.parametrize(("values", "key"), [({"ttl": 0}, "ttl"), ({"ttl": 300}, "ttl"),
                                             ({"jitter": -1}, "jitter"),
                                             ({"jitter": "x"}, "jitter")])
def test_bad_params(values: dict[str, object], key: str) -> None:
    with pytest.raises(ParameterError) as err:
        parse_params(FloodingParams, values)
    assert err.value.key == key


def test_deterministic_for_a_seed() -> None:
    def run() -> list[tuple[float, int, int | None]]:
        net = Net.of(Flooding, range(1, 10), params=FloodingParams(jitter=0.05), seed=7)
        net.grid(3, 3)
        net.publish(5, parse_event("a b=1"))
        net.run()
        return [(tx.time, tx.src, tx.dst) for tx in net.txs]

    assert run() == run()
