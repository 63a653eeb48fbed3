"""B-SUB over the in-test harness: the contact procedure, brokers, copies and handoffs."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from harness import BodiesOutOfIndex, Net, Tx

from meshsub.core.api import FrameReceived, Message, MessageId, MsgKind, NeighborInfo, NeighborUp
from meshsub.core.buffer import MemoryStore
from meshsub.core.params import ParameterError, parse_params
from meshsub.core.registry import get_protocol
from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.core.tcbf import TCBF, decay_factor
from meshsub.protocols.bsub import BSub, BSubParams, RoleMode
from meshsub.protocols.bsub.carried import Carried, Kind
from meshsub.protocols.bsub.election import ContactLog, Meeting, designation
from meshsub.protocols.bsub.wire import DATA, DESIGNATE, FILTER, IDENT, OFFER, ROLE, Mode

KEY = "NewMoon"


def params(**values: Any) -> BSubParams:
    return parse_params(BSubParams, values)


def net_of(brokers: Iterable[int], users: Iterable[int], delay: float = 0.01,
           **values: Any) -> Net:
    """Pinned brokers and pinned users (no election), unless the test says otherwise."""
    nodes: dict[int, Any] = {}
    for n in brokers:
        nodes[n] = BSub(n, params=params(role_mode="pinned_broker", **values))
    for n in users:
        nodes[n] = BSub(n, params=params(role_mode="pinned_user", **values))
    return Net(nodes, delay=delay)


def meet(net: Net, a: int, b: int, duration: float = 5.0) -> None:
    """One contact of ``duration`` seconds, then the link goes down."""
    net.link(a, b)
    net.run(until=net.now + duration)
    net.unlink(a, b)


def data_txs(net: Net, mode: Mode | None = None) -> list[Tx]:
    return [tx for tx in net.txs if tx.message.type == DATA and tx.message.reliable_id is not None
            and (mode is None or tx.message.body[0] == mode)]


def holds(net: Net, node: int, mid: MessageId) -> bool:
    return mid in net.nodes[node].buffer  # type: ignore[attr-defined]


def proto(net: Net, node: int) -> BSub:
    p = net.nodes[node]
    assert isinstance(p, BSub)
    return p


def event(topic: str = KEY) -> Any:
    return parse_event(f"{topic} n=1")


def sub(topic: str = KEY) -> Any:
    return parse_subscription(topic)


# ------------------------------------------------------------------ basics


def test_registered_ids_and_kinds() -> None:
    assert get_protocol("bsub") is BSub
    p = BSub(1)
    assert p.protocol_id == 4
    assert p.kind_of(DATA) is MsgKind.DATA
    assert p.kind_of(FILTER) is MsgKind.SUBSCRIPTION
    assert p.kind_of(IDENT) is MsgKind.CONTROL
    assert p.kind_of(DESIGNATE) is MsgKind.CONTROL


def test_params_validate_and_eq5_default() -> None:
    p = params()
    # Eq. 5 with N = 123, T = TTL = 10 h: the paper's 0.138/min (Zhao and Wu 2010, §VI-A)
    assert p.decay_per_s() * 60 == pytest.approx(0.138, abs=0.001)
    assert p.decay_per_s() == decay_factor(123, initial=50, lifetime=36000.0)
    assert params(DF=0.0).decay_per_s() == 0.0
    for bad in ({"C": 0}, {"up": 1, "low": 3}, {"DF": -1.0}, {"TTL": 0}, {"m": 4},
                {"I": 300}, {"role_mode": "boss"}, {"window": 0}):
        with pytest.raises(ParameterError):
            params(**bad)


def test_direct_delivery_from_producer_is_not_a_copy() -> None:
    net = net_of([], [1, 2])
    net.subscribe(2, "s", sub())
    mid = net.publish(1, event())
    meet(net, 1, 2)
    assert net.deliveries(mid) == [(2, "s")]
    assert [tx.message.body[0] for tx in data_txs(net)] == [Mode.DIRECT]
    assert holds(net, 1, mid)  # the producer keeps it: no copy was counted
    item = Carried.from_message(proto(net, 1).buffer.get(mid))  # type: ignore[arg-type]
    assert item.copies_given == 0 and 2 in item.told
    meet(net, 1, 2)  # a second contact sends nothing again
    assert len(data_txs(net)) == 1


def test_no_false_positive_reaches_the_application() -> None:
    # m = 8, k = 2: "t11" hashes to {0}, inside "news"'s {0, 1}: a Bloom-filter match.
    net = net_of([], [1, 2], m=8, k=2)
    net.subscribe(2, "s", sub("news"))
    mid = net.publish(1, event("t11"))
    meet(net, 1, 2)
    assert len(data_txs(net, Mode.DIRECT)) == 1  # the filter said yes...
    assert net.deliveries(mid) == []  # ...the exact match said no
    assert [n for n, _ in net.drops("false_positive_forward")] == [2]


# ------------------------------------------------------------------ copies and custody


def interested_brokers(net: Net, consumer: int, brokers: Iterable[int]) -> None:
    for b in brokers:
        meet(net, consumer, b)


def test_copy_limit_c_distinct_brokers() -> None:
    net = net_of([10, 11, 12, 13, 14], [1, 2], C=3)
    net.subscribe(2, "s", sub())
    interested_brokers(net, 2, [10, 11, 12, 13, 14])
    mid = net.publish(1, event())
    meet(net, 1, 2)  # a direct delivery: does not count
    for b in (10, 10, 11, 12, 13, 14):
        meet(net, 1, b)
    copies = data_txs(net, Mode.COPY)
    assert [tx.dst for tx in copies] == [10, 11, 12]  # distinct brokers, then done
    assert not holds(net, 1, mid)  # deleted at C
    assert [b for b in (10, 11, 12, 13, 14) if holds(net, b, mid)] == [10, 11, 12]
    assert net.deliveries(mid) == [(2, "s")]


def test_handoff_by_preference_moves_custody_and_filters_agree() -> None:
    net = net_of([10, 11], [1, 2])
    net.subscribe(2, "s", sub())
    meet(net, 2, 11)  # consumer reinforces broker 11 twice: counter 100 there
    meet(net, 2, 11)
    meet(net, 2, 10)  # and broker 10 once: counter 50
    mid = net.publish(1, event())
    meet(net, 1, 10)  # producer copy to broker 10
    assert holds(net, 10, mid)
    before = len(data_txs(net))
    meet(net, 10, 11)
    handoffs = data_txs(net)[before:]
    assert [(tx.src, tx.dst, tx.message.body[0]) for tx in handoffs] == [(10, 11, Mode.HANDOFF)]
    assert holds(net, 11, mid) and not holds(net, 10, mid)
    # pre-merge decisions, then M-merge both ways: identical relay filters (§8 item 18)
    assert proto(net, 10).relay_filter == proto(net, 11).relay_filter
    # the broker that now holds it does not hand it back (PREF <= 0 the other way)
    before = len(data_txs(net))
    meet(net, 10, 11)
    assert data_txs(net)[before:] == []


def test_handoffs_go_highest_preference_first() -> None:
    net = net_of([10, 11], [1, 2, 3])
    net.subscribe(2, "s", sub("alpha"))
    net.subscribe(3, "s", sub("beta"))
    meet(net, 2, 10)
    meet(net, 3, 10)
    a = net.publish(1, event("alpha"))
    b = net.publish(1, event("beta"))
    meet(net, 1, 10)
    meet(net, 3, 11)  # broker 11 knows "beta" only: PREF(alpha) < 0 ... PREF(beta) = 0
    meet(net, 3, 11)  # reinforced: PREF(beta) = (100 - 50)/50 = 1 > 0
    start = len(data_txs(net))
    meet(net, 10, 11)
    assert [tx.message.id for tx in data_txs(net)[start:]] == [b]
    assert holds(net, 10, a) and holds(net, 11, b)


def test_contact_cut_mid_session_loses_and_duplicates_nothing() -> None:
    net = net_of([10, 11], [1, 2], delay=0.05)
    net.subscribe(2, "s", sub())
    meet(net, 2, 11)
    meet(net, 2, 11)
    meet(net, 2, 10)
    mid = net.publish(1, event())
    meet(net, 1, 10)
    assert holds(net, 10, mid)
    # cut the broker contact just after the handoff DATA left, before it arrives
    net.link(10, 11)
    for _ in range(100):
        if data_txs(net, Mode.HANDOFF):
            break
        net.run(until=net.now + 0.01)
    assert data_txs(net, Mode.HANDOFF)
    net.unlink(10, 11)
    net.run(until=net.now + 10)
    assert holds(net, 10, mid) and not holds(net, 11, mid)  # custody stayed
    meet(net, 10, 11)  # the next contact completes it
    assert holds(net, 11, mid) and not holds(net, 10, mid)
    meet(net, 2, 11)
    assert net.deliveries(mid) == [(2, "s")]


def test_a_broker_that_sees_the_link_last_still_merges_the_consumers_interest() -> None:
    """The virtual mesh's lost delivery (vmesh-bsub-groups): consumer 4's IDENT and
    genuine filter reached broker 7 before 7's own NeighborUp for 4 (the consumer
    detected the link first). 7 decided with nothing to send, its pump waited for
    the neighbour, and no ACK ever came to run it again: the merge never happened,
    7's relay filter lacked "alerts/fire" and the producer gave it no copy."""
    net = net_of([10], [1, 2])
    net.subscribe(2, "s", sub())
    net.link(2, 10, announce=[2])  # only the consumer sees the link at first
    net.run(until=1.0)  # IDENT, FILTER and their ACKs: broker 10 has decided
    net.feed(10, NeighborUp(net.now, NeighborInfo(2)))  # ...and now sees it too
    net.run(until=2.0)
    net.unlink(2, 10)
    assert proto(net, 10).relay_filter.counter(KEY, net.now) == 50
    mid = net.publish(1, event())
    meet(net, 1, 10)
    assert holds(net, 10, mid)  # the producer's copy: 10's relay filter holds the key
    meet(net, 10, 2)
    assert net.deliveries(mid) == [(2, "s")]


