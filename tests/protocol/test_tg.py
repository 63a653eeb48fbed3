"""TG over the harness: the thesis's Fig. 1, groups on random topologies, repairs, merges, gateways.

Invariants: ``cluster_world.check_invariants`` (docs/protocols/tg.md, "Invariants").
"""

from __future__ import annotations

import random
from typing import Any

import pytest
from cluster_world import (
    Walkers,
    World,
    check_exact_delivery,
    check_invariants,
    geometric,
    group_graph,
    group_graph_connected,
    subscribe_randomly,
)
from harness import Net

from meshsub.core.api import FrameReceived, Message, MessageId, PositionChanged
from meshsub.core.cluster import messages as cm
from meshsub.core.cluster.base import MAX_HEARD, MAX_HEARD_BYTES
from meshsub.core.cluster.ids import GroupId
from meshsub.core.content import Event
from meshsub.core.params import ParameterError, parse_params
from meshsub.core.registry import get_protocol
from meshsub.core.tags import Mode, Scope, tag_event, tag_subscriptions
from meshsub.core.telemetry import make_record, validate_record
from meshsub.protocols.tg import TG, TGParams
from meshsub.protocols.tg.messages import PUBLISH

A, B, C, D, E, F = 1, 2, 3, 4, 5, 6
FIG1 = {  # Liu 2011, Fig. 1 (1-based bit positions); D, E, C and F's own are filled in
    "SB": (2, 3), "SD": (1, 7), "SE": (4, 8), "SC": (3, 11), "SF": (5, 10), "X": (2, 8),
    "SN": (5, 10),
}
UNUSED = (6, 12)
"""Bits no subscription of Fig. 1 sets: every other key (the topic probes) maps here."""


def fig1_positions(key: str) -> list[int]:
    return [p - 1 for p in FIG1.get(key, UNUSED)]


def fig1(extra_links: tuple[tuple[int, int], ...] = ()) -> Net:
    """Fig. 1's tree: A leads (the only node able to), B, C below it, D, E below B, F below C."""
    base = {"m": 12, "k": 2, "max_groups": 1}
    nodes: dict[int, Any] = {}
    for n in range(1, 9):
        p = parse_params(TGParams, {**base, "leader_capable": n == A})
        nodes[n] = TG(n, params=p, seed=n, positions=fig1_positions)
    net = Net(nodes, delay=0.001)
    for a, b in ((A, B), (A, C), (B, D), (B, E), (C, F), *extra_links):
        net.link(a, b)
    for n, key in ((B, "SB"), (C, "SC"), (D, "SD"), (E, "SE"), (F, "SF")):
        net.subscribe(n, "s", tag_subscriptions("s", "fig", Mode.SINGLE, [key])[0][1])
    net.run(until=30.0)
    return net


def tg(net: Net, n: int) -> TG:
    proto = net.nodes[n]
    assert isinstance(proto, TG)
    return proto


def publish_txs(net: Net, after: int) -> list[tuple[int, int | None]]:
    return [(tx.src, tx.dst) for tx in net.txs[after:] if tx.message.type == PUBLISH]


def test_fig1_tree_and_bitmaps() -> None:
    net = fig1()
    parents = {n: tg(net, n).dump_state()[0]["parent"] for n in (A, B, C, D, E, F)}
    assert parents == {A: None, B: A, C: A, D: B, E: B, F: C}
    bits = {n: {p + 1 for p in range(12) if tg(net, n).merged(
        next(iter(tg(net, n).memberships.values()))) >> p & 1} for n in (B, C, A)}
    assert bits == {B: {1, 2, 3, 4, 7, 8}, C: {3, 5, 10, 11}, A: {1, 2, 3, 4, 5, 7, 8, 10, 11}}


def test_fig1_publication_climbs_then_branches_into_matching_children() -> None:
    """The worked example (§3.2): S_F from D goes D->B->A->C->F, 4 transmissions; E sees nothing."""
    net = fig1()
    start = len(net.txs)
    eid = net.publish(D, tag_event("fig", ["SF"]))
    net.run(until=31.0)
    assert publish_txs(net, start) == [(D, B), (B, A), (A, C), (C, F)]
    assert net.deliveries(eid) == [(F, "s")]


