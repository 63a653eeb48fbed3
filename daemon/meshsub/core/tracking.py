"""Fix-quality gating, local metres, hysteresis and staleness for the own position.

Pure logic with the caller's clock, so every tier uses this one copy: the
daemon's location service feeds it the fixes of gpsd, NMEA or a configured
position, and the simulator feeds it its simulated receivers' fixes
(``meshsim.gps.des``), so a protocol sees the same gated positions in both.

The protocol must only see positions worth acting on: a gated fix (mode,
HDOP, the source's error estimate, satellites; each gate can be switched off),
converted to local metres about the fleet's origin,
re-announced only when it moved more than the threshold or the last report
is older than ``max_age``; and exactly one ``None`` when the fix is lost or
goes stale (Meshtastic's six-hour stale bad fix is the cautionary tale).
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from meshsub.core.api import Position
from meshsub.core.geo import GeoError, LocalFrame


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


UERE_M = 5.0
"""User equivalent range error: horizontal error estimate = HDOP x UERE, for sources
that give no estimate of their own (NMEA serial)."""


@dataclass(frozen=True, slots=True)
class PositionReport:
    """Something to hand to the protocol: a new position, or ``None`` for no fix."""

    position: Position | None


@dataclass(frozen=True, slots=True)
class Gating:
    """The fix-quality gates; 0 switches ``max_hdop``, ``max_error_m`` and
    ``min_satellites`` off. A gate whose figure the source does not report is
    not applied; ``require_quality`` rejects a fix that reports neither HDOP nor
    an error estimate (nothing tells how good it is)."""

    min_mode: int = 2
    max_hdop: float = 5.0
    min_satellites: int = 4
    movement_threshold: float = 10.0
    max_age: float = 60.0
    stale_after: float = 10.0
    max_error_m: float = 100.0
    require_quality: bool = True

    def __post_init__(self) -> None:
        if self.min_mode not in (2, 3):
            raise ValueError("min_mode must be 2 or 3")
        if not (self.max_age > 0 and self.stale_after > 0):
            raise ValueError("max_age and stale_after must be positive")
        if min(self.movement_threshold, self.min_satellites, self.max_hdop,
               self.max_error_m) < 0:
            raise ValueError("movement_threshold, min_satellites, max_hdop and max_error_m "
                             "must not be negative")


def error_estimate(fix: Fix) -> float | None:
    """Horizontal error (m): the source's own estimate, else HDOP x UERE, else None."""
    if fix.error_m is not None and math.isfinite(fix.error_m):
        return fix.error_m
    if fix.hdop is not None and math.isfinite(fix.hdop):
        return fix.hdop * UERE_M
    return None


class LocationTracker:
    """Turns raw fixes into position reports; pure logic, the caller supplies ``now``."""

    def __init__(self, gating: Gating, origin: LocalFrame | None, source: str = "") -> None:
        self.gating = gating
        self.origin = origin
        self.source = source
        self.fix: Fix | None = None
        """The last fix that passed the gate."""
        self.position: Position | None = None
        """The last position reported to the protocol (``None``: no fix)."""
        self.reported_at: float | None = None
        self.accepted = 0
        self.rejected: Counter[str] = Counter()
        self.last_reject: str | None = None
        self.last_seen: Fix | None = None

    @property
    def has_fix(self) -> bool:
        return self.position is not None

    def reject_reason(self, fix: Fix) -> str | None:
        """Why ``fix`` fails the gate, or ``None`` if it passes."""
        g = self.gating
        if fix.static:
            return None
        if fix.mode < 2:
            return "no_fix"
        if not fix.has_position:
            return "no_position"
        if fix.mode < g.min_mode:
            return "mode"
        hdop = fix.hdop if fix.hdop is not None and math.isfinite(fix.hdop) else None
        error = error_estimate(fix)
        if hdop is None and error is None and g.require_quality:
            return "quality_unknown"
        if g.max_hdop > 0 and hdop is not None and hdop > g.max_hdop:
            return "hdop"
        if g.max_error_m > 0 and error is not None and error > g.max_error_m:
            return "error"
        if g.min_satellites > 0 and fix.satellites is not None \
                and fix.satellites < g.min_satellites:
            return "satellites"
        return None

    def _local(self, fix: Fix) -> tuple[float, float, float] | None:
        if fix.local is not None:
            return fix.local
        if self.origin is None or fix.lat is None or fix.lon is None:
            return None
        try:
            return self.origin.to_local(fix.lat, fix.lon, fix.alt or 0.0)
        except GeoError:
            return None

    def update(self, fix: Fix, now: float) -> PositionReport | None:
        """Feed one fix; return what to tell the protocol, if anything."""
        self.last_seen = fix
        reason = self.reject_reason(fix)
        local = self._local(fix) if reason is None else None
        if reason is None and local is None:
            reason = "no_origin" if self.origin is None else "bad_coordinates"
        if reason is not None:
            self.rejected[reason] += 1
            self.last_reject = reason
            if reason == "no_fix":  # the receiver says so: no need to wait for staleness
                self.fix = None
                return self._lose()
            return None
        assert local is not None
        self.accepted += 1
        self.fix = fix
        x, y, z = local
        error = 0.0 if fix.static else (error_estimate(fix) or 0.0)
        candidate = Position(x, y, z if fix.alt is not None or fix.local else 0.0,
                             error, fix.received_at)
        if self.position is None or self.reported_at is None:
            return self._report(candidate, now)
        moved = math.hypot(candidate.x - self.position.x, candidate.y - self.position.y)
        if moved > self.gating.movement_threshold or now - self.reported_at >= self.gating.max_age:
            return self._report(candidate, now)
        return None

    def tick(self, now: float) -> PositionReport | None:
        """Time passes: detect a stale fix; re-announce an old report of a fresh fix."""
        if self.fix is None:
            return None
        if not self.fix.static and now - self.fix.received_at > self.gating.stale_after:
            self.fix = None
            self.rejected["stale"] += 1
            self.last_reject = "stale"
            return self._lose()
        if (self.position is not None and self.reported_at is not None
                and now - self.reported_at >= self.gating.max_age):
            return self._report(self.position, now)
        return None

    def _report(self, position: Position, now: float) -> PositionReport:
        self.position = position
        self.reported_at = now
        return PositionReport(position)

    def _lose(self) -> PositionReport | None:
        if self.position is None:
            return None  # never had a fix, or the loss was already reported once
        self.position = None
        return PositionReport(None)

    def status(self, now: float) -> dict[str, Any]:
        """The state ``meshsubctl status`` shows."""
        fix = self.fix
        pos = self.position
        return {
            "source": self.source,
            "fix": pos is not None,
            "mode": fix.mode if fix else (self.last_seen.mode if self.last_seen else None),
            "lat": fix.lat if fix else None,
            "lon": fix.lon if fix else None,
            "x": round(pos.x, 2) if pos else None,
            "y": round(pos.y, 2) if pos else None,
            "z": round(pos.z, 2) if pos else None,
            "error_m": round(pos.error_m, 2) if pos else None,
            "hdop": fix.hdop if fix else (self.last_seen.hdop if self.last_seen else None),
            "source_error_m": (fix.error_m if fix else
                               (self.last_seen.error_m if self.last_seen else None)),
            "sats": fix.satellites if fix else (self.last_seen.satellites
                                                if self.last_seen else None),
            "age_s": round(now - fix.received_at, 3) if fix else None,
            "accepted": self.accepted,
            "rejected": dict(self.rejected),
            "last_reject": self.last_reject,
        }
