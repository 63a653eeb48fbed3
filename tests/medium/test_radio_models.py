"""The radio models (no root): boundaries, monotonicity, hand-computed values.

The log-distance model is also checked against the DBPSK spot values of ns-3's
``wifi-error-rate-models`` test (its ``FromRss``: noise -100.55 dBm + 7 dB noise
figure, frames of 1024 + 40 + 14 bytes), an independent implementation of the
same formula.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from meshsim.radio import (
    LINK_CUTOFF,
    LinearRamp,
    LogDistance,
    UnitDisk,
    compute_links,
    directed,
    pair_delays,
)
from meshsim.scenario.model import LinkOverride


def test_unit_disk_boundary() -> None:
    model = UnitDisk(100.0, 0.2)
    assert model.loss_at(0.0) == model.loss_at(100.0) == 0.2
    assert model.loss_at(100.000001) is None


def test_linear_ramp_hand_values() -> None:
    model = LinearRamp(200.0, 0.1, 0.5)  # flat to 100 m, then 0.1 -> 1 over 100 m
    assert model.loss_at(0.0) == model.loss_at(100.0) == 0.1
    assert model.loss_at(150.0) == pytest.approx(0.55)
    assert model.loss_at(190.0) == pytest.approx(0.91)
    assert model.loss_at(200.0) is None


@pytest.mark.parametrize("model", [UnitDisk(50.0, 0.05), LinearRamp(80.0, 0.0, 0.25),
                                   LogDistance(), LogDistance(path_loss_exp=2.2, loss=0.1)])
def test_models_are_monotonic_and_end_at_their_range(model: UnitDisk | LinearRamp | LogDistance
                                                     ) -> None:
    losses = [model.loss_at(model.range_m * i / 1000) for i in range(1001)]
    present = [loss for loss in losses if loss is not None]
    assert all(0.0 <= loss <= 1.0 for loss in present)
    assert present == sorted(present)
    assert model.loss_at(model.range_m * 1.001) is None


def ns3_model() -> LogDistance:
    """rx power = -20 log10(d) dBm: distance 10 ** (-rss / 20) gives received power rss."""
    return LogDistance(tx_power_dbm=0.0, ref_loss_db=0.0, path_loss_exp=2.0,
                       noise_floor_dbm=-100.5522786 + 7, frame_bytes=1024 + 40 + 14)


@pytest.mark.parametrize(("rss_dbm", "success", "tol"), [
    (-98.0, 0.202, 0.005), (-97.0, 0.813, 0.005), (-96.0, 0.984, 0.005),
    (-95.0, 0.999, 0.001), (-90.0, 1.0, 0.001), (-99.0, 0.0003, 0.0001),
    (-100.0, 1.5e-13, 1e-13),
])
def test_log_distance_per_matches_ns3_dbpsk(rss_dbm: float, success: float, tol: float) -> None:
    assert 1.0 - ns3_model().per(10 ** (-rss_dbm / 20)) == pytest.approx(success, abs=tol)


def test_log_distance_hand_computed_point() -> None:
    model = LogDistance(tx_power_dbm=20.0, ref_loss_db=40.0, ref_distance_m=1.0,
                        path_loss_exp=3.0, noise_floor_dbm=-91.0, frame_bytes=100)
    # 100 m: rx = 20 - 40 - 60 = -80 dBm, SNR 11 dB: BER = 0.5 exp(-22 * 12.59) ~ 0
    assert model.loss_at(100.0) == pytest.approx(0.0, abs=1e-12)
    # 1000 m: rx = -110 dBm, SNR -19 dB = 0.01259; BER = 0.5 exp(-0.2770) = 0.3790
    ber = 0.5 * math.exp(-22 * 10 ** (-1.9))
    assert ber == pytest.approx(0.37902, abs=1e-4)
    assert model.per(1000.0) == pytest.approx(1 - (1 - ber) ** 800)
    assert model.loss_at(1000.0) is None  # PER rounds to 1
    assert model.snr_db(0.1) == model.snr_db(1.0) == pytest.approx(71.0)  # near field: clamped


def test_log_distance_range_is_where_loss_reaches_the_cutoff() -> None:
    for model in (LogDistance(), LogDistance(frame_bytes=60), LogDistance(loss=0.3),
                  LogDistance(path_loss_exp=4.0, tx_power_dbm=10.0)):
        assert model.loss_at(model.range_m) == pytest.approx(LINK_CUTOFF, abs=1e-9)
        assert model.loss_at(model.range_m * (1 + 1e-9)) is None


def test_log_distance_range_shrinks_with_longer_frames_and_steeper_loss() -> None:
    base = LogDistance()
    assert LogDistance(frame_bytes=60).range_m > base.range_m
    assert LogDistance(frame_bytes=1500).range_m < base.range_m
    assert LogDistance(path_loss_exp=3.5).range_m < base.range_m
    assert LogDistance(tx_power_dbm=23.0).range_m > base.range_m


def test_log_distance_floor_loss_combines_independently() -> None:
    plain, floored = LogDistance(), LogDistance(loss=0.2)
    d = plain.range_m * 0.9
    assert floored.loss_at(d) == pytest.approx(1 - 0.8 * (1 - (plain.loss_at(d) or 0.0)))
    assert floored.loss_at(1.0) == pytest.approx(0.2)


@pytest.mark.parametrize(("kwargs", "problem"), [
    ({"tx_power_dbm": -60.0}, "no link at any distance"),
    ({"path_loss_exp": 0.0}, "must be > 0"),
    ({"frame_bytes": 0}, "frame_bytes must be >= 1"),
    ({"loss": 0.999}, "loss must be in"),
    ({"noise_floor_dbm": math.nan}, "must be finite"),
])
def test_log_distance_rejects_bad_parameters(kwargs: dict[str, float], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        LogDistance(**kwargs)  # type: ignore[arg-type]


@given(st.floats(-10, 30), st.floats(1.6, 6.0), st.integers(20, 3000),
       st.floats(0.0, 0.9), st.lists(st.floats(0.0, 5000.0), min_size=2, max_size=20))
def test_log_distance_loss_never_decreases_with_distance(
        tx: float, exp: float, nbytes: int, floor: float, distances: list[float]) -> None:
    model = LogDistance(tx_power_dbm=tx, path_loss_exp=exp, frame_bytes=nbytes, loss=floor)
    losses = [model.loss_at(d) for d in sorted(distances)]
    seen_none = False
    last = 0.0
    for loss in losses:
        if loss is None:
            seen_none = True
            continue
        assert not seen_none, "a link beyond a distance with no link"
        assert floor - 1e-12 <= loss <= LINK_CUTOFF + 1e-9 and loss >= last - 1e-12
        last = loss


def test_directed_links_and_pair_delays() -> None:
    positions = {1: (0.0, 0.0), 2: (30.0, 0.0), 3: (200.0, 0.0)}
    links = compute_links(positions, UnitDisk(50.0, 0.1))
    assert directed(links) == {(1, 2): 0.1, (2, 1): 0.1}
    overrides = [LinkOverride(1, 3, delay_s=0.02), LinkOverride(2, 3, loss=0.5),
                 LinkOverride(3, 1, delay_s=0.04)]
    assert pair_delays(overrides) == {(1, 3): 0.04, (3, 1): 0.04}
