"""The simulator's clock keeps the order SimPy gave the engine (runs stay byte-identical)."""

from __future__ import annotations

import pytest

from meshsim.des.clock import Clock


def test_ties_run_in_scheduling_order_and_callbacks_may_schedule() -> None:
    clock, seen = Clock(), []

    def note(tag: str) -> None:
        seen.append((clock.now, tag))
        if tag == "b":
            clock.at(clock.now, note, "b-again")  # due now: after what was already due
            clock.at(0.5, note, "past")  # in the past: runs now, after that

    for tag, t in (("a", 2.0), ("b", 1.0), ("c", 1.0), ("d", 2.0)):
        clock.at(t, note, tag)
    clock.run(10.0)
    assert seen == [(1.0, "b"), (1.0, "c"), (1.0, "b-again"), (1.0, "past"), (2.0, "a"),
                    (2.0, "d")]
    assert clock.now == 10.0 and len(clock) == 0


def test_run_stops_before_what_is_due_at_until_and_resumes_with_it() -> None:
    clock, seen = Clock(), []
    for t in (1.0, 2.0, 2.0, 3.0):
        clock.at(t, seen.append, t)
    clock.run(2.0)
    assert seen == [1.0] and clock.now == 2.0 and len(clock) == 3
    with pytest.raises(ValueError):
        clock.run(2.0)  # not after now
    clock.run(5.0)
    assert seen == [1.0, 2.0, 2.0, 3.0] and clock.now == 5.0


def test_the_clock_starts_as_the_integer_zero_and_integer_times_stay_integers() -> None:
    """As SimPy's: an integer time reaches protocols (and message bodies) unchanged."""
    clock, seen = Clock(), []
    assert type(clock.now) is int
    clock.at(3, lambda: seen.append(clock.now))
    clock.at(-1, lambda: seen.append(clock.now))  # in the past: at once, 0 + 0.0
    clock.run(4)
    assert seen == [0.0, 3] and [type(t) for t in seen] == [float, int]
    clock.at(4.5, lambda: seen.append(clock.now))
    clock.run(10.0)
    assert seen[2] == 4.5 and type(clock.now) is float
