"""Helpers for the PUMA and GIANT results pages: confidence intervals and verdict tables.

Every verdict on a results page is computed from the figures by a rule that is
printed beside it (docs/evaluation.md); ``n/a`` where the figures cannot test
the claim. Confidence intervals are 95 % Student-t intervals over independent
seeds (each seed one batch of runs), so n is the number of seeds.
"""

from __future__ import annotations

import math
import os
import statistics
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

_T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306,
        9: 2.262, 10: 2.228, 15: 2.131, 20: 2.086, 30: 2.042}


def t95(df: int) -> float:
    """The two-sided 95 % Student-t quantile for ``df`` degrees of freedom (>= 1)."""
    if df >= 30:
        return 1.96 if df > 120 else _T95[30]
    return _T95.get(df) or _T95[max(k for k in _T95 if k <= df)]


@dataclass(frozen=True, slots=True)
class Estimate:
    mean: float
    half: float
    """Half-width of the 95 % interval (0 with a single seed: no interval)."""
    n: int

    def fmt(self, digits: int = 1) -> str:
        if self.n < 2:
            return f"{self.mean:.{digits}f}"
        return f"{self.mean:.{digits}f} ± {self.half:.{digits}f}"


def estimate(values: Sequence[float]) -> Estimate:
    """Mean and 95 % interval of per-seed values."""
    n = len(values)
    if n == 0:
        return Estimate(math.nan, math.nan, 0)
    mean = statistics.fmean(values)
    if n < 2:
        return Estimate(mean, 0.0, n)
    return Estimate(mean, t95(n - 1) * statistics.stdev(values) / math.sqrt(n), n)


@dataclass(frozen=True, slots=True)
class Verdict:
    claim: str
    thesis: str
    measured: str
    rule: str
    holds: bool | None
    """True/False from the rule; None = n/a (the figures cannot test the claim)."""

    @property
    def word(self) -> str:
        return "n/a" if self.holds is None else ("holds" if self.holds else "does not hold")


def within(measured: float, target: float, rel: float) -> bool:
    """|measured - target| <= rel * |target|."""
    return abs(measured - target) <= rel * abs(target)


def verdict_table(verdicts: Sequence[Verdict]) -> list[str]:
    lines = ["| claim | thesis | measured | rule (tolerance) | verdict |",
             "|---|---|---|---|---|"]
    for v in verdicts:
        lines.append(f"| {v.claim} | {v.thesis} | {v.measured} | {v.rule} | **{v.word}** |")
    held = sum(1 for v in verdicts if v.holds)
    tested = sum(1 for v in verdicts if v.holds is not None)
    lines += ["", f"{held} of {tested} testable claims hold; "
                  f"{len(verdicts) - tested} n/a."]
    return lines


def machine_note() -> str:
    """Load and commit beside the figures (costs here are message counts, not timings)."""
    load = " ".join(f"{x:.2f}" for x in os.getloadavg())
    try:
        head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=False).stdout.strip()
    except OSError:
        head = "?"
    return f"commit {head or '?'}, load average {load} (uptime)"
