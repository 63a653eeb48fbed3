"""gpsd source: the parser on recorded reports, and the real gpsd fed by gpsfake."""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from meshsim.gps.nmea import Epoch, Satellite, encode
from meshsub.core.api import Position
from meshsub.core.geo import LocalFrame
from meshsub.runtime.location import (
    Gating,
    GpsdParser,
    GpsdSource,
    LocationService,
    LocationTracker,
)

M_PER_DEG_LAT = 111_132.954


def nmea_log(start_lat: float, lon: float, step_deg: float, count: int) -> str:
    """One receiver epoch per second, as ``meshsim.gps`` writes it: 8 satellites used,
    HDOP 0.9, altitude 250 m above mean sea level (geoid 47 m above the ellipsoid)."""
    sats = tuple(Satellite(i + 1, 10 + i * 8, 30 * i, 40) for i in range(8))
    epochs = (Epoch(utc=1_795_000_000.0 + i, fix=True, lat=start_lat + i * step_deg, lon=lon,
                    alt_m=250.0, geoid_sep_m=47.0, hdop=0.9, vdop=1.2, pdop=1.5,
                    used=tuple(range(1, 9)), in_view=sats) for i in range(count))
    return "".join(encode(e).decode("ascii") for e in epochs)


def test_parser_merges_sky_into_tpv() -> None:
    p = GpsdParser()
    assert p.feed('{"class":"VERSION","release":"3.22"}', 0.0) is None
    assert p.feed('{"class":"SKY","hdop":1.2,"satellites":[{"PRN":1,"used":true},'
                  '{"PRN":2,"used":false},{"PRN":3,"used":true}]}', 0.5) is None
    fix = p.feed('{"class":"TPV","mode":3,"lat":45.1,"lon":7.2,"altMSL":250.0}', 1.0)
    assert fix is not None
    assert (fix.mode, fix.lat, fix.lon, fix.alt, fix.hdop, fix.satellites, fix.received_at) == \
        (3, 45.1, 7.2, 250.0, 1.2, 2, 1.0)
    p.feed('{"class":"SKY","hdop":0.8,"uSat":9,"nSat":12}', 1.5)
    fix = p.feed('{"class":"TPV","mode":2,"lat":45.1,"lon":7.2,"alt":99}', 2.0)
    assert fix is not None and fix.satellites == 9 and fix.hdop == 0.8 and fix.alt is None
    assert p.release == "3.22"


@pytest.mark.parametrize("line", ["not json", "[1,2]", '{"no":"class"}', '{"class":5}', "\xff"])
def test_parser_counts_garbage(line: str) -> None:
    p = GpsdParser()
    assert p.feed(line, 0.0) is None
    assert sum(p.counters.values()) == 1


def test_parser_sanitises_tpv() -> None:
    p = GpsdParser()
    fix = p.feed('{"class":"TPV","mode":"3","lat":95.0,"lon":7}', 0.0)
    assert fix is not None and fix.mode == 0 and fix.lat is None
    assert p.counters["bad_mode"] == 1 and p.counters["bad_coordinates"] == 1


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def gpsfake_runner(tmp_path: Path) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start gpsfake processes (each its own session) and always kill them afterwards."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        stop_gpsfake(proc)


def stop_gpsfake(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM the session (gpsfake and its gpsd); SIGKILL if gpsfake lingers."""
    if proc.poll() is not None:
        return
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def start_gpsfake(procs: list[subprocess.Popen[bytes]], log: Path, port: int
                  ) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen(
        ["gpsfake", "-P", str(port), "-1", "-q", "-c", "0.05", str(log)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
        env={**os.environ, "PATH": os.environ.get("PATH", "") + ":/usr/sbin:/sbin"},
    )
    procs.append(proc)
    return proc


async def wait_for(predicate: object, guard: float = 60.0) -> None:
    deadline = time.monotonic() + guard  # a guard against hanging, not a timing assertion
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached")
        await asyncio.sleep(0.05)


@pytest.mark.skipif(shutil.which("gpsfake") is None, reason="gpsfake not installed")
async def test_real_gpsd_via_gpsfake_with_reconnect(
        tmp_path: Path, gpsfake_runner: list[subprocess.Popen[bytes]]) -> None:
    port = free_port()
    first = tmp_path / "first.nmea"
    first.write_text(nmea_log(45.0, 7.0, 0.0002, 12))  # moving north 22 m per second
    second = tmp_path / "second.nmea"
    second.write_text(nmea_log(45.01, 7.0, 0.0, 12))  # 1.1 km further north, still

    positions: list[Position | None] = []
    source = GpsdSource("127.0.0.1", port, clock=time.monotonic, backoff_min=0.1,
                        backoff_max=0.5)
    tracker = LocationTracker(Gating(movement_threshold=10.0, stale_after=30.0),
                              LocalFrame(45.0, 7.0, 250.0), "gpsd")
    service = LocationService(source, tracker, positions.append, clock=time.monotonic,
                              tick_interval=0.2)
    async with service:
        # the client starts before gpsd exists: it must keep retrying
        await wait_for(lambda: source.failures >= 1)
        proc = start_gpsfake(gpsfake_runner, first, port)
        await wait_for(lambda: sum(p is not None and p.y > 100 for p in positions) >= 1)
        assert source.connects >= 1
        reports = [p for p in positions if p is not None]
        # gpsd's own estimate (TPV eph), not HDOP x UERE: it is what gpsd knows
        assert tracker.fix is not None and tracker.fix.error_m is not None
        assert all(p.error_m == pytest.approx(tracker.fix.error_m) for p in reports)
        ys = [p.y for p in reports]
        assert ys == sorted(ys)  # moving north, reported in order
        assert all(b - a > 10.0 for a, b in itertools.pairwise(ys))  # threshold held
        assert reports[-1].z == pytest.approx(0.0, abs=0.5)  # altMSL 250 = origin altitude
        connects = source.connects
        await asyncio.to_thread(stop_gpsfake, proc)  # gpsd goes away (a restart, a crash)
        await wait_for(lambda: not source.connected)
        start_gpsfake(gpsfake_runner, second, port)
        await wait_for(lambda: any(p is not None and p.y > 1000 for p in positions))
        assert source.connects > connects
        status = service.status()
    assert status["fix"] is True and status["source"] == "gpsd"
    assert status["y"] == pytest.approx(0.01 * M_PER_DEG_LAT, abs=1.0)
    assert status["provider"]["release"]  # gpsd answered VERSION
    assert json.dumps(status)  # status is plain JSON for meshsubctl
