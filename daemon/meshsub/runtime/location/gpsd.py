"""gpsd client: the JSON protocol over TCP, shared with other clients, never exclusive.

``?WATCH={"enable":true,"json":true}`` asks for JSON reports without taking
the device; TPV reports carry mode, position and gpsd's own error estimates
(``eph``, else ``epx``/``epy``), SKY reports HDOP and the satellites used.
Many receivers give gpsd no sky view (no GSV sentences: no SKY report at
all), so the TPV estimate is what the gate relies on then. gpsd 3.22 reports
``uSat 0`` when the receiver sends GSV but no GSA (it cannot tell which
satellites are used): with a fix that count means "unknown", not zero.
When gpsd goes away the source reconnects with exponential back-off, so a
gpsd restart or a late start at boot needs no daemon restart.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections import Counter
from collections.abc import AsyncIterator, Callable
from typing import Any

from meshsub.runtime.location.fix import Fix
from meshsub.runtime.logging import format_address, get_logger

log = get_logger("meshsub.location.gpsd")

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
        if used is None and isinstance(report.get("satellites"), list):
            used = sum(1 for s in report["satellites"]
                       if isinstance(s, dict) and s.get("used") is True)
        if used is None:
            return
        if used <= 0:  # no GSA from the receiver: gpsd does not know which are used
            self.counters["sky_used_unknown"] += 1
            self.satellites = None
        else:
            self.satellites = int(used)

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
            error_m=self._error(report),
        )

    def _error(self, report: dict[str, Any]) -> float | None:
        """gpsd's horizontal error estimate: ``eph``, else the larger of ``epx``/``epy``."""
        eph = _number(report, "eph")
        if eph is not None and eph >= 0:
            return eph
        epx, epy = _number(report, "epx"), _number(report, "epy")
        if epx is not None and epy is not None and epx >= 0 and epy >= 0:
            return max(epx, epy)
        return None


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
            log.info("gpsd connected", endpoint=format_address((self.host, self.port)))
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
        log.warning("gpsd unavailable", endpoint=format_address((self.host, self.port)),
                    error=error, retry_s=round(delay, 1))

    def status(self) -> dict[str, object]:
        return {
            "source": self.name,
            "endpoint": format_address((self.host, self.port)),
            "connected": self.connected,
            "connects": self.connects,
            "failures": self.failures,
            "last_error": self.last_error,
            "release": self.parser.release,
            "devices": list(self.parser.devices),
            "reports": dict(self.parser.counters),
        }
