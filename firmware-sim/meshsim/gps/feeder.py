"""Wall-clock feeder: every node's true position, as a GPS receiver would report it,
sent as NMEA over UDP to the gpsd of that node.

One asyncio task serves all nodes. Epochs fall on the UTC grid of the rate
(whole seconds at 1 Hz, as a receiver's do); at each one the feeder asks
``position(node, t)`` for every node (``t`` in scenario seconds, ``t0`` being
the UNIX time of scenario time 0), derives the velocity from the previous
epoch's position (for RMC speed and course), lets the node's
``ReceiverModel`` add error or drop the fix, converts local metres to WGS84
with the same ``LocalFrame`` the daemon uses the other way (so the two are
exact inverses), and sends the epoch's sentences in one datagram. A stalled
host skips epochs instead of bursting stale ones (counted as late).

Everything sent is also written to ``log_path`` as JSON Lines (one record per
node and epoch, appended; fields in docs/scenarios.md) so that tests and the
evaluation can compare the daemon's view with the truth.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import ipaddress
import json
import logging
import math
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from meshsim.gps.model import ReceiverModel, dops
from meshsim.gps.nmea import Epoch, Satellite, encode, gsv
from meshsim.gps.settings import GpsSettings
from meshsim.gps.sky import NodeSky, Sky
from meshsub.core.geo import GeoError, LocalFrame

log = logging.getLogger(__name__)

PositionFn = Callable[[int, float], tuple[float, float]]
"""``position(node, t) -> (x, y)``: true local metres (east, north) at scenario time t."""
STILL_MPS = 0.05
"""Below this speed the course is unknown (empty RMC field), as on a receiver."""


class FeederError(RuntimeError):
    """The feeder cannot run: bad targets, a failing position function, an unusable log."""


@dataclass(slots=True)
class FeederStats:
    epochs: int = 0
    late_epochs: int = 0
    """Epochs skipped because the host was more than one period late."""
    datagrams: int = 0
    bytes: int = 0
    fixes: int = 0
    no_fixes: int = 0
    send_errors: Counter[str] = field(default_factory=Counter)


@dataclass(frozen=True, slots=True)
class Datagram:
    """One node's epoch: the bytes for its gpsd and the log record of what they say."""

    node: int
    data: bytes
    record: dict[str, Any]


def _check_targets(targets: Mapping[int, tuple[str, int]]
                   ) -> dict[int, tuple[socket.AddressFamily, tuple[str, int]]]:
    if not targets:
        raise FeederError("targets: no nodes to feed")
    out = {}
    for node, target in targets.items():
        if isinstance(node, bool) or not isinstance(node, int) or node < 0:
            raise FeederError(f"targets: node id {node!r} is not a non-negative integer")
        if not (isinstance(target, tuple) and len(target) == 2):
            raise FeederError(f"targets[{node}]: expected (address, port), got {target!r}")
        host, port = target
        try:
            address = ipaddress.ip_address(host)
        except ValueError:
            raise FeederError(f"targets[{node}]: {host!r} is not an IP address") from None
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise FeederError(f"targets[{node}]: port {port!r} is not in 1..65535")
        family = socket.AF_INET6 if address.version == 6 else socket.AF_INET
        out[node] = (family, (str(address), port))
    return out


