"""core/geo.py: WGS84 <-> local metres (round trips, known distances)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsub.core.geo import (
    GeoError,
    LocalFrame,
    distance_m,
    ecef_to_geodetic,
    geodetic_to_ecef,
    haversine_m,
)


def test_origin_is_zero() -> None:
    frame = LocalFrame(52.52, 13.405, 34.0)
    assert frame.to_local(52.52, 13.405, 34.0) == pytest.approx((0, 0, 0), abs=1e-6)


def test_known_metres_per_degree_at_45() -> None:
    # ellipsoid: 1 deg latitude = 111132.954 m, 1 deg longitude = 78846.806 m at 45 N
    frame = LocalFrame(45.0, 7.0)
    east, north, up = frame.to_local(45.001, 7.0)
    assert north == pytest.approx(111.133, abs=0.01) and abs(east) < 1e-6
    assert up == pytest.approx(0.0, abs=0.01)  # curvature drop over 111 m is ~1 mm
    east, north, _ = frame.to_local(45.0, 7.001)
    assert east == pytest.approx(78.847, abs=0.01) and abs(north) < 0.01


def test_equator_and_curvature() -> None:
    frame = LocalFrame(0.0, 0.0)
    east, _, up = frame.to_local(0.0, 0.01)
    assert east == pytest.approx(1113.19, abs=0.05)  # 111319.49 m per degree on the equator
    assert up == pytest.approx(-(1113.19**2) / (2 * 6_378_137), abs=0.01)  # earth curves away


def test_ecef_known_point() -> None:
    x, y, z = geodetic_to_ecef(0.0, 0.0, 0.0)
    assert (x, y, z) == pytest.approx((6_378_137.0, 0.0, 0.0))
    assert ecef_to_geodetic(0.0, 0.0, 6_356_752.314245) == pytest.approx((90.0, 0.0, 0.0),
                                                                         abs=1e-6)


def test_haversine_known_distance() -> None:
    # Berlin (52.5200, 13.4050) - Paris (48.8566, 2.3522): ~877.5 km great circle
    assert haversine_m(52.52, 13.405, 48.8566, 2.3522) == pytest.approx(877_500, rel=0.003)
    assert haversine_m(0, 0, 0, 180) == pytest.approx(math.pi * 6_371_008.8)


@settings(max_examples=200, deadline=None)
@given(
    lat=st.floats(-85, 85),
    lon=st.floats(-179.5, 179.5),
    alt=st.floats(-100, 3000),
    dlat=st.floats(-0.3, 0.3),
    dlon=st.floats(-0.3, 0.3),
    dalt=st.floats(-500, 500),
)
def test_round_trip(lat: float, lon: float, alt: float, dlat: float, dlon: float,
                    dalt: float) -> None:
    frame = LocalFrame(lat, lon, alt)
    plat, plon, palt = lat + dlat, lon + dlon, alt + dalt
    back = frame.to_geodetic(*frame.to_local(plat, plon, palt))
    assert back[0] == pytest.approx(plat, abs=1e-9)
    assert back[1] == pytest.approx(plon, abs=1e-9)
    assert back[2] == pytest.approx(palt, abs=1e-4)


@settings(max_examples=150, deadline=None)
@given(lat=st.floats(-80, 80), lon=st.floats(-179, 179), d=st.floats(-0.05, 0.05),
       e=st.floats(-0.05, 0.05))
def test_local_distance_matches_great_circle(lat: float, lon: float, d: float,
                                             e: float) -> None:
    frame = LocalFrame(lat, lon)
    x, y, _ = frame.to_local(lat + d, lon + e)
    expected = haversine_m(lat, lon, lat + d, lon + e)
    assert distance_m((0, 0), (x, y)) == pytest.approx(expected, rel=0.006, abs=0.01)


@pytest.mark.parametrize(("lat", "lon"), [(91, 0), (-90.5, 0), (0, 181), (math.nan, 0),
                                          (0, math.inf)])
def test_bad_coordinates(lat: float, lon: float) -> None:
    with pytest.raises(GeoError):
        LocalFrame(lat, lon)
    with pytest.raises(GeoError):
        LocalFrame(0, 0).to_local(lat, lon)


def test_bad_local() -> None:
    with pytest.raises(GeoError):
        LocalFrame(0, 0).to_geodetic(math.nan, 0)
