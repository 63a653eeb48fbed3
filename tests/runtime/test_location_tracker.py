"""LocationTracker: gating, local metres, movement threshold, max age, no-fix state."""

from __future__ import annotations

from typing import Any

import pytest

from meshsub.core.geo import LocalFrame
from meshsub.runtime.location import Fix, Gating, LocationTracker, PositionReport

ORIGIN = LocalFrame(45.0, 7.0)
M_PER_DEG_LAT = 111_132.954


def good(t: float, north_m: float = 0.0, **kw: Any) -> Fix:
    args: dict[str, object] = {"mode": 3, "lat": 45.0 + north_m / M_PER_DEG_LAT, "lon": 7.0,
                               "alt": 0.0, "hdop": 1.0, "satellites": 8}
    args.update(kw)
    return Fix(received_at=t, **args)  # type: ignore[arg-type]


def tracker(**kw: float) -> LocationTracker:
    return LocationTracker(Gating(**kw), ORIGIN, "gpsd")  # type: ignore[arg-type]


def test_first_good_fix_is_reported_in_local_metres() -> None:
    tr = tracker()
    report = tr.update(good(10.0, north_m=50), now=10.0)
    assert isinstance(report, PositionReport) and report.position is not None
    assert report.position.y == pytest.approx(50, abs=0.01)
    assert report.position.x == pytest.approx(0, abs=0.01)
    assert report.position.error_m == pytest.approx(5.0)  # HDOP 1 x UERE 5 m
    assert report.position.fixed_at == 10.0
    assert tr.has_fix


@pytest.mark.parametrize(
    ("fix", "reason"),
    [
        (dict(mode=1), "no_fix"),
        (dict(lat=None, lon=None), "no_position"),
        (dict(mode=2), "mode"),  # min_mode 3 below
        (dict(hdop=None), "quality_unknown"),
        (dict(hdop=7.5), "hdop"),
        (dict(hdop=None, error_m=120.0), "error"),
        (dict(hdop=2.0, error_m=150.0), "error"),
        (dict(satellites=3), "satellites"),
    ],
)
def test_gating_rejects(fix: dict[str, Any], reason: str) -> None:
    tr = tracker(min_mode=3, max_hdop=5.0, min_satellites=4)
    assert tr.update(good(1.0, **fix), now=1.0) is None
    assert tr.rejected[reason] == 1 and tr.last_reject == reason
    assert not tr.has_fix


def test_two_d_fix_accepted_when_min_mode_2() -> None:
    tr = tracker(min_mode=2)
    report = tr.update(good(1.0, mode=2, alt=None), now=1.0)
    assert report is not None and report.position is not None and report.position.z == 0.0


def test_min_satellites_zero_disables_check() -> None:
    tr = tracker(min_satellites=0)
    assert tr.update(good(1.0, satellites=None), now=1.0) is not None


def test_movement_threshold_and_max_age() -> None:
    tr = tracker(movement_threshold=10.0, max_age=60.0, stale_after=5.0)
    assert tr.update(good(0.0), now=0.0) is not None
    assert tr.update(good(1.0, north_m=9.0), now=1.0) is None  # jitter under the threshold
    moved = tr.update(good(2.0, north_m=10.5), now=2.0)
    assert moved is not None and moved.position is not None
    assert moved.position.y == pytest.approx(10.5, abs=0.01)
    # moving back and forth within 10 m of the *reported* position stays quiet
    assert tr.update(good(3.0, north_m=2.0), now=3.0) is None
    for t in range(4, 62):
        assert tr.update(good(float(t), north_m=10.0), now=float(t)) is None
    again = tr.update(good(62.0, north_m=10.0), now=62.0)  # 60 s since the last report
    assert again is not None and again.position is not None and again.position.fixed_at == 62.0


def test_stale_fix_emits_none_once() -> None:
    tr = tracker(stale_after=5.0)
    tr.update(good(0.0), now=0.0)
    assert tr.tick(4.0) is None
    lost = tr.tick(5.5)
    assert lost == PositionReport(None)
    assert tr.tick(6.0) is None and tr.tick(100.0) is None  # only once
    assert not tr.has_fix and tr.rejected["stale"] == 1
    status = tr.status(7.0)
    assert status["fix"] is False and status["x"] is None and status["last_reject"] == "stale"
    back = tr.update(good(8.0), now=8.0)  # a fix returns: reported at once
    assert back is not None and back.position is not None


