"""bench/geo_voids.py's verdicts flip with the figures they judge (issue 13's rule for
every results generator): delivery and the void-cost ratio, on both sides of each rule."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))

import geo_voids

SEEDS = [1, 2, 3]


def runs(hole_hesper_sub: int, river_delivered: int) -> list[geo_voids.Run]:
    """Uniform: HESPER-I 800 / DF 400 subscription tx; hole: DF 400 and HESPER-I as given."""
    out = []
    for seed in SEEDS:
        jitter = seed  # a little spread, so that the intervals are finite
        for field, proto, sub_tx, delivered in (
                ("uniform", "HESPER-I", 800 + jitter, 120), ("uniform", "DF", 400, 120),
                ("hole", "HESPER-I", hole_hesper_sub + jitter, 120), ("hole", "DF", 400, 120),
                ("river", "HESPER-I", 800 + jitter, river_delivered),
                ("river", "DF", 400, 120)):
            out.append(geo_voids.Run(field, proto, seed, 120, delivered, 0, sub_tx, 1200, 12,
                                     10.0, 0.0))
    return out


def verdict(report: str, claim: str, field: str) -> str:
    rows = [line for line in report.splitlines()
            if line.startswith(f"| {claim}") and f"| {field} | HESPER-I |" in line]
    assert len(rows) == 1, rows
    return rows[0].rstrip(" |").rsplit("| ", 1)[1]


def report(hole_sub: int, river_delivered: int) -> str:
    saved = geo_voids.PROTOCOLS
    geo_voids.PROTOCOLS = (("HESPER-I", []), ("DF", []))
    try:
        return geo_voids.report(runs(hole_sub, river_delivered), SEEDS,
                                ["uniform", "hole", "river"])
    finally:
        geo_voids.PROTOCOLS = saved


def test_delivery_verdict_flips() -> None:
    assert verdict(report(800, 120), "delivers every expected event", "river") == "holds"
    assert verdict(report(800, 119), "delivers every expected event", "river") == "fails"


def test_void_cost_verdict_flips() -> None:
    claim = "void costs HESPER what it costs DF (subscription tx)"
    assert verdict(report(800, 120), claim, "hole") == "holds"  # ratio 1.0
    assert verdict(report(1100, 120), claim, "hole") == "fails"  # ratio 1.375 > 1.25