class GpsFeeder:
    """Simulated GPS receivers for a set of nodes; ``await run()`` or ``start()``/``stop()``."""

    def __init__(
        self,
        targets: Mapping[int, tuple[str, int]],
        frame: LocalFrame,
        position: PositionFn,
        settings: GpsSettings,
        seed: int,
        log_path: Path | None = None,
        *,
        t0: float | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not isinstance(settings, GpsSettings):
            raise FeederError(f"settings: expected GpsSettings, got {type(settings).__name__}")
        if not isinstance(frame, LocalFrame):
            raise FeederError(f"frame: expected LocalFrame, got {type(frame).__name__}")
        if not callable(position):
            raise FeederError("position: expected a function (node, t) -> (x, y)")
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise FeederError(f"seed: expected an integer, got {seed!r}")
        if t0 is not None and not math.isfinite(t0):
            raise FeederError(f"t0: expected a finite UNIX time, got {t0!r}")
        self.targets = _check_targets(targets)
        self.frame = frame
        self.position = position
        self.settings = settings
        self.seed = seed
        self.log_path = log_path
        self.t0 = t0
        self._clock = clock
        self.nodes = tuple(sorted(self.targets))
        self.models = {n: ReceiverModel(settings, seed, n) for n in self.nodes}
        self.sky = Sky(seed, settings.satellites_in_view)
        self._views = {n: NodeSky(self.sky, seed, n, settings.satellites) for n in self.nodes}
        self._previous: dict[int, tuple[float, float, float]] = {}
        self._gsv: dict[int, tuple[tuple[Satellite, ...], list[str]]] = {}
        self._last_t: float | None = None
        self._log: IO[str] | None = None
        self._sockets: dict[socket.AddressFamily, socket.socket] = {}
        self._warned: set[tuple[int, str]] = set()
        self.stats = FeederStats()
        self._stop_requested = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._wake: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._thread_error: BaseException | None = None

    # -------------------------------------------------------------- one epoch

    def compose(self, t: float, utc: float) -> list[Datagram]:
        """Every node's epoch for scenario time ``t``, stamped ``utc``; no I/O.

        ``t`` must increase from call to call (the receiver models advance).
        ``run`` sends and logs what this returns; tests may call it directly.
        """
        if self._last_t is not None and t <= self._last_t:
            raise FeederError(f"epoch time went from {self._last_t:g} to {t:g}: must increase")
        self._last_t = t
        geometry = self.sky.at(t)
        out = []
        ts_ns = round(utc * 1e9)
        for node in self.nodes:
            x, y = self._true_position(node, t)
            speed, course = self._velocity(node, t, x, y)
            reading = self.models[node].step(t)
            used, in_view = self._views[node].view(geometry)
            record: dict[str, Any] = {"ts_ns": ts_ns, "t": round(t, 3), "node": node,
                                      "x": round(x, 3), "y": round(y, 3), "fix": reading.fix}
            if reading.fix:
                rx, ry = x + reading.east_m, y + reading.north_m
                try:
                    lat, lon, alt = self.frame.to_geodetic(rx, ry, 0.0)
                except GeoError as exc:
                    raise FeederError(f"node {node} at t={t:g}: {exc}") from None
                pdop, hdop, vdop = dops(reading.hdop)
                epoch = Epoch(utc, True, lat, lon, alt_m=alt, speed_mps=speed,
                              course_deg=course, hdop=hdop, vdop=vdop, pdop=pdop, used=used,
                              in_view=in_view)
                record.update(rx=round(rx, 3), ry=round(ry, 3), lat=round(lat, 9),
                              lon=round(lon, 9), hdop=round(reading.hdop, 2),
                              sats=len(used), sigma_m=round(reading.sigma_m, 3),
                              err_m=round(math.hypot(reading.east_m, reading.north_m), 3))
                self.stats.fixes += 1
            else:
                epoch = Epoch(utc, False, in_view=())  # total signal loss: nothing tracked
                self.stats.no_fixes += 1
            out.append(Datagram(node, encode(epoch, self._gsv_lines(node, epoch)), record))
        self.stats.epochs += 1
        return out

    def _gsv_lines(self, node: int, epoch: Epoch) -> list[str]:
        """GSV of ``epoch``, formatted again only when the node's satellites in view change."""
        cached = self._gsv.get(node)
        if cached is not None and cached[0] is epoch.in_view:
            return cached[1]
        lines = gsv(epoch)
        self._gsv[node] = (epoch.in_view, lines)
        return lines

    def _true_position(self, node: int, t: float) -> tuple[float, float]:
        try:
            x, y = self.position(node, t)
            x, y = float(x), float(y)
        except Exception as exc:
            raise FeederError(f"position(node {node}, t={t:g}) failed: "
                              f"{type(exc).__name__}: {exc}") from None
        if not (math.isfinite(x) and math.isfinite(y)):
            raise FeederError(f"position(node {node}, t={t:g}) is not finite: ({x}, {y})")
        return x, y

    def _velocity(self, node: int, t: float, x: float, y: float
                  ) -> tuple[float, float | None]:
        """Speed (m/s) and course (degrees true) by backward difference over the epoch."""
        previous = self._previous.get(node)
        self._previous[node] = (t, x, y)
        if previous is None:
            return 0.0, None
        pt, px, py = previous
        vx, vy = (x - px) / (t - pt), (y - py) / (t - pt)
        speed = math.hypot(vx, vy)
        if speed < STILL_MPS:
            return speed, None
        course = math.degrees(math.atan2(vx, vy)) % 360.0
        return speed, course if course < 360.0 else 0.0

    # ------------------------------------------------------------ the network

    def _write(self, datagrams: list[Datagram]) -> None:
        if self._log is not None:
            self._log.write("".join(json.dumps(d.record, separators=(",", ":")) + "\n"
                                    for d in datagrams))
            self._log.flush()

    def _send(self, datagrams: list[Datagram]) -> None:
        for datagram in datagrams:
            node, data = datagram.node, datagram.data
            family, address = self.targets[node]
            try:
                self._sockets[family].sendto(data, address)
            except OSError as exc:
                name = errno.errorcode.get(exc.errno or 0, type(exc).__name__)
                self.stats.send_errors[name] += 1
                if (node, name) not in self._warned:  # once per node and cause, not per second
                    self._warned.add((node, name))
                    log.warning("gps send failed node=%d to=%s:%d error=%s", node, *address,
                                name)
                continue
            self.stats.datagrams += 1
            self.stats.bytes += len(data)

    def _open(self) -> None:
        for family in {f for f, _ in self.targets.values()}:
            sock = socket.socket(family, socket.SOCK_DGRAM)
            sock.setblocking(False)
            self._sockets[family] = sock
        if self.log_path is not None:
            try:
                self._log = open(self.log_path, "a", encoding="utf-8")  # noqa: SIM115
            except OSError as exc:
                self._close()
                raise FeederError(f"cannot open gps log {str(self.log_path)!r}: "
                                  f"{exc.strerror}") from None

    def _close(self) -> None:
        for sock in self._sockets.values():
            sock.close()
        self._sockets.clear()
        if self._log is not None:
            self._log.close()
            self._log = None

    # ---------------------------------------------------------------- running

    async def run(self, until: float | None = None) -> FeederStats:
        """Feed until scenario time ``until`` (inclusive) or ``stop()``; a feeder runs once."""
        if self._loop is not None:
            raise FeederError("a GpsFeeder runs once")
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        if self._stop_requested:
            return self.stats
        period = self.settings.period_s
        now = self._clock()
        t0 = self.t0 if self.t0 is not None else now
        k = math.ceil(max(now, t0) / period)
        self._open()
        log.info("gps feeder start nodes=%d rate_hz=%g noise_m=%g hdop=%.2f", len(self.nodes),
                 self.settings.rate_hz, self.settings.noise_m, self.settings.nominal_hdop)
        try:
            while not self._stop_requested:
                utc = k * period
                t = utc - t0
                if until is not None and t > until:
                    break
                delay = utc - self._clock()
                if delay > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), delay)
                    if self._stop_requested:
                        break
                behind = self._clock() - utc
                if behind > period:
                    skipped = math.floor(behind / period)
                    self.stats.late_epochs += skipped
                    log.warning("gps feeder late by %.2fs: skipping %d epochs", behind, skipped)
                    k += skipped
                    continue
                batch = self.compose(t, utc)
                self._send(batch)
                self._write(batch)
                k += 1
        finally:
            self._close()
            log.info("gps feeder stop epochs=%d datagrams=%d late=%d send_errors=%d",
                     self.stats.epochs, self.stats.datagrams, self.stats.late_epochs,
                     sum(self.stats.send_errors.values()))
        return self.stats

    def stop(self, timeout: float = 10.0) -> None:
        """Ask ``run`` to end (from any thread); with ``start()``, also join the thread."""
        self._stop_requested = True
        loop, wake = self._loop, self._wake
        if loop is not None and wake is not None and not loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop ended meanwhile
                loop.call_soon_threadsafe(wake.set)
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                raise FeederError(f"gps feeder thread did not stop within {timeout:g}s")
            if self._thread_error is not None:
                raise FeederError(f"gps feeder failed: {self._thread_error}")

    def start(self, until: float | None = None) -> None:
        """Run in a thread of its own (its own event loop) until ``stop()`` or ``until``."""
        if self._thread is not None:
            raise FeederError("a GpsFeeder runs once")

        def main() -> None:
            try:
                asyncio.run(self.run(until))
            except BaseException as exc:  # reported by stop()
                self._thread_error = exc
                log.error("gps feeder failed: %s", exc)

        self._thread = threading.Thread(target=main, name="gps-feeder", daemon=True)
        self._thread.start()

    def status(self) -> dict[str, object]:
        s = self.stats
        return {"nodes": len(self.nodes), "epochs": s.epochs, "late_epochs": s.late_epochs,
                "datagrams": s.datagrams, "bytes": s.bytes, "fixes": s.fixes,
                "no_fixes": s.no_fixes, "send_errors": dict(s.send_errors)}
