"""Neighbour table logic with a fake clock: liveness, link quality, events."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsub.core.api import NeighborChanged, NeighborDown, NeighborUp, Position
from meshsub.runtime.link import Address
from meshsub.runtime.neighbors import EventKind, NeighborEvent, NeighborTable, to_input

A = ("10.0.0.2", 4790)


def hear(t: NeighborTable, seq: int, now: float, *, node: int = 2, interval: float = 1.0,
         address: Address = A, **kw: Any) -> list[NeighborEvent]:
    return t.heard(node, seq, interval, now, address=address, **kw)


def test_up_once_then_quiet() -> None:
    t = NeighborTable()
    events = hear(t, 1, 0.0, name="n2", protocol="flooding", capabilities=("geo",))
    assert [e.kind for e in events] == [EventKind.UP]
    info = events[0].info
    assert info is not None and info.node == 2 and info.protocol == "flooding"
    assert info.capabilities == ("geo",) and info.link_quality == 1.0
    assert events[0].address == A
    for seq in range(2, 20):
        assert hear(t, seq, float(seq - 1), name="n2", protocol="flooding",
                    capabilities=("geo",)) == []
    assert t.get(2) is not None and t.get(2).lq == pytest.approx(1.0)  # type: ignore[union-attr]


def test_down_after_k_missed_intervals() -> None:
    t = NeighborTable(timeout_beacons=3)
    hear(t, 1, 0.0, interval=2.0)
    assert [e.kind for e in t.expire(2.9)] == []  # within jitter of the first due time
    # missing beacons lower the quality before the neighbour is declared down
    changed = t.expire(5.0)  # 2 missed (due at 2 and 4, counted at 3 and 5)
    assert [e.kind for e in changed] == [EventKind.CHANGED]
    assert changed[0].info is not None and changed[0].info.link_quality == pytest.approx(0.64)
    assert t.expire(6.9) == []
    down = t.expire(7.0)  # third missed beacon: down
    assert [(e.kind, e.node) for e in down] == [(EventKind.DOWN, 2)]
    assert 2 not in t and t.expire(100.0) == []


def test_sequence_gaps_lower_link_quality() -> None:
    t = NeighborTable(alpha=0.2, lq_threshold=0.1)
    hear(t, 1, 0.0)
    events = hear(t, 4, 1.0)  # beacons 2 and 3 lost
    n = t.get(2)
    assert n is not None and n.lost == 2 and n.received == 2
    assert n.lq == pytest.approx(0.8 * 0.8 * 0.8 + 0.2)
    assert [e.kind for e in events] == [EventKind.CHANGED]
    # recovery: enough consecutive beacons bring a CHANGED event back up
    kinds = [e.kind for seq in range(5, 15) for e in hear(t, seq, float(seq))]
    assert EventKind.CHANGED in kinds and n.lq > 0.9


def test_overdue_beacons_not_counted_twice() -> None:
    t = NeighborTable(alpha=0.2, timeout_beacons=5)
    hear(t, 1, 0.0)
    t.expire(2.6)  # two beacons overdue (due at 1 and 2): applied as losses now
    n = t.get(2)
    assert n is not None and n.lost == 2
    hear(t, 4, 3.0)  # the gap (2, 3) is the same two losses
    assert n.lost == 2 and n.lq == pytest.approx(0.8 * 0.8**2 + 0.2)


def test_duplicates_and_restart() -> None:
    t = NeighborTable()
    hear(t, 10, 0.0)
    assert hear(t, 10, 0.1) == [] and t.duplicates == 1  # same beacon by unicast and broadcast
    # the neighbour rebooted: its sequence restarted (no losses), and it is a new contact
    assert [e.kind for e in hear(t, 1, 1.0)] == [EventKind.DOWN, EventKind.UP]
    n = t.get(2)
    assert n is not None and t.restarts == 1 and n.lost == 0 and n.last_seq == 1


def test_a_restarted_neighbour_leaves_and_arrives_again() -> None:
    """Its protocol state is gone with its process, so protocols must meet it anew (an
    epidemic copy sent to the old process and never acknowledged is offered again at the
    new contact); a later beacon of the same boot is an ordinary one."""
    t = NeighborTable()
    hear(t, 7, 0.0, epoch=100, name="old")
    restarted = hear(t, 1, 1.0, epoch=101, name="new", address=("10.0.0.3", 4790))
    assert [(e.kind, e.address) for e in restarted] == [
        (EventKind.DOWN, A), (EventKind.UP, ("10.0.0.3", 4790))]
    n = t.get(2)
    assert n is not None and n.name == "new" and n.epoch == 101
    assert hear(t, 2, 2.0, epoch=101, name="new", address=("10.0.0.3", 4790)) == []
    assert t.restarts == 1 and len(t) == 1


def test_position_move_and_metadata_change() -> None:
    t = NeighborTable(move_threshold=10.0)
    hear(t, 1, 0.0, position=Position(0, 0))
    assert hear(t, 2, 1.0, position=Position(5, 5)) == []  # 7 m: below the threshold
    moved = hear(t, 3, 2.0, position=Position(8, 8))  # 11.3 m from the reported position
    assert [e.kind for e in moved] == [EventKind.CHANGED]
    assert moved[0].info is not None and moved[0].info.position == Position(8, 8)
    lost = hear(t, 4, 3.0, position=None)  # the neighbour lost its fix
    assert [e.kind for e in lost] == [EventKind.CHANGED]
    renamed = hear(t, 5, 4.0, protocol="bsub")
    assert [e.kind for e in renamed] == [EventKind.CHANGED]


def test_address_follows_latest_beacon() -> None:
    t = NeighborTable()
    hear(t, 1, 0.0)
    hear(t, 2, 1.0, address=("10.0.0.9", 4790))
    n = t.get(2)
    assert n is not None and n.address == ("10.0.0.9", 4790)


def test_status_rows() -> None:
    t = NeighborTable()
    hear(t, 1, 0.0, node=5, name="five", position=Position(1.234, 2.0))
    hear(t, 1, 0.5, node=3, address=("fe80::1", 4790, 0, 2))
    rows = t.status(2.0)
    assert [r["node"] for r in rows] == [3, 5]
    assert rows[0]["address"] == "[fe80::1]:4790"
    assert rows[1]["name"] == "five" and rows[1]["x"] == 1.23 and rows[1]["age_s"] == 2.0


def test_events_become_protocol_inputs() -> None:
    t = NeighborTable()
    (up,) = hear(t, 1, 0.0, protocol="flooding")
    inp = to_input(up, 0.0)
    assert isinstance(inp, NeighborUp) and inp.neighbor.node == 2 and inp.now == 0.0
    (changed,) = hear(t, 5, 1.0, protocol="flooding")
    assert isinstance(to_input(changed, 1.0), NeighborChanged)
    (down,) = t.remove(2)
    assert to_input(down, 2.0) == NeighborDown(2.0, 2)
    with pytest.raises(ValueError):
        to_input(NeighborEvent(EventKind.UP, 3), 0.0)


def test_remove_and_validation() -> None:
    t = NeighborTable()
    hear(t, 1, 0.0)
    assert [e.kind for e in t.remove(2)] == [EventKind.DOWN] and t.remove(2) == []
    with pytest.raises(ValueError):
        NeighborTable(timeout_beacons=0)
    with pytest.raises(ValueError):
        hear(t, 1, 0.0, interval=0.0)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.booleans(), min_size=1, max_size=200), st.floats(0.05, 0.5))
def test_lq_tracks_reception_ratio(received: list[bool], alpha: float) -> None:
    """LQ stays in (0, 1] and equals the EWMA of the reception pattern."""
    t = NeighborTable(alpha=alpha, timeout_beacons=1000, min_lq=0.0)
    hear(t, 0, 0.0)
    expected = 1.0
    for seq, got in enumerate(received, start=1):
        expected = (1 - alpha) * expected + (alpha if got else 0.0)
        if got:
            hear(t, seq, float(seq))
    n = t.get(2)
    assert n is not None
    last = max((s for s, g in enumerate(received, 1) if g), default=0)
    # losses after the last received beacon are not known yet (no clock passed)
    trailing = len(received) - last
    assert n.lq == pytest.approx(expected / (1 - alpha) ** trailing, rel=1e-9)
    assert 0.0 < n.lq <= 1.0


def test_a_stale_beacon_never_moves_the_address() -> None:
    """Issue 25 item 3: a replayed old beacon must not redirect unicasts to the attacker."""
    t = NeighborTable()
    hear(t, 5, 0.0, epoch=100)
    hear(t, 6, 1.0, epoch=100)
    attacker = ("10.0.0.66", 4790)
    assert hear(t, 5, 2.0, epoch=100, address=attacker) == []  # same boot, older
    assert hear(t, 9, 2.0, epoch=99, address=attacker) == []  # an earlier boot
    n = t.get(2)
    assert n is not None and n.address == A and n.last_seq == 6 and t.stale == 2
    assert t.check(2, 1, epoch=101) is None  # a real restart is heard
    hear(t, 1, 3.0, epoch=101, address=("10.0.0.3", 4790))
    n = t.get(2)
    assert n is not None and n.address == ("10.0.0.3", 4790) and t.restarts == 1


def test_a_full_table_refuses_new_ids_and_keeps_live_neighbours() -> None:
    """Issue 25 item 10: beacons from 10,000 made-up ids must not push live ones out."""
    t = NeighborTable(max_neighbors=8, timeout_beacons=3)
    for node in range(1, 4):
        hear(t, 1, 0.0, node=node)
    ups = [e for node in range(1000, 11000) for e in hear(t, 1, 0.5, node=node)]
    assert len(ups) == 5 and len(t) == 8 and t.refused == 9995
    for seq, now in ((2, 1.0), (3, 2.0), (4, 3.0)):  # the live ones keep beaconing, and stay
        for node in range(1, 4):
            hear(t, seq, now, node=node)
    assert all(node in t for node in range(1, 4))
    down = t.expire(4.2)  # the made-up ids fall silent: they go, the table has room again
    assert sorted(e.node for e in down if e.kind == EventKind.DOWN) == list(range(1000, 1005))
    assert t.check(20000, 1) is None
