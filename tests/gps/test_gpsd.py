"""The real gpsd reads the simulated receiver: positions round-trip, noise survives, fix loss.

Epochs are made with ``GpsFeeder.compose`` (the feeder minus its clock) and
sent to gpsd's UDP source by the test, so nothing here depends on how fast
the machine is: the assertions are on what gpsd reports, matched by time stamp.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

import pytest
from gpsdproc import Gpsd, iso, needs_gpsd

from meshsim.gps.feeder import GpsFeeder, PositionFn
from meshsim.gps.settings import GpsSettings, Outage
from meshsub.core.api import Position
from meshsub.core.geo import LocalFrame
from meshsub.core.tracking import UERE_M
from meshsub.runtime.location import Gating, GpsdSource, LocationService, LocationTracker

pytestmark = needs_gpsd

START_UTC = 1_795_000_000.0
PRECISION_M = 0.014
"""Worst horizontal error of ddmm.mmmmm formatting: hypot of two half-steps of 1e-5'."""
ALT_PRECISION_M = 0.06
"""Altitude is written with one decimal."""


def feed(gpsd: Gpsd, feeder: GpsFeeder, times: list[float]) -> list[dict[str, Any]]:
    """Compose and send one epoch per scenario time; return the feeder's log records."""
    records: list[dict[str, Any]] = []
    for t in times:
        for datagram in feeder.compose(t, START_UTC + t):
            gpsd.send(datagram.data)
            records.append(datagram.record)
        time.sleep(0.005)  # keep well inside gpsd's socket buffer; not a timing assertion
    return records


def make_feeder(gpsd: Gpsd, settings: GpsSettings, position: PositionFn,
                origin: tuple[float, float] = (45.0, 7.0)) -> GpsFeeder:
    return GpsFeeder({1: ("127.0.0.1", gpsd.udp_port)}, LocalFrame(*origin), position,
                     settings, seed=11)


def last_tpv(gpsd_watch: Any, t: float) -> dict[str, Any]:
    stamp = iso(START_UTC + t)
    return dict(gpsd_watch.wait_for(lambda r: r.get("class") == "TPV"
                                    and r.get("time") == stamp))


@pytest.mark.parametrize("origin", [(45.0, 7.0), (-33.86, 151.21), (40.71, -74.0), (0.0, 0.0)])
def test_position_round_trips_through_gpsd(gpsd: Gpsd,
                                           origin: tuple[float, float]) -> None:
    """Noise 0: gpsd's TPV is the true position to the formatting precision, everywhere
    (at origin 0/0 the track crosses the equator and the prime meridian)."""
    watch = gpsd.watch()
    settings = GpsSettings(enabled=True, noise_m=0.0, hdop=1.2)
    feeder = make_feeder(gpsd, settings,
                         lambda n, t: (-2000.0 + 137.1 * t, -1500.0 + 101.3 * t), origin)
    times = [float(t) for t in range(30)]
    records = feed(gpsd, feeder, times)
    last_tpv(watch, times[-1])
    frame = LocalFrame(*origin)
    tpvs = watch.tpvs()
    matched = 0
    for rec in records:
        tpv = tpvs.get(iso(rec["ts_ns"] / 1e9))
        if tpv is None:
            continue  # gpsd reports its first cycle before it knows the date
        matched += 1
        assert tpv["mode"] == 3
        x, y, z = frame.to_local(tpv["lat"], tpv["lon"], tpv["altMSL"])
        assert math.hypot(x - rec["x"], y - rec["y"]) <= PRECISION_M
        assert abs(z) <= ALT_PRECISION_M
        if rec["t"] > 0:  # speed and course from the true velocity
            assert tpv["speed"] == pytest.approx(math.hypot(137.1, 101.3), abs=1e-3)
            assert tpv["track"] == pytest.approx(math.degrees(math.atan2(137.1, 101.3)),
                                                 abs=0.01)
    assert matched >= len(records) - 2
    sky = [r for r in watch.reports if r.get("class") == "SKY"]
    assert sky and all((s["hdop"], s["uSat"], s["nSat"]) == (1.2, 8, 11) for s in sky)


