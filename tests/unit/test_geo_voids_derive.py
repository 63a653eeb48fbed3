"""bench/geo_voids.py's sweep hook: the voids block of experiments/hesper.sweep.toml gets
each field's placement and workload for its seed, and Table 4.1's block nothing."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

import geo_voids  # noqa: E402
from meshsim.sweep import expand  # noqa: E402
from meshsim.sweep.point import resolve  # noqa: E402
from meshsim.sweep.points import Point  # noqa: E402
from meshsim.sweep.spec import load_sweep  # noqa: E402

SCENARIOS = ROOT / "firmware-sim" / "meshsim" / "scenarios"


def test_seed_1_of_a_voids_point_is_the_shipped_scenario() -> None:
    spec = load_sweep(ROOT / "experiments" / "hesper.sweep.toml")
    hole = next(p for p in expand(spec) if p.id == "voids.field-hole.protocol-DF.s1")
    scenario, derived = resolve(spec, hole)
    assert derived and scenario.protocol.name == "df"
    shipped = tomllib.loads((SCENARIOS / "voids-hole.toml").read_text(encoding="utf-8"))
    assert scenario.source["nodes"]["positions"] == shipped["nodes"]["positions"]
    assert scenario.source["workload"] == shipped["workload"]
    assert scenario.meta.duration_s == shipped["scenario"]["duration_s"]


def _point(values: dict[str, str | int], seed: int) -> Point:
    return Point("b", values, seed, SCENARIOS / "voids-uniform.toml", "simulation", (), {})


def test_each_seed_draws_its_own_placement_of_the_field_and_other_blocks_get_nothing() -> None:
    one = geo_voids.derive(None, _point({"field": "hole"}, 1))
    two = geo_voids.derive(None, _point({"field": "hole"}, 2))
    assert one != two and one == geo_voids.derive(None, _point({"field": "hole"}, 1))
    drawn = geo_voids.draw(geo_voids.FIELDS["hole"], 2)
    assert len(drawn.positions) == geo_voids.FIELDS["hole"].nodes
    assert not any(geo_voids.FIELDS["hole"].void(x, y) for x, y in drawn.positions)
    assert geo_voids.derive(None, _point({"nodes": 4000, "protocol": "DF"}, 1)) == []
