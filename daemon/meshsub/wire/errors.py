"""The one exception the wire layer raises, and the closed set of its reasons.

Drivers count drops by ``FrameError.reason`` (telemetry ``drop`` records), so
the reasons are a documented, closed vocabulary rather than free text.
"""

from __future__ import annotations

from typing import Final

DECODE_REASONS: Final = frozenset(
    {
        "malformed",  # truncated, not msgpack, wrong shape, wrong types, out-of-range values
        "bad_version",  # frame version byte is not ours
        "oversized",  # frame or (reassembled) message above the configured limits
        "unknown_key",  # key id not in the key ring
        "bad_tag",  # authentication tag does not verify
        "replay",  # frame seen before, older than the window, or from a stale epoch
        "transmitters_full",  # a new transmitter while every replay-table entry is in use
        "own_frame",  # our own broadcast heard back
        "fragment_invalid",  # inconsistent fragment header (index/count/protocol/empty)
        "fragment_duplicate",  # a fragment index already stored for that message
    }
)
"""Reasons ``FrameCodec.decode`` raises (each also counted in ``counters``)."""

EXPIRY_REASONS: Final = frozenset(
    {
        "reassembly_timeout",  # a partial message expired (counted, never raised)
        "reassembly_overflow",  # a partial message evicted to bound memory (counted)
    }
)
"""Drops of partial messages, counted by the codec and never raised."""

ENCODE_REASONS: Final = frozenset(
    {
        "unencodable",  # body not msgpack-able or a header field out of its range
        "oversized",  # message above ``max_message`` or needing too many fragments
    }
)
"""Reasons ``FrameCodec.encode`` raises."""

REASONS: Final = DECODE_REASONS | EXPIRY_REASONS | ENCODE_REASONS
"""Every reason the wire layer uses."""


class FrameError(Exception):
    """A frame (or message) the wire layer refuses; ``reason`` is one of ``REASONS``."""

    def __init__(self, reason: str, detail: str = "") -> None:
        if reason not in REASONS:
            raise ValueError(f"unknown frame error reason {reason!r}")
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
