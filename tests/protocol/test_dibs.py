"""DIBS on the unit-test harness: tree formation, storage, routing, repair (Pham and Tran 2012).

Each test runs real DIBS nodes on a small graph with a virtual clock and
checks the paper's claims that hold exactly: the trees and key zones
(§3.1-3.2, Properties 3.2-3.3), distances equal to BFS, queries stored
exactly where their interval meets a key zone (one replica for exact match),
one notification per matching pair, m routed copies per publication, repair
that changes VAs only below the failed node (§3.3.2), and counted drops for
malformed frames.
"""

from __future__ import annotations

from dataclasses import replace

from dibs_world import PARAMS, bfs, check_trees, dibs, dibs_net, start, unit_disk

from meshsub.core.api import FrameReceived, Message, MessageId, NeighborDown
from meshsub.core.content import Event, Subscription
from meshsub.core.keyspace import format_key
from meshsub.core.predicates import Predicate
from meshsub.protocols.dibs import va as v
from meshsub.protocols.dibs.messages import (
    HEARTBEAT,
    PUBLISH,
    SUBSCRIBE,
    DistEntry,
    Heartbeat,
)

K = PARAMS.k


def key_sub(lo: int, hi: int) -> Subscription:
    return Subscription("s", (Predicate.between("key", format_key(lo, K), format_key(hi, K)),))


def key_event(key: int) -> Event:
    return Event("s", {"key": format_key(key, K)})


def grid_net(refs: set[int]):  # type: ignore[no-untyped-def]
    net = dibs_net(list(range(1, 26)), refs)
    net.grid(5, 5)
    start(net, 20.0)
    return net


def test_trees_form_with_bfs_distances_and_partitioned_zones() -> None:
    net = grid_net({1, 25})
    alive = set(net.nodes)
    check_trees(net, alive)
    for ref in (1, 25):
        hops = bfs(net, ref)
        for n in alive:
            assert dibs(net, n).hops_to(ref) == hops[n]
    for n in alive:  # each node in a nearest reference's cluster (the Voronoi claim)
        d = dibs(net, n)
        assert d.hops_to(d.cl) == min(d.hops_to(1), d.hops_to(25))  # type: ignore[arg-type]


def test_queries_are_stored_exactly_where_they_meet_a_key_zone() -> None:
    net = grid_net({1, 25})
    net.subscribe(13, "r", key_sub(1000, 40000))
    net.subscribe(7, "x", key_sub(44100, 44100))
    net.subscribe(8, "y", key_sub(44100, 44200))
    net.run(until=25.0)
    for sub_node, sub_id, lo, hi in ((13, "r", 1000, 40000), (7, "x", 44100, 44100),
                                     (8, "y", 44100, 44200)):
        cl = dibs(net, sub_node).cl
        holders = {n for n in net.nodes if (sub_node, sub_id) in dibs(net, n).store}
        expected = {n for n in net.nodes if dibs(net, n).cl == cl
                    and v.meets(dibs(net, n).kzone(), lo, hi)}
        assert holders == expected
    assert len([n for n in net.nodes if (7, "x") in dibs(net, n).store]) == 1  # exact match


def test_every_matching_pair_is_notified_once_through_m_copies() -> None:
    net = grid_net({1, 25})
    subs = {3: (0, 30000), 11: (20000, 65535), 22: (5, 5), 18: (100, 200)}
    for node, (lo, hi) in subs.items():
        net.subscribe(node, "q", key_sub(lo, hi))
    net.run(until=25.0)
    sent_before = len([t for t in net.txs if t.message.type == PUBLISH])
    for pub, key in ((9, 5), (16, 25000), (2, 150), (24, 64000)):
        eid = net.publish(pub, key_event(key))
        net.run(until=net.now + 2.0)
        got = sorted(net.deliveries(eid))
        assert got == sorted((n, "q") for n, (lo, hi) in subs.items() if lo <= key <= hi)
    copies = sum(dibs(net, n).stats["copies"] for n in net.nodes)
    assert copies == 4 * 2  # m = 2 copies per publication
    assert len([t for t in net.txs if t.message.type == PUBLISH]) > sent_before


