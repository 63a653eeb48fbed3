"""Runs a location source through the tracker and tells the node about positions."""

from __future__ import annotations

import asyncio
import contextlib
from collections import Counter
from collections.abc import Callable
from typing import Any

from meshsub.core.api import Position
from meshsub.core.geo import LocalFrame
from meshsub.core.tracking import Gating, LocationTracker, PositionReport, error_estimate
from meshsub.runtime.config import LocationConfig
from meshsub.runtime.location.fix import FixSource
from meshsub.runtime.location.gpsd import GpsdSource
from meshsub.runtime.location.nmea import NmeaSerialSource
from meshsub.runtime.location.static import StaticSource
from meshsub.runtime.logging import get_logger

log = get_logger("meshsub.location")

REJECT_LOG_EVERY_S = 30.0
"""Rejected fixes are logged at most this often (a new reason at once)."""


def make_source(cfg: LocationConfig, clock: Callable[[], float]) -> FixSource | None:
    """The provider named by ``location.source``; ``None`` for ``none`` (no position)."""
    if cfg.source == "none":
        return None
    if cfg.source == "gpsd":
        return GpsdSource(cfg.gpsd.host, cfg.gpsd.port, clock=clock)
    if cfg.source == "nmea":
        return NmeaSerialSource(cfg.nmea.device, cfg.nmea.baud, clock=clock)
    static = cfg.static
    if static is None:
        raise ValueError("location.source is 'static' but location.static is missing")
    if static.x is not None and static.y is not None:
        return StaticSource(local=(static.x, static.y, static.z), clock=clock,
                            period=max(1.0, cfg.max_age / 2))
    return StaticSource(lat=static.lat, lon=static.lon, alt=static.alt, clock=clock,
                        period=max(1.0, cfg.max_age / 2))


def make_tracker(cfg: LocationConfig, source: str) -> LocationTracker:
    origin = LocalFrame(cfg.origin.lat, cfg.origin.lon, cfg.origin.alt) if cfg.origin else None
    gating = Gating(cfg.min_mode, cfg.max_hdop, cfg.min_satellites, cfg.movement_threshold,
                    cfg.max_age, cfg.stale_after, cfg.max_error_m, cfg.require_quality)
    return LocationTracker(gating, origin, source)


class LocationService:
    """Consumes ``source``, gates with ``tracker``, calls ``on_position`` on each report.

    ``on_position(None)`` means the fix was lost; the node turns each call into
    a ``PositionChanged`` input. A tick every ``tick_interval`` seconds catches
    staleness even when the source falls silent. Rejected fixes are logged with
    their reasons and the figures that failed, at most every
    ``REJECT_LOG_EVERY_S`` (a receiver at 1 Hz would otherwise fill the journal).
    """

    def __init__(
        self,
        source: FixSource,
        tracker: LocationTracker,
        on_position: Callable[[Position | None], None],
        *,
        clock: Callable[[], float],
        tick_interval: float = 1.0,
    ) -> None:
        self.source = source
        self.tracker = tracker
        self._on_position = on_position
        self._clock = clock
        self._tick_interval = tick_interval
        self._tasks: list[asyncio.Task[None]] = []
        self._rejects_logged: Counter[str] = Counter()
        self._reject_logged_at: float | None = None

    async def start(self) -> None:
        self._tasks = [asyncio.create_task(self._consume(), name="location-source"),
                       asyncio.create_task(self._ticker(), name="location-tick")]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def __aenter__(self) -> LocationService:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    def _emit(self, report: PositionReport | None) -> None:
        if report is None:
            return
        pos = report.position
        if pos is None:
            log.warning("position lost", source=self.source.name,
                        reason=self.tracker.last_reject)
        else:
            log.info("position", x=round(pos.x, 1), y=round(pos.y, 1),
                     error_m=round(pos.error_m, 1))
        self._on_position(pos)

    def _log_rejects(self, now: float) -> None:
        """Say why fixes are refused: at once for a new reason, else every 30 s."""
        rejected = self.tracker.rejected
        if rejected == self._rejects_logged:
            return
        new_reason = any(r not in self._rejects_logged for r in rejected)
        last = self._reject_logged_at
        if not new_reason and last is not None and now - last < REJECT_LOG_EVERY_S:
            return
        since = {r: n - self._rejects_logged[r] for r, n in rejected.items()
                 if n > self._rejects_logged[r]}
        seen = self.tracker.last_seen
        error = error_estimate(seen) if seen is not None else None
        log.warning("position fixes rejected", source=self.source.name,
                    reasons=",".join(f"{r}:{n}" for r, n in sorted(since.items())),
                    last=self.tracker.last_reject, accepted=self.tracker.accepted,
                    mode=seen.mode if seen else None, hdop=seen.hdop if seen else None,
                    error_m=None if error is None else round(error, 1),
                    sats=seen.satellites if seen else None)
        self._rejects_logged = Counter(rejected)
        self._reject_logged_at = now

    async def _consume(self) -> None:
        async for fix in self.source.fixes():
            now = self._clock()
            self._emit(self.tracker.update(fix, now))
            self._log_rejects(now)

    async def _ticker(self) -> None:
        while True:
            await asyncio.sleep(self._tick_interval)
            self._emit(self.tracker.tick(self._clock()))

    def status(self) -> dict[str, Any]:
        return {**self.tracker.status(self._clock()), "provider": self.source.status()}
