"""PUBACKs released only once what they acknowledge is on disk, the fsync off the event loop.

An application's QoS 1 publication is acknowledged only after it is in the
outbox on disk ("an event acknowledged to an application is never lost").
The bridge used to make that commit durable in the event loop, before the
event went on the mesh: every publication waited for an fsync (3 ms median,
15 ms at the 99th percentile on a shared virtual disk, more on an SD card)
before its first frame, and the whole loop waited with it.

Now the commit is written without waiting for the disk (it survives a crash
of the process at once: it is in the kernel's page cache), the event is sent,
and the fsync runs in one worker thread; the PUBACK goes out when it returns.
A power cut before that fsync loses only publications that were never
acknowledged: the application publishes them again (at worst a second copy on
the mesh, never a loss). One fsync covers every commit written before it
started, so under load the fsyncs batch themselves (group commit).

Acknowledgements leave in the order they were asked for (MQTT 5 §4.6: PUBACKs
in the order of the PUBLISH packets): one that needs no fsync (a rejected or
redelivered message) waits behind earlier ones that do.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from meshsub.runtime.logging import get_logger

log = get_logger("meshsub.mqtt")

RETRY_S = 1.0
"""Wait before trying a failed fsync again (acknowledgements wait with it)."""


class DurableAcks:
    """Orders acknowledgements behind the fsync that makes their commits durable.

    ``sync`` is the blocking fsync (run in a worker thread; it must not touch
    the SQLite connection), ``on_error`` is told of a failed one (it is retried
    every ``RETRY_S``: nothing waiting is acknowledged before one succeeds).
    """

    def __init__(self, sync: Callable[[], Any],
                 on_error: Callable[[BaseException], None] | None = None) -> None:
        self._sync = sync
        self._on_error = on_error
        self._queue: deque[tuple[int, Callable[[], Any]]] = deque()
        self._started = 0
        """Number of the last fsync started (each covers what was written before it)."""
        self._done = 0
        """Number of the last fsync that succeeded."""
        self._wanted = 0
        """The highest fsync number anyone waits for."""
        self._running = False
        self._closed = False
        self._executor: concurrent.futures.ThreadPoolExecutor | None = None
        self.syncs = 0
        self.sync_errors = 0
        self.sync_s_max = 0.0

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def waiting(self) -> int:
        """Acknowledgements not yet sent."""
        return len(self._queue)

    def ack(self, send: Callable[[], Any]) -> None:
        """Send now, or after every acknowledgement already waiting (order is kept)."""
        if not self._queue:
            send()
            return
        self._queue.append((self._queue[-1][0], send))

    def ack_durable(self, sends: list[Callable[[], Any]]) -> None:
        """Send these once an fsync started after this call has returned."""
        if not sends:
            return
        target = self._started + 1
        self._wanted = max(self._wanted, target)
        self._queue.extend((target, send) for send in sends)
        if not self._running:
            self._start()

    def _start(self) -> None:
        if self._closed:  # stopping: what waits is never acknowledged (the broker resends)
            return
        loop = asyncio.get_running_loop()
        if self._executor is None:
            self._executor = concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="meshsub-fsync")
        self._started += 1
        self._running = True
        number = self._started
        future = loop.run_in_executor(self._executor, self._timed_sync)
        future.add_done_callback(lambda f: self._finished(number, f))

    def _timed_sync(self) -> float:
        start = time.monotonic()
        self._sync()
        return time.monotonic() - start

    def _finished(self, number: int, future: asyncio.Future[float]) -> None:
        self._running = False
        if future.cancelled():
            return
        exc = future.exception()
        if exc is not None:
            self.sync_errors += 1
            if self._on_error is not None:
                self._on_error(exc)
            # what was written is not known to be on disk: try again, acknowledge nothing
            asyncio.get_running_loop().call_later(RETRY_S, self._retry)
            return
        self.syncs += 1
        self.sync_s_max = max(self.sync_s_max, future.result())
        self._done = number
        queue = self._queue
        while queue and queue[0][0] <= number:
            queue.popleft()[1]()
        if self._wanted > number:
            self._start()

    def _retry(self) -> None:
        if not self._running and self._wanted > self._done:
            self._start()

    async def settled(self) -> None:
        """Return once every acknowledgement asked for so far has been sent."""
        while self._queue:
            await asyncio.sleep(0.001)

    def drop_waiting(self) -> int:
        """Forget acknowledgements not sent (their session ended: the broker sends those
        messages again, and they are recognised as redeliveries); how many."""
        count = len(self._queue)
        self._queue.clear()
        return count

    def close(self) -> None:
        self._closed = True
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None

    def status(self) -> dict[str, float | int]:
        return {"waiting": len(self._queue), "syncs": self.syncs,
                "sync_errors": self.sync_errors, "sync_ms_max": round(self.sync_s_max * 1e3, 2)}