def test_a_message_published_before_the_late_neighbor_up_is_offered_after_it() -> None:
    """A message that appears while the session waits for the NeighborUp (so
    ``_consider_everywhere`` skips that peer) is offered when the neighbour appears."""
    net = net_of([10], [2])
    net.subscribe(2, "s", sub())
    net.link(2, 10, announce=[2])
    net.run(until=1.0)
    mid = net.publish(10, event())
    net.run(until=2.0)
    net.feed(10, NeighborUp(net.now, NeighborInfo(2)))
    net.run(until=3.0)
    assert net.deliveries(mid) == [(2, "s")]


def test_lost_ack_leaves_a_duplicate_that_is_detected_by_id() -> None:
    net = net_of([10, 11], [1, 2], delay=0.05)
    net.subscribe(2, "s", sub())
    meet(net, 2, 11)
    meet(net, 2, 11)
    meet(net, 2, 10)
    mid = net.publish(1, event())
    meet(net, 1, 10)
    # every ACK from 11 to 10 is lost, then the contact ends: both hold the message
    net.loss = lambda src, dst, msg: src == 11 and msg.type == 1
    net.link(10, 11)
    net.run(until=net.now + 0.3)
    net.unlink(10, 11)
    net.loss = None
    assert holds(net, 10, mid) and holds(net, 11, mid)
    before = len(data_txs(net))
    meet(net, 10, 11)  # the offer finds the copy by id: no second DATA, custody moved
    assert [tx for tx in data_txs(net)[before:] if tx.message.id == mid] == []
    assert holds(net, 11, mid) and not holds(net, 10, mid)
    assert net.drops("duplicate") == []


