"""DR, the double-ruling baseline: queries on the subscriber's vertical band, events on the
publisher's horizontal band, notification by greedy forwarding (docs/protocols/dr.md)."""

from __future__ import annotations

from harness import Net

from meshsub.core.api import NeighborChanged, NeighborInfo, Position, PositionChanged
from meshsub.core.content import Event, Subscription
from meshsub.core.predicates import Predicate
from meshsub.protocols.dibs.keys import format_key
from meshsub.protocols.dr import DR, DRParams

PARAMS = DRParams(dr_halfwidth=4.0, k=16, jitter=0.0)
SPACING = 10.0


def grid(n: int) -> tuple[Net, dict[int, tuple[float, float]]]:
    ids = [r * n + c + 1 for r in range(n) for c in range(n)]
    net = Net({i: DR(i, params=PARAMS, seed=3) for i in ids}, delay=0.001)
    rows = net.grid(n, n)
    pos = {rows[r][c]: (c * SPACING, r * SPACING) for r in range(n) for c in range(n)}
    for i, (x, y) in pos.items():
        net.feed(i, PositionChanged(0.0, Position(x, y)))
    for a in ids:
        for b in net.neighbors(a):
            net.feed(a, NeighborChanged(0.0, NeighborInfo(b, Position(*pos[b]))))
    return net, pos


def sub(lo: int, hi: int) -> Subscription:
    return Subscription("s", (Predicate.between("key", format_key(lo, 16), format_key(hi, 16)),))


def test_queries_fill_the_vertical_band_and_events_meet_them() -> None:
    net, pos = grid(7)
    net.subscribe(9, "q", sub(100, 200))  # column x = 10
    net.run(until=1.0)
    holders = {n for n, p in net.nodes.items() if (9, "q") in p.store}  # type: ignore[attr-defined]
    assert holders == {n for n, (x, _) in pos.items() if x == pos[9][0]}
    eid = net.publish(41, Event("s", {"key": format_key(150, 16)}))  # row y = 50
    net.run(until=2.0)
    assert net.deliveries(eid) == [(9, "q")]
    miss = net.publish(41, Event("s", {"key": format_key(300, 16)}))
    net.run(until=3.0)
    assert net.deliveries(miss) == []
    checks = sum(p.stats["evaluations"] for p in net.nodes.values())  # type: ignore[attr-defined]
    assert checks > 0


def test_without_a_position_a_query_is_a_counted_drop() -> None:
    net = Net({1: DR(1, params=PARAMS)})
    net.subscribe(1, "q", sub(1, 2))
    assert [e.attrs["reason"] for _, e in net.drops("no_position")] == ["no_position"]
