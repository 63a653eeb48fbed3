"""The receiver error model: statistics as documented, HDOP as the daemon reads it, fix loss."""

from __future__ import annotations

import itertools
import math
from statistics import NormalDist, fmean

import pytest

from meshsim.gps.model import VDOP_RATIO, ReceiverModel, dops
from meshsim.gps.settings import GpsSettings, GpsSettingsError, Outage
from meshsub.core.tracking import UERE_M

Z = NormalDist().inv_cdf(1 - 0.0005)
"""Two-sided 99.9 %: with fixed seeds a bound is either met or not, never flaky."""


def chi2_bounds(k: int) -> tuple[float, float]:
    """99.9 % two-sided interval of a chi-square with k degrees of freedom (Wilson-Hilferty)."""
    c = 2.0 / (9.0 * k)
    return k * (1 - c - Z * math.sqrt(c)) ** 3, k * (1 - c + Z * math.sqrt(c)) ** 3


def errors(settings: GpsSettings, steps: int, seed: int = 1, node: int = 1
           ) -> list[tuple[float, float, float, float]]:
    model = ReceiverModel(settings, seed, node)
    out = []
    for k in range(steps):
        r = model.step(float(k))
        assert r.fix
        out.append((r.east_m, r.north_m, r.sigma_m, r.hdop))
    return out


def test_white_noise_has_the_configured_sigma() -> None:
    sigma = 3.0
    sample = errors(GpsSettings(noise_m=sigma, correlation_s=0.0), 5000)
    chi2 = sum((e * e + n * n) / sigma**2 for e, n, _, _ in sample)
    lo, hi = chi2_bounds(2 * len(sample))
    assert lo < chi2 < hi
    for axis in (0, 1):
        assert abs(fmean(s[axis] for s in sample)) < Z * sigma / math.sqrt(len(sample))


def test_a_wrong_sigma_would_fail_that_bound() -> None:
    """The bound is tight enough to catch a 5 % error in the noise (the test can fail)."""
    sample = errors(GpsSettings(noise_m=3.0, correlation_s=0.0), 5000)
    chi2 = sum((e * e + n * n) / 3.15**2 for e, n, _, _ in sample)
    assert not chi2_bounds(2 * len(sample))[0] < chi2


def lag1(xs: list[float]) -> float:
    m = fmean(xs)
    num = sum((a - m) * (b - m) for a, b in itertools.pairwise(xs))
    return num / sum((a - m) ** 2 for a in xs)


@pytest.mark.parametrize(("tau", "white"), [(30.0, 0.0), (30.0, 0.2), (10.0, 0.5)])
def test_gauss_markov_correlation(tau: float, white: float) -> None:
    sample = errors(GpsSettings(noise_m=2.0, correlation_s=tau, white_fraction=white), 40_000)
    expected = (1 - white) * math.exp(-1.0 / tau)
    for axis in (0, 1):
        assert lag1([s[axis] for s in sample]) == pytest.approx(expected, abs=0.02)


def test_correlated_error_is_stationary_across_nodes() -> None:
    """At any instant the nodes' errors are independent N(0, sigma^2): chi-square over nodes."""
    sigma, nodes = 4.0, 300
    settings = GpsSettings(noise_m=sigma, correlation_s=60.0)
    models = [ReceiverModel(settings, 7, n) for n in range(nodes)]
    for t in range(0, 181):
        readings = [m.step(float(t)) for m in models]
        if t in (0, 60, 180):
            chi2 = sum((r.east_m**2 + r.north_m**2) / sigma**2 for r in readings)
            lo, hi = chi2_bounds(2 * nodes)
            assert lo < chi2 < hi, t


def test_hdop_agrees_with_the_daemons_error_estimate() -> None:
    """Derived HDOP: the daemon's HDOP x UERE is the DRMS, sqrt(2) sigma, fix by fix."""
    settings = GpsSettings(noise_m=3.0, hdop_spread=0.3, correlation_s=0.0)
    assert settings.nominal_hdop == pytest.approx(math.sqrt(2) * 3.0 / UERE_M)
    sample = errors(settings, 4000)
    hdops = [h for _, _, _, h in sample]
    assert min(hdops) < 0.6 < settings.nominal_hdop < 1.2 < max(hdops)  # drawn per fix
    for _, _, s, h in sample:
        assert h * UERE_M == pytest.approx(math.sqrt(2) * s)
    chi2 = sum((e * e + n * n) / s**2 for e, n, s, _ in sample)
    lo, hi = chi2_bounds(2 * len(sample))
    assert lo < chi2 < hi


def test_explicit_hdop_is_reported_as_configured() -> None:
    sample = errors(GpsSettings(noise_m=3.0, hdop=6.0), 50)
    assert {h for _, _, _, h in sample} == {6.0}
    assert {s for _, _, s, _ in sample} == {3.0}  # the noise does not follow an explicit HDOP


def test_dops_for_gsa() -> None:
    pdop, hdop, vdop = dops(1.0)
    assert (hdop, vdop) == (1.0, VDOP_RATIO) and pdop == pytest.approx(math.hypot(1.0, 1.5))


