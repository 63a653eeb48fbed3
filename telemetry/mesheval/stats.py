"""Means with Student-t confidence intervals over seeds (no SciPy needed).

The t quantile is found by bisection on the t CDF, written with the regularised
incomplete beta function (Numerical Recipes' continued fraction, Lentz's method).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


def _betacf(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _betacf(a, b, x) / a
    return 1.0 - front * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * _betainc(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t (e.g. p=0.975 for a two-sided 95% interval)."""
    if not 0.0 < p < 1.0 or df <= 0:
        raise ValueError("need 0 < p < 1 and df > 0")
    if p < 0.5:
        return -t_quantile(1.0 - p, df)
    lo, hi = 0.0, 1.0
    while t_cdf(hi, df) < p:
        hi *= 2.0
    for _ in range(200):
        mid = (lo + hi) / 2.0
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return (lo + hi) / 2.0


@dataclass(frozen=True)
class MeanCI:
    """Mean of ``n`` values and the half-width of its two-sided confidence interval."""

    mean: float | None
    half_width: float | None
    n: int

    @property
    def low(self) -> float | None:
        return None if self.mean is None or self.half_width is None else self.mean - self.half_width

    @property
    def high(self) -> float | None:
        return None if self.mean is None or self.half_width is None else self.mean + self.half_width


def mean_ci(values: Iterable[float | None], confidence: float = 0.95) -> MeanCI:
    """Mean and Student-t interval of the finite values; None where undefined.

    One value has a mean but no interval (n-1 = 0 degrees of freedom).
    """
    xs = [float(v) for v in values if v is not None and math.isfinite(float(v))]
    n = len(xs)
    if n == 0:
        return MeanCI(None, None, 0)
    mean = math.fsum(xs) / n
    if n == 1:
        return MeanCI(mean, None, 1)
    var = math.fsum((x - mean) ** 2 for x in xs) / (n - 1)
    half = t_quantile(0.5 + confidence / 2.0, n - 1) * math.sqrt(var / n)
    return MeanCI(mean, half, n)
