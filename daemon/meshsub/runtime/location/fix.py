"""What every location source produces: a raw GNSS fix, before any gating."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class Fix:
    """One report from a position source, stamped with the driver's clock.

    ``mode`` follows gpsd: 0 unknown, 1 no fix, 2 two-dimensional, 3 3D.
    Sources that only know local metres (a configured x/y) set ``local``
    instead of latitude/longitude. ``hdop``/``satellites`` are ``None`` when
    the source does not report them; ``error_m`` is the source's own estimate
    of the horizontal error in metres (gpsd's TPV ``eph``), ``None`` if it
    gives none.
    """

    received_at: float
    mode: int
    lat: float | None = None
    lon: float | None = None
    alt: float | None = None
    hdop: float | None = None
    satellites: int | None = None
    error_m: float | None = None
    local: tuple[float, float, float] | None = None
    static: bool = False
    """A configured position: exact, and never stale."""

    @property
    def has_position(self) -> bool:
        return self.local is not None or (self.lat is not None and self.lon is not None)


class FixSource(Protocol):
    """A location provider: an async iterator of fixes plus its counters."""

    name: str

    def fixes(self) -> AsyncIterator[Fix]:
        """Yield fixes until cancelled; reconnects are the source's own business."""
        ...

    def status(self) -> dict[str, object]:
        """Counters and connection state for ``meshsubctl status``."""
        ...