def test_ttl_no_forwarding_or_delivery_after_expiry() -> None:
    net = net_of([], [1, 2], TTL=100.0)
    net.subscribe(2, "s", sub())
    mid = net.publish(1, event())
    net.run(until=150.0)
    meet(net, 1, 2)
    assert data_txs(net) == [] and net.deliveries(mid) == []
    assert [n for n, e in net.drops("expired") if e.attrs["event_id"] == str(mid)] == [1]
    # a DATA that arrives with no lifetime left is dropped, not delivered
    p = proto(net, 2)
    body = [0, event().to_wire(), 0.0, 0.0, []]
    p.handle(FrameReceived(200.0, 1, Message(DATA, MessageId(1, 1, 99), body)))
    assert p.drops["expired"] == 1


def test_genuine_filter_merged_once_under_retransmission() -> None:
    net = net_of([10], [2], delay=0.05)
    net.subscribe(2, "s", sub())
    first_ack_lost = {"done": False}

    def lose(src: int, dst: int, msg: Message) -> bool:
        if src == 10 and msg.type == 1 and not first_ack_lost["done"]:
            first_ack_lost["done"] = True  # the ACK of 2's IDENT: 2 retransmits it
            return True
        return src == 10 and msg.type == 1 and net.now < 0.5  # and the FILTER's ACK
    net.loss = lose
    meet(net, 2, 10)
    assert sum(1 for tx in net.txs if tx.message.type == FILTER and tx.src == 2) >= 2
    assert proto(net, 10).relay_filter.counter(KEY, net.now) == 50  # not 100


