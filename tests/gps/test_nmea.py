"""The NMEA writer: checksums, field formats, pynmea2 and the daemon's own parser agree."""

from __future__ import annotations

import datetime as dt
import math

import pynmea2
import pytest
from hypothesis import given
from hypothesis import strategies as st

from meshsim.gps.nmea import (
    KNOTS_PER_MPS,
    MAX_SENTENCE,
    Epoch,
    NmeaError,
    Satellite,
    degrees_minutes,
    encode,
    gsv,
    sentence,
    sentences,
    utc_fields,
)
from meshsub.runtime.location import NmeaAssembler

HALF_STEP_DEG = 0.5e-5 / 60.0
"""Rounding of the fifth decimal of the minutes, in degrees."""
UTC = 1_795_000_000.25  # 2026-11-18T11:06:40.25Z


def sats(n: int) -> tuple[Satellite, ...]:
    return tuple(Satellite(p, 5 + (p * 7) % 85, (p * 37) % 360, 20 + p) for p in range(1, n + 1))


def fix_epoch(**kw: object) -> Epoch:
    values: dict[str, object] = dict(
        utc=UTC, fix=True, lat=45.123456789, lon=-7.987654321, alt_m=251.37,
        speed_mps=3.5, course_deg=123.456, hdop=0.85, vdop=1.27, pdop=1.53,
        used=(2, 5, 7, 9, 11, 12, 20, 31), in_view=sats(11))
    values.update(kw)
    return Epoch(**values)  # type: ignore[arg-type]


def parse(line: str) -> pynmea2.NMEASentence:
    return pynmea2.parse(line.rstrip("\r\n"), check=True)


def test_checksum_of_the_textbook_sentence() -> None:
    assert sentence("GPGGA,092750.000,5321.6802,N,00630.3372,W,1,8,1.03,61.7,M,55.2,M,,") \
        .endswith("*76\r\n")


@pytest.mark.parametrize(("value", "lat", "text", "hemi"), [
    (45.5, True, "4530.00000", "N"),
    (-33.8688, True, "3352.12800", "S"),
    (7.0, False, "00700.00000", "E"),
    (-122.4194, False, "12225.16400", "W"),
    (0.0, True, "0000.00000", "N"),
    (-0.0000001, False, "00000.00001", "W"),
    (45.99999999999, True, "4600.00000", "N"),  # 59.9999999' carries into the degrees
    (179.99999999, False, "18000.00000", "E"),
    (-90.0, True, "9000.00000", "S"),
])
def test_degrees_minutes(value: float, lat: bool, text: str, hemi: str) -> None:
    assert degrees_minutes(value, lat=lat) == (text, hemi)


@pytest.mark.parametrize("utc", [0.0, 951_782_400.0, 951_868_799.994, 1_700_000_000.5,
                                 4_102_444_799.996, UTC])
def test_utc_fields_match_datetime(utc: float) -> None:
    stamp = dt.datetime.fromtimestamp(round(utc * 100) / 100, dt.UTC)
    assert utc_fields(utc) == (stamp.strftime("%H%M%S.") + f"{stamp.microsecond // 10_000:02d}",
                               stamp.strftime("%d%m%y"))


def test_fix_epoch_parses_with_pynmea2() -> None:
    e = fix_epoch()
    lines = sentences(e)
    assert [ln[3:6] for ln in lines] == ["GGA", "GSA", "GSV", "GSV", "GSV", "RMC"]
    assert all(len(ln) <= MAX_SENTENCE and ln.endswith("\r\n") for ln in lines)
    gga, gsa, *gsvs, rmc = (parse(ln) for ln in lines)
    assert gga.gps_qual == 1 and gga.num_sats == "08" and float(gga.horizontal_dil) == 0.85
    assert gga.altitude == pytest.approx(251.4) and gga.altitude_units == "M"
    assert gga.geo_sep == "0.0"
    for msg in (gga, rmc):
        assert abs(msg.latitude - e.lat) <= HALF_STEP_DEG
        assert abs(msg.longitude - e.lon) <= HALF_STEP_DEG
        assert msg.timestamp == dt.time(11, 6, 40, 250_000, tzinfo=dt.UTC)
    assert rmc.status == "A" and rmc.mode_indicator == "A"
    assert rmc.datestamp == dt.date(2026, 11, 18)
    assert float(rmc.spd_over_grnd) == pytest.approx(3.5 * KNOTS_PER_MPS, abs=5e-4)
    assert float(rmc.true_course) == pytest.approx(123.46)
    assert (gsa.mode, gsa.mode_fix_type) == ("A", "3")
    assert [gsa.data[i] for i in range(2, 14)] == \
        ["02", "05", "07", "09", "11", "12", "20", "31", "", "", "", ""]
    assert (float(gsa.pdop), float(gsa.hdop), float(gsa.vdop)) == (1.53, 0.85, 1.27)
    assert [(m.num_messages, m.msg_num, m.num_sv_in_view) for m in gsvs] == \
        [("3", "1", "11"), ("3", "2", "11"), ("3", "3", "11")]
    listed = [(int(m.data[i]), int(m.data[i + 1]), int(m.data[i + 2]), int(m.data[i + 3]))
              for m in gsvs for i in range(3, len(m.data), 4)]
    assert listed == [(s.prn, s.elevation, s.azimuth, s.snr) for s in e.in_view]


