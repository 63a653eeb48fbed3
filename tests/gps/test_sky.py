"""The sky: plausible, shared by all nodes, seeded; each node uses the highest satellites."""

from __future__ import annotations

import pytest

from meshsim.gps.sky import MIN_ELEVATION, NodeSky, Sky, SkyError, snr


def test_geometry_stays_plausible_over_a_day() -> None:
    sky = Sky(seed=3, count=12)
    assert len(set(sky.prns)) == 12 and all(1 <= p <= 32 for p in sky.prns)
    for t in range(0, 86_400, 600):
        geometry = sky.at(float(t))
        assert [g[0] for g in geometry] == list(sky.prns)
        assert all(MIN_ELEVATION <= el <= 90 and 0 <= az <= 359 for _, el, az in geometry)


def test_satellites_move_slowly() -> None:
    sky = Sky(seed=3, count=8)
    a, b = sky.at(0.0), sky.at(60.0)
    assert a != sky.at(3600.0)
    for (_, el0, az0), (_, el1, az1) in zip(a, b, strict=True):
        assert abs(el1 - el0) <= 1 and min(abs(az1 - az0), 360 - abs(az1 - az0)) <= 1


def test_same_seed_same_sky() -> None:
    assert Sky(1, 10).at(100.0) == Sky(1, 10).at(100.0)
    assert Sky(1, 10).at(100.0) != Sky(2, 10).at(100.0)


def test_node_uses_the_highest_satellites() -> None:
    sky = Sky(seed=5, count=11)
    geometry = sky.at(0.0)
    used, in_view = NodeSky(sky, 5, 1, used=8).view(geometry)
    assert len(used) == 8 and list(used) == sorted(used)
    unused = [g for g in geometry if g[0] not in used]
    assert min(g[1] for g in geometry if g[0] in used) >= max(g[1] for g in unused)
    assert [(s.prn, s.elevation, s.azimuth) for s in in_view] == list(geometry)
    other = NodeSky(sky, 5, 2, used=8).view(geometry)
    assert other[0] == used  # same sky, same choice
    assert [s.snr for s in other[1]] != [s.snr for s in in_view]  # own antenna


def test_snr_rises_with_elevation() -> None:
    assert snr(5, 0) < snr(45, 0) < snr(90, 0) == 45
    assert snr(90, 3) == 48 and snr(0, -3) == 22


@pytest.mark.parametrize("count", [0, 33])
def test_bad_sky(count: int) -> None:
    with pytest.raises(SkyError, match="satellites in view"):
        Sky(1, count)


def test_cannot_use_more_than_in_view() -> None:
    with pytest.raises(SkyError, match="satellites used"):
        NodeSky(Sky(1, 6), 1, 1, used=7)


def test_unchanged_geometry_is_the_same_object() -> None:
    """Callers cache what they derive from the geometry by identity."""
    sky = Sky(seed=3, count=8)
    node = NodeSky(sky, 3, 1, used=6)
    a = sky.at(0.0)
    assert sky.at(0.5) is a and node.view(a) is node.view(sky.at(0.5))
    assert sky.at(7200.0) is not a
