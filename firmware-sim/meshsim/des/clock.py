"""The simulator's virtual clock and event heap: callbacks at times, FIFO among equals.

The engine only ever schedules "call ``fn(*args)`` at time t", so a heap of
``(time, sequence, fn, args)`` does all it needs, without an event object, a
callback list and a closure per scheduled thing (SimPy's ``Timeout``, which it
replaced for speed). The order is SimPy's exactly, so runs are unchanged:

- an item scheduled at ``t`` from time ``now`` is due at ``now + max(0, t - now)``
  (the same floating-point sum as ``env.timeout(delay)``);
- ties break by scheduling order;
- ``run(until)`` processes what is due strictly before ``now + (until - now)`` and
  leaves the clock there (SimPy's urgent stop event comes before normal events
  due at the same instant);
- the clock starts at the integer 0, as SimPy's, so times keep their types.
"""

from __future__ import annotations

from collections.abc import Callable
from heapq import heappop, heappush
from itertools import count
from typing import Any


class Clock:
    """Virtual time and the callbacks due; ``now`` is read by the engine directly."""

    __slots__ = ("_queue", "_seq", "now")

    def __init__(self) -> None:
        self.now: float = 0
        self._queue: list[tuple[float, int, Callable[..., None], tuple[Any, ...]]] = []
        self._seq = count()

    def __len__(self) -> int:
        """Callbacks still scheduled."""
        return len(self._queue)

    def at(self, t: float, fn: Callable[..., None], *args: Any) -> None:
        """Call ``fn(*args)`` at virtual time ``t`` (at once if ``t`` is past)."""
        now = self.now
        heappush(self._queue, (now + max(0.0, t - now), next(self._seq), fn, args))

    def run(self, until: float) -> None:
        """Call everything due before ``until``, in order; then the clock reads ``until``."""
        now = self.now
        at = until if isinstance(until, int) else float(until)
        if at <= now:
            raise ValueError(f"until ({at}) must be greater than the current time ({now})")
        stop = now + (at - now)
        queue = self._queue
        while queue and queue[0][0] < stop:
            self.now, _, fn, args = heappop(queue)
            fn(*args)
        self.now = stop
