"""PUBACKs wait for the fsync of their commit, which runs off the event loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from meshsub.runtime.durableacks import DurableAcks


class _Gate:
    """A blocking ``sync`` the test releases (or makes fail) one call at a time."""

    def __init__(self) -> None:
        self.calls = 0
        self.fail = False
        self._go = threading.Semaphore(0)

    def __call__(self) -> None:
        self.calls += 1
        self._go.acquire(timeout=5)
        if self.fail:
            self.fail = False
            raise OSError(5, "Input/output error")

    def release(self) -> None:
        self._go.release()


async def _until(cond: Any) -> None:
    for _ in range(2000):
        if cond():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("condition not reached")


async def test_acks_wait_for_the_sync_and_keep_their_order() -> None:
    gate, sent, errors = _Gate(), [], []
    acks = DurableAcks(gate, errors.append)
    try:
        acks.ack(lambda: sent.append("now"))  # nothing waits: sent at once
        acks.ack_durable([lambda: sent.append(1), lambda: sent.append(2)])
        acks.ack(lambda: sent.append("behind"))  # waits behind 1 and 2
        await _until(lambda: gate.calls == 1)
        acks.ack_durable([lambda: sent.append(3)])  # needs a second sync: written later
        assert sent == ["now"] and acks.waiting == 4
        gate.release()
        await _until(lambda: len(sent) == 4)
        assert sent == ["now", 1, 2, "behind"]
        await _until(lambda: gate.calls == 2)
        gate.release()
        await acks.settled()
        assert sent == ["now", 1, 2, "behind", 3] and acks.syncs == 2 and not errors
    finally:
        gate.release()
        acks.close()


async def test_a_failed_sync_acknowledges_nothing_until_one_succeeds(monkeypatch: Any) -> None:
    monkeypatch.setattr("meshsub.runtime.durableacks.RETRY_S", 0.01)
    gate, sent, errors = _Gate(), [], []
    acks = DurableAcks(gate, errors.append)
    try:
        gate.fail = True
        acks.ack_durable([lambda: sent.append(1)])
        gate.release()
        await _until(lambda: errors)
        assert sent == [] and acks.sync_errors == 1
        await _until(lambda: gate.calls == 2)
        gate.release()
        await acks.settled()
        assert sent == [1]
    finally:
        acks.close()


async def test_syncs_batch_under_load() -> None:
    """Requests made while one sync runs share the next one (group commit)."""
    gate, sent = _Gate(), []
    acks = DurableAcks(gate)
    try:
        acks.ack_durable([lambda: sent.append(0)])
        await _until(lambda: gate.calls == 1)
        for i in range(1, 50):
            acks.ack_durable([lambda i=i: sent.append(i)])
        gate.release()
        await _until(lambda: gate.calls == 2)
        gate.release()
        await acks.settled()
        assert sent == list(range(50)) and gate.calls == 2
    finally:
        acks.close()
