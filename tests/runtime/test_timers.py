"""Protocol timers on the loop: re-arming replaces, cancelling forgets, protocol-time deadlines."""

from __future__ import annotations

import asyncio

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