def test_explicit_no_fix_reports_loss_immediately_once() -> None:
    tr = tracker()
    tr.update(good(0.0), now=0.0)
    assert tr.update(good(1.0, mode=1), now=1.0) == PositionReport(None)
    assert tr.update(good(2.0, mode=1), now=2.0) is None


def test_bad_quality_alone_waits_for_staleness() -> None:
    tr = tracker(stale_after=5.0)
    tr.update(good(0.0), now=0.0)
    assert tr.update(good(1.0, hdop=20.0), now=1.0) is None  # one bad sample: keep the fix
    assert tr.has_fix
    assert tr.tick(3.0) is None
    assert tr.tick(5.1) == PositionReport(None)  # no good fix for 5 s: lost


def test_never_had_fix_emits_nothing() -> None:
    tr = tracker()
    assert tr.update(good(0.0, mode=1), now=0.0) is None
    assert tr.tick(100.0) is None


def test_static_fix_never_stale_and_reannounced() -> None:
    tr = LocationTracker(Gating(max_age=30.0, stale_after=5.0), None, "static")
    fix = Fix(received_at=0.0, mode=3, local=(3.0, 4.0, 1.0), static=True)
    first = tr.update(fix, now=0.0)
    assert first is not None and first.position is not None
    assert (first.position.x, first.position.y, first.position.z) == (3.0, 4.0, 1.0)
    assert first.position.error_m == 0.0
    assert tr.tick(20.0) is None
    again = tr.tick(30.0)
    assert again is not None and again.position == first.position


def test_lat_lon_without_origin_is_rejected() -> None:
    tr = LocationTracker(Gating(), None, "gpsd")
    assert tr.update(good(0.0), now=0.0) is None
    assert tr.rejected["no_origin"] == 1


def test_status_fields() -> None:
    tr = tracker()
    tr.update(good(10.0, north_m=20.0), now=10.0)
    status = tr.status(12.5)
    assert status["source"] == "gpsd" and status["fix"] is True
    assert status["y"] == pytest.approx(20.0, abs=0.01)
    assert status["hdop"] == 1.0 and status["sats"] == 8 and status["age_s"] == 2.5
    assert status["lat"] == pytest.approx(45.0 + 20 / M_PER_DEG_LAT)


@pytest.mark.parametrize(
    ("fix", "gates"),
    [
        (dict(hdop=None, error_m=17.1), {}),  # gpsd without SKY: TPV's eph decides
        (dict(satellites=None), {}),  # a receiver that does not report the count
        (dict(hdop=9.0), dict(max_hdop=0)),  # each gate can be switched off
        (dict(hdop=None, error_m=500.0), dict(max_error_m=0)),
        (dict(satellites=1), dict(min_satellites=0)),
        (dict(hdop=None), dict(require_quality=False)),
    ],
)
def test_gates_pass_or_are_off(fix: dict[str, Any], gates: dict[str, Any]) -> None:
    tr = tracker(**gates)
    report = tr.update(good(1.0, **fix), now=1.0)
    assert report is not None and report.position is not None, tr.rejected
    assert not tr.rejected


def test_error_is_the_sources_own_estimate_else_hdop_times_uere() -> None:
    tr = tracker()
    report = tr.update(good(1.0, hdop=None, error_m=17.1), now=1.0)
    assert report is not None and report.position is not None
    assert report.position.error_m == pytest.approx(17.1)
    report = tr.update(good(70.0, hdop=2.0, north_m=500), now=70.0)
    assert report is not None and report.position is not None
    assert report.position.error_m == pytest.approx(10.0)
    assert tr.status(70.0)["source_error_m"] is None


def test_gating_validation() -> None:
    with pytest.raises(ValueError):
        Gating(min_mode=1)
    with pytest.raises(ValueError):
        Gating(max_hdop=-1)
    with pytest.raises(ValueError):
        Gating(max_error_m=-0.5)
