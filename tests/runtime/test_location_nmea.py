"""NMEA serial source: the assembler on sentences, and a pseudo-terminal as the device."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Iterator

import pytest
from test_location_gpsd import nmea_log  # sibling module (rootdir-less test layout)

from meshsim.gps.nmea import Epoch, rmc
from meshsim.gps.nmea import sentence as nmea
from meshsub.runtime.location import Fix, NmeaAssembler, NmeaSerialSource

GGA = "GPGGA,092750.000,5321.6802,N,00630.3372,W,1,08,1.03,61.7,M,55.2,M,,"


def test_gga_fix() -> None:
    a = NmeaAssembler()
    fix = a.feed(nmea(GGA), 5.0)
    assert fix is not None
    assert fix.lat == pytest.approx(53.361336666) and fix.lon == pytest.approx(-6.50562)
    assert (fix.mode, fix.alt, fix.hdop, fix.satellites, fix.received_at) == \
        (3, 61.7, 1.03, 8, 5.0)


def test_gsa_mode_and_no_fix() -> None:
    a = NmeaAssembler()
    a.feed(nmea("GPGSA,A,2,10,07,05,02,,,,,,,,,1.72,1.03,1.38"), 0.0)
    fix = a.feed(nmea(GGA), 1.0)
    assert fix is not None and fix.mode == 2 and fix.alt is None
    lost = a.feed(nmea("GPGGA,092751.000,,,,,0,00,99.99,,,,,,"), 2.0)
    assert lost is not None and lost.mode == 1 and lost.lat is None


def test_rmc_only_receiver() -> None:
    a = NmeaAssembler()
    fix = a.feed(nmea("GPRMC,092750.000,A,5321.6802,N,00630.3372,W,0.02,31.66,280511,,,A"), 0.0)
    assert fix is not None and fix.mode == 2 and fix.satellites is None
    void = a.feed(nmea("GPRMC,092751.000,V,,,,,,,280511,,,N"), 1.0)
    assert void is not None and void.mode == 1
    a.feed(nmea(GGA), 2.0)  # once GGA is seen, RMC no longer produces fixes
    assert a.feed(nmea("GPRMC,092752.000,A,5321.6802,N,00630.3372,W,0,0,280511,,,A"), 3) is None


@pytest.mark.parametrize(
    ("line", "counter"),
    [
        ("$" + GGA + "*00", "checksum"),
        ("$" + GGA, "checksum"),  # strict: a missing checksum is an error too
        ("\x00\x13garbage", "garbage"),
        ("$GPXXX,1,2,3*00", "checksum"),
        ("$", "parse_error"),
    ],
)
def test_bad_lines_are_counted(line: str, counter: str) -> None:
    a = NmeaAssembler()
    assert a.feed(line, 0.0) is None
    assert a.counters[counter] == 1, dict(a.counters)


def test_unknown_but_valid_sentence_counted() -> None:
    a = NmeaAssembler()
    assert a.feed(nmea("GPZZZ,1,2"), 0.0) is None
    assert a.counters["unknown_sentence"] == 1


@pytest.fixture
def pty() -> Iterator[tuple[int, str]]:
    master, slave = os.openpty()
    path = os.ttyname(slave)
    yield master, path
    os.close(master)
    os.close(slave)


async def test_serial_pty_end_to_end(pty: tuple[int, str]) -> None:
    master, path = pty
    source = NmeaSerialSource(path, 4800, clock=time.monotonic)
    fixes: list[Fix] = []

    async def consume() -> None:
        async for fix in source.fixes():
            fixes.append(fix)

    task = asyncio.create_task(consume())
    try:
        deadline = time.monotonic() + 30  # hang guard only
        while not source.open:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        noise = b"\xff\xfe\x00garbage at open\r\n" + ("$" + GGA + "*00\r\n").encode()
        # switched on mid-epoch: the stream starts with the RMC that ends an epoch
        log = (rmc(Epoch(1_794_999_999.0, True, 45.0, 7.0))
               + nmea_log(45.0, 7.0, 0.0001, 3)).encode()
        os.write(master, noise + log[:50])  # a sentence split across reads
        await asyncio.sleep(0.05)
        os.write(master, log[50:] + b"x" * 600 + b"\r\n")  # an overlong line
        while len(fixes) < 4:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
    finally:
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    # the leading RMC gives a 2D fix before any GGA; then one fix per GGA
    assert fixes[0].mode == 2 and fixes[0].satellites is None
    gga = fixes[1:]
    assert [round(f.lat or 0, 6) for f in gga] == [45.0, 45.0001, 45.0002]
    assert all(f.mode == 3 and f.hdop == 0.9 and f.satellites == 8 for f in gga)
    counters = source.assembler.counters
    assert counters["garbage"] >= 2 and counters["checksum"] == 1
    assert source.status()["opens"] == 1


async def test_missing_device_retries(tmp_path: object) -> None:
    source = NmeaSerialSource("/dev/msub-no-such-tty", 9600, clock=time.monotonic,
                              backoff_min=0.01, backoff_max=0.02)
    gen = source.fixes()
    task = asyncio.ensure_future(gen.__anext__())
    deadline = time.monotonic() + 30
    while source.failures < 3:
        assert time.monotonic() < deadline
        await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert "open" in (source.last_error or "")


def test_bad_baud() -> None:
    with pytest.raises(ValueError, match="baud"):
        NmeaSerialSource("/dev/null", 1234, clock=time.monotonic)
