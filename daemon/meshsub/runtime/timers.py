"""Protocol timers on the asyncio loop: ``SetTimer``/``CancelTimer`` by name.

A protocol names its timers and re-arming a name replaces the earlier one
(the sans-I/O contract), so this is a dict of loop handles. Deadlines come in
the protocol's clock (wall-clock seconds in the daemon) and are turned into a
delay once, at arming time: a wall-clock step afterwards (NTP, GPS time) does
not move an armed timer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Timers:
    """Named one-shot timers; ``on_fire(name)`` runs in the loop when one expires."""

    def __init__(
        self,
        on_fire: Callable[[str], None],
        clock: Callable[[], float],
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self._on_fire = on_fire
        self._clock = clock
        self._loop = loop
        self._handles: dict[str, asyncio.TimerHandle] = {}
        self.fired = 0

    def __len__(self) -> int:
        return len(self._handles)

    def __contains__(self, name: object) -> bool:
        return name in self._handles

    def set(self, name: str, at: float) -> None:
        """Arm ``name`` for protocol time ``at``, replacing an armed timer of that name."""
        loop = self._loop or asyncio.get_running_loop()
        old = self._handles.pop(name, None)
        if old is not None:
            old.cancel()
        delay = max(0.0, at - self._clock())
        self._handles[name] = loop.call_at(loop.time() + delay, self._fire, name)

    def cancel(self, name: str) -> None:
        handle = self._handles.pop(name, None)
        if handle is not None:
            handle.cancel()

    def cancel_all(self) -> None:
        for handle in self._handles.values():
            handle.cancel()
        self._handles.clear()

    def _fire(self, name: str) -> None:
        self._handles.pop(name, None)
        self.fired += 1
        self._on_fire(name)
