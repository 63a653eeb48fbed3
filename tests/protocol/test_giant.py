"""GIANT over the harness: brokers that never meet, ferries that visit them one at a time."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from harness import Net

from meshsub.core.api import (
    FrameReceived,
    Message,
    MessageId,
    NeighborDown,
    NeighborInfo,
    NeighborUp,
    Position,
    PositionChanged,
    SendTo,
)
from meshsub.core.buffer import MemoryStore
from meshsub.core.grid import Cell
from meshsub.core.lattice import hit_probability
from meshsub.core.params import ParameterError, parse_params
from meshsub.core.registry import get_protocol
from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.core.telemetry import make_record, validate_record
from meshsub.protocols.giant import Giant, GiantParams
from meshsub.protocols.giant import messages as gm

UNIT = 1.0


class Dtn:
    """Brokers by cell (ids 1..), ferries (ids 100..); contacts only by ``visit``."""

    def __init__(self, brokers: dict[tuple[int, int], dict[str, Any]], ferries: int = 1,
                 **common: Any) -> None:
        self.net = Net({}, delay=0.001)
        self.broker: dict[Cell, int] = {}
        base = {"unit_s": UNIT, "cols": 20, "rows": 20, **common}
        for k, (cell, extra) in enumerate(sorted(brokers.items()), start=1):
            p = parse_params(GiantParams, {**base, "role": "broker", "cell_x": cell[0],
                                           "cell_y": cell[1], **extra})
            self.net.nodes[k] = Giant(k, params=p, seed=k)
            self.broker[Cell(*cell)] = k
        self.ferry_params = parse_params(GiantParams, {**base, "role": "ferry"})
        self.ferries = [100 + i for i in range(ferries)]
        for f in self.ferries:
            self.net.nodes[f] = Giant(f, params=self.ferry_params, seed=f)
        self.net.run(until=0.01)

    def node(self, node: int) -> Giant:
        proto = self.net.nodes[node]
        assert isinstance(proto, Giant)
        return proto

    def at(self, cell: tuple[int, int]) -> Giant:
        return self.node(self.broker[Cell(*cell)])

    def visit(self, ferry: int, cell: tuple[int, int], when: float | None = None,
              stay: float = 0.5) -> None:
        if when is not None:
            self.net.run(until=when)
        b = self.broker[Cell(*cell)]
        self.net.link(ferry, b)
        self.net.run(until=self.net.now + stay)
        self.net.unlink(ferry, b)

    def broker_to_broker_txs(self) -> int:
        ids = set(self.broker.values())
        return sum(1 for tx in self.net.txs if tx.src in ids and tx.dst in ids)


def carried(d: Dtn, ferry: int) -> list[Message]:
    return carried_by(d.node(ferry))


def carried_by(ferry: Giant) -> list[Message]:
    assert ferry.carried is not None
    return list(ferry.carried.buffer)


def sub(text: str) -> Any:
    return parse_subscription(text)


def two_brokers(**extra: Any) -> Dtn:
    d = Dtn({(0, 0): {"adverts": ["temp"]}, (4, 0): {}}, **extra)
    d.net.subscribe(d.broker[Cell(4, 0)], "s", sub("temp value>1"))
    return d


def test_registered_with_id_9() -> None:
    assert get_protocol("giant") is Giant and Giant.protocol_id == 9


def test_a_ferry_carries_advertisement_subscription_and_event_between_brokers() -> None:
    d = two_brokers()
    f = d.ferries[0]
    d.visit(f, (0, 0), 1)  # takes the advertisement
    d.visit(f, (4, 0), 5)  # gives it; the SHB answers with its subscription
    shb = d.at((4, 0))
    entry = shb.routes[("temp", Cell(0, 0))]
    assert entry.upstream is not None and entry.upstream.upstream == Cell(0, 0)
    d.visit(f, (0, 0), 9)  # the subscription reaches the PHB
    phb = d.at((0, 0))
    assert len(phb.routes[("temp", Cell(0, 0))].downstream) == 1
    eid = d.net.publish(d.broker[Cell(0, 0)], parse_event("temp value=5"))
    d.net.publish(d.broker[Cell(0, 0)], parse_event("temp value=0"))  # matches nobody
    assert len(phb.outgoing) == 1
    d.visit(f, (0, 0), 12)
    d.visit(f, (4, 0), 16)
    assert d.net.deliveries(eid) == [(d.broker[Cell(4, 0)], "s")]
    assert d.broker_to_broker_txs() == 0  # brokers never talk to each other
    assert all(msg.type == gm.ADV for msg in carried(d, f))


def test_a_ferry_heard_from_the_next_cell_is_no_contact_until_it_walks_in() -> None:
    """The in-cell check (§6.2: a broker talks only with ferries in its hosting cell):
    a radio that reaches the next cell does not make a contact there. The ferry, in
    A's cell and in radio range of B too, exchanges with A only; B learns nothing
    until the ferry walks into B's cell (and A's contact with it ends then)."""
    d = Dtn({(0, 0): {"adverts": ["temp"]}, (1, 0): {}})
    a, b = d.broker[Cell(0, 0)], d.broker[Cell(1, 0)]
    d.net.subscribe(b, "s", sub("temp value>1"))
    f = d.ferries[0]
    d.net.feed(f, PositionChanged(d.net.now, Position(50.0, 50.0)))  # cell (0, 0)
    d.net.link(f, a)
    d.net.run(until=d.net.now + 2.0)
    assert [msg.type for msg in carried(d, f)] == [gm.ADV]  # from A
    d.net.link(f, b)  # still in A's cell
    d.net.run(until=d.net.now + 2.0)
    assert d.at((1, 0)).stats["advs_learned"] == 0
    assert d.at((1, 0)).stats["out_of_cell"] >= 1 and d.node(f).stats["out_of_cell"] >= 1
    assert not any({tx.src, tx.dst} == {f, b} and tx.message.type in (gm.ADV, gm.BUNDLE)
                   for tx in d.net.txs)  # between B and the ferry: HELLOs only
    d.net.feed(f, PositionChanged(d.net.now, Position(150.0, 50.0)))  # walks into (1, 0)
    d.net.run(until=d.net.now + 2.0)
    assert d.at((1, 0)).stats["advs_learned"] == 1
    assert d.at((1, 0)).routes[("temp", Cell(0, 0))].upstream is not None
    assert d.at((0, 0)).stats["left_cell"] == 1 and d.node(f).stats["left_cell"] == 1
    assert d.node(f).status()["contacts"] == 1  # B only


def test_two_hops_with_the_two_three_hop_preference() -> None:
    """§6.3.4 shape: X at (6, 6) ties PHB (0, 0) and M (3, 3); it picks M (2 hops)."""
    d = Dtn({(0, 0): {"adverts": ["temp"]}, (3, 3): {}, (6, 6): {}})
    x = d.broker[Cell(6, 6)]
    d.net.subscribe(x, "s", sub("temp"))
    f = d.ferries[0]
    d.visit(f, (0, 0), 1)
    d.visit(f, (3, 3), 2)  # M appends its record (distance 6, 1 hop)
    d.visit(f, (6, 6), 3)  # X: candidates PHB (total 12, 1 hop) and M (12, 2 hops)
    assert d.at((6, 6)).routes[("temp", Cell(0, 0))].upstream.upstream == Cell(3, 3)  # type: ignore[union-attr]
    d.visit(f, (3, 3), 4)  # X's subscription to M; M forwards towards the PHB
    d.visit(f, (0, 0), 5)
    eid = d.net.publish(d.broker[Cell(0, 0)], parse_event("temp value=1"))
    d.visit(f, (0, 0), 6)
    d.visit(f, (3, 3), 7)
    d.visit(f, (6, 6), 8)
    assert d.net.deliveries(eid) == [(x, "s")]


def test_the_prim_tree_attaches_to_the_nearest_broker_on_the_tree() -> None:
    d = Dtn({(0, 0): {"adverts": ["temp"]}, (3, 3): {}, (4, 4): {}}, tree="prim")
    f = d.ferries[0]
    d.net.subscribe(d.broker[Cell(3, 3)], "s", sub("temp"))
    d.visit(f, (0, 0), 1)
    d.visit(f, (3, 3), 2)  # (3, 3) joins the tree through the PHB
    d.visit(f, (0, 0), 3)
    d.visit(f, (3, 3), 4)  # its record now says "on the tree"
    d.net.subscribe(d.broker[Cell(4, 4)], "s", sub("temp"))
    d.visit(f, (4, 4), 5)
    up = d.at((4, 4)).routes[("temp", Cell(0, 0))].upstream
    assert up is not None and up.upstream == Cell(3, 3) and up.hops == 2


def test_an_older_copy_of_the_advertisement_does_not_take_a_broker_off_the_tree() -> None:
    """Prim's rule needs to know who is on the tree; a broker's upstream is kept, so a
    record saying "off the tree" from a copy made before it joined is stale."""
    d = Dtn({(0, 0): {"adverts": ["temp"]}, (3, 3): {}, (4, 4): {}}, ferries=2, tree="prim")
    old, new = d.ferries
    d.visit(old, (0, 0), 1)
    d.visit(old, (3, 3), 2)  # (3, 3) is not subscribed yet: its record says off the tree
    d.net.subscribe(d.broker[Cell(3, 3)], "s", sub("temp"))
    d.visit(new, (0, 0), 3)
    d.visit(new, (3, 3), 4)  # now it joins through the PHB and says so
    d.visit(new, (4, 4), 5)
    d.visit(old, (4, 4), 6)  # the stale copy arrives last
    d.net.subscribe(d.broker[Cell(4, 4)], "s", sub("temp"))
    d.net.run(until=7)
    up = d.at((4, 4)).routes[("temp", Cell(0, 0))].upstream
    assert up is not None and up.upstream == Cell(3, 3)


def test_an_advertisement_that_overtakes_the_ferrys_hello_still_goes_back_updated() -> None:
    """On a real radio a ferry's first HELLO can be lost and its ADV arrive first; the
    broker must still hand its record back, or no later contact would (the ferry already
    holds the ADV's id) and Prim's rule would not see the broker on the tree."""
    d = Dtn({(0, 0): {"adverts": ["temp"]}, (2, 2): {}}, tree="prim")
    f = d.ferries[0]
    d.visit(f, (0, 0), 1)
    adv = next(msg for msg in carried(d, f) if msg.type == gm.ADV)
    shb = d.node(d.broker[Cell(2, 2)])
    d.net.subscribe(shb.node, "s", sub("temp"))
    d.net.run(until=2)
    actions = shb.handle(FrameReceived(2.0, f, adv))  # no NeighborUp, no HELLO yet
    back = [gm.Adv.decode(a.message.body, 32) for a in actions
            if isinstance(a, SendTo) and a.node == f and a.message.type == gm.ADV]
    assert back and [(s.cell, s.on_tree) for s in back[0].senders] == [
        (Cell(0, 0), True), (Cell(2, 2), True)]


def test_each_recruitment_is_a_record_and_ferries_do_not_greet_ferries() -> None:
    d = Dtn({(0, 0): {"adverts": ["temp"]}, (2, 0): {}}, ferries=2)
    a, b = d.ferries
    d.net.subscribe(d.broker[Cell(2, 0)], "s", sub("temp"))
    d.visit(a, (0, 0), 1)
    d.visit(a, (2, 0), 2)
    d.visit(a, (0, 0), 3)
    eid = d.net.publish(d.broker[Cell(0, 0)], parse_event("temp value=1"))
    d.visit(b, (0, 0), 4)
    recruits = [(n, e.attrs) for n, e in d.net.records("counter")
                if e.attrs.get("reason") == "giant_recruited"]
    events = [(n, at["peer"]) for n, at in recruits if at.get("event_id") == str(eid)]
    assert events == [(d.broker[Cell(0, 0)], b)]
    assert any(at.get("sub_id") and n == d.broker[Cell(2, 0)] for n, at in recruits)
    assert d.at((0, 0)).status()["upstreams"] == []
    assert d.at((2, 0)).status()["upstreams"] == [
        {"topic": "temp", "phb": [0, 0], "upstream": [0, 0]}]
    ferry = d.node(a)  # a neighbour advertising the ferry role gets no HELLO (§6.2)
    to_ferry = ferry.handle(NeighborUp(d.net.now, NeighborInfo(b, capabilities=("ferry",))))
    to_broker = ferry.handle(NeighborUp(d.net.now, NeighborInfo(
        d.broker[Cell(0, 0)], capabilities=("broker",))))
    assert not [x for x in to_ferry if isinstance(x, SendTo)]
    assert [x.message.type for x in to_broker if isinstance(x, SendTo)] == [gm.HELLO]


def test_recruitment_stops_at_the_per_hop_target() -> None:
    """Ferries pass the PHB every 2 units: it recruits exactly as Algorithm 6.1's trace says."""
    d = Dtn({(0, 0): {"adverts": ["temp"]}, (2, 2): {"DR": 0.5}}, ferries=12)
    shb = d.broker[Cell(2, 2)]
    d.net.subscribe(shb, "s", sub("temp"))
    a, b = d.ferries[0], d.ferries[1]
    d.visit(a, (0, 0), 1)
    d.visit(a, (2, 2), 2)
    d.visit(b, (2, 2), 2.6)  # a second copy of the SUB (Prob_ctrl 0.9 not reached)
    d.visit(a, (0, 0), 3)
    d.visit(b, (0, 0), 3.6)
    phb = d.at((0, 0))
    eid = d.net.publish(d.broker[Cell(0, 0)], parse_event("temp value=1"))
    start = 10.0
    for k, f in enumerate(d.ferries):
        d.visit(f, (0, 0), start + 2 * k, stay=0.1)
    # (2, 2) at DR 0.5 over one hop: 7 ferries (the recruit_trace of the model)
    holders = [f for f in d.ferries if any(
        msg.type == gm.BUNDLE and msg.body[0] == gm.Kind.EVENT
        for msg in carried(d, f))]
    assert len(holders) == 7
    assert phb.stats["refused"] == 1 and not phb.outgoing
    d.visit(holders[0], (2, 2), 40)
    assert d.net.deliveries(eid) == [(shb, "s")]
    for f in holders[1:]:  # later copies are duplicates, delivered once
        d.visit(f, (2, 2))
    assert d.net.deliveries(eid) == [(shb, "s")]
    assert sum(p.drops["duplicate_event"] for p in d.net.nodes.values()) == 6


def test_leases_expire_without_refresh() -> None:
    d = two_brokers(sub_lease_s=100.0, sub_refresh_s=50.0, sweep_s=10.0)
    f = d.ferries[0]
    d.visit(f, (0, 0), 1)
    d.visit(f, (4, 0), 2)
    d.visit(f, (0, 0), 3)
    entry = d.at((0, 0)).routes[("temp", Cell(0, 0))]
    assert len(entry.downstream) == 1
    d.net.run(until=95.0)
    assert len(entry.downstream) == 1  # within the lease (the refresh is still on its way)
    d.net.run(until=115.0)  # no ferry brought the refresh: the lease ended
    assert len(entry.downstream) == 0
    assert [e.attrs["reason"] for _n, e in d.net.drops("lease_expired")] == ["lease_expired"]
    d.net.publish(d.broker[Cell(0, 0)], parse_event("temp value=5"))
    assert not d.at((0, 0)).outgoing


def test_refresh_renews_the_lease() -> None:
    d = two_brokers(sub_lease_s=100.0, sub_refresh_s=50.0, sweep_s=10.0)
    f = d.ferries[0]
    d.visit(f, (0, 0), 1)
    d.visit(f, (4, 0), 2)
    d.visit(f, (0, 0), 3)
    d.visit(f, (4, 0), 60)  # takes the refreshed subscription (a newer version)
    d.visit(f, (0, 0), 61)
    d.net.run(until=150.0)
    assert len(d.at((0, 0)).routes[("temp", Cell(0, 0))].downstream) == 1


def test_an_old_subscription_cannot_undo_an_unsubscription() -> None:
    """A ferry carrying SUB v1 arrives after the UNSUB v2 another ferry brought."""
    d = two_brokers()
    early, late = d.ferries[0], d.ferries[0] + 1
    d.net.nodes[late] = Giant(late, params=d.ferry_params, seed=7)
    d.visit(early, (0, 0), 1)
    d.visit(early, (4, 0), 2)  # early takes SUB v1
    d.net.unsubscribe(d.broker[Cell(4, 0)], "s")
    d.visit(late, (4, 0), 3)  # late takes UNSUB v2 (it replaced the SUB still recruiting)
    d.visit(late, (0, 0), 4)
    d.visit(early, (0, 0), 5)
    entry = d.at((0, 0)).routes[("temp", Cell(0, 0))]
    assert len(entry.downstream) == 0
    assert len(d.net.drops("stale_subscription")) == 1
    d.net.publish(d.broker[Cell(0, 0)], parse_event("temp value=5"))
    assert not d.at((0, 0)).outgoing


def test_a_covered_subscription_does_not_travel_further() -> None:
    d = Dtn({(0, 0): {"adverts": ["temp"]}, (2, 0): {}})
    shb = d.broker[Cell(2, 0)]
    d.net.subscribe(shb, "wide", sub("temp value>1"))
    d.net.subscribe(shb, "narrow", sub("temp value>5"))
    f = d.ferries[0]
    d.visit(f, (0, 0), 1)
    d.visit(f, (2, 0), 2)
    d.visit(f, (0, 0), 3)
    entry = d.at((0, 0)).routes[("temp", Cell(0, 0))]
    assert [k.split("/")[1] for k in entry.downstream] == ["wide"]
    d.net.unsubscribe(shb, "wide")  # now the narrow one must go up instead
    d.visit(f, (2, 0), 4)
    d.visit(f, (0, 0), 5)
    assert [k.split("/")[1] for k in entry.downstream] == ["narrow"]


def test_a_contact_cut_short_loses_nothing() -> None:
    d = two_brokers(window=1)
    f = d.ferries[0]
    d.visit(f, (0, 0), 1)
    d.visit(f, (4, 0), 2)
    d.visit(f, (0, 0), 3)
    eid = d.net.publish(d.broker[Cell(0, 0)], parse_event("temp value=5"))
    d.net.loss = lambda src, dst, msg: msg.type == gm.BUNDLE  # every bundle lost
    d.visit(f, (0, 0), 5, stay=0.0005)
    phb = d.at((0, 0))
    assert len(phb.outgoing) == 1  # the handover never counted as a recruitment
    assert not next(iter(phb.outgoing.values())).unready[Cell(4, 0)].times
    d.net.loss = None
    d.visit(f, (0, 0), 6)
    d.visit(f, (4, 0), 7)
    assert len(d.net.deliveries(eid)) == 1


def test_the_ferry_store_survives_a_restart() -> None:
    d = two_brokers()
    store = MemoryStore()
    f = d.ferries[0]
    d.net.nodes[f] = Giant(f, params=d.ferry_params, store=store, seed=1)
    d.visit(f, (0, 0), 1)
    d.visit(f, (4, 0), 2)
    assert len(store) == 2  # the advertisement and the subscription bundle
    d.net.nodes[f] = Giant(f, params=d.ferry_params, store=store, seed=2)  # reboot
    d.visit(f, (0, 0), 3)
    assert len(d.at((0, 0)).routes[("temp", Cell(0, 0))].downstream) == 1


def test_ferries_have_no_clients() -> None:
    d = two_brokers()
    f = d.ferries[0]
    d.net.subscribe(f, "x", sub("temp"))
    d.net.publish(f, parse_event("temp value=1"))
    assert len(d.net.drops("ferry_has_no_clients")) == 2


def test_malformed_and_misaddressed_bundles_are_counted() -> None:
    d = two_brokers()
    b = d.broker[Cell(4, 0)]
    item = gm.EventItem(MessageId(1, 0, 1), Cell(0, 0), "temp", parse_event("temp value=5"), 0.0)
    wrong = gm.Bundle(gm.Kind.EVENT, Cell(9, 9), Cell(0, 0), 0.9, 10.0, item)
    for body in (None, [1], wrong.encode()):
        d.net.feed(b, FrameReceived(1.0, 100, Message(gm.BUNDLE, MessageId(100, 0, 1), body)))
    # malformed bodies are counted at once and recorded as a summary (an insider's junk)
    assert d.net.nodes[b].drops["malformed"] == 2 and len(d.net.drops("wrong_receiver")) == 1


def test_parameters_are_validated() -> None:
    with pytest.raises(ParameterError):
        parse_params(GiantParams, {"DR": 1.0})
    with pytest.raises(ParameterError):
        parse_params(GiantParams, {"tree": "kruskal"})
    with pytest.raises(ParameterError):
        parse_params(GiantParams, {"sub_lease_s": 10.0, "sub_refresh_s": 20.0})


def test_bounded_hit_model() -> None:
    d = Dtn({(0, 0): {"adverts": ["temp"], "hit_boundary": "reflect", "cols": 5, "rows": 5},
             (4, 4): {}})
    phb = d.at((0, 0))
    # walls send the walker back: the far corner is reached more often than on the plane
    assert phb.p_hit(Cell(4, 4), 16) > hit_probability(4, 4, 16)
    assert phb.p_hit(Cell(4, 4), 1000) > 0.99


def test_every_telemetry_record_is_valid() -> None:
    d = two_brokers()
    f = d.ferries[0]
    for k, cell in enumerate([(0, 0), (4, 0), (0, 0)]):
        d.visit(f, cell, 1 + k)
    d.net.publish(d.broker[Cell(0, 0)], parse_event("temp value=5"))
    d.visit(f, (0, 0), 5)
    d.visit(f, (4, 0), 6)
    for _at, node, emit in d.net.emitted:
        validate_record(make_record(run="r", node=node, protocol="giant", ts_ns=1,
                                    event=emit.event, attrs=emit.attrs))


def test_copies_per_next_hop_are_bounded() -> None:
    d = Dtn({(0, 0): {"adverts": ["temp"], "max_copies": 2}, (9, 9): {"DR": 0.99}},
            ferries=4)
    d.net.subscribe(d.broker[Cell(9, 9)], "s", sub("temp"))
    a = d.ferries[0]
    d.visit(a, (0, 0), 1)
    d.visit(a, (9, 9), 2)
    d.visit(a, (0, 0), 3)
    d.net.publish(d.broker[Cell(0, 0)], parse_event("temp value=1"))
    for k, f in enumerate(d.ferries):
        d.visit(f, (0, 0), 10 + k)
    assert len(d.net.drops("copy_limit")) == 1 and not d.at((0, 0)).outgoing


def test_the_peers_heard_are_bounded_and_the_stalest_make_room() -> None:
    # an insider with the fleet key can claim any number of ferry ids in a broker's cell
    d = two_brokers(max_peers=3)
    b = d.broker[Cell(0, 0)]
    hello = gm.Hello(True, Cell(0, 0), ()).encode()
    for k, forged in enumerate(range(500, 505)):
        d.net.feed(b, FrameReceived(1.0 + k, forged,
                                    Message(gm.HELLO, MessageId(forged, 0, 1), hello)))
    broker = d.at((0, 0))
    assert len(broker._heard) == 3 and set(broker._heard) == {502, 503, 504}
    assert len(d.net.drops("peers_full")) == 2
    # a real ferry still makes contact (the stalest forged id makes room for it) and
    # carries the broker's advertisement away
    f = d.ferries[0]
    d.visit(f, (0, 0), 10)
    assert len(d.net.drops("peers_full")) == 3 and 502 not in broker._heard
    assert any(msg.type == gm.ADV for msg in carried(d, f))


def test_the_in_flight_counts_are_bounded_and_end_with_their_sends() -> None:
    # forged ferry ids in a broker's cell: each gets the broker's advertisement, which no
    # one acknowledges; the evicted contacts' sends stay in flight until given up
    d = two_brokers(max_peers=3)
    b = d.broker[Cell(0, 0)]
    broker = d.at((0, 0))
    hello = gm.Hello(True, Cell(0, 0), ()).encode()
    most = 0
    for k, forged in enumerate(range(500, 506)):
        d.net.feed(b, FrameReceived(1.0 + 0.1 * k, forged,
                                    Message(gm.HELLO, MessageId(forged, 0, 1), hello)))
        most = max(most, len(broker._inflight))
    assert most == 3  # max_peers, never more
    refused = d.net.drops("inflight_full")
    assert len(refused) == 3 and {e.attrs["peer"] for _, e in refused} == {503, 504, 505}
    assert set(broker._contacts) == set()  # the refused contacts ended too
    d.net.run(until=30.0)  # every advertisement given up: no entry is left behind
    assert broker._inflight == {}
    # a real ferry still makes contact and carries the advertisement away
    f = d.ferries[0]
    d.visit(f, (0, 0), 31)
    assert any(msg.type == gm.ADV for msg in carried(d, f))
    assert broker._inflight == {} and d.node(f)._inflight == {}


def test_advertisements_from_peers_never_heard_leave_no_queue_behind() -> None:
    # a broker gives an advertisement back to whoever brought it, heard or not (its HELLO
    # may come later); forged senders used to leave an empty queue each, for ever
    d = two_brokers()
    b = d.broker[Cell(0, 0)]
    broker = d.at((0, 0))
    for k, forged in enumerate(range(600, 610)):
        adv = gm.Adv(f"x{k}", Cell(5, 5), (), 100.0).encode()
        d.net.feed(b, FrameReceived(1.0 + 0.01 * k, forged,
                                    Message(gm.ADV, MessageId(forged, 0, 1), adv)))
    assert set(broker._inflight) == set(range(600, 610))  # each given its ADV back
    d.net.run(until=30.0)  # no forged sender acknowledges: every send given up
    assert broker._outbox == {} and broker._inflight == {}
    assert broker.stats["advs_learned"] == 10


def test_hellos_do_not_take_the_window_of_bundles() -> None:
    # a HELLO's acknowledgement used to free a bundle's slot: with window = 1 a second
    # bundle or advertisement went out while the first still awaited its acknowledgement
    d = two_brokers(window=1)
    f = d.ferries[0]
    worst = 0
    for k, cell in enumerate([(0, 0), (4, 0), (0, 0), (4, 0)]):
        b = d.broker[Cell(*cell)]
        d.net.run(until=1 + 2 * k)
        d.net.link(f, b)
        end = d.net.now + 0.5
        while d.net.now < end:
            d.net.run(until=d.net.now + 0.0005)
            for proto in (d.node(f), d.node(b)):
                windowed = Counter(e.node for e in proto.reliable.pending.values()
                                   if e.message.type != gm.HELLO)
                worst = max([worst, *windowed.values()])
        d.net.unlink(f, b)
    assert worst == 1
    assert d.at((4, 0)).stats["bundles_delivered"] == 0  # brokers deliver, ferries count
    assert d.node(f).stats["bundles_delivered"] >= 1 and d.node(f)._inflight == {}


def test_a_broker_that_lost_a_ferry_the_ferry_kept_gets_its_contact_back() -> None:
    # neighbour loss is not symmetric: the broker times the ferry out, the ferry (its own
    # timeout not yet run out) keeps the broker; when the broker hears it again and greets
    # it, the ferry must answer, or the broker has no contact until the ferry's cell changes
    d = two_brokers()
    f, b = d.ferries[0], d.broker[Cell(0, 0)]
    d.net.link(f, b)
    d.net.run(until=d.net.now + 0.5)
    broker = d.at((0, 0))
    assert f in broker._contacts
    d.net.feed(b, NeighborDown(d.net.now, f))  # the broker alone loses the ferry
    assert f not in broker._contacts and b in d.node(f)._contacts
    d.net.run(until=d.net.now + 0.5)
    d.net.feed(b, NeighborUp(d.net.now, NeighborInfo(f)))  # and hears it again
    d.net.run(until=d.net.now + 0.5)
    assert f in broker._contacts


def test_a_broker_that_learns_its_cell_after_a_ferry_greeted_it_takes_the_contact_up() -> None:
    # On a device the ferry's HELLO can come before the broker's first fix: a broker that
    # does not know its cell cannot check the ferry's, so it waits; once it knows its cell
    # it must take up the ferry it heard and greet it with that cell, or the ferry passes
    # by without the advertisement (a virtual-mesh run lost a whole ferry round so).
    base = {"unit_s": UNIT, "cols": 20, "rows": 20}
    net = Net({}, delay=0.001)
    phb = Giant(1, params=parse_params(GiantParams, {**base, "role": "broker",
                                                     "adverts": ["temp"]}), seed=1)
    ferry = Giant(100, params=parse_params(GiantParams, {**base, "role": "ferry"}), seed=100)
    net.nodes.update({1: phb, 100: ferry})
    net.run(until=0.01)
    net.feed(100, PositionChanged(net.now, Position(50.0, 50.0)))  # cell (0, 0)
    net.link(100, 1)
    net.run(until=net.now + 1.0)
    assert phb.cell is None and 100 not in phb._contacts and not carried_by(ferry)
    net.feed(1, PositionChanged(net.now, Position(40.0, 60.0)))  # the broker's first fix
    net.run(until=net.now + 1.0)
    assert phb.cell == Cell(0, 0) and 100 in phb._contacts and 1 in ferry._contacts
    assert [msg.type for msg in carried_by(ferry)] == [gm.ADV]

