"""HESPER's and DF's tables fed by the network are bounded in entries and bytes, with
counted drops.

A broker alone in its cell (so the broker of every topic there, and the PHB of every
subscription naming that cell) is fed SUBSCRIBEs and BROKER_UPDATEs from a neighbour:
whatever it is sent, its routing table and its remembered brokers stay within
``max_routing_entries``/``max_routing_bytes`` and ``max_hints``/``max_hint_bytes``,
and every subscription or hint it does not keep is a drop record. A DF node's
gradients likewise stay within ``max_gradients``/``max_gradient_bytes``, its running
count always the exact one, and an unsubscription makes room again.
"""

from __future__ import annotations

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsub.core.api import (
    FrameReceived,
    Message,
    MessageId,
    NeighborInfo,
    NeighborUp,
    Position,
    PositionChanged,
)
from meshsub.core.georouting import GeoHeader
from meshsub.core.syntax import parse_subscription
from meshsub.protocols.df import DF, DOWNSTREAM_BYTES, SUBSCRIBE, UNSUBSCRIBE, DFParams
from meshsub.protocols.hesper import Hesper, HesperParams
from meshsub.protocols.hesper import messages as m

NEIGHBOUR = 2
topics = st.sampled_from(["temp", "hum", "a/b", "x" * 200])
subscriptions = st.lists(
    st.tuples(topics, st.text("abcdef0123", min_size=1, max_size=40), st.integers(0, 9),
              st.integers(1, 12)),
    min_size=1, max_size=60)


def _broker(**params: object) -> Hesper:
    p = HesperParams(beacon_s=0.0, reliable_control=False, TR=100.0, area_width_m=500.0,
                     area_height_m=500.0, **params)  # type: ignore[arg-type]
    node = Hesper(1, params=p)
    node.handle(PositionChanged(0.0, Position(30.0, 30.0)))
    return node


def _frame(node: Hesper, mtype: int, topic: str, payload: list[object], seq: int) -> None:
    assert node.cell is not None
    env = m.Envelope(node.cell, topic, None, 0, GeoHeader(), payload)
    msg = Message(mtype, MessageId(NEIGHBOUR, 1, seq), env.to_wire(), hop=1, ttl=200)
    node.handle(FrameReceived(1.0 + seq * 1e-3, NEIGHBOUR, msg))


@settings(max_examples=60, deadline=None)
@given(subscriptions)
def test_routing_table_stays_within_its_bounds(subs: list[tuple[str, str, int, int]]) -> None:
    node = _broker(max_routing_entries=40, max_routing_bytes=3000)
    assert node.cell is not None
    for seq, (topic, sub_id, value, width) in enumerate(subs):
        preds = " ".join(f"v{i}>{value}" for i in range(width))
        flt = parse_subscription(f"{topic} gx={node.cell[0]} gy={node.cell[1]} {preds}")
        s = m.Subscribe(f"9/{seq}-{sub_id}", flt, 9, 9, "I", 1, (m.Cell(node.cell[0] + 1,
                                                                   node.cell[1]),), seq, False)
        _frame(node, m.SUBSCRIBE, topic, s.to_wire(), seq)
        entries, nbytes = node.state_sizes()["routing"]
        assert entries <= 40 and nbytes <= 3000
    kept = sum(len(e.downstream) for t in node.topics.values() for e in t.entries.values())
    assert kept + node.drops.get("routing_full", 0) == len(subs)


def test_a_full_routing_table_refuses_with_a_counted_drop() -> None:
    node = _broker(max_routing_entries=10, max_routing_bytes=1_000_000)
    assert node.cell is not None
    for seq in range(20):
        flt = parse_subscription(f"temp gx={node.cell[0]} gy={node.cell[1]} v={seq}")
        s = m.Subscribe(f"9/s{seq}", flt, 9, 9, "I", 1, (m.Cell(node.cell[0] + 1,
                                                                 node.cell[1]),), 0, False)
        _frame(node, m.SUBSCRIBE, "temp", s.to_wire(), seq)
    # The topic, then an entry and its downstream pointer per subscription (none of
    # the filters covers another).
    assert node.state_sizes()["routing"][0] <= 10
    assert len(node.topics["temp"].entries) == 4
    assert node.drops["routing_full"] == 16


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.text("abc/", min_size=1, max_size=120), st.integers(0, 3)),
                min_size=1, max_size=80))