def test_broker_election_designates_and_takes_effect_after_contact() -> None:
    nodes = {n: BSub(n, params=params(low=1, up=5)) for n in (1, 2)}
    net = Net(nodes, delay=0.01)  # type: ignore[arg-type]
    net.link(1, 2)
    net.run(until=1.0)
    assert not proto(net, 1).broker and not proto(net, 2).broker  # not mid-contact
    assert {n for n, _ in net.records("broker")} == set()
    net.unlink(1, 2)
    # both designated each other (each knew 0 < low brokers)
    assert proto(net, 1).broker and proto(net, 2).broker
    assert sorted(n for n, e in net.records("broker") if e.attrs["role"] == "broker") == [1, 2]


def test_hold_down_ignores_designate_after_a_role_change() -> None:
    p = BSub(5, params=params(T_hold=1800.0))
    p.handle(NeighborUp(0.0, NeighborInfo(6)))
    body = [1, 1]
    p.handle(FrameReceived(1.0, 6, Message(DESIGNATE, MessageId(6, 1, 1), body)))
    p.handle(FrameReceived(1.0, 7, Message(DESIGNATE, MessageId(7, 1, 1), body)))
    assert p.broker  # 7 is not in contact: applies at once
    p.handle(FrameReceived(2.0, 7, Message(DESIGNATE, MessageId(7, 1, 2), [1, 0])))
    assert p.broker  # within T_hold: ignored


def test_designation_rules() -> None:
    log = ContactLog(window=100.0)
    log.record(Meeting(9, 0.0, False, 3))
    assert designation(log, 0.0, 9, False, 3, low=3, up=5) is True
    for b, deg in ((10, 8), (11, 9), (12, 10), (13, 11), (14, 12), (15, 2)):
        log.record(Meeting(b, 1.0, True, deg))
    assert designation(log, 1.0, 15, True, 2, low=3, up=5) is False  # 6 > up, below average
    assert designation(log, 1.0, 14, True, 12, low=3, up=5) is None  # above average
    assert log.degree(1.0) == 7
    assert log.degree(150.0) == 0  # the window slid past everything


def test_malformed_frames_are_counted_drops() -> None:
    p = BSub(1)
    p.handle(NeighborUp(0.0, NeighborInfo(2)))
    for mtype, body in ((IDENT, "x"), (IDENT, [1, 2]), (FILTER, [1, "notbytes"]),
                        (FILTER, [1, b"\x00"]), (DATA, [9, ["a"], 0, 1, []]),
                        (DATA, [0, "bad", 0, 1, []]), (DESIGNATE, [1, 7]), (ROLE, [1, "x"]),
                        (99, None)):
        p.handle(FrameReceived(1.0, 2, Message(mtype, MessageId(2, 1, 1), body)))
    assert p.drops["malformed"] == 8 and p.drops["unknown_type"] == 1
    p.handle(FrameReceived(1.0, 2, Message(IDENT, MessageId(2, 1, 2), [5, 0, 0, 12345])))
    assert p.drops["config_mismatch"] == 1


def test_persistent_store_carries_messages_and_copy_counts_over_a_restart() -> None:
    store = MemoryStore()
    p = BSub(1, params=params(role_mode="pinned_user"), store=store)
    net = Net({1: p, 10: BSub(10, params=params(role_mode="pinned_broker")),
               2: BSub(2, params=params(role_mode="pinned_user"))}, delay=0.01)
    net.subscribe(2, "s", sub())
    meet(net, 2, 10)
    mid = net.publish(1, event())
    meet(net, 1, 10)
    again = BSub(1, params=params(role_mode="pinned_user"), store=store)
    item = Carried.from_message(again.buffer.get(mid))  # type: ignore[arg-type]
    assert item.kind is Kind.OWN and item.copies_given == 1 and item.given_to == [10]


