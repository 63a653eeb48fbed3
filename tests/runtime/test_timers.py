"""Protocol timers on the loop: re-arming replaces, cancelling forgets, protocol-time deadlines."""

from __future__ import annotations

import asyncio
import time

from meshsub.runtime.timers import Timers


async def test_rearm_replaces_and_cancel_forgets() -> None:
    fired: list[str] = []
    done = asyncio.Event()

    def on_fire(name: str) -> None:
        fired.append(name)
        if name == "last":
            done.set()

    now = 1000.0  # a protocol clock far from the loop's own
    timers = Timers(on_fire, lambda: now)
    timers.set("a", now + 0.05)
    timers.set("a", now + 0.01)  # replaces: fires once, at the new time
    timers.set("b", now + 0.02)
    timers.cancel("b")
    timers.cancel("never-armed")
    timers.set("past", now - 5.0)  # already due: fires at once
    timers.set("last", now + 0.1)
    assert len(timers) == 3 and "b" not in timers
    await asyncio.wait_for(done.wait(), 30)  # hang guard only
    assert fired == ["past", "a", "last"]
    assert len(timers) == 0 and timers.fired == 3


async def test_cancel_all() -> None:
    fired: list[str] = []
    timers = Timers(fired.append, lambda: 0.0)
    for name in "xyz":
        timers.set(name, 0.01)
    timers.cancel_all()
    await asyncio.sleep(0.05)
    assert fired == [] and len(timers) == 0


async def test_one_loop_handle_serves_every_timer() -> None:
    """A relay arms a timer per forwarded frame: they share one loop handle (armed for
    the earliest deadline), and one wake-up fires all that are due, in deadline order."""
    loop = asyncio.get_running_loop()
    fired: list[str] = []
    timers = Timers(fired.append, lambda: 0.0)

    def armed() -> int:  # live handles in asyncio's own timer heap
        return sum(not h.cancelled() for h in loop._scheduled)  # type: ignore[attr-defined]

    before = armed()
    # one reading of the loop's clock for every set: the deadlines' order is the test's,
    # not how long a busy machine took between two calls
    now = loop.time()
    loop.time = lambda: now  # type: ignore[method-assign]
    try:
        for i in range(50):
            timers.set(f"fwd:{i}", 0.15 + i * 0.001)  # later than the first: no loop call
        for i in range(50, 100):
            timers.set(f"fwd:{i}", 0.15 - (i - 49) * 0.001)  # earlier: the one handle moves
        timers.set("later", 5.0)
    finally:
        del loop.time
    assert armed() - before == 1
    await asyncio.sleep(0.3)
    assert fired == [f"fwd:{i}" for i in [*reversed(range(50, 100)), *range(50)]]
    assert timers.fired == 100 and "later" in timers
    timers.cancel("later")  # the last armed timer gone: no wake-up left for nothing
    assert armed() - before == 0
    # a loop late by 20 ms (a busy machine) finds all of them due: one pass fires them
    for i in range(100):
        timers.set(f"due:{i}", 0.001 + i * 0.00001)
    time.sleep(0.02)
    wakeups = timers.wakeups
    await asyncio.sleep(0.01)
    assert timers.fired == 200 and timers.wakeups == wakeups + 1


async def test_callbacks_rearm_and_cancel_during_a_pass() -> None:
    """A timer that re-arms itself at once waits for the next wake-up (no endless pass);
    a timer cancelled by an earlier one in the same pass does not fire; ties fire in
    arming order; re-arming the same name many times keeps the heap bounded."""
    fired: list[str] = []
    timers: Timers

    def on_fire(name: str) -> None:
        fired.append(name)
        if name == "a" and fired.count("a") < 3:
            timers.set("a", 0.0)
        if name == "b":
            timers.cancel("c")

    timers = Timers(on_fire, lambda: 0.0)
    for _ in range(1000):
        timers.set("x", 5.0)
    assert len(timers._heap) <= 2 * len(timers) + 65
    timers.cancel("x")
    for name in "abcd":
        timers.set(name, 0.0)
    await asyncio.sleep(0.05)
    assert fired == ["a", "b", "d", "a", "a"]
    assert len(timers) == 0
