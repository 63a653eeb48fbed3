"""NMEA 0183 sentence writer: what a GPS receiver prints once per epoch.

The virtual mesh feeds these to the *real* gpsd in each device, so they must
be what gpsd and pynmea2 accept from hardware: checksummed sentences with
CR LF, ``ddmm.mmmmm``/``dddmm.mmmmm`` coordinates with hemispheres, UTC time
``hhmmss.ss`` and date ``ddmmyy``, and, without a fix, the empty fields a
u-blox receiver prints (GGA quality 0, RMC status V, GSA mode 1).

The epoch order is GGA, GSA, GSV..., RMC, as MediaTek and SiRF receivers
print it. With that order gpsd emits an epoch's SKY report (HDOP,
satellites used) *before* its TPV, so a client that merges SKY into the next
TPV, as ``meshsub.runtime.location.gpsd.GpsdParser`` does, pairs every fix
with its own HDOP. (With the u-blox order, RMC first, the HDOP lags a fix.)
Talker ``GP``: a GPS-only receiver, PRNs 1..32.

Pure code, no I/O: an ``Epoch`` in, text out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

TALKER = "GP"
MAX_DOP = 99.99
"""What receivers print for an unknown dilution of precision."""
MINUTE_DECIMALS = 5
"""Decimals of the minutes: 1e-5 minute is 1.9 cm of latitude (u-blox M8 prints 5)."""
KNOTS_PER_MPS = 3600.0 / 1852.0
SATS_PER_GSV = 4
MAX_USED = 12
"""GSA has twelve PRN slots."""
MAX_IN_VIEW = 36
"""GSV counts its sentences with one digit: at most 9 x 4 satellites."""
MAX_SENTENCE = 82
"""NMEA 0183 limit, ``$`` to CR LF included."""


class NmeaError(ValueError):
    """An epoch that cannot be written as valid NMEA."""


@dataclass(frozen=True, slots=True)
class Satellite:
    """One satellite in view, as GSV lists it."""

    prn: int
    elevation: int
    """Degrees above the horizon, 0..90."""
    azimuth: int
    """Degrees true, 0..359."""
    snr: int | None
    """Carrier-to-noise density, dB-Hz 0..99; ``None`` when not tracked."""

    def __post_init__(self) -> None:
        if not 1 <= self.prn <= 99:
            raise NmeaError(f"satellite PRN {self.prn} is not in 1..99")
        if not 0 <= self.elevation <= 90:
            raise NmeaError(f"satellite {self.prn}: elevation {self.elevation} not in 0..90")
        if not 0 <= self.azimuth <= 359:
            raise NmeaError(f"satellite {self.prn}: azimuth {self.azimuth} not in 0..359")
        if self.snr is not None and not 0 <= self.snr <= 99:
            raise NmeaError(f"satellite {self.prn}: SNR {self.snr} not in 0..99")


@dataclass(frozen=True, slots=True)
class Epoch:
    """Everything one epoch's sentences say. Without a fix the position is ignored."""

    utc: float
    """UNIX time of the fix (seconds, UTC)."""
    fix: bool
    lat: float = 0.0
    lon: float = 0.0
    alt_m: float = 0.0
    """Altitude above mean sea level, metres."""
    geoid_sep_m: float = 0.0
    """Geoid height above the ellipsoid (GGA field 11)."""
    speed_mps: float = 0.0
    course_deg: float | None = None
    """Course over ground, degrees true; ``None`` (empty field) when not moving."""
    hdop: float = MAX_DOP
    vdop: float = MAX_DOP
    pdop: float = MAX_DOP
    used: tuple[int, ...] = ()
    """PRNs used in the fix (GSA), at most 12."""
    in_view: tuple[Satellite, ...] = ()

    def __post_init__(self) -> None:
        if not (math.isfinite(self.utc) and self.utc >= 0):
            raise NmeaError(f"utc {self.utc!r} is not a non-negative UNIX time")
        if len(self.in_view) > MAX_IN_VIEW:
            raise NmeaError(f"{len(self.in_view)} satellites in view (GSV holds {MAX_IN_VIEW})")
        if len(self.used) > MAX_USED:
            raise NmeaError(f"{len(self.used)} satellites used (GSA holds {MAX_USED})")
        if any(not 1 <= prn <= 99 for prn in self.used):
            raise NmeaError(f"used PRNs {self.used} are not all in 1..99")
        if not self.fix:
            return
        if not (math.isfinite(self.lat) and -90.0 <= self.lat <= 90.0):
            raise NmeaError(f"latitude {self.lat!r} is not in [-90, 90]")
        if not (math.isfinite(self.lon) and -180.0 <= self.lon <= 180.0):
            raise NmeaError(f"longitude {self.lon!r} is not in [-180, 180]")
        for name in ("alt_m", "geoid_sep_m", "speed_mps", "hdop", "vdop", "pdop"):
            value = getattr(self, name)
            if not math.isfinite(value):
                raise NmeaError(f"{name} {value!r} is not finite")
        if self.speed_mps < 0:
            raise NmeaError(f"speed_mps {self.speed_mps!r} is negative")
        if min(self.hdop, self.vdop, self.pdop) < 0:
            raise NmeaError("dilutions of precision must not be negative")
        if self.course_deg is not None and not (
                math.isfinite(self.course_deg) and 0.0 <= self.course_deg < 360.0):
            raise NmeaError(f"course_deg {self.course_deg!r} is not in [0, 360)")


# ------------------------------------------------------------------ fields


def checksum(body: str) -> int:
    """XOR of the characters between ``$`` and ``*``."""
    value = 0
    for byte in body.encode("ascii"):
        value ^= byte
    return value


def sentence(body: str) -> str:
    """``$body*CS`` CR LF."""
    return f"${body}*{checksum(body):02X}\r\n"


