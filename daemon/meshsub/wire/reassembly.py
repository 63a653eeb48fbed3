"""All-or-nothing reassembly of segmented messages, in bounded memory.

Partial messages are keyed by (transmitter, epoch, fragment id). Memory is
bounded three ways: fragments per message, concurrent partial messages, and
accounted bytes (chunk bytes plus a fixed per-fragment charge, so that many
tiny fragments cannot cost more than they are charged). When a bound is hit
the *oldest* partial message is evicted: a message that has waited longest
for a missing fragment is the one least likely to complete.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Final

from meshsub.core.api import NodeId
from meshsub.wire.errors import FrameError
from meshsub.wire.frame import Fragment

CHUNK_CHARGE: Final = 64
"""Bytes charged per stored fragment on top of its chunk (object overhead)."""

PartialKey = tuple[NodeId, int, int]
"""(transmitter, transmitter epoch, fragment id)."""


@dataclass(frozen=True, slots=True)
class Reassembled:
    """A completed message section and what it cost on the air."""

    section: bytes
    frame_bytes: int
    frames: int


@dataclass(slots=True)
class _Partial:
    protocol_id: int
    count: int
    deadline: float
    chunks: dict[int, bytes] = field(default_factory=dict)
    payload: int = 0
    charged: int = 0
    frame_bytes: int = 0


class Reassembler:
    """Collects fragments; returns the joined section once every index arrived.

    ``now`` must not go backwards: expiry pops partial messages in arrival
    order, which is deadline order under a fixed timeout.
    """

    def __init__(
        self,
        counters: Counter[str],
        *,
        max_message: int,
        max_fragments: int,
        max_partials: int,
        max_bytes: int,
        timeout: float,
    ) -> None:
        if max_partials < 1:
            raise ValueError("max_reassemblies must be at least 1")
        if max_bytes < max_message + max_fragments * CHUNK_CHARGE:
            raise ValueError(
                "max_reassembly_bytes must hold one largest message "
                f"({max_message + max_fragments * CHUNK_CHARGE} bytes)"
            )
        if not timeout > 0:
            raise ValueError("reassembly_timeout must be positive")
        self.counters = counters
        self.max_message = max_message
        self.max_fragments = max_fragments
        self.max_partials = max_partials
        self.max_bytes = max_bytes
        self.timeout = timeout
        self._partials: OrderedDict[PartialKey, _Partial] = OrderedDict()
        self._charged = 0

    def __len__(self) -> int:
        return len(self._partials)

    @property
    def charged_bytes(self) -> int:
        """Accounted memory of all partial messages (never above ``max_bytes``)."""
        return self._charged

    def add(
        self, key: PartialKey, protocol_id: int, fragment: Fragment, frame_bytes: int, now: float
    ) -> Reassembled | None:
        """Store one fragment; the whole section when it was the last one missing."""
        self.expire(now)
        if fragment.count > self.max_fragments:
            raise FrameError(
                "oversized", f"{fragment.count} fragments, limit {self.max_fragments}"
            )
        partial = self._partials.get(key)
        if partial is None:
            partial = _Partial(protocol_id, fragment.count, now + self.timeout)
        elif partial.count != fragment.count or partial.protocol_id != protocol_id:
            raise FrameError(
                "fragment_invalid",
                f"fragment {fragment.index}/{fragment.count} of protocol {protocol_id} does not "
                f"match {partial.count} fragments of protocol {partial.protocol_id}",
            )
        elif fragment.index in partial.chunks:
            raise FrameError("fragment_duplicate", f"fragment {fragment.index} already stored")
        size = len(fragment.chunk)
        if partial.payload + size > self.max_message:
            self._discard(key)
            raise FrameError("oversized", f"message above {self.max_message} bytes")
        charge = size + CHUNK_CHARGE
        self._make_room(key, charge)
        partial.chunks[fragment.index] = fragment.chunk
        partial.payload += size
        partial.charged += charge
        partial.frame_bytes += frame_bytes
        self._charged += charge
        self._partials[key] = partial
        if len(partial.chunks) < partial.count:
            return None
        self._discard(key)
        section = b"".join(partial.chunks[i] for i in range(partial.count))
        return Reassembled(section, partial.frame_bytes, partial.count)

    def expire(self, now: float) -> int:
        """Drop partial messages whose deadline passed; count ``reassembly_timeout``."""
        expired = 0
        while self._partials:
            key, partial = next(iter(self._partials.items()))
            if partial.deadline > now:
                break
            self._discard(key)
            expired += 1
        if expired:
            self.counters["reassembly_timeout"] += expired
        return expired

    def _make_room(self, key: PartialKey, charge: int) -> None:
        """Evict the oldest other partial messages until ``charge`` more bytes fit."""
        new = key not in self._partials
        for victim in list(self._partials):
            over_count = new and len(self._partials) >= self.max_partials
            if not over_count and self._charged + charge <= self.max_bytes:
                return
            if victim == key:
                continue
            self._discard(victim)
            self.counters["reassembly_overflow"] += 1

    def _discard(self, key: PartialKey) -> None:
        partial = self._partials.pop(key, None)
        if partial is not None:
            self._charged -= partial.charged