def test_repair_changes_vas_only_below_the_failed_node_and_deliveries_resume() -> None:
    net = grid_net({1})
    victim = next(n for n in sorted(net.nodes, key=lambda n: -len(dibs(net, n).succ))
                  if not dibs(net, n).is_ref)
    before = {n: dibs(net, n).va for n in net.nodes}
    below = {n for n in net.nodes if n != victim and before[n] is not None
             and before[n].startswith(before[victim] or "x")}  # type: ignore[union-attr]
    net.subscribe(25, "q", key_sub(0, 65535))
    net.run(until=net.now + 3.0)
    for other in net.neighbors(victim):
        net.unlink(victim, other)
    alive = set(net.nodes) - {victim}
    net.run(until=net.now + 15.0)
    check_trees(net, alive)
    changed = {n for n in alive if dibs(net, n).va != before[n]}
    assert changed <= below and changed
    net.run(until=net.now + PARAMS.lease_s / 3 + 2.0)  # one refresh re-places the queries
    eid = net.publish(2 if victim != 2 else 3, key_event(4242))
    net.run(until=net.now + 2.0)
    assert (25, "q") in net.deliveries(eid)


def test_random_unit_disk_graphs_converge() -> None:
    for seed in (1, 2, 3):
        net = dibs_net(list(range(1, 41)), {1, 2, 3})
        unit_disk(net, 40, 100.0, 30.0, seed)
        comp = bfs(net, 1)
        for ref in (2, 3):
            comp.update(bfs(net, ref))
        start(net, 30.0)
        alive = set(comp)
        check_trees(net, alive)


def test_malformed_frames_are_counted_drops() -> None:
    net = grid_net({1})
    node = dibs(net, 7)
    before = dict(node.drops)
    mid = MessageId(8, 0, 99)
    for mtype, body in ((HEARTBEAT, [1, 2]), (SUBSCRIBE, "x"), (PUBLISH, [1, b"\x00", [], 0]),
                        (99, None)):
        net.feed(7, FrameReceived(net.now, 8, Message(mtype, mid, body, ttl=1)))
    assert node.drops["malformed"] - before.get("malformed", 0) == 3
    assert node.drops["unknown_type"] - before.get("unknown_type", 0) == 1


def test_a_lost_neighbor_is_forgotten() -> None:
    net = grid_net({1})
    node = dibs(net, 7)
    net.feed(7, NeighborDown(net.now, 8))
    assert 8 not in node.nbs


def test_paper_mode_stores_a_superset_and_still_meets_every_designated_node() -> None:
    """§3.2's two conditions store at least the exact replicas (more for some ranges)."""
    holders = {}
    for paper in (False, True):
        net = dibs_net(list(range(1, 26)), {1}, replace(PARAMS, paper_mode=paper))
        net.grid(5, 5)
        start(net, 20.0)
        net.subscribe(13, "r", key_sub(20000, 40000))  # across the root's first two zones
        net.run(until=25.0)
        holders[paper] = {n for n in net.nodes if (13, "r") in dibs(net, n).store}
        for key in (20000, 30000, 40000):  # the designated node of each key holds it
            owner = next(n for n in net.nodes if v.owns(str(dibs(net, n).va),
                                                         dibs(net, n).slots(), key, K))
            assert owner in holders[paper]
    assert holders[False] < holders[True]


def test_the_neighbour_table_is_bounded_with_counted_drops() -> None:
    """CRES keeps heartbeats in ``core.beacon``'s table: beyond its bounds, a counted drop."""
    params = replace(PARAMS, max_neighbors=4, max_neighbor_bytes=28 + 3 * 16)  # ref 1's + 3
    net = dibs_net([1, 2], {1}, params)
    net.link(1, 2)
    start(net, 5.0)
    node = dibs(net, 2)
    assert list(node.nbs) == [1]
    before = dict(node.drops)
    hb = Heartbeat(False, None, None, None, 0, False, (), (), 1.0)
    for fake in range(100, 110):
        net.feed(2, FrameReceived(net.now, fake, Message(HEARTBEAT, MessageId(fake, 0, 1),
                                                          hb.encode(), ttl=1)))
    assert len(node.nbs) == 4 and node.nbs.bytes <= params.max_neighbor_bytes
    assert node.drops["neighbor_table_full"] - before.get("neighbor_table_full", 0) == 7
    big = replace(hb, dist=tuple(DistEntry(r, 1, None, 1) for r in range(1, 7)))  # 88 bytes
    net.feed(2, FrameReceived(net.now, 100, Message(HEARTBEAT, MessageId(100, 0, 2),
                                                     big.encode(), ttl=1)))
    assert node.drops["heartbeat_too_big"] - before.get("heartbeat_too_big", 0) == 1
    assert node.nbs.get(100) is not None and node.nbs.get(100).state == hb  # type: ignore[union-attr]
    assert node.state_sizes()["neighbors"] == (4, node.nbs.bytes)
    net.run(until=net.now + 10.0)  # the fakes fall silent: forgotten after dead_periods · T
    assert list(node.nbs) == [1]
