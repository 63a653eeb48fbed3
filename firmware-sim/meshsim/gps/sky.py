"""The satellites above the scenario area, for GSV and GSA.

Nodes a few kilometres apart see the same sky, so there is one ``Sky`` per
run, drawn from the seed: ``count`` GPS PRNs with elevations between 10 and
80 degrees that drift slowly (one swing per GPS orbit, 11 h 58 min) while the
azimuths turn by 10 to 30 degrees an hour. The set in view stays fixed for
the run (runs last minutes to hours; no satellite rises or sets). Each node
uses the highest ``used`` satellites, and sees its own signal strengths: an
elevation-dependent C/N0 with a fixed per-node, per-satellite offset (antenna
and surroundings). gpsd only relays these numbers; nothing in meshsub reads
them, so plausibility is all they need.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from meshsim.gps.nmea import Satellite

GPS_PRNS = range(1, 33)
ORBIT_S = 43_082.0
"""GPS orbital period (half a sidereal day), seconds."""
ELEVATION_RANGE = (10.0, 80.0)
MIN_ELEVATION = 5.0
"""Elevation mask: a drifting satellite never dips below it."""
SWING_DEG = 15.0
AZIMUTH_RATE_DEG_S = (10.0 / 3600.0, 30.0 / 3600.0)
SNR_OFFSET_DB = 3
"""Per-node, per-satellite C/N0 offset is drawn from -3..3 dB-Hz."""


class SkyError(ValueError):
    """A sky that cannot exist (more satellites than PRNs, none used, ...)."""


@dataclass(frozen=True, slots=True)
class _Orbit:
    prn: int
    elevation: float
    swing: float
    azimuth: float
    azimuth_rate: float
    phase: float


class Sky:
    """``count`` satellites in view, shared by every node of a run (seeded)."""

    def __init__(self, seed: int, count: int) -> None:
        if not 1 <= count <= len(GPS_PRNS):
            raise SkyError(f"satellites in view must be within 1..{len(GPS_PRNS)}, got {count}")
        rng = random.Random(f"{seed}:gps:sky")
        orbits = []
        for prn in sorted(rng.sample(GPS_PRNS, count)):
            elevation = rng.uniform(*ELEVATION_RANGE)
            swing = min(SWING_DEG, elevation - MIN_ELEVATION, 90.0 - elevation)
            rate = rng.uniform(*AZIMUTH_RATE_DEG_S) * rng.choice((-1.0, 1.0))
            orbits.append(_Orbit(prn, elevation, swing, rng.uniform(0.0, 360.0), rate,
                                 rng.uniform(0.0, 2.0 * math.pi)))
        self._orbits = tuple(orbits)
        self.prns = tuple(o.prn for o in orbits)
        self._last: tuple[tuple[int, int, int], ...] = ()

    def at(self, t: float) -> tuple[tuple[int, int, int], ...]:
        """(PRN, elevation, azimuth) in whole degrees at scenario time ``t``, by PRN.

        While no whole degree changes (minutes, at these rates) the *same* tuple
        is returned, so callers can cache what they derive from it by identity.
        """
        out = []
        for o in self._orbits:
            el = o.elevation + o.swing * math.sin(2.0 * math.pi * t / ORBIT_S + o.phase)
            az = (o.azimuth + o.azimuth_rate * t) % 360.0
            out.append((o.prn, round(el), round(az) % 360))
        geometry = tuple(out)
        if geometry != self._last:
            self._last = geometry
        return self._last


class NodeSky:
    """One node's view of the ``Sky``: its C/N0 offsets and the satellites it uses."""

    def __init__(self, sky: Sky, seed: int, node: int, used: int) -> None:
        if not 1 <= used <= len(sky.prns):
            raise SkyError(f"satellites used must be within 1..{len(sky.prns)}, got {used}")
        rng = random.Random(f"{seed}:gps:snr:{node}")
        self.sky = sky
        self.used_count = used
        self._offset = {prn: rng.randint(-SNR_OFFSET_DB, SNR_OFFSET_DB) for prn in sky.prns}
        self._geometry: tuple[tuple[int, int, int], ...] | None = None
        self._view: tuple[tuple[int, ...], tuple[Satellite, ...]] = ((), ())

    def view(self, geometry: tuple[tuple[int, int, int], ...]
             ) -> tuple[tuple[int, ...], tuple[Satellite, ...]]:
        """(PRNs used, satellites in view) for ``geometry`` from ``Sky.at``.

        Unchanged geometry gives the same objects back (cheap, and cacheable).
        """
        if geometry is self._geometry:
            return self._view
        highest = sorted(geometry, key=lambda g: (-g[1], g[0]))[:self.used_count]
        used = tuple(sorted(g[0] for g in highest))
        in_view = tuple(
            Satellite(prn, el, az, snr(el, self._offset[prn])) for prn, el, az in geometry)
        self._geometry, self._view = geometry, (used, in_view)
        return self._view


def snr(elevation: int, offset: int) -> int:
    """C/N0 in dB-Hz: about 25 at the horizon, 45 at the zenith, plus the node's offset."""
    return max(0, min(99, round(25.0 + 20.0 * math.sin(math.radians(elevation))) + offset))