def test_fig1_aggregation_false_positive_dies_at_b() -> None:
    """X = {2, 8} passes B's merged bitmap at A but no bitmap below B: one wasted hop."""
    net = fig1()
    start = len(net.txs)
    eid = net.publish(F, tag_event("fig", ["X"]))
    net.run(until=31.0)
    assert publish_txs(net, start) == [(F, C), (C, A), (A, B)]
    assert net.deliveries(eid) == []
    assert tg(net, B).drops["false_positive_forward"] == 1


def test_prematch_joins_the_parent_whose_bitmap_overlaps_most() -> None:
    """§3.3: N ({5, 10}) hears B (score 0) and C (score 2): it joins C."""
    net = fig1()
    net.subscribe(7, "s", tag_subscriptions("s", "fig", Mode.SINGLE, ["SN"])[0][1])
    net.link(7, B)
    net.link(7, C)
    net.run(until=45.0)
    assert tg(net, 7).dump_state()[0]["parent"] == C
    # a joiner with an empty bitmap scores 0 everywhere: the shallower candidate wins
    net.link(8, D)
    net.link(8, C)
    net.run(until=60.0)
    assert tg(net, 8).dump_state()[0]["parent"] == C


def test_max_level_node_never_offers_its_group() -> None:
    """Algorithm 1: a node at maxLevel ignores joining requests; deeper nodes stay out."""
    p = parse_params(TGParams, {"preferred_levels": 3, "leader_capable": False})
    net = Net({n: TG(n, params=p if n != 1 else parse_params(TGParams, {
        "preferred_levels": 3}), seed=n) for n in range(1, 7)}, delay=0.001)
    net.line([1, 2, 3, 4, 5, 6])
    net.run(until=40.0)
    levels = {n: [g["level"] for g in tg(net, n).dump_state()] for n in range(1, 7)}
    assert levels == {1: [0], 2: [1], 3: [2], 4: [3], 5: [], 6: []}
    assert not [tx for tx in net.txs if tx.src == 4 and tx.message.type == cm.JOIN_REPLY]
    before = sum(tg(net, 5).drops.values())
    net.publish(5, tag_event("t", ["a"]))
    assert tg(net, 5).drops["unaffiliated"] == 1 and sum(tg(net, 5).drops.values()) == before + 1


def test_isolated_nodes_and_leader_election_time() -> None:
    """A capable isolated node leads within 5 s (the timers' bound); an incapable one never."""
    p = TGParams()
    bound = p.T_START_JITTER + (p.N_QUERY + 1) * p.T_QUERY + p.T_LEADER_BACKOFF
    net = Net({1: TG(1, params=p, seed=1),
               2: TG(2, params=parse_params(TGParams, {"leader_capable": False}), seed=2)})
    for n in (1, 2):  # nothing else reaches an isolated node: the driver's first input
        net.feed(n, PositionChanged(0.0, None))
    net.run(until=bound)
    assert [g["level"] for g in tg(net, 1).dump_state()] == [0]
    net.run(until=60.0)
    assert tg(net, 2).memberships == {}


# ---------------------------------------------------------------- random static topologies


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_groups_on_random_topologies_keep_every_invariant(seed: int) -> None:
    w = World.build(TG, geometric(40, seed, 0.22), TGParams(), seed=seed)
    w.run(60.0)
    check_invariants(w, covers=lambda top, local: top & local == local)
    assert group_graph_connected(w)
    assert sum(w.node(n).stats["merges"] for n in w.alive()) > 0
    groups = len(w.groups())
    w.run(120.0)  # no singleton storms: the grouping is stable
    assert len(w.groups()) == groups


def _cycle_free(w: World) -> bool:
    for members in w.groups().values():
        for n in members:
            seen = {n}
            x = members[n]["parent"]
            while x is not None and x in members:
                if x in seen:
                    return False
                seen.add(x)
                x = members[x]["parent"]
    return True


@pytest.mark.parametrize("seed", [3, 4])
def test_a_parent_removed_its_orphans_reattach_without_a_loop(seed: int) -> None:
    w = World.build(TG, geometric(40, seed, 0.25), TGParams(), seed=seed)
    w.run(40.0)
    rnd = random.Random(seed)
    parents = [n for n in w.alive() if any(len(ms.tree) and not ms.is_leader
                                           for ms in w.node(n).memberships.values())]
    victim = rnd.choice(parents)
    orphans = {c for ms in w.node(victim).memberships.values() for c in ms.tree}
    w.remove(victim)
    t = 40.0
    while t < 70.0:  # every snapshot during the repair is loop-free
        t += 0.25
        w.run(t)
        assert _cycle_free(w)
    check_invariants(w, repairs=True)
    alive = set(w.alive())
    assert all(w.node(o).memberships for o in orphans & alive)
    assert sum(w.node(n).stats["repairs"] + w.node(n).stats["promotions"]
               for n in orphans & alive) >= 1


