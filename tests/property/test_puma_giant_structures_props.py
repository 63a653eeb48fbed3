"""Properties of PUMA's and GIANT's remaining decoders and data structures.

Routed inner bodies (REPLY, REFRESH, UNSUBSCRIBE, HELLO/REPORT) raise only body
errors; HLD's hot/cold split (Zheng 2008, §5.3.1, Problem 5.2) is the minimal
ranked prefix reaching ``th``; paging's flood is a tree over the diamond; the
ferry store keeps one copy per (item, receiver) and never exceeds its capacity
(every drop counted); the lease table never exceeds its capacity; GIANT's per-peer
in-flight counts stay within ``max_peers`` peers and ``window`` each, whatever peers
claim contact, and none is left once every send ended.
"""

from __future__ import annotations

import contextlib
from typing import Any

from harness import BodiesOutOfIndex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_giant import two_brokers

from meshsub.core.api import FrameReceived, Message, MessageId, NeighborDown
from meshsub.core.bodies import BodyError
from meshsub.core.buffer import DropPolicy
from meshsub.core.grid import Cell, manhattan
from meshsub.core.lattice import Boundary, Lattice, walk_distribution
from meshsub.core.leases import Upsert, VersionedLeases
from meshsub.core.syntax import parse_event
from meshsub.protocols.giant import messages as gm
from meshsub.protocols.giant.ferry import FerryStore
from meshsub.protocols.puma import messages as pm
from meshsub.protocols.puma.predict import diamond_tree, ranked, split

SETTINGS = settings(max_examples=60, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40),
                    st.floats(allow_nan=True), st.text(max_size=8), st.binary(max_size=8))
inners = st.lists(st.one_of(scalars, st.lists(scalars, max_size=4)), max_size=5).map(tuple)


@SETTINGS
@given(inners)
def test_routed_inner_decoders_raise_only_body_errors(inner: tuple[Any, ...]) -> None:
    for decode in (pm.decode_reply, pm.decode_refresh, pm.decode_unsubscribe,
                   lambda x: pm.decode_empty(x, "HELLO")):
        with contextlib.suppress(BodyError):
            decode(inner)


def test_routed_inner_round_trips() -> None:
    eid = MessageId(7, 3, 2)
    assert pm.decode_reply(pm.reply_inner(eid)) == eid
    assert pm.decode_unsubscribe(pm.unsubscribe_inner("s1", 9)) == ("s1", 9)
    pm.decode_empty((), "HELLO")


@SETTINGS
@given(st.integers(2, 9), st.integers(2, 9), st.data(), st.integers(0, 10),
       st.floats(0.05, 1.0), st.sampled_from(list(Boundary)))
def test_split_is_the_minimal_ranked_prefix_reaching_th(
        cols: int, rows: int, data: st.DataObject, t: int, th: float,
        boundary: Boundary) -> None:
    lattice = Lattice() if boundary is Boundary.INFINITE else Lattice(cols, rows, boundary)
    start = Cell(data.draw(st.integers(0, cols - 1)), data.draw(st.integers(0, rows - 1)))
    dist = walk_distribution(start, t, lattice)

    def inside(c: Cell) -> bool:
        return 0 <= c[0] < cols and 0 <= c[1] < rows

    s = split(dist, th, inside)
    usable = [c for c, _p in ranked(dist) if inside(c)]
    assert list(s.hot) + list(s.cold) == usable  # ranked, nothing lost, nothing twice
    assert s.hot  # the broker always tries somewhere
    assert s.hot_mass >= th * s.total_mass - 1e-9
    without_last = s.hot_mass - dist[s.hot[-1]]
    assert len(s.hot) == 1 or without_last < th * s.total_mass + 1e-9  # minimal
    if th >= 1.0:
        assert not s.cold  # ALD: one round over every usable cell


@SETTINGS
@given(st.integers(1, 8), st.integers(1, 8), st.data(), st.integers(0, 4))
def test_paging_flood_is_a_tree_over_the_diamond(cols: int, rows: int, data: st.DataObject,
                                                 radius: int) -> None:
    centre = Cell(data.draw(st.integers(0, cols - 1)), data.draw(st.integers(0, rows - 1)))

    def inside(c: Cell) -> bool:
        return 0 <= c[0] < cols and 0 <= c[1] < rows

    tree = diamond_tree(centre, radius, inside)
    want = {Cell(x, y) for x in range(cols) for y in range(rows)
            if manhattan(Cell(x, y), centre) <= radius}
    assert set(tree.cells) == want  # a rectangle is convex: every diamond cell is reached
    assert tree.edge_count == len(want) - 1  # one message per cell but the centre
    for child, parent in tree.parent.items():
        assert manhattan(child, parent) == 1
        assert manhattan(parent, centre) == manhattan(child, centre) - 1


