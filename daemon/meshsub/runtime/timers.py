"""Protocol timers on the asyncio loop: ``SetTimer``/``CancelTimer`` by name.

A protocol names its timers and re-arming a name replaces the earlier one
(the sans-I/O contract). Deadlines come in the protocol's clock (wall-clock
seconds in the daemon) and are turned into a loop-clock deadline once, at
arming time: a wall-clock step afterwards (NTP, GPS time) does not move an
armed timer.

All of a node's timers share **one** loop handle, armed for the earliest
deadline (a heap of deadlines, entries of re-armed or cancelled names
skipped when they surface). A relay arms a timer per forwarded frame
(flooding's rebroadcast jitter): with a loop handle each, every frame paid
for a handle, a heap push into the loop and a cancelled handle, and every
expiry was a loop iteration of its own. Here arming a timer later than the
earliest touches nothing in the loop, and one wake-up fires every timer
due by then, in deadline order (arming order on a tie). A timer never
fires before its deadline.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
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
        self._live: dict[str, int] = {}
        """Armed name -> the sequence number of its entry in ``_heap``."""
        self._heap: list[tuple[float, int, str]] = []
        """(loop deadline, sequence, name); an entry whose sequence is not its name's
        live one is stale (re-armed or cancelled) and skipped."""
        self._seq = itertools.count()
        self._handle: asyncio.TimerHandle | None = None
        self._handle_at = math.inf
        self._firing = False
        self.fired = 0
        self.wakeups = 0
        """Loop wake-ups that fired at least one timer (``fired / wakeups``: coalescing)."""

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, name: object) -> bool:
        return name in self._live

    def set(self, name: str, at: float) -> None:
        """Arm ``name`` for protocol time ``at``, replacing an armed timer of that name."""
        loop = self._loop
        if loop is None:
            loop = self._loop = asyncio.get_running_loop()
        when = loop.time() + max(0.0, at - self._clock())
        seq = next(self._seq)
        self._live[name] = seq
        heapq.heappush(self._heap, (when, seq, name))
        if len(self._heap) > 2 * len(self._live) + 64:
            self._compact()
        if when < self._handle_at and not self._firing:
            self._arm(loop, when)

    def cancel(self, name: str) -> None:
        if self._live.pop(name, None) is not None and not self._live:
            self.cancel_all()  # nothing left: no wake-up for nothing

    def cancel_all(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle, self._handle_at = None, math.inf
        self._live.clear()
        self._heap.clear()

    def _compact(self) -> None:
        """Drop stale entries (bounded: the heap never holds more than about twice the
        armed timers)."""
        live = self._live
        self._heap[:] = [entry for entry in self._heap if live.get(entry[2]) == entry[1]]
        heapq.heapify(self._heap)  # in place: a firing pass holds the list

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._handle is not None:
            self._handle.cancel()
        self._handle, self._handle_at = loop.call_at(when, self._fire_due), when

    def _fire_due(self) -> None:
        """Fire every timer due now, in deadline order; re-arm for the next one.

        Timers armed by the callbacks wait for the next wake-up (as a handle
        armed in a callback waits for the loop's next iteration), so a protocol
        that re-arms at once cannot keep this pass going."""
        self._handle, self._handle_at = None, math.inf
        loop = self._loop
        assert loop is not None
        heap, live = self._heap, self._live
        now = loop.time()
        first_new = next(self._seq)  # entries armed from here on wait
        fired = 0
        self._firing = True
        try:
            while heap and heap[0][0] <= now:
                if heap[0][1] > first_new:
                    break
                _, seq, name = heapq.heappop(heap)
                if live.get(name) != seq:
                    continue  # re-armed or cancelled
                del live[name]
                fired += 1
                self.fired += 1
                self._on_fire(name)
        finally:
            self._firing = False
            if fired:
                self.wakeups += 1
            while heap and live.get(heap[0][2]) != heap[0][1]:
                heapq.heappop(heap)
            if heap:
                self._arm(loop, heap[0][0])
