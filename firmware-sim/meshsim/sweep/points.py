"""A sweep's grid points: axis values, a seed, and the overrides they make."""

from __future__ import annotations

import itertools
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meshsim.sweep.expr import ExpressionError, evaluate
from meshsim.sweep.spec import EVALUATE, Scalar, SweepError, SweepSpec, same_value

_UNSAFE = re.compile(r"[^A-Za-z0-9_+-]+")


@dataclass(frozen=True)
class Point:
    """One run of the sweep: everything ``point.run_point`` needs besides the spec."""

    block: str
    values: Mapping[str, Scalar]
    """Axis -> value, in the block's order (pinned axes last)."""
    seed: int
    scenario: Path
    tier: str
    overrides: tuple[str, ...]
    """``key.path=value`` (TOML values), applied as ``--set`` would be."""
    evaluate: Mapping[str, Any]
    vars: Mapping[str, float] = field(default_factory=dict)
    """The ``vars`` of the point's levels (names for expressions and the derive hook)."""

    @property
    def id(self) -> str:
        """A directory name and run id part: block, axis values and seed, dot-separated,
        e.g. ``g0.protocol-DF.subscribers-20.s3`` (other characters become ``_``)."""
        parts = [self.block] + [f"{k}-{_UNSAFE.sub('_', _text(v))}" for k, v in
                                self.values.items()] + [f"s{self.seed}"]
        return ".".join(parts)

    @property
    def varied(self) -> dict[str, Scalar]:
        return dict(self.values)

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "block": self.block, "values": dict(self.values),
                "seed": self.seed, "scenario": str(self.scenario), "tier": self.tier,
                "overrides": list(self.overrides), "evaluate": dict(self.evaluate),
                "vars": dict(self.vars)}


def _text(value: Scalar) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def toml_value(value: Any) -> str:
    """A value in TOML syntax, for an override."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {toml_value(v)}"
                                for k, v in value.items()) + " }"
    raise SweepError("", f"cannot write {value!r} as a TOML value")


def _combos(spec: SweepSpec, block_index: int) -> list[dict[str, Scalar]]:
    block = spec.blocks[block_index]
    if block.points:
        combos = [dict(p) for p in block.points]
    else:
        levels = [[lv.value for lv in spec.axes[a].levels] for a in block.axes]
        combos = [dict(zip(block.axes, values, strict=True))
                  for values in itertools.product(*levels)]
        combos = [c for c in combos if not any(
            all(same_value(c.get(a), v) for a, v in s.items()) for s in block.skip)]
    return [{**c, **block.pin} for c in combos]


def expand(spec: SweepSpec) -> list[Point]:
    """Every point of every block, seeds innermost; ids are unique."""
    points: list[Point] = []
    for i, block in enumerate(spec.blocks):
        for combo in _combos(spec, i):
            for seed in block.seeds:
                points.append(_point(spec, block.name, combo, seed, i))
    ids = [p.id for p in points]
    dup = next((x for x in ids if ids.count(x) > 1), None)
    if dup is not None:
        raise SweepError("grid", f"two points have the id {dup!r} (same block, values, seed)")
    return points


def _point(spec: SweepSpec, block_name: str, combo: Mapping[str, Scalar], seed: int,
           block_index: int) -> Point:
    block = spec.blocks[block_index]
    sets: dict[str, Any] = dict(block.sets)
    names: dict[str, float] = {}
    for axis, value in combo.items():
        level = spec.axes[axis].level(value)
        sets.update(level.sets)
        names.update(level.vars)
    env = {**names, **combo, "seed": seed}
    overrides: list[str] = []
    evaluation: dict[str, Any] = dict(spec.evaluate)
    for key, raw in sets.items():
        value = raw
        if isinstance(raw, str) and raw.startswith("="):
            try:
                value = evaluate(raw[1:], env)
            except ExpressionError as exc:
                raise SweepError(f"grid.{block_name}.{key}", str(exc)) from None
        if key.startswith(EVALUATE):
            evaluation[key[len(EVALUATE):]] = value
        else:
            overrides.append(f"{key}={toml_value(value)}")
    overrides += [f"{key}={seed}" for key in spec.seed_keys]
    return Point(block_name, dict(combo), seed, block.scenario, block.tier, tuple(overrides),
                 evaluation, names)
