"""What every location source is: an async iterator of raw fixes (``Fix``, before gating)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Protocol

from meshsub.core.tracking import Fix

__all__ = ["Fix", "FixSource"]


class FixSource(Protocol):
    """A location provider: an async iterator of fixes plus its counters."""

    name: str

    def fixes(self) -> AsyncIterator[Fix]:
        """Yield fixes until cancelled; reconnects are the source's own business."""
        ...

    def status(self) -> dict[str, object]:
        """Counters and connection state for ``meshsubctl status``."""
        ...