def test_a_leader_killed_fragments_reattach_or_lead() -> None:
    w = World.build(TG, geometric(40, 5, 0.25), TGParams(), seed=5)
    w.run(40.0)
    leader = max(w.groups().items(), key=lambda kv: len(kv[1]))[0].leader
    w.remove(leader)
    w.run(80.0)
    check_invariants(w, repairs=True)
    assert all(leader != gid.leader for gid in w.groups())


@pytest.mark.parametrize("seed", [11])
def test_walking_nodes_then_still_ones_settle_into_valid_groups(seed: int) -> None:
    """40 s of random waypoint churn (repairs, merges, gateways coming and going), then 40 s
    still: every invariant holds and delivery is exact again."""
    walkers = Walkers(40, seed, 0.25)
    rnd = random.Random(seed)
    w = World.build(TG, sorted(walkers.edges()), TGParams(), seed=seed, ids=walkers.pos)
    subs = subscribe_randomly(w, rnd)
    walkers.walk(w, 40.0)
    w.run(80.0)
    check_invariants(w, repairs=True, covers=lambda top, local: top & local == local)
    assert sum(w.node(n).stats["repairs"] for n in w.alive()) > 10
    live = {k: v for k, v in subs.items() if k[0] in w.alive()}
    check_exact_delivery(w, live, rnd, 10, scoped=True)


def test_dissolve_policy_also_heals() -> None:
    """The thesis's own behaviour (§3.5): the orphan's children find new parents themselves."""
    params = parse_params(TGParams, {"orphan_policy": "dissolve"})
    w = World.build(TG, geometric(30, 6, 0.3), params, seed=6)
    w.run(40.0)
    victim = next(n for n in w.alive() if any(len(ms.tree) and not ms.is_leader
                                              for ms in w.node(n).memberships.values()))
    w.remove(victim)
    w.run(90.0)
    check_invariants(w, repairs=True)
    assert sum(w.node(n).stats["promotions"] for n in w.alive()) == 0


# ---------------------------------------------------------------- merge and gateways


def _line(preferred: int) -> World:
    """1-2 and 3-4, each pair a group (only 1 and 4 may lead), then the link 2-3 appears."""
    nodes: dict[int, Any] = {
        n: TG(n, params=parse_params(TGParams, {"preferred_levels": preferred,
                                                "leader_capable": n in (1, 4)}), seed=n)
        for n in (1, 2, 3, 4)}
    w = World(Net(nodes, delay=0.002), [(1, 2), (3, 4)])
    w.net.link(1, 2)
    w.net.link(3, 4)
    w.run(20.0)
    assert len(w.groups()) == 2
    w.net.link(2, 3)
    w.edges.append((2, 3))
    w.run(60.0)
    return w


def test_groups_merge_when_the_combined_depth_fits() -> None:
    """a + b + c = 1 + 2 + 1 <= L = 4: one group, no level beyond a + b + c."""
    w = _line(4)
    check_invariants(w)
    (members,) = w.groups().values()
    assert len(members) == 4 and max(g["level"] for g in members.values()) <= 4
    assert sum(w.node(n).stats["merges"] for n in w.alive()) == 1


def test_groups_too_deep_to_merge_keep_one_active_gateway_that_relays() -> None:
    """a + b + c = 4 > L = 3: two groups, one active gateway; global events cross, local don't."""
    w = _line(3)
    check_invariants(w)
    gids, links = group_graph(w)
    assert len(gids) == 2 and len(links) == 1
    for n, sub in ((1, "s"), (4, "s")):
        w.net.subscribe(n, sub, tag_subscriptions(sub, "t", Mode.SINGLE, ["a"])[0][1])
    w.run(70.0)
    eid = w.net.publish(1, tag_event("t", ["a"]))
    w.run(72.0)
    assert sorted(w.net.deliveries(eid)) == [(1, "s"), (4, "s")]
    assert sum(w.node(n).stats["relayed"] for n in w.alive()) == 1
    start = len(w.net.txs)
    local = w.net.publish(1, tag_event("t", ["a"], Scope.LOCAL))
    w.run(74.0)
    assert w.net.deliveries(local) == [(1, "s")]
    home = w.group_of(1)
    reached = {tx.dst for tx in w.net.txs[start:] if tx.message.type == PUBLISH}
    assert all(w.group_of(n) & home for n in reached)  # it never left the publisher's group