def test_wildcard_subscription_is_not_advertised_but_counted() -> None:
    p = BSub(1)
    net = Net({1: p}, delay=0.0)
    net.subscribe(1, "w", parse_subscription("news/#"))
    assert p.genuine.is_empty()
    assert p.drops["subscription_not_a_key"] == 1


def test_relay_filter_decays_and_own_interest_is_pinned() -> None:
    net = net_of([10, 11], [2], DF=1.0)
    net.subscribe(2, "s", sub())
    net.subscribe(11, "own", sub("mine"))
    meet(net, 2, 10, duration=1.0)
    f: TCBF = proto(net, 10).relay_filter
    assert f.exists(KEY, net.now)
    assert not f.exists(KEY, net.now + 60.0)  # 50 units at 1 unit/s
    meet(net, 10, 11, duration=1.0)
    assert proto(net, 10).relay_filter.counter("mine", net.now) >= 48


def test_role_mode_enum() -> None:
    assert RoleMode("auto") is RoleMode.AUTO


# ------------------------------------------------------------------ regressions


def test_a_user_designates_only_until_it_knows_low_brokers() -> None:
    """A node the user designated counts as a broker it met (election.py): with
    low = 2, meeting four users in a row makes exactly the first two brokers."""
    nodes = {n: BSub(n, params=params(low=2, up=5, T_hold=0.0)) for n in (1, 2, 3, 4, 5)}
    nodes[1] = BSub(1, params=params(low=2, up=5, role_mode="pinned_user"))
    net = Net(nodes, delay=0.01)  # type: ignore[arg-type]
    for peer in (2, 3, 4, 5):
        meet(net, 1, peer)
    sent = [(n, e) for n, e in net.records("broker")]
    assert sorted(n for n, e in sent if e.attrs["role"] == "broker") == [2, 3]
    assert proto(net, 1).stats["designations"] == 2
    assert proto(net, 1).log.brokers(net.now) == {2: 0, 3: 0}


def test_a_designated_node_that_refuses_is_not_counted_as_a_broker() -> None:
    """The designated node answers with the role it takes (ROLE): a node in its
    hold-down (here: pinned) stays a user in the user's count, so the user goes
    on designating until ``low`` nodes did become brokers."""
    nodes = {n: BSub(n, params=params(low=2, up=5, T_hold=0.0)) for n in (3, 4, 5)}
    nodes[1] = BSub(1, params=params(low=2, up=5, role_mode="pinned_user"))
    nodes[2] = BSub(2, params=params(low=2, up=5, role_mode="pinned_user"))
    net = Net(nodes, delay=0.01)  # type: ignore[arg-type]
    for peer in (2, 3, 4, 5):
        meet(net, 1, peer)
    roles = [tx.message.body for tx in net.txs if tx.message.type == ROLE and tx.dst == 1]
    assert [r[1] for r in roles] == [0, 1, 1]  # 2 refused, 3 and 4 took it
    assert proto(net, 1).stats["designations"] == 3
    assert proto(net, 1).log.brokers(net.now) == {3: 0, 4: 0}
    assert not proto(net, 2).broker and proto(net, 3).broker and proto(net, 4).broker


def test_a_user_demotes_only_down_to_up_brokers() -> None:
    """After demoting one broker the user counts it as a user: with up = 2 and
    three known brokers it demotes one below-average broker, not a second."""
    user = BSub(1, params=params(low=1, up=2, role_mode="pinned_user"))
    brokers = {n: BSub(n, params=params(low=1, up=2, T_hold=0.0)) for n in (10, 11, 12)}
    for b in brokers.values():
        b._set_role(True)  # promoted long ago
    net = Net({1: user, **brokers}, delay=0.01)  # type: ignore[dict-item]
    # The brokers' degrees (distinct nodes met in T_w) as they report them.
    user.log.record(Meeting(10, 0.0, True, 9))
    user.log.record(Meeting(11, 0.0, True, 1))
    user.log.record(Meeting(12, 0.0, True, 1))
    meet(net, 1, 11)  # 3 > up brokers; degree 1 < average 11/3 (11 reports 1 again)
    assert not proto(net, 11).broker
    meet(net, 1, 12)  # now 2 brokers known: not more than up, 12 stays a broker
    assert proto(net, 12).broker
    assert user.stats["designations"] == 1


