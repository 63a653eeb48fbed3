"""Verdicts computed from figures: ``holds``, ``differs`` or ``n/a``, with the rule printed.

Every function takes ``Figure``s (a configuration's mean over seeds with its 95 %
interval) and returns a ``Verdict`` whose ``rule`` says exactly what was tested,
tolerance included, and whose ``ours`` lists the figures it was tested on. A claim the
figures cannot test (no configuration selected, a metric undefined, every value 0) is
``n/a`` with the reason, never a verdict.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

HOLDS, DIFFERS, NA = "holds", "differs", "n/a"


@dataclass(frozen=True)
class Figure:
    label: str
    """What the figure is of, e.g. ``protocol=DF, subscribers=20``."""
    mean: float | None
    half_width: float | None = None
    n: int = 0
    low_run: float | None = None
    """Smallest per-run value (the worst case over seeds, for bounds)."""
    high_run: float | None = None

    def text(self, fmt: str = ".3g") -> str:
        if self.mean is None:
            return "n/a"
        body = format(self.mean, fmt)
        if self.half_width:
            body += f" ± {format(self.half_width, fmt)}"
        return body


@dataclass(frozen=True)
class Verdict:
    status: str
    rule: str
    ours: str

    @property
    def holds(self) -> bool:
        return self.status == HOLDS


def _na(rule: str, why: str) -> Verdict:
    return Verdict(NA, rule, why)


def _untestable(figs: Sequence[Figure]) -> str | None:
    missing = [f.label for f in figs if f.mean is None]
    if not figs:
        return "no configuration selected"
    if missing:
        return f"no figure for {missing[0]}"
    if all(f.mean == 0 for f in figs):
        return "every value is 0: the figures cannot tell"
    return None


def _pct(x: float) -> str:
    return f"{100 * x:g} %"


def order(points: Sequence[Sequence[Figure]], *, descending: bool, tolerance: float = 0.0,
          names: Sequence[str] = ()) -> Verdict:
    """At every point, the figures in the listed order: each >= the next (descending) or
    <= (ascending), a later one allowed to exceed by ``tolerance`` relative to it."""
    sign = ">=" if descending else "<="
    rule = (f"{f' {sign} '.join(names)} at every point" if names else f"ordered {sign}") + (
        f", up to {_pct(tolerance)} the wrong way" if tolerance else "")
    flat = [f for figs in points for f in figs]
    why = _untestable(flat)
    if why:
        return _na(rule, why)
    good = 0
    texts = []
    for figs in points:
        ok = all(_in_order(a.mean, b.mean, descending, tolerance)  # type: ignore[arg-type]
                 for a, b in itertools.pairwise(figs))
        good += ok
        texts.append(" / ".join(f.text() for f in figs) + ("" if ok else " (out of order)"))
    ours = f"in order at {good} of {len(points)}: " + "; ".join(texts)
    return Verdict(HOLDS if good == len(points) else DIFFERS, rule, ours)


def _in_order(a: float, b: float, descending: bool, tolerance: float) -> bool:
    if descending:
        return a >= b - tolerance * abs(b)
    return a <= b + tolerance * abs(b)


def trend(figs: Sequence[Figure], *, direction: str, tolerance: float = 0.0,
          min_change: float = 0.0) -> Verdict:
    """Along an axis (figures in axis order). ``falls``/``rises``: every step goes that way
    or against it by at most ``tolerance`` (relative to the step's start), and the last
    point differs from the first by at least ``min_change`` (relative) that way.
    ``flat``: the largest is at most (1 + ``tolerance``) times the smallest."""
    if direction == "flat":
        rule = f"flat: largest <= smallest x (1 + {_pct(tolerance)})"
    else:
        rule = f"{direction}: every step {direction}"
        if tolerance:
            rule += f" or goes back by at most {_pct(tolerance)}"
        rule += (f", last vs first by at least {_pct(min_change)}" if min_change
                 else ", last beyond first")
    why = _untestable(figs) or (None if len(figs) >= 2 else "fewer than two points")
    if why:
        return _na(rule, why)
    xs = [float(f.mean) for f in figs]  # type: ignore[arg-type]
    ours = " -> ".join(f.text() for f in figs)
    if direction == "flat":
        lo, hi = min(xs), max(xs)
        ok = hi <= lo * (1 + tolerance) if lo >= 0 else hi - lo <= tolerance * abs(lo)
        return Verdict(HOLDS if ok else DIFFERS, rule, ours)
    up = direction == "rises"
    steps_ok = all((b >= a - tolerance * abs(a)) if up else (b <= a + tolerance * abs(a))
                   for a, b in itertools.pairwise(xs))
    first, last = xs[0], xs[-1]
    need = min_change * abs(first)
    gain = last - first if up else first - last
    change_ok = gain > 0 if min_change == 0 else gain >= need
    return Verdict(HOLDS if steps_ok and change_ok else DIFFERS, rule, ours)


@dataclass(frozen=True)
class Expect:
    """What a number must satisfy: at most, at least, between, or near a value."""

    at_most: float | None = None
    at_least: float | None = None
    near: float | None = None
    tolerance: float = 0.0

    def text(self) -> str:
        parts = []
        if self.near is not None:
            parts.append(f"within {self.tolerance:g} of {self.near:g}")
        if self.at_least is not None and self.at_most is not None:
            parts.append(f"between {self.at_least:g} and {self.at_most:g}")
        elif self.at_most is not None:
            parts.append(f"<= {self.at_most:g}" + (f" (+{self.tolerance:g})"
                                                   if self.tolerance and self.near is None
                                                   else ""))
        elif self.at_least is not None:
            parts.append(f">= {self.at_least:g}" + (f" (-{self.tolerance:g})"
                                                    if self.tolerance and self.near is None
                                                    else ""))
        return " and ".join(parts)

    def ok(self, x: float) -> bool:
        slack = self.tolerance if self.near is None else 0.0
        if self.near is not None and abs(x - self.near) > self.tolerance:
            return False
        if self.at_most is not None and x > self.at_most + slack:
            return False
        return not (self.at_least is not None and x < self.at_least - slack)


STATS = ("each", "min", "max", "mean")


def _stat(values: Sequence[float], stat: str) -> list[float]:
    if stat == "each":
        return list(values)
    if stat == "min":
        return [min(values)]
    if stat == "max":
        return [max(values)]
    return [math.fsum(values) / len(values)]


def ratio(pairs: Sequence[tuple[Figure, Figure]], expect: Expect, *, stat: str = "each",
          what: str = "ratio", saving: bool = False) -> Verdict:
    """num/den (``saving``: 1 - num/den) at every point, reduced by ``stat`` (each, min,
    max, mean), then tested."""
    rule = f"{what} ({'at every point' if stat == 'each' else stat + ' over the points'}) " \
           f"{expect.text()}"
    why = _untestable([f for p in pairs for f in p])
    if why:
        return _na(rule, why)
    if any(d.mean == 0 for _, d in pairs):
        return _na(rule, "a denominator is 0")
    values = [float(n.mean) / float(d.mean) for n, d in pairs]  # type: ignore[arg-type]
    if saving:
        values = [1.0 - v for v in values]
    tested = _stat(values, stat)
    ours = ", ".join(f"{n.label}: {v:.3g}" for (n, _), v in zip(pairs, values, strict=True))
    if stat != "each":
        ours += f"; {stat} {tested[0]:.3g}"
    return Verdict(HOLDS if all(expect.ok(v) for v in tested) else DIFFERS, rule, ours)


def bound(figs: Sequence[Figure], expect: Expect, *, stat: str = "each",
          use: str = "mean") -> Verdict:
    """A figure (``use``: the mean over seeds, or the largest/smallest run) tested against
    a bound at every configuration (or their min/max/mean)."""
    pick = {"mean": "mean", "max_run": "largest run", "min_run": "smallest run"}[use]
    rule = f"{pick} ({'every configuration' if stat == 'each' else stat}) {expect.text()}"
    values: list[float] = []
    for f in figs:
        v = f.mean if use == "mean" else f.high_run if use == "max_run" else f.low_run
        if v is None:
            return _na(rule, f"no figure for {f.label}")
        values.append(float(v))
    if not figs:
        return _na(rule, "no configuration selected")
    tested = _stat(values, stat)
    ours = ", ".join(f"{f.label}: {v:.3g}" for f, v in zip(figs, values, strict=True))
    return Verdict(HOLDS if all(expect.ok(v) for v in tested) else DIFFERS, rule, ours)


def agree(fig: Figure, value: float, tolerance: float) -> Verdict:
    """Our figure's 95 % interval (its mean if one run) meets [value - tol, value + tol]."""
    rule = f"95 % interval meets {value:g} ± {tolerance:g}"
    if fig.mean is None:
        return _na(rule, f"no figure for {fig.label}")
    hw = fig.half_width or 0.0
    ok = fig.mean - hw <= value + tolerance and fig.mean + hw >= value - tolerance
    return Verdict(HOLDS if ok else DIFFERS, rule, f"{fig.label}: {fig.text('.4g')}")