# ---------------------------------------------------------------- exact delivery


@pytest.mark.parametrize("seed", [8, 9])
def test_exact_delivery_on_random_topologies(seed: int) -> None:
    rnd = random.Random(seed)
    w = World.build(TG, geometric(40, seed, 0.22), TGParams(), seed=seed)
    subs = subscribe_randomly(w, rnd)
    w.run(60.0)
    check_invariants(w, covers=lambda top, local: top & local == local)
    assert len(w.groups()) > 1  # so that events cross gateways
    assert check_exact_delivery(w, subs, rnd, 25, scoped=True) > 50
    assert sum(w.node(n).stats["relayed"] for n in w.alive()) > 0


def test_per_hop_acks_keep_delivery_exact_under_frame_loss() -> None:
    """5 % of all frames lost (control traffic too): publications still arrive exactly."""
    rnd = random.Random(13)
    loss = random.Random(14)
    w = World.build(TG, geometric(30, 13, 0.28), TGParams(), seed=13)
    w.net.loss = lambda src, dst, message: loss.random() < 0.05
    subs = subscribe_randomly(w, rnd)
    w.run(60.0)
    assert check_exact_delivery(w, subs, rnd, 15, scoped=False) > 20


def test_tiny_bitmaps_cost_traffic_never_precision() -> None:
    """Precision: with m = 8 everything passes every filter, yet delivery stays exact
    (here best effort, as in the thesis: no per-hop acknowledgements)."""
    rnd = random.Random(10)
    params = parse_params(TGParams, {"m": 8, "k": 1, "reliable_publish": False})
    w = World.build(TG, geometric(25, 10, 0.3), params, seed=10)
    subs = subscribe_randomly(w, rnd)
    w.run(50.0)
    check_exact_delivery(w, subs, rnd, 10, scoped=False)


def test_unsubscribe_rebuilds_the_local_bitmap() -> None:
    """Subscribe A, B, unsubscribe A: the bitmap is that of B alone (no Bloom deletion)."""
    net = Net.of(TG, [1])
    a = tag_subscriptions("a", "t", Mode.AND, ["x", "y"])[0][1]
    b = tag_subscriptions("b", "t", Mode.SINGLE, ["z"])[0][1]
    net.subscribe(1, "a", a)
    net.subscribe(1, "b", b)
    only_b = Net.of(TG, [1])
    only_b.subscribe(1, "b", b)
    assert tg(net, 1).local_summary() != tg(only_b, 1).local_summary()
    net.unsubscribe(1, "a")
    assert tg(net, 1).local_summary() == tg(only_b, 1).local_summary()


def test_a_subtree_leaving_clears_its_bits_upward() -> None:
    """§3.5: after a leaf leaves, its bits leave every ancestor's merged bitmap."""
    net = fig1()
    root = next(iter(tg(net, A).memberships.values()))
    before = tg(net, A).merged(root)
    net.unlink(B, E)
    net.run(until=35.0)
    after = tg(net, A).merged(root)
    assert before != after and after | (1 << 3) | (1 << 7) == before


# ---------------------------------------------------------------- odds and ends


def test_every_record_follows_the_telemetry_schema() -> None:
    rnd = random.Random(15)
    w = World.build(TG, geometric(20, 15, 0.3), TGParams(), seed=15)
    subs = subscribe_randomly(w, rnd)
    w.run(30.0)
    w.remove(w.alive()[3])
    w.run(40.0)
    check_exact_delivery(w, {k: v for k, v in subs.items() if k[0] in w.alive()}, rnd, 5,
                         scoped=True)
    for _, node, emit in w.net.emitted:
        validate_record(make_record(run="r", node=node, protocol="tg", ts_ns=0,
                                    event=emit.event, attrs=emit.attrs))
    assert w.net.records("deliver")