def degrees_minutes(value: float, *, lat: bool, decimals: int = MINUTE_DECIMALS
                    ) -> tuple[str, str]:
    """Signed degrees -> (``ddmm.mmmmm`` or ``dddmm.mmmmm``, hemisphere letter).

    Rounds once, in integer units of the last minute digit, so 59.999999'
    carries into the degrees instead of printing ``60.00000``.
    """
    scale = 10 ** decimals
    units = round(abs(value) * 60.0 * scale)
    degrees, rest = divmod(units, 60 * scale)
    minutes, frac = divmod(rest, scale)
    width = 2 if lat else 3
    text = f"{degrees:0{width}d}{minutes:02d}"
    if decimals:
        text += f".{frac:0{decimals}d}"
    if lat:
        return text, "N" if value >= 0 else "S"
    return text, "E" if value >= 0 else "W"


def utc_fields(utc: float) -> tuple[str, str]:
    """UNIX time -> (``hhmmss.ss``, ``ddmmyy``), rounded once to the centisecond."""
    centis = round(utc * 100)
    days, day_centis = divmod(centis, 86_400 * 100)
    seconds, cs = divmod(day_centis, 100)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    year, month, day = _civil_from_days(days)
    return (f"{hours:02d}{minutes:02d}{secs:02d}.{cs:02d}",
            f"{day:02d}{month:02d}{year % 100:02d}")


def _civil_from_days(days: int) -> tuple[int, int, int]:
    """Days since 1970-01-01 -> (year, month, day); H. Hinnant's algorithm, no datetime."""
    z = days + 719_468
    era = z // 146_097
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (1 if month <= 2 else 0), month, day


def _dop(value: float) -> str:
    return f"{min(value, MAX_DOP):.2f}"


# --------------------------------------------------------------- sentences


def position_fields(e: Epoch) -> str:
    """``ddmm.mmmmm,N,dddmm.mmmmm,E``: the four position fields GGA and RMC share."""
    la, ns = degrees_minutes(e.lat, lat=True)
    lo, ew = degrees_minutes(e.lon, lat=False)
    return f"{la},{ns},{lo},{ew}"


def gga(e: Epoch, time_text: str | None = None, position: str | None = None) -> str:
    """Fix data: position, quality (1 GPS, 0 none), satellites used, HDOP, altitude."""
    hms = time_text or utc_fields(e.utc)[0]
    if not e.fix:
        return sentence(f"{TALKER}GGA,{hms},,,,,0,00,{MAX_DOP:.2f},,,,,,")
    pos = position or position_fields(e)
    return sentence(f"{TALKER}GGA,{hms},{pos},1,{len(e.used):02d},"
                    f"{_dop(e.hdop)},{e.alt_m:.1f},M,{e.geoid_sep_m:.1f},M,,")


def rmc(e: Epoch, fields: tuple[str, str] | None = None, position: str | None = None) -> str:
    """Recommended minimum: status A/V, position, speed (knots), course, date, mode A/N."""
    hms, dmy = fields or utc_fields(e.utc)
    if not e.fix:
        return sentence(f"{TALKER}RMC,{hms},V,,,,,,,{dmy},,,N")
    pos = position or position_fields(e)
    course = "" if e.course_deg is None else f"{e.course_deg:.2f}"
    return sentence(f"{TALKER}RMC,{hms},A,{pos},"
                    f"{e.speed_mps * KNOTS_PER_MPS:.3f},{course},{dmy},,,A")


def gsa(e: Epoch) -> str:
    """DOP and active satellites: mode A (automatic 2D/3D), fix 1 none / 3 3D."""
    if not e.fix:
        return sentence(f"{TALKER}GSA,A,1" + "," * MAX_USED
                        + f",{MAX_DOP:.2f},{MAX_DOP:.2f},{MAX_DOP:.2f}")
    slots = [f"{prn:02d}" for prn in e.used] + [""] * (MAX_USED - len(e.used))
    return sentence(f"{TALKER}GSA,A,3,{','.join(slots)},"
                    f"{_dop(e.pdop)},{_dop(e.hdop)},{_dop(e.vdop)}")


def gsv(e: Epoch) -> list[str]:
    """Satellites in view, four per sentence; ``GPGSV,1,1,00`` when none."""
    sats = e.in_view
    total = max(1, math.ceil(len(sats) / SATS_PER_GSV))
    out = []
    for k in range(total):
        group = sats[k * SATS_PER_GSV:(k + 1) * SATS_PER_GSV]
        blocks = "".join(
            f",{s.prn:02d},{s.elevation:02d},{s.azimuth:03d},"
            + ("" if s.snr is None else f"{s.snr:02d}") for s in group)
        out.append(sentence(f"{TALKER}GSV,{total},{k + 1},{len(sats):02d}{blocks}"))
    return out


def sentences(e: Epoch, gsv_lines: list[str] | None = None) -> list[str]:
    """One epoch in receiver order: GGA, GSA, GSV..., RMC (see the module docstring).

    ``gsv_lines``: ``gsv(e)`` made earlier for the same satellites in view. The
    sky changes by whole degrees only every few minutes, and GSV is most of the
    text, so a feeder of many nodes reuses it instead of formatting it again.
    """
    fields = utc_fields(e.utc)
    pos = position_fields(e) if e.fix else None
    return [gga(e, fields[0], pos), gsa(e), *(gsv(e) if gsv_lines is None else gsv_lines),
            rmc(e, fields, pos)]


def encode(e: Epoch, gsv_lines: list[str] | None = None) -> bytes:
    """One epoch as the bytes a serial line (or a UDP datagram to gpsd) carries."""
    return "".join(sentences(e, gsv_lines)).encode("ascii")