def test_noise_survives_gpsd(gpsd: Gpsd) -> None:
    """sigma 3 m, white: the squared errors of gpsd's fixes fit a chi-square (seeded)."""
    watch = gpsd.watch()
    sigma = 3.0
    feeder = make_feeder(gpsd, GpsSettings(noise_m=sigma, correlation_s=0.0),
                         lambda n, t: (50.0, -20.0))
    times = [float(t) for t in range(300)]
    records = feed(gpsd, feeder, times)
    last_tpv(watch, times[-1])
    frame, tpvs = LocalFrame(45.0, 7.0), watch.tpvs()
    chi2, n = 0.0, 0
    for rec in records:
        tpv = tpvs.get(iso(rec["ts_ns"] / 1e9))
        if tpv is None:
            continue
        x, y, _ = frame.to_local(tpv["lat"], tpv["lon"], tpv["altMSL"])
        assert math.hypot(x - rec["rx"], y - rec["ry"]) <= PRECISION_M  # gpsd relays the fix
        chi2 += ((x - 50.0) ** 2 + (y + 20.0) ** 2) / sigma**2
        n += 1
    assert n >= 290
    # 99.9 % interval of chi-square(2n) (Wilson-Hilferty, z = 3.29)
    c = 2.0 / (9.0 * 2 * n)
    assert 2 * n * (1 - c - 3.29 * c**0.5) ** 3 < chi2 < 2 * n * (1 - c + 3.29 * c**0.5) ** 3
    hdop = math.sqrt(2) * sigma / UERE_M
    sky = [r for r in watch.reports if r.get("class") == "SKY"]
    assert {s["hdop"] for s in sky} == {round(hdop, 2)}


def test_fix_loss_gives_no_fix_reports(gpsd: Gpsd) -> None:
    watch = gpsd.watch()
    settings = GpsSettings(noise_m=1.0, outages=(Outage(10.0, 20.0),))
    feeder = make_feeder(gpsd, settings, lambda n, t: (0.0, 0.0))
    times = [float(t) for t in range(30)]
    records = feed(gpsd, feeder, times)
    last_tpv(watch, times[-1])
    tpvs = watch.tpvs()
    modes = {rec["t"]: tpvs[s]["mode"] for rec in records if (s := iso(rec["ts_ns"] / 1e9))
             in tpvs}
    # gpsd ignores the time of an RMC with status V, so it reports the first no-fix epoch
    # only with the next one: 9 of the 10 lost epochs have their own TPV
    lost = [t for t in modes if 10 <= t < 20]
    assert len(lost) >= 9 and {modes[t] for t in lost} == {1}
    assert all("lat" not in tpvs[iso(START_UTC + t)] for t in lost)
    assert {modes[t] for t in modes if t < 10 or t >= 20} == {3}
    assert [r["fix"] for r in records] == [not 10 <= r["t"] < 20 for r in records]


async def test_daemon_reports_no_fix_then_recovers(gpsd: Gpsd) -> None:
    """The daemon's gpsd source and tracker: a position, then "no fix" once, then again."""
    origin = (45.0, 7.0)
    settings = GpsSettings(noise_m=0.0, hdop=1.1, outages=(Outage(8.0, 16.0),))
    feeder = make_feeder(gpsd, settings, lambda n, t: (120.0, 80.0), origin)
    positions: list[Position | None] = []
    source = GpsdSource("127.0.0.1", gpsd.tcp_port, clock=time.monotonic, backoff_min=0.1)
    tracker = LocationTracker(Gating(movement_threshold=0.0, stale_after=60.0),
                              LocalFrame(*origin), "gpsd")
    service = LocationService(source, tracker, positions.append, clock=time.monotonic)
    async with service:
        deadline = time.monotonic() + 30.0  # a hang guard, not a timing assertion
        while not source.connected and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        assert source.connected
        for t in range(24):
            for datagram in feeder.compose(float(t), START_UTC + t):
                gpsd.send(datagram.data)
            await asyncio.sleep(0.02)
        while source.parser.counters["tpv"] < 20 and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        status = service.status()
    lost = [i for i, p in enumerate(positions) if p is None]
    assert len(lost) == 1, positions  # "no fix" is announced exactly once
    before, after = positions[:lost[0]], positions[lost[0] + 1:]
    assert before and after
    for p in before + after:
        assert p is not None
        assert math.hypot(p.x - 120.0, p.y - 80.0) <= PRECISION_M
        assert p.error_m > 1.1 * UERE_M  # gpsd's eph (95 %), larger than HDOP x 5 m
    assert status["fix"] is True and tracker.rejected["no_fix"] >= 1