def test_member_records_replay_to_each_nodes_groups() -> None:
    """The evaluation's local-event truth is the ``member`` records: they must add up."""
    w = World.build(TG, geometric(25, 21, 0.3), TGParams(preferred_levels=2), seed=21)
    w.run(30.0)
    w.remove(w.alive()[4])
    w.run(45.0)
    held: dict[int, set[str]] = {}
    for node, emit in w.net.records("member"):
        groups = held.setdefault(node, set())
        name = emit.attrs["group"]
        if emit.attrs["reason"] == "join":
            assert name not in groups
            groups.add(name)
        else:
            groups.remove(name)
    for n in w.alive():
        assert held.get(n, set()) == {f"tg:{g}" for g in tg_groups(w, n)}, n
    assert sum(1 for _, e in w.net.records("member") if e.attrs["reason"] == "leave")


def tg_groups(w: World, n: int) -> set[GroupId]:
    return set(w.node(n).memberships)


def test_origin_scope_is_local() -> None:
    """``_scope = "@origin:tg"`` (the scenarios' spelling) stays in the publisher's groups."""
    line = [(i, i + 1) for i in range(1, 6)]
    w = World.build(TG, line, TGParams(preferred_levels=1), seed=3)
    w.run(30.0)
    assert len(w.groups()) > 1  # depth 1 cannot hold a line of six
    for n in range(1, 7):
        w.net.subscribe(n, "s", tag_subscriptions("s", "t", Mode.AND, ["x"])[0][1])
    w.run(32.0)
    publisher = next(n for n in range(1, 7) if len(tg_groups(w, n)) == 1)
    w.net.publish(publisher, Event("t", {"x": True, "_scope": "@origin:tg"}))
    w.run(35.0)
    got = {n for n, _ in w.net.records("deliver")}
    mates = {n for n in range(1, 7) if tg_groups(w, n) & tg_groups(w, publisher)}
    assert got == mates and got != set(range(1, 7))


def test_registry_ids_and_state_size() -> None:
    assert get_protocol("tg") is TG and TG.protocol_id == 11
    net = fig1()
    # A: its own bitmap and two children's, 12 bits -> 2 bytes each
    assert tg(net, A).state_sizes() == {"bitmaps": (3, 6)}
    assert tg(net, E).state_sizes() == {"bitmaps": (1, 2)}
    assert tg(net, A).status()["groups"][0]["children"] == 2


@pytest.mark.parametrize("values", [
    {"preferred_levels": 0}, {"preferred_levels": 5, "maximum_levels": 4}, {"m": 4},
    {"k": 0}, {"LOCAL_GROUP_HOPS": 40}, {"max_groups": 9}, {"W_MIN": 2.0, "W_MAX": 1.0},
    {"T_DEAD": 0.5}, {"orphan_policy": "flee"}, {"T_HELLO": -1},
])
def test_bad_parameters_are_refused(values: dict[str, Any]) -> None:
    with pytest.raises(ParameterError):
        parse_params(TGParams, values)


def test_group_ids_order_and_print() -> None:
    g = GroupId(0x1A, 2, 3)
    assert str(g) == "1a-2-3" and GroupId.decode(g.wire()) == g and g < GroupId(0x1A, 2, 4)


def test_the_hello_table_is_bounded_and_forgets_the_silent() -> None:
    """The machine keeps HELLOs in ``core.beacon``'s table: the least recently heard make room
    (each a counted drop), and a neighbour silent for ``T_DEAD`` is forgotten at the next tick."""
    net = fig1()
    a = tg(net, A)
    assert sorted(a._heard) == [B, C]
    before = a.drops.get("heard_table_full", 0)
    fakes = range(1000, 1000 + MAX_HEARD + 3)
    for fake in fakes:
        hello = cm.Hello(False, ())
        net.feed(A, FrameReceived(net.now, fake, Message(cm.HELLO, MessageId(fake, 0, 1),
                                                         hello.encode(), ttl=1)))
    assert len(a._heard) == MAX_HEARD and a._heard.bytes <= MAX_HEARD_BYTES
    assert a.drops["heard_table_full"] - before == 5
    assert B not in a._heard and C not in a._heard  # the least recently heard went first
    assert [n for n in fakes if n not in a._heard] == [1000, 1001, 1002]
    net.run(until=net.now + a.params.T_DEAD + 2 * a.params.T_HELLO)
    assert sorted(a._heard) == [B, C]  # back with their next HELLOs; the fakes fell silent
    check_invariants(World(net, [(A, B), (A, C), (B, D), (B, E), (C, F)]))
