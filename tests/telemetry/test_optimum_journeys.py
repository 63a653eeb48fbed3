"""Minimum-hop journeys over a contact history, worked out by hand."""

from __future__ import annotations

from mesheval.optimum.journeys import journey_bounds, journeys
from mesheval.optimum.topology import contact_intervals

# 1-2 up 10..20, 2-3 up 15..25, 3-4 up 5..8 (before the event), 1-4 up 30..40,
# 4-3 up 35..50; node 5 never meets anyone.
EVENTS = [
    {"t": 10, "a": 1, "b": 2, "up": True}, {"t": 20, "a": 1, "b": 2, "up": False},
    {"t": 15, "a": 2, "b": 3, "up": True}, {"t": 25, "a": 3, "b": 2, "up": False},
    {"t": 5, "a": 3, "b": 4, "up": True}, {"t": 8, "a": 3, "b": 4, "up": False},
    {"t": 30, "a": 1, "b": 4, "up": True}, {"t": 40, "a": 1, "b": 4, "up": False},
    {"t": 35, "a": 4, "b": 3, "up": True},
]


def test_minimum_hops_and_bounds() -> None:
    contacts = contact_intervals(EVENTS, end_s=50.0)
    assert list(contacts.end) == [8.0, 20.0, 25.0, 40.0, 50.0]  # 4-3 still up at the end
    result = journeys(contacts, source=1, t0=0.0, deadline=60.0)
    assert result.hops == {1: 0, 2: 1, 4: 1, 3: 2}
    # the earliest two-hop journey to 3 goes through 2 (t = 15), not through 4 (t = 35)
    assert result.transfers[3] == [(1, 2), (2, 3)]
    broadcast, unicast, reached, missing = journey_bounds(result, [3, 4, 5])
    # union of the journeys: 1->2, 2->3, 1->4 (3 transfers); the optimum is 2 (1->4, 4->3),
    # at least max(2 hops to 3, 2 nodes to reach) for unicast, 2 hops for broadcast
    assert (reached, missing) == (2, 1)
    assert (unicast.lower, unicast.upper, unicast.method) == (2, 3, "journeys")
    assert (broadcast.lower, broadcast.upper) == (2, 3)


def test_the_deadline_and_the_publish_time_cut_journeys() -> None:
    contacts = contact_intervals(EVENTS, end_s=50.0)
    assert journeys(contacts, 1, 0.0, 12.0).hops == {1: 0, 2: 1}
    # published at 21: 1-2 is over, so 3 is reached only through 4 at 35
    late = journeys(contacts, 1, 21.0, 60.0)
    assert late.hops == {1: 0, 4: 1, 3: 2}
    assert late.transfers[3] == [(1, 4), (4, 3)]