def test_a_consumer_never_receives_a_message_twice() -> None:
    """OFFER/REQUEST: a broker's copy is not sent to a consumer the producer
    already delivered it to (through another path than ``told``)."""
    net = net_of([10], [1, 2])
    net.subscribe(2, "s", sub())
    meet(net, 2, 10)
    mid = net.publish(1, event())
    meet(net, 1, 10)  # copy to the broker, which learns nothing about 2
    meet(net, 1, 2)  # direct delivery
    before = len(data_txs(net))
    meet(net, 10, 2)  # the broker offers, the consumer declines
    assert data_txs(net)[before:] == []
    assert net.deliveries(mid) == [(2, "s")]
    assert net.drops("duplicate") == []


def test_a_broker_holding_a_copy_declines_a_handoff_and_both_copies_stay() -> None:
    """Two of the C copies meeting must not merge into one: the broker that
    already carries the message declines it, and the sender keeps its copy."""
    net = net_of([10, 11], [1, 2])
    net.subscribe(2, "s", sub())
    meet(net, 2, 10)
    meet(net, 2, 11)
    mid = net.publish(1, event())
    meet(net, 1, 10)
    meet(net, 1, 11)  # two copies, on two brokers
    meet(net, 2, 11)  # 11 is reinforced: PREF from 10 to 11 > 0
    before = len(data_txs(net))
    meet(net, 10, 11)
    assert data_txs(net)[before:] == []  # offered, declined: no DATA
    assert holds(net, 10, mid) and holds(net, 11, mid)
    item = Carried.from_message(proto(net, 10).buffer.get(mid))  # type: ignore[arg-type]
    assert 11 in item.told  # and it is not offered again
    before = len(net.txs)
    meet(net, 10, 11)
    assert not [tx for tx in net.txs[before:] if tx.message.type == OFFER and tx.src == 10]


def test_a_message_published_during_a_contact_reaches_the_connected_consumer() -> None:
    """Every node is a producer from the start, so the consumer's interest
    filter is already there when the producer publishes mid-contact."""
    net = net_of([], [1, 2])
    net.subscribe(2, "s", sub())
    net.link(1, 2)
    net.run(until=1.0)
    mid = net.publish(1, event())
    net.run(until=2.0)
    assert net.deliveries(mid) == [(2, "s")]


def test_a_demoted_broker_hands_its_relay_messages_to_a_broker() -> None:
    net = net_of([10, 11], [1, 2])
    net.subscribe(2, "s", sub())
    meet(net, 2, 10)
    meet(net, 2, 11)
    mid = net.publish(1, event())
    meet(net, 1, 10)
    proto(net, 10)._set_role(False)  # demoted (as a DESIGNATE would do at contact end)
    meet(net, 10, 11)
    assert [(tx.src, tx.dst, tx.message.body[0]) for tx in data_txs(net, Mode.HANDOFF)] \
        == [(10, 11, Mode.HANDOFF)]
    assert holds(net, 11, mid) and not holds(net, 10, mid)



def test_status_counts_own_and_relay_copies_without_reading_bodies_again() -> None:
    """``status`` (a Prometheus scrape a second) counts own and relay entries from the
    keys and the decoded-item cache; it used to read every carried body back from the
    store on each call."""
    net = net_of([], [1, 2])
    store = BodiesOutOfIndex()
    net.nodes[10] = BSub(10, params=params(role_mode="pinned_broker"), store=store)
    net.subscribe(2, "s", sub())
    meet(net, 2, 10)  # the broker learns the consumer's interest
    mids = [net.publish(1, event()) for _ in range(2)]
    meet(net, 1, 10)  # the producer gives the broker a copy of each
    assert all(holds(net, 10, mid) for mid in mids)
    producer, broker = proto(net, 1), proto(net, 10)
    assert (producer.status()["own"], producer.status()["relay"]) == (2, 0)
    assert (broker.status()["own"], broker.status()["relay"]) == (0, 2)
    before = store.reads
    for _ in range(3):
        assert broker.status()["relay"] == 2
    assert store.reads == before