def _bundle(seq: int, receiver: Cell) -> Message:
    item = gm.EventItem(MessageId(1, 1, seq), Cell(0, 0), "t", parse_event("t v=1"), 0.0)
    body = gm.Bundle(gm.Kind.EVENT, receiver, Cell(0, 0), 0.9, 100.0, item).encode()
    return Message(gm.BUNDLE, MessageId(2, 1, 1000 + seq * 10 + receiver[0]), body)


@SETTINGS
@given(st.integers(1, 6), st.sampled_from(list(DropPolicy)),
       st.lists(st.tuples(st.integers(0, 8), st.integers(0, 2), st.booleans()), max_size=30))
def test_ferry_store_is_bounded_and_keeps_one_copy_per_receiver(
        capacity: int, policy: DropPolicy, ops: list[tuple[int, int, bool]]) -> None:
    store = FerryStore(capacity, policy, max_lifetime=1000.0)
    dropped = added = 0
    now = 0.0
    for seq, rx, remove in ops:
        now += 1.0
        message = _bundle(seq, Cell(rx, 0))
        if remove:
            store.remove(message.id)
            continue
        if store.carries(gm.Bundle.decode(message.body)):
            continue
        added += 1
        dropped += len(store.add(message, now, now + 100.0))
        assert len(store) <= capacity
    keys = [(b.kind, str(b.item.event_id), b.receiver)
            for r in range(3) for _m, b in store.bundles_for(Cell(r, 0))]
    assert len(keys) == len(set(keys)) == len(store)
    assert len(store) <= added - dropped  # every copy that is gone was dropped or removed
    for r in range(3):  # the receiver index answers what a scan of every body would
        scanned = [msg.id for msg in store.buffer
                   if gm.Bundle.decode(msg.body).receiver == Cell(r, 0)]
        assert [msg.id for msg, _b in store.bundles_for(Cell(r, 0))] == scanned


def test_a_brokers_bundles_are_found_without_reading_the_other_bodies() -> None:
    """On each HELLO the ferry looks up the broker's bundles; it used to read every
    carried body back from the store to find them."""
    backing = BodiesOutOfIndex()
    store = FerryStore(50, DropPolicy.DROP_OLDEST, backing, max_lifetime=1000.0)
    for seq in range(10):
        store.add(_bundle(seq, Cell(seq % 5, 0)), 0.0, 100.0)
    backing.reads = 0
    assert [b.item.event_id.seq for _m, b in store.bundles_for(Cell(1, 0))] == [1, 6]
    assert backing.reads == 2
    assert store.advertisements() == [] and backing.reads == 2


@SETTINGS
@given(st.integers(1, 5), st.lists(st.tuples(st.integers(0, 9), st.integers(1, 5)),
                                   max_size=40))
def test_lease_table_never_exceeds_its_capacity(capacity: int,
                                                ops: list[tuple[int, int]]) -> None:
    table: VersionedLeases[int, str] = VersionedLeases(capacity)
    for key, version in ops:
        outcome = table.upsert(key, "v", version, 100.0)
        assert len(table) <= capacity
        if outcome is Upsert.FULL:
            assert key not in table


@SETTINGS
@given(st.lists(st.tuples(st.sampled_from(["hello", "down", "wait"]), st.integers(500, 507),
                          st.integers(0, 4)), max_size=30))
def test_giant_in_flight_counts_stay_bounded(ops: list[tuple[str, int, int]]) -> None:
    """Forged peers (an insider with the fleet key can claim any id) greet a broker as
    ferries and a ferry that carries an advertisement as brokers; nobody acknowledges."""
    d = two_brokers(max_peers=3, window=2)
    f = d.ferries[0]
    d.visit(f, (0, 0), 1.0)  # the ferry now carries the broker's advertisement
    broker, ferry = d.at((0, 0)), d.node(f)
    as_ferry = gm.Hello(True, Cell(0, 0), ()).encode()
    for seq, (op, peer, x) in enumerate(ops, start=1):
        if op == "hello":
            d.net.feed(broker.node, FrameReceived(d.net.now, peer, Message(
                gm.HELLO, MessageId(peer, 0, seq), as_ferry)))
            d.net.feed(f, FrameReceived(d.net.now, peer, Message(
                gm.HELLO, MessageId(peer, 1, seq), gm.Hello(False, Cell(x, 0), ()).encode())))
        elif op == "down":
            d.net.feed(broker.node, NeighborDown(d.net.now, peer))
            d.net.feed(f, NeighborDown(d.net.now, peer))
        else:
            d.net.run(until=d.net.now + 0.3 * x)
        for proto in (broker, ferry):
            assert len(proto._inflight) <= 3
            assert all(1 <= n <= 2 for n in proto._inflight.values()), proto._inflight
            assert set(proto._outbox) <= set(proto._inflight)  # only behind a full window
    d.net.run(until=d.net.now + 60.0)  # every send given up
    assert broker._inflight == {} and ferry._inflight == {}
    assert broker._outbox == {} and ferry._outbox == {}