def test_zero_noise_is_exact() -> None:
    assert {(e, n) for e, n, _, _ in errors(GpsSettings(noise_m=0.0), 20)} == {(0.0, 0.0)}


def test_deterministic_per_seed_and_node() -> None:
    s = GpsSettings(noise_m=3.0, fix_loss_per_s=0.1, hdop_spread=0.2)

    def run(seed: int, node: int) -> list[object]:
        m = ReceiverModel(s, seed, node)
        return [m.step(float(t)) for t in range(100)]

    assert run(1, 1) == run(1, 1)
    assert run(1, 1) != run(1, 2)
    assert run(1, 1) != run(2, 1)


def test_fix_loss_does_not_change_the_noise_of_the_fixes() -> None:
    plain = ReceiverModel(GpsSettings(noise_m=3.0), 3, 9)
    lossy = ReceiverModel(GpsSettings(noise_m=3.0, fix_loss_per_s=0.2, outage_mean_s=3.0), 3, 9)
    kept = 0
    for t in range(300):
        a, b = plain.step(float(t)), lossy.step(float(t))
        if b.fix:
            kept += 1
            assert (a.east_m, a.north_m) == (b.east_m, b.north_m)
    assert 0 < kept < 300


def outage_runs(fixes: list[bool]) -> list[int]:
    runs, current = [], 0
    for fix in fixes:
        if not fix:
            current += 1
        elif current:
            runs.append(current)
            current = 0
    return runs


def test_random_fix_loss_rate_and_outage_length() -> None:
    p, mean = 0.02, 10.0
    model = ReceiverModel(GpsSettings(fix_loss_per_s=p, outage_mean_s=mean), 5, 1)
    fixes = [model.step(float(t)).fix for t in range(40_000)]
    runs = outage_runs(fixes)
    # an outage of exponential length L loses ceil(L) epochs: geometric with q = 1 - e^(-1/mean)
    q = 1 - math.exp(-1 / mean)
    epochs_mean, epochs_sd = 1 / q, math.sqrt(1 - q) / q
    assert fmean(runs) == pytest.approx(epochs_mean, abs=Z * epochs_sd / math.sqrt(len(runs)))
    # losses start in epochs with a fix, with probability p each
    with_fix = sum(fixes)
    assert len(runs) == pytest.approx(p * with_fix, abs=Z * math.sqrt(p * with_fix))


def test_explicit_outage_windows() -> None:
    settings = GpsSettings(outages=(Outage(10.0, 15.0, (2,)), Outage(30.0, 31.0)))
    lost = {node: [t for t in range(40) if not m.step(float(t)).fix]
            for node in (1, 2) if (m := ReceiverModel(settings, 1, node))}
    assert lost == {1: [30], 2: [10, 11, 12, 13, 14, 30]}


def test_no_fix_reading() -> None:
    r = ReceiverModel(GpsSettings(outages=(Outage(0.0, 5.0),)), 1, 1).step(0.0)
    assert (r.fix, r.east_m, r.north_m, r.hdop) == (False, 0.0, 0.0, 99.99)


def test_time_must_increase() -> None:
    model = ReceiverModel(GpsSettings(), 1, 1)
    model.step(5.0)
    with pytest.raises(ValueError, match="must increase"):
        model.step(5.0)
    with pytest.raises(ValueError, match="not finite"):
        model.step(math.nan)


@pytest.mark.parametrize(("kw", "key"), [
    ({"noise_m": -1.0}, "noise_m"),
    ({"noise_m": math.inf}, "noise_m"),
    ({"noise_m": 400.0}, "noise_m"),  # HDOP would exceed 99.99
    ({"rate_hz": 0.0}, "rate_hz"),
    ({"rate_hz": 20.0}, "rate_hz"),
    ({"correlation_s": -1.0}, "correlation_s"),
    ({"white_fraction": 1.5}, "white_fraction"),
    ({"hdop": 0.0}, "hdop"),
    ({"hdop_spread": 2.0}, "hdop_spread"),
    ({"satellites": 0}, "satellites"),
    ({"satellites": 13, "satellites_in_view": 20}, "satellites"),
    ({"satellites": 8.0}, "satellites"),
    ({"satellites": 9, "satellites_in_view": 8}, "satellites_in_view"),
    ({"satellites_in_view": 33}, "satellites_in_view"),
    ({"fix_loss_per_s": 1.1}, "fix_loss_per_s"),
    ({"outage_mean_s": 0.0}, "outage_mean_s"),
    ({"enabled": 1}, "enabled"),
])
def test_bad_settings_name_the_key(kw: dict[str, object], key: str) -> None:
    with pytest.raises(GpsSettingsError) as info:
        GpsSettings(**kw)  # type: ignore[arg-type]
    assert info.value.key == key
    assert str(info.value).startswith(f"{key}: ") and "\n" not in str(info.value)


def test_bad_outage_window() -> None:
    with pytest.raises(GpsSettingsError, match="outages: need 0 <= start_s < end_s"):
        Outage(5.0, 5.0)