def test_remembered_brokers_stay_within_their_bounds(updates: list[tuple[str, int]]) -> None:
    node = _broker(max_hints=8, max_hint_bytes=600)
    assert node.cell is not None
    fresh = 0
    for seq, (topic, dx) in enumerate(updates):
        cell = m.Cell(node.cell[0] + dx, node.cell[1])
        fresh += (cell, topic) not in node._hints
        update = m.BrokerUpdate(cell, 5, 6 + dx, (1.0, 2.0), seq)
        _frame(node, m.BROKER_UPDATE, topic, update.to_wire(), seq)
        entries, nbytes = node.state_sizes()["broker_hints"]
        assert entries <= 8 and nbytes <= 600
        assert nbytes == sum(len(t.encode()) + 32 for _c, t in node._hints)
    assert node.drops.get("hint_evicted", 0) == fresh - len(node._hints)


def test_beacons_of_new_neighbours_past_the_bound_are_counted_drops() -> None:
    node = Hesper(1, params=HesperParams(beacon_s=2.0, member_timeout_s=6.0, max_beacons=4))
    node.handle(PositionChanged(0.0, Position(10.0, 10.0)))
    claims = tuple(f"topic/{i}" for i in range(50))

    def beacon(t: float, sender: int) -> None:
        b = m.Beacon((12.0, 12.0), node.cell or m.Cell(0, 0), 0.5, False, claims)
        node.handle(FrameReceived(t, sender, Message(m.BEACON, MessageId(sender, 0, int(t)),
                                                     b.to_wire())))

    for sender in range(2, 12):
        beacon(1.0, sender)
    assert len(node._beacons) == 4 and node.drops["beacons_full"] == 6
    assert all(b.claims == () for b, _t in node._beacons.values())
    assert len(node._npos) == 4
    beacon(10.0, 20)  # the first four are silent for longer than member_timeout_s
    assert set(node._beacons) == {20} and set(node._npos) == {20}


def _df_node(**params: object) -> DF:
    node = DF(1, params=DFParams(TR=70.0, area_width_m=300.0, area_height_m=300.0,
                                 **params))  # type: ignore[arg-type]
    node.handle(PositionChanged(0.0, Position(10.0, 10.0)))
    node.handle(NeighborUp(0.0, NeighborInfo(9, Position(60.0, 60.0))))
    return node


def _df_exact(node: DF) -> tuple[int, int]:
    entries = nbytes = 0
    for sid, grad in node.gradients.items():
        entries += 1 + len(grad.downstream)
        nbytes += len(sid.encode()) + len(msgpack.packb(grad.filter.to_wire()))
        nbytes += DOWNSTREAM_BYTES * len(grad.downstream)
    return entries, nbytes


df_ops = st.lists(st.tuples(st.booleans(), st.integers(0, 15), st.integers(2, 5),
                            st.integers(1, 12)), min_size=1, max_size=80)


@settings(max_examples=60, deadline=None)
@given(df_ops)
def test_df_gradients_stay_within_their_bounds(ops: list[tuple[bool, int, int, int]]) -> None:
    node = _df_node(max_gradients=12, max_gradient_bytes=900)
    for seq, (subscribe, sid, sender, width) in enumerate(ops):
        preds = " ".join(f"v{i}>{sid}" for i in range(width))
        flt = parse_subscription(f"temp gx=2 gy=2 {preds}")
        body: list[object] = [f"x/{sid}", flt.to_wire(), [0]] if subscribe else [f"x/{sid}"]
        node.handle(FrameReceived(1.0 + seq, sender, Message(
            SUBSCRIBE if subscribe else UNSUBSCRIBE, MessageId(sender, 0, seq), body)))
        assert node.state_sizes()["gradients"] == _df_exact(node)
        entries, nbytes = _df_exact(node)
        assert entries <= 12 and nbytes <= 900


def test_df_refuses_a_subscription_past_the_bound_and_makes_room_on_unsubscribe() -> None:
    node = _df_node(max_gradients=6, max_gradient_bytes=1_000_000)
    flt = parse_subscription("temp gx=2 gy=2").to_wire()
    for seq in range(5):
        node.handle(FrameReceived(1.0, 3, Message(SUBSCRIBE, MessageId(3, 0, seq),
                                                  [f"x/{seq}", flt, [0]])))
    # A gradient and its downstream neighbour each: three fit in six.
    assert sorted(node.gradients) == ["x/0", "x/1", "x/2"]
    assert node.drops["gradients_full"] == 2
    node.handle(FrameReceived(2.0, 3, Message(UNSUBSCRIBE, MessageId(3, 0, 9), ["x/0"])))
    node.handle(FrameReceived(3.0, 3, Message(SUBSCRIBE, MessageId(3, 0, 10),
                                              ["x/4", flt, [0]])))
    assert sorted(node.gradients) == ["x/1", "x/2", "x/4"]
