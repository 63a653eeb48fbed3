"""gpsd client: the JSON protocol over TCP, shared with other clients, never exclusive.

``?WATCH={"enable":true,"json":true}`` asks for JSON reports without taking
the device; TPV reports carry mode and position, SKY reports HDOP and the
satellites used. When gpsd goes away the source reconnects with exponential
back-off, so a gpsd restart or a late start at boot needs no daemon restart.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

from meshsub.runtime.location.fix import Fix

log = logging.getLogger(__name__)

WATCH = b'?WATCH={"enable":true,"json":true}\n'
MAX_LINE = 256 * 1024


def _number(report: dict[str, Any], *names: str) -> float | None:
    for name in names:
        value = report.get(name)
        if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
            return float(value)
    return None


class GpsdParser:
    """Pure: JSON lines in, fixes out. SKY data is merged into the next TPV."""

    def __init__(self) -> None:
        self.hdop: float | None = None
        self.satellites: int | None = None
        self.counters: Counter[str] = Counter()
        self.release: str | None = None
        self.devices: list[str] = []

    def feed(self, line: bytes | str, now: float) -> Fix | None:
        """Parse one report line; return a fix for TPV, ``None`` otherwise (counted)."""
        try:
            report = json.loads(line)
        except (ValueError, UnicodeDecodeError):
            self.counters["bad_json"] += 1
            return None
        if not isinstance(report, dict) or not isinstance(report.get("class"), str):
            self.counters["bad_report"] += 1
            return None
        cls = report["class"]
        self.counters[cls.lower()] += 1
        if cls == "VERSION":
            self.release = str(report.get("release", ""))
        elif cls == "DEVICES":
            devices = report.get("devices")
            if isinstance(devices, list):
                self.devices = [str(d.get("path", "")) for d in devices if isinstance(d, dict)]
        elif cls == "SKY":
            self._sky(report)
        elif cls == "TPV":
            return self._tpv(report, now)
        return None

    def _sky(self, report: dict[str, Any]) -> None:
        hdop = _number(report, "hdop")
        if hdop is not None:
            self.hdop = hdop
        used = _number(report, "uSat")
        if used is not None:
            self.satellites = int(used)
        elif isinstance(report.get("satellites"), list):
            self.satellites = sum(1 for s in report["satellites"]
                                  if isinstance(s, dict) and s.get("used") is True)

    def _tpv(self, report: dict[str, Any], now: float) -> Fix:
        mode = report.get("mode")
        if isinstance(mode, bool) or not isinstance(mode, int) or not 0 <= mode <= 3:
            self.counters["bad_mode"] += 1
            mode = 0
        lat, lon = _number(report, "lat"), _number(report, "lon")
        if (lat is not None and not -90 <= lat <= 90) or (
                lon is not None and not -180 <= lon <= 180):
            self.counters["bad_coordinates"] += 1
            lat = lon = None
        return Fix(
            received_at=now,
            mode=mode,
            lat=lat,
            lon=lon,
            alt=_number(report, "altMSL", "alt", "altHAE") if mode == 3 else None,
            hdop=self.hdop,
            satellites=self.satellites,
        )


class GpsdSource:
    """Reconnecting gpsd client; iterate ``fixes()``."""

    name = "gpsd"

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 2947,
        *,
        clock: Callable[[], float],
        backoff_min: float = 1.0,
        backoff_max: float = 30.0,
        connect_timeout: float = 5.0,
    ) -> None:
        self.host, self.port = host, port
        self._clock = clock
        self.backoff_min, self.backoff_max = backoff_min, backoff_max
        self.connect_timeout = connect_timeout
        self.parser = GpsdParser()
        self.connected = False
        self.connects = 0
        self.failures = 0
        self.last_error: str | None = None

    async def fixes(self) -> AsyncIterator[Fix]:
        delay = self.backoff_min
        while True:
            try:
                async with asyncio.timeout(self.connect_timeout):
                    reader, writer = await asyncio.open_connection(self.host, self.port,
                                                                   limit=MAX_LINE)
            except (OSError, TimeoutError) as exc:
                self._failed(f"connect: {exc or type(exc).__name__}", delay)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.backoff_max)
                continue
            self.connected = True
            self.connects += 1
            log.info("gpsd connected host=%s port=%d", self.host, self.port)
            try:
                writer.write(WATCH)
                await writer.drain()
                while True:
                    line = await reader.readline()
                    if not line:
                        raise ConnectionResetError("gpsd closed the connection")
                    if not line.endswith(b"\n"):
                        continue  # a partial line at EOF
                    delay = self.backoff_min  # data flowed: the link is healthy again
                    fix = self.parser.feed(line, self._clock())
                    if fix is not None:
                        yield fix
            except (OSError, ValueError, asyncio.LimitOverrunError) as exc:
                self._failed(str(exc) or type(exc).__name__, delay)
            finally:
                self.connected = False
                writer.close()
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.backoff_max)

    def _failed(self, error: str, delay: float) -> None:
        self.failures += 1
        self.last_error = error
        log.warning("gpsd unavailable host=%s port=%d error=%r retry_in=%.1fs",
                    self.host, self.port, error, delay)

    def status(self) -> dict[str, object]:
        return {
            "source": self.name,
            "endpoint": f"{self.host}:{self.port}",
            "connected": self.connected,
            "connects": self.connects,
            "failures": self.failures,
            "last_error": self.last_error,
            "release": self.parser.release,
            "devices": list(self.parser.devices),
            "reports": dict(self.parser.counters),
        }
