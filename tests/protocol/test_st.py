"""ST over the harness: one tree per connected part, exact tables with covering, exact delivery."""

from __future__ import annotations

import random

import pytest
from cluster_world import (
    Walkers,
    World,
    check_exact_delivery,
    check_invariants,
    components,
    geometric,
    subscribe_randomly,
)
from harness import Net

from meshsub.core.registry import get_protocol
from meshsub.core.tags import Mode, conjunction, tag_event, tag_subscriptions
from meshsub.protocols.st import ST, STParams
from meshsub.protocols.st.messages import PUBLISH


def st_node(w: World, n: int) -> ST:
    proto = w.node(n)
    assert isinstance(proto, ST)
    return proto


@pytest.mark.parametrize("seed", [0, 1])
def test_one_tree_per_connected_network(seed: int) -> None:
    w = World.build(ST, geometric(40, seed, 0.22), STParams(), seed=seed)
    w.run(60.0)
    check_invariants(w)
    assert len(w.groups()) == 1


def test_tables_follow_the_tree_with_covering() -> None:
    """A line 1-2-3: 3 subscribes {a} and {a, b}; only {a} travels, the covered one stays home."""
    net = Net.of(ST, [1, 2, 3], delay=0.002, seed=1)
    net.line([1, 2, 3])
    w = World(net, [(1, 2), (2, 3)])
    a = conjunction("t", ["a"])
    ab = conjunction("t", ["a", "b"])
    net.subscribe(3, "x", a)
    net.subscribe(3, "y", ab)
    w.run(30.0)
    assert list(st_node(w, 2).learned[3].values()) == [a]
    assert list(st_node(w, 1).learned[2].values()) == [a]
    assert st_node(w, 1).state_sizes() == {"tables": (1, len(a.key) + 8)}
    net.unsubscribe(3, "x")  # now {a, b} is needed upstream, and {a} withdrawn
    w.run(32.0)
    assert list(st_node(w, 1).learned[2].values()) == [ab]
    start = len(net.txs)
    eid = net.publish(1, tag_event("t", ["a", "c"]))
    w.run(33.0)
    assert net.deliveries(eid) == []
    assert not [tx for tx in net.txs[start:] if tx.message.type == PUBLISH]  # no match upstream


def test_a_lost_link_withdraws_and_a_repair_restores_the_tables() -> None:
    rnd = random.Random(3)
    w = World.build(ST, geometric(30, 3, 0.3), STParams(), seed=3)
    subs = subscribe_randomly(w, rnd)
    w.run(50.0)
    victim = next(n for n in w.alive() if len(st_node(w, n).edges) >= 3)
    w.remove(victim)
    w.run(90.0)
    check_invariants(w, repairs=True)
    for n in w.alive():
        assert victim not in st_node(w, n).learned
    live = {k: v for k, v in subs.items() if k[0] != victim}
    check_exact_delivery(w, live, rnd, 10, scoped=False)


def test_walking_nodes_then_still_ones_settle_into_one_tree() -> None:
    walkers = Walkers(40, 12, 0.25)
    rnd = random.Random(12)
    w = World.build(ST, sorted(walkers.edges()), STParams(), seed=12, ids=walkers.pos)
    subs = subscribe_randomly(w, rnd)
    walkers.walk(w, 40.0)
    w.run(80.0)
    check_invariants(w, repairs=True)
    assert len(w.groups()) == len(components(w.alive(), w.edges))
    live = {k: v for k, v in subs.items() if k[0] in w.alive()}
    check_exact_delivery(w, live, rnd, 10, scoped=False)


@pytest.mark.parametrize("seed", [8, 9])
def test_exact_delivery(seed: int) -> None:
    rnd = random.Random(seed)
    w = World.build(ST, geometric(40, seed, 0.22), STParams(), seed=seed)
    subs = subscribe_randomly(w, rnd)
    w.run(60.0)
    assert check_exact_delivery(w, subs, rnd, 20, scoped=False) > 40


def test_registry_and_ids() -> None:
    assert get_protocol("st") is ST and ST.protocol_id == 12
    assert tag_subscriptions("g", "t", Mode.OR, ["a"])[0][0] == "g|a"