def test_no_fix_epoch_says_so_as_a_receiver_does() -> None:
    e = Epoch(UTC, False, in_view=())
    gga, gsa, gsv_, rmc = (parse(ln) for ln in sentences(e))
    assert gga.gps_qual == 0 and gga.lat == "" and gga.num_sats == "00"
    assert gsa.mode_fix_type == "1" and float(gsa.hdop) == 99.99
    assert gsv_.num_sv_in_view == "00"
    assert rmc.status == "V" and rmc.lat == "" and rmc.mode_indicator == "N"
    assert rmc.datestamp == dt.date(2026, 11, 18)


@pytest.mark.parametrize(("count", "messages"), [(0, 1), (1, 1), (4, 1), (5, 2), (12, 3),
                                                 (13, 4), (32, 8)])
def test_gsv_splits_four_satellites_per_sentence(count: int, messages: int) -> None:
    lines = gsv(fix_epoch(in_view=sats(count), used=()))
    assert len(lines) == messages
    parsed = [parse(ln) for ln in lines]
    assert all(int(m.num_messages) == messages and int(m.num_sv_in_view) == count
               for m in parsed)
    assert [int(m.msg_num) for m in parsed] == list(range(1, messages + 1))
    assert sum((len(m.data) - 3) // 4 for m in parsed) == count


def test_untracked_satellite_has_an_empty_snr() -> None:
    (line,) = gsv(fix_epoch(in_view=(Satellite(3, 12, 200, None),), used=()))
    assert line.startswith("$GPGSV,1,1,01,03,12,200,*")
    assert parse(line).data[6] == ""


def test_still_receiver_leaves_the_course_empty() -> None:
    rmc = parse(sentences(fix_epoch(speed_mps=0.0, course_deg=None))[-1])
    assert rmc.true_course is None or rmc.true_course == ""
    assert float(rmc.spd_over_grnd) == 0.0


def test_the_daemons_nmea_parser_reads_the_epoch() -> None:
    assembler = NmeaAssembler()
    fixes = [f for line in sentences(fix_epoch()) if (f := assembler.feed(line, 1.0))]
    assert len(fixes) == 1
    (fix,) = fixes
    assert (fix.mode, fix.hdop, fix.satellites) == (3, 0.85, 8)
    assert fix.alt == pytest.approx(251.4)
    assert abs(fix.lat - 45.123456789) <= HALF_STEP_DEG  # type: ignore[operator]
    assert sum(assembler.counters[k] for k in ("checksum", "parse_error", "garbage")) == 0
    lost = [f for line in sentences(Epoch(UTC, False)) if (f := assembler.feed(line, 2.0))]
    assert [f.mode for f in lost] == [1]


@given(lat=st.floats(-90, 90), lon=st.floats(-180, 180),
       utc=st.floats(0, 4_102_444_800), speed=st.floats(0, 100))
def test_any_position_round_trips_through_pynmea2(lat: float, lon: float, utc: float,
                                                   speed: float) -> None:
    e = fix_epoch(lat=lat, lon=lon, utc=utc, speed_mps=speed)
    data = encode(e).decode("ascii")
    lines = data.split("\r\n")[:-1]
    for line in lines:
        assert len(line) + 2 <= MAX_SENTENCE
        parse(line)
    gga = parse(lines[0])
    assert abs(gga.latitude - lat) <= HALF_STEP_DEG + 1e-12
    assert abs(gga.longitude - lon) <= HALF_STEP_DEG + 1e-12


@pytest.mark.parametrize(("kw", "problem"), [
    ({"lat": 90.5}, "latitude"),
    ({"lon": math.nan}, "longitude"),
    ({"utc": -1.0}, "utc"),
    ({"hdop": math.inf}, "hdop"),
    ({"speed_mps": -1.0}, "speed"),
    ({"course_deg": 360.0}, "course"),
    ({"used": tuple(range(1, 14))}, "satellites used"),
    ({"used": (0,)}, "PRNs"),
])
def test_bad_epochs_are_refused_in_one_line(kw: dict[str, object], problem: str) -> None:
    with pytest.raises(NmeaError, match=problem) as info:
        fix_epoch(**kw)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("args", "problem"), [
    ((0, 10, 10, 30), "PRN"), ((3, 91, 10, 30), "elevation"), ((3, 10, 360, 30), "azimuth"),
    ((3, 10, 10, 100), "SNR")])
def test_bad_satellites_are_refused(args: tuple[int, int, int, int], problem: str) -> None:
    with pytest.raises(NmeaError, match=problem):
        Satellite(*args)


def test_no_fix_epoch_ignores_the_position_fields() -> None:
    assert encode(Epoch(UTC, False, lat=math.nan)) == encode(Epoch(UTC, False))
