"""Drop summaries in the protocol base: counted at once, recorded per reason and interval."""

from __future__ import annotations

from typing import Any

import pytest

from meshsub.core.api import Emit, FrameReceived, Message, MessageId, SetTimer, Stopping, TimerFired
from meshsub.core.content import Event
from meshsub.core.protocol import DROP_SUMMARY_TIMER
from meshsub.protocols.flooding import DATA, Flooding, encode_body

MID = MessageId(9, 1, 1)


def _frame(now: float, sender: int = 2) -> FrameReceived:
    body = encode_body(Event("t/x", {"v": 1}), 0.0)
    return FrameReceived(now, sender, Message(DATA, MID, body, hop=1, ttl=4))


def _drops(actions: list[Any]) -> list[dict[str, Any]]:
    return [dict(a.attrs) for a in actions if isinstance(a, Emit) and a.event == "drop"]


def test_duplicates_are_summed_until_the_timer_then_recorded_once_per_reason() -> None:
    proto = Flooding(1, drop_summary_s=5.0)
    proto.handle(_frame(0.0))  # the first copy: relayed
    second = proto.handle(_frame(0.1, sender=3))
    assert _drops(second) == [] and SetTimer(DROP_SUMMARY_TIMER, 5.1) in second
    third = proto.handle(_frame(0.2, sender=4))
    assert _drops(third) == [] and not any(isinstance(a, SetTimer) for a in third)
    assert proto.drops["duplicate"] == 2  # counted at once
    assert _drops(proto.handle(TimerFired(5.1, DROP_SUMMARY_TIMER))) == [
        {"reason": "duplicate", "count": 2}]
    assert _drops(proto.handle(Stopping(6.0))) == []  # nothing pending any more


def test_stopping_records_what_is_pending_and_zero_interval_records_each() -> None:
    proto = Flooding(1)
    proto.handle(_frame(0.0))
    proto.handle(_frame(0.5, sender=3))
    assert _drops(proto.handle(Stopping(1.0))) == [{"reason": "duplicate", "count": 1}]

    single = Flooding(1, drop_summary_s=0.0)
    single.handle(_frame(0.0))
    assert _drops(single.handle(_frame(0.5, sender=3))) == [
        {"reason": "duplicate", "event_id": str(MID), "msg_type": DATA, "msg_kind": "data",
         "peer": 3}]


def test_a_reliable_copy_of_a_seen_message_is_acknowledged_then_dropped_as_a_duplicate() -> None:
    """``duplicate_types`` applies on the core's reliable path too: flooding never sends
    reliably, but a peer may, and its copy is not flooded again."""
    proto = Flooding(1, drop_summary_s=0.0)
    proto.handle(_frame(0.0))
    body = encode_body(Event("t/x", {"v": 1}), 0.0)
    actions = proto.handle(FrameReceived(0.5, 3, Message(DATA, MID, body, hop=1, ttl=4,
                                                         reliable_id=7)))
    assert [type(a).__name__ for a in actions] == ["SendTo", "Emit"]  # the ACK, the drop
    assert _drops(actions) == [{"reason": "duplicate", "event_id": str(MID), "msg_type": DATA,
                                "msg_kind": "data", "peer": 3}]
    assert proto.drops["duplicate"] == 1


@pytest.mark.parametrize("summary_s", [5.0, 0.0])
def test_handle_each_is_handle_at_each_node_in_turn(summary_s: float) -> None:
    """``Protocol.handle_each`` (the simulator's one frame at many receivers) against
    ``handle`` node by node on twin nodes: first copies, duplicates (arming the summary
    timer or not), reliable copies and another type, with the same actions, counts,
    summaries and clocks."""
    twins = [[Flooding(n, drop_summary_s=summary_s) for n in range(1, 6)] for _ in range(2)]
    body = encode_body(Event("t/x", {"v": 1}), 0.0)
    frames = [FrameReceived(0.0, 9, Message(DATA, MID, body, hop=1, ttl=4)),
              FrameReceived(0.1, 8, Message(DATA, MID, body, hop=1, ttl=4)),
              FrameReceived(0.2, 7, Message(DATA, MID, body, hop=2, ttl=3)),
              FrameReceived(0.3, 7, Message(DATA, MID, body, hop=2, ttl=3, reliable_id=4)),
              FrameReceived(0.4, 6, Message(DATA + 1, MID, body, hop=2, ttl=3)),
              FrameReceived(0.5, 6, Message(DATA, MessageId(9, 1, 2), body, hop=1, ttl=4))]
    for i, frame in enumerate(frames):
        some = slice(0, 5) if i % 2 == 0 else slice(1, 4)  # not every node hears each one
        together = Flooding.handle_each(twins[0][some], frame)
        one_by_one = [p.handle(frame) for p in twins[1][some]]
        assert together == [(i, a) for i, a in enumerate(one_by_one) if a]
    assert twins[0][2].drops["duplicate"] == 3
    for a, b in zip(*twins, strict=True):
        assert (dict(a.drops), a.now) == (dict(b.drops), b.now)
        assert _drops(a.handle(Stopping(9.0))) == _drops(b.handle(Stopping(9.0)))


def test_copies_counted_together_reach_the_counts_and_each_summary() -> None:
    """The copies ``handle_each`` counts while a summary is pending are in ``drops`` at
    every reading and in that summary's record, not the next one's; the same as
    ``handle`` node by node across two summary intervals."""
    twins = [[Flooding(n, drop_summary_s=5.0) for n in range(1, 4)] for _ in range(2)]
    body = encode_body(Event("t/x", {"v": 1}), 0.0)

    def copy(now: float, sender: int) -> FrameReceived:
        return FrameReceived(now, sender, Message(DATA, MID, body, hop=1, ttl=4))

    def both(inp: Any, together: bool = True) -> None:
        if together and isinstance(inp, FrameReceived):
            got = Flooding.handle_each(twins[0], inp)
        else:
            got = [(i, a) for i, p in enumerate(twins[0]) if (a := p.handle(inp))]
        want = [(i, a) for i, p in enumerate(twins[1]) if (a := p.handle(inp))]
        assert got == want

    both(copy(0.0, 9))  # first copies
    for t in range(1, 5):  # the first duplicate arms the summary, the next three are summed
        both(copy(0.1 * t, 9 + t))
    both(TimerFired(5.1, DROP_SUMMARY_TIMER))  # each node's summary: count 4
    assert [p.drops["duplicate"] for p in twins[0]] == [4, 4, 4]
    for t in range(2):  # the next interval, read in the middle
        both(copy(6.0 + t, 20 + t))
    assert [p.drops["duplicate"] for p in twins[0]] == [6, 6, 6]
    both(copy(8.0, 30))
    both(Stopping(9.0))  # each node's last summary: count 3
    assert [p.drops["duplicate"] for p in twins[0]] == [7, 7, 7]
