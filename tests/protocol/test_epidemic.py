"""Epidemic routing over the in-test harness: contacts, partitions, loss, limits."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from harness import Net

from meshsub.core.api import (
    FrameReceived,
    LocalPublish,
    Message,
    MessageId,
    MsgKind,
    NeighborInfo,
    NeighborUp,
)
from meshsub.core.buffer import DropPolicy, MemoryStore
from meshsub.core.params import ParameterError, parse_params
from meshsub.core.registry import get_protocol
from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.protocols.epidemic import DATA, REQUEST, VECTOR, Epidemic, EpidemicParams

SUB = parse_subscription("news/local level>=1")


def event(n: int = 1) -> Any:
    return parse_event(f"news/local level={n}")


def epidemic_net(ids: range | list[int], delay: float = 0.0, **params: Any) -> Net:
    return Net.of(Epidemic, ids, params=parse_params(EpidemicParams, params), delay=delay)


def data_txs(net: Net, src: int | None = None, dst: int | None = None) -> list[Any]:
    return [tx for tx in net.txs if tx.message.type == DATA
            and (src is None or tx.src == src) and (dst is None or tx.dst == dst)]


def test_registered_and_kinds() -> None:
    assert get_protocol("epidemic") is Epidemic
    proto = Epidemic(1)
    assert proto.protocol_id == 2
    assert proto.kind_of(DATA) is MsgKind.DATA
    assert proto.kind_of(VECTOR) is MsgKind.CONTROL
    assert proto.kind_of(REQUEST) is MsgKind.CONTROL


def test_partitions_joined_by_a_later_contact() -> None:
    net = epidemic_net(range(1, 7), delay=0.01)
    net.line([1, 2, 3])
    net.line([4, 5, 6])
    net.subscribe(6, "s", SUB)
    net.subscribe(2, "s", SUB)
    eid = net.publish(1, event())
    net.run(until=50.0)
    assert net.deliveries(eid) == [(2, "s")]
    assert all(eid in net.nodes[n].buffer for n in (1, 2, 3))
    assert not any(eid in net.nodes[n].buffer for n in (4, 5, 6))

    net.link(3, 4)  # the contact at t = 50
    net.run(until=100.0)
    assert sorted(net.deliveries(eid)) == [(2, "s"), (6, "s")]
    (when,) = [t for t, n, d in net.delivered if n == 6]
    assert when >= 50.0
    assert all(eid in net.nodes[n].buffer for n in range(1, 7))
    # every node received the message exactly once
    receivers = Counter(tx.dst for tx in data_txs(net))
    assert receivers == Counter({n: 1 for n in range(2, 7)})


def test_exchange_does_not_transfer_twice_within_a_pair() -> None:
    net = epidemic_net([1, 2], delay=0.01)
    net.subscribe(1, "s", SUB)
    net.subscribe(2, "s", SUB)
    a = net.publish(1, event(1))
    b = net.publish(2, event(2))
    net.link(1, 2)
    net.run(until=10.0)
    assert sorted(net.deliveries(a)) == [(1, "s"), (2, "s")]
    assert sorted(net.deliveries(b)) == [(1, "s"), (2, "s")]
    assert [(tx.src, tx.dst, tx.message.id) for tx in data_txs(net)] in (
        [(1, 2, a), (2, 1, b)], [(2, 1, b), (1, 2, a)])
    # a second contact transfers nothing: both already hold both
    net.unlink(1, 2)
    net.link(1, 2)
    net.run(until=20.0)
    assert len(data_txs(net)) == 2


def test_new_messages_are_pushed_to_connected_neighbours() -> None:
    net = epidemic_net([1, 2, 3], delay=0.01)
    net.line([1, 2, 3])
    net.subscribe(3, "s", SUB)
    net.run(until=1.0)
    eid = net.publish(1, event())
    net.run(until=5.0)
    assert net.deliveries(eid) == [(3, "s")]
    assert [(tx.src, tx.dst) for tx in data_txs(net)] == [(1, 2), (2, 3)]


def test_data_push_mode_sends_the_message_itself() -> None:
    net = epidemic_net([1, 2, 3], delay=0.01, push_offer=False)
    net.line([1, 2, 3])
    net.subscribe(3, "s", SUB)
    net.run(until=1.0)
    eid = net.publish(1, event())
    net.run(until=5.0)
    assert net.deliveries(eid) == [(3, "s")]
    assert [(tx.src, tx.dst) for tx in data_txs(net)] == [(1, 2), (2, 3)]
    assert not [tx for tx in net.txs if tx.message.type in (VECTOR, REQUEST) and tx.time >= 1.0]


def test_a_message_offered_by_two_neighbours_is_fetched_once() -> None:
    net = epidemic_net([1, 2, 3], delay=0.01)
    eid = net.publish(1, event())
    net.link(1, 2)
    net.run(until=5.0)
    assert eid in net.nodes[2].buffer
    net.link(3, 1)
    net.link(3, 2)
    net.run(until=10.0)
    assert [(tx.src, tx.dst) for tx in data_txs(net, dst=3)] == [(1, 3)]
    assert net.nodes[3].drops["duplicate"] == 0


def test_a_request_that_goes_unanswered_is_sent_to_another_neighbour() -> None:
    def loss(src: int, dst: int, message: Message) -> bool:
        return src == 1 and dst == 3 and message.type == DATA  # 1 cannot reach 3 with data

    net = Net.of(Epidemic, [1, 2, 3], delay=0.01, loss=loss,
                 params=EpidemicParams(request_timeout=5.0))
    net.subscribe(3, "s", SUB)
    eid = net.publish(1, event())
    net.link(1, 2)
    net.run(until=2.0)
    net.link(3, 1)  # 1's vector reaches 3 first: 3 asks 1
    net.link(3, 2)  # 2's offer of the same id is not requested at once
    net.run(until=6.0)
    assert net.deliveries(eid) == []
    assert not data_txs(net, src=2, dst=3)
    net.run(until=20.0)  # after request_timeout, 3 asks 2
    assert net.deliveries(eid) == [(3, "s")]
    assert [tx.src for tx in data_txs(net, dst=3)][-1] == 2
    assert not net.nodes[3]._requested


def test_contact_ending_mid_exchange_loses_nothing() -> None:
    net = epidemic_net([1, 2], delay=0.05, window=2)
    net.subscribe(2, "s", SUB)
    ids = [net.publish(1, event(i + 1)) for i in range(10)]
    net.link(1, 2)
    net.run(until=0.22)  # vector, request, then only a couple of DATA windows
    net.unlink(1, 2)
    got_first = {d.event_id for _, n, d in net.delivered if n == 2}
    assert 0 < len(got_first) < 10
    assert net.drops("neighbor_down")  # pending reliable sends given up, counted
    net.run(until=30.0)
    net.link(1, 2)
    net.run(until=60.0)
    assert sorted(net.deliveries()) == [(2, "s")] * 10
    assert {d.event_id for _, _, d in net.delivered} == set(ids)
    # what arrived during the first contact was not sent again
    second = [tx.message.id for tx in data_txs(net) if tx.time >= 30.0]
    assert not set(second) & got_first


def test_lost_frames_are_retransmitted_and_lost_acks_do_not_duplicate() -> None:
    dropped: list[tuple[int, int]] = []

    def loss(src: int, dst: int, message: Message) -> bool:
        key = (message.type, src)
        if key in ((DATA, 1), (1, 2)) and key not in dropped:  # first DATA, first ACK of 2
            dropped.append(key)
            return True
        return False

    net = Net.of(Epidemic, [1, 2], delay=0.01, loss=loss)
    net.subscribe(2, "s", SUB)
    eid = net.publish(1, event())
    net.link(1, 2)
    net.run(until=20.0)
    assert net.deliveries(eid) == [(2, "s")]
    assert len(dropped) == 2
    assert net.nodes[1].reliable.stats["retransmitted"] >= 1
    assert not net.nodes[1].reliable.pending and not net.nodes[2].reliable.pending


def test_hop_limit() -> None:
    net = epidemic_net([1, 2, 3, 4], max_hops=2)
    net.line([1, 2, 3, 4])
    for n in (2, 3, 4):
        net.subscribe(n, "s", SUB)
    eid = net.publish(1, event())
    net.run(until=10.0)
    assert sorted(n for n, _ in net.deliveries(eid)) == [2, 3]
    assert [n for n, _ in net.drops("ttl_expired")] == [3]
    assert eid not in net.nodes[3].buffer


def test_buffer_overflow_is_a_counted_drop() -> None:
    net = epidemic_net([1, 2], buffer_size=3)
    ids = [net.publish(1, event(i + 1)) for i in range(5)]
    full = net.drops("buffer_full")
    assert [e.attrs["event_id"] for _, e in full] == [str(ids[0]), str(ids[1])]
    assert net.nodes[1].drops["buffer_full"] == 2
    assert [m.id for m in net.nodes[1].buffer] == ids[2:]


def test_drop_expiring_policy_prefers_the_short_lived_message() -> None:
    proto = Epidemic(1, params=EpidemicParams(buffer_size=2,
                                              drop_policy=DropPolicy.DROP_EXPIRING))
    long_lived = Message(DATA, MessageId(7, 0, 1), [event().to_wire(), 0.0, 100.0], ttl=5)
    short_lived = Message(DATA, MessageId(7, 0, 2), [event().to_wire(), 0.0, 10.0], ttl=5)
    newest = Message(DATA, MessageId(7, 0, 3), [event().to_wire(), 0.0, 50.0], ttl=5)
    for m in (long_lived, short_lived, newest):
        proto.handle(FrameReceived(1.0, 7, m))
    assert {m.id for m in proto.buffer} == {long_lived.id, newest.id}
    assert proto.drops["buffer_full"] == 1


def test_an_insider_flood_cannot_erase_unshared_own_events() -> None:
    """Issue 25 item 2: 1,500 unique ~60 KB events that never expire, from a node with
    the key, after three local events nobody else holds: those three stay, the store
    stays within its byte cap, and the junk lives at most ``ttl_s``."""
    proto = Epidemic(1, params=EpidemicParams())
    for n in range(3):
        proto.handle(LocalPublish(0.0, event(n + 1), proto.new_message_id()))
    own = set(proto.buffer.summary_vector())
    pad = parse_event("junk " + " ".join(f"p{i}={'x' * 1000!r}" for i in range(58))).to_wire()
    for seq in range(1500):
        body = [[f"junk/{seq}", *pad[1:]], 0.0, 1e12]
        proto.handle(FrameReceived(1.0 + seq / 100, 66, Message(DATA, MessageId(66 + seq % 50,
                                                                         1, seq), body, ttl=5)))
    assert own <= proto.buffer.summary_vector()
    assert proto.buffer.bytes <= proto.buffer.max_bytes
    assert max(e.expires_at - e.stored_at for e in proto.buffer.entries()) <= 3600.0
    assert proto.drops["buffer_full"] + proto.drops["buffer_refused"] > 0


def test_expiry_is_a_counted_drop_and_stops_spreading() -> None:
    net = epidemic_net([1, 2], ttl_s=10.0)
    net.subscribe(2, "s", SUB)
    eid = net.publish(1, event())
    net.run(until=11.0)
    assert [e.attrs["event_id"] for _, e in net.drops("expired")] == [str(eid)]
    assert len(net.nodes[1].buffer) == 0
    net.link(1, 2)
    net.run(until=20.0)
    assert net.deliveries(eid) == []


def test_remaining_lifetime_travels_with_the_copy() -> None:
    net = epidemic_net([1, 2, 3], ttl_s=10.0)
    eid = net.publish(1, event())
    net.run(until=4.0)
    net.link(1, 2)
    net.run(until=5.0)
    entry = net.nodes[2].buffer.entry(eid)
    assert entry is not None and entry.expires_at == pytest.approx(10.0)
    net.run(until=12.0)
    net.link(2, 3)
    net.run(until=13.0)
    assert eid not in net.nodes[3].dedup


def test_summary_vectors_are_chunked() -> None:
    net = epidemic_net([1, 2], vector_chunk=4)
    for i in range(10):
        net.publish(1, event(i + 1))
    net.link(1, 2)
    net.run(until=10.0)
    vectors = [tx.message.body for tx in net.txs if tx.message.type == VECTOR and tx.src == 1]
    assert [len(v) for v in vectors] == [4, 4, 2]
    requests = [tx.message.body for tx in net.txs if tx.message.type == REQUEST and tx.src == 2]
    assert [len(r) for r in requests] == [4, 4, 2]
    assert len(net.nodes[2].buffer) == 10


def test_vector_chunks_respect_the_byte_bound() -> None:
    import msgpack

    net = epidemic_net([1, 2], vector_bytes=64)
    proto = net.nodes[1]
    proto.epoch = 2**40  # large ids: about 16 packed bytes each
    for i in range(10):
        net.publish(1, event(i + 1))
    net.link(1, 2)
    net.run(until=10.0)
    vectors = [tx.message.body for tx in net.txs if tx.message.type == VECTOR and tx.src == 1]
    assert sum(len(v) for v in vectors) == 10 and len(vectors) > 1
    assert all(sum(len(msgpack.packb(i)) for i in v) <= 64 for v in vectors)
    assert len(net.nodes[2].buffer) == 10


def test_vector_from_a_node_not_yet_seen_as_neighbour_is_served() -> None:
    net = epidemic_net([1, 2], delay=0.01)
    net.subscribe(1, "s", SUB)
    eid = net.publish(2, event())
    # only node 2 detects the contact: node 1 hears its vector first
    net.link(1, 2, announce=[2])
    net.run(until=5.0)
    assert net.deliveries(eid) == [(1, "s")]


def test_buffer_survives_a_restart_through_its_store() -> None:
    store = MemoryStore()
    first = Epidemic(1, store=store)
    first.handle(NeighborUp(0.0, NeighborInfo(9)))
    eid = first.new_message_id()
    from meshsub.core.api import LocalPublish

    first.handle(LocalPublish(1.0, event(), eid))
    assert len(store) == 1
    net = Net({1: Epidemic(1, store=store, epoch=1), 2: Epidemic(2)})
    net.subscribe(2, "s", SUB)
    net.link(1, 2)
    net.run(until=5.0)
    assert net.deliveries(eid) == [(2, "s")]


def test_malformed_frames_are_counted_drops() -> None:
    proto = Epidemic(1)
    proto.handle(NeighborUp(0.0, NeighborInfo(2)))
    seq = iter(range(1, 100))

    def frame(mtype: int, body: Any) -> None:
        proto.handle(FrameReceived(0.0, 2, Message(mtype, MessageId(2, 0, next(seq)), body)))

    frame(DATA, None)
    frame(DATA, ["x", 1.0, 5.0])
    frame(DATA, [event().to_wire(), 1.0, float("inf")])
    frame(VECTOR, "nope")
    frame(VECTOR, [[1, 2]])
    frame(REQUEST, [[1, 2, -3]])
    frame(REQUEST, [[0, 0, 0]] * 2000)
    frame(99, None)
    assert proto.drops["malformed"] == 7
    assert proto.drops["unknown_type"] == 1
    frame(REQUEST, [[5, 0, 1]])  # well formed, but we do not hold it
    assert proto.drops["request_unavailable"] == 1


@pytest.mark.parametrize(("values", "key"), [
    ({"buffer_size": 0}, "buffer_size"), ({"ttl_s": 0}, "ttl_s"),
    ({"max_hops": 0}, "max_hops"), ({"vector_chunk": 0}, "vector_chunk"),
    ({"window": 0}, "window"), ({"drop_policy": "random"}, "drop_policy"),
    ({"rto_initial": 0}, "rto_initial"), ({"rto_attempts": 0}, "rto_attempts"),
])
def test_bad_params(values: dict[str, Any], key: str) -> None:
    with pytest.raises(ParameterError) as err:
        parse_params(EpidemicParams, values)
    assert err.value.key == key


def test_drop_policy_from_config_text() -> None:
    params = parse_params(EpidemicParams, {"drop_policy": "drop_expiring"})
    assert params.drop_policy is DropPolicy.DROP_EXPIRING


@pytest.mark.parametrize("first", [1, 2])
def test_either_end_may_see_the_link_first(first: int) -> None:
    """B-SUB and PULL once lost a contact when the peer's frames arrived before the
    receiver's own NeighborUp; epidemic serves a vector or request from a peer it
    does not yet list, so the exchange completes whichever end sees the link first."""
    net = epidemic_net([1, 2], delay=0.01)
    net.subscribe(2, "s", SUB)
    eid = net.publish(1, event())
    net.link(1, 2, announce=[first])
    net.run(until=net.now + 1.0)
    net.feed(3 - first, NeighborUp(net.now, NeighborInfo(first)))
    net.run(until=net.now + 2.0)
    assert net.deliveries(eid) == [(2, "s")]


def test_contacts_share_one_summary_vector_in_memory() -> None:
    """Issue 25 item 10: an insider's 256 made-up neighbours (the table's cap) meeting a
    node that carries 300 messages. Each contact's pending VECTOR messages reuse the same
    id lists while the buffer is unchanged, instead of a private copy per contact (about
    140 bytes per id per contact, ~10 MB here, whose freed memory stayed resident in the
    daemon); the bound is on the heap the pending sends keep, in bytes."""
    import tracemalloc

    proto = Epidemic(1, params=EpidemicParams())
    for n in range(300):
        proto.handle(LocalPublish(0.0, event(n % 5 + 1), proto.new_message_id()))
    proto.handle(NeighborUp(0.0, NeighborInfo(2)))  # the first contact builds the chunks
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for node in range(0x10000, 0x10000 + 255):
            proto.handle(NeighborUp(0.1, NeighborInfo(node)))
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    sent: dict[int, list[list[int]]] = {}
    for pending in proto.reliable.pending.values():
        if pending.message.type == VECTOR:
            sent.setdefault(pending.node, []).extend(pending.message.body)
    held = sorted([m.origin, m.epoch, m.seq] for m in proto.buffer.summary_vector())
    assert len(sent) == 256 and all(sorted(ids) == held for ids in sent.values())
    assert kept < 2_000_000, f"255 contacts keep {kept} bytes"
