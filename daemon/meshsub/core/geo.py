"""WGS84 geodetic coordinates <-> local east/north/up metres about an origin.

Protocols reason in flat metres (``meshsub.core.api.Position``); GPS speaks
latitude/longitude. Every node of a deployment is configured with the same
origin, so local coordinates agree across the fleet. The conversion goes
through Earth-centred Earth-fixed (ECEF) coordinates, which is exact (to
floating point) at any distance, unlike an equirectangular approximation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

WGS84_A = 6_378_137.0
"""Semi-major axis (m)."""
WGS84_F = 1.0 / 298.257223563
"""Flattening."""
WGS84_B = WGS84_A * (1.0 - WGS84_F)
WGS84_E2 = WGS84_F * (2.0 - WGS84_F)
"""First eccentricity squared."""
WGS84_EP2 = WGS84_E2 / (1.0 - WGS84_E2)
"""Second eccentricity squared."""
MEAN_EARTH_RADIUS = 6_371_008.8
"""IUGG mean radius (m), for great-circle distances."""


class GeoError(ValueError):
    """A coordinate outside its valid range (or not finite)."""


def check_lat_lon(lat: float, lon: float) -> None:
    """Raise ``GeoError`` unless ``lat`` is in [-90, 90] and ``lon`` in [-180, 180]."""
    if not (math.isfinite(lat) and -90.0 <= lat <= 90.0):
        raise GeoError(f"latitude {lat!r} is not in [-90, 90]")
    if not (math.isfinite(lon) and -180.0 <= lon <= 180.0):
        raise GeoError(f"longitude {lon!r} is not in [-180, 180]")


def geodetic_to_ecef(lat: float, lon: float, alt: float = 0.0) -> tuple[float, float, float]:
    """Degrees and metres above the ellipsoid -> ECEF metres."""
    check_lat_lon(lat, lon)
    phi, lam = math.radians(lat), math.radians(lon)
    sin_phi = math.sin(phi)
    n = WGS84_A / math.sqrt(1.0 - WGS84_E2 * sin_phi * sin_phi)
    x = (n + alt) * math.cos(phi) * math.cos(lam)
    y = (n + alt) * math.cos(phi) * math.sin(lam)
    z = (n * (1.0 - WGS84_E2) + alt) * sin_phi
    return x, y, z


def ecef_to_geodetic(x: float, y: float, z: float) -> tuple[float, float, float]:
    """ECEF metres -> (lat, lon in degrees, alt in metres); Bowring plus two refinements."""
    lon = math.atan2(y, x)
    p = math.hypot(x, y)
    if p < 1e-9:  # on the polar axis
        lat = 90.0 if z >= 0 else -90.0
        return lat, math.degrees(lon), abs(z) - WGS84_B
    theta = math.atan2(z * WGS84_A, p * WGS84_B)
    phi = math.atan2(
        z + WGS84_EP2 * WGS84_B * math.sin(theta) ** 3,
        p - WGS84_E2 * WGS84_A * math.cos(theta) ** 3,
    )
    for _ in range(2):  # Newton-like refinement to sub-millimetre
        sin_phi = math.sin(phi)
        n = WGS84_A / math.sqrt(1.0 - WGS84_E2 * sin_phi * sin_phi)
        alt = p / math.cos(phi) - n
        phi = math.atan2(z, p * (1.0 - WGS84_E2 * n / (n + alt)))
    sin_phi = math.sin(phi)
    n = WGS84_A / math.sqrt(1.0 - WGS84_E2 * sin_phi * sin_phi)
    alt = p / math.cos(phi) - n
    return math.degrees(phi), math.degrees(lon), alt


@dataclass(frozen=True, slots=True)
class LocalFrame:
    """A local tangent plane (east, north, up) anchored at ``lat``/``lon``/``alt``."""

    lat: float
    lon: float
    alt: float = 0.0

    def __post_init__(self) -> None:
        check_lat_lon(self.lat, self.lon)
        if not math.isfinite(self.alt):
            raise GeoError(f"altitude {self.alt!r} is not finite")

    def to_local(self, lat: float, lon: float, alt: float = 0.0) -> tuple[float, float, float]:
        """WGS84 -> (east, north, up) metres about the origin."""
        x, y, z = geodetic_to_ecef(lat, lon, alt)
        ox, oy, oz = geodetic_to_ecef(self.lat, self.lon, self.alt)
        dx, dy, dz = x - ox, y - oy, z - oz
        phi, lam = math.radians(self.lat), math.radians(self.lon)
        sp, cp, sl, cl = math.sin(phi), math.cos(phi), math.sin(lam), math.cos(lam)
        east = -sl * dx + cl * dy
        north = -sp * cl * dx - sp * sl * dy + cp * dz
        up = cp * cl * dx + cp * sl * dy + sp * dz
        return east, north, up

    def to_geodetic(self, east: float, north: float, up: float = 0.0) -> tuple[float, float, float]:
        """(east, north, up) metres about the origin -> WGS84 (lat, lon, alt)."""
        for value in (east, north, up):
            if not math.isfinite(value):
                raise GeoError(f"local coordinate {value!r} is not finite")
        phi, lam = math.radians(self.lat), math.radians(self.lon)
        sp, cp, sl, cl = math.sin(phi), math.cos(phi), math.sin(lam), math.cos(lam)
        dx = -sl * east - sp * cl * north + cp * cl * up
        dy = cl * east - sp * sl * north + cp * sl * up
        dz = cp * north + sp * up
        ox, oy, oz = geodetic_to_ecef(self.lat, self.lon, self.alt)
        return ecef_to_geodetic(ox + dx, oy + dy, oz + dz)


def haversine_m(lat1: float, lon1: float, lat2: float, lon2: float) -> float:
    """Great-circle distance on the mean-radius sphere (error < 0.5 % vs the ellipsoid)."""
    check_lat_lon(lat1, lon1)
    check_lat_lon(lat2, lon2)
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    h = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2.0 * MEAN_EARTH_RADIUS * math.asin(min(1.0, math.sqrt(h)))


def distance_m(a: tuple[float, float], b: tuple[float, float]) -> float:
    """Euclidean distance between two local (x, y) points in metres."""
    return math.hypot(a[0] - b[0], a[1] - b[1])
