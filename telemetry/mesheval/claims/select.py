"""Picking configurations (groups of metrics.json) and their figures.

A selection ``{axis = value, ...}`` keeps the groups whose ``varied`` values (or, for
``protocol``, ``scenario`` and ``tier``, their own fields) equal every given value;
numbers compare by value (``20 == 20.0``).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mesheval.claims.rules import Figure
from mesheval.claims.spec import ClaimsError

Group = Mapping[str, Any]
FIELDS = ("protocol", "scenario", "tier")


def same(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return math.isclose(float(a), float(b), rel_tol=1e-12, abs_tol=1e-12)
    return str(a) == str(b)


def value_of(g: Group, axis: str) -> Any:
    varied = g.get("varied") or {}
    if axis in varied:
        return varied[axis]
    return g.get(axis)


def matches(value: Any, wanted: Any) -> bool:
    """A selection value is one value, or a list of the values allowed."""
    if isinstance(wanted, list):
        return any(same(value, w) for w in wanted)
    return same(value, wanted)


def pick(groups: Sequence[Group], where: Mapping[str, Any]) -> list[Group]:
    return [g for g in groups if all(
        (k in (g.get("varied") or {}) or k in FIELDS) and matches(value_of(g, k), v)
        for k, v in where.items())]


def label(where: Mapping[str, Any]) -> str:
    return ", ".join(f"{k}={_fmt(v)}" for k, v in where.items()) or "all"


def _fmt(v: Any) -> str:
    if isinstance(v, list):
        return "{" + ", ".join(_fmt(x) for x in v) + "}"
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def figure(groups: Sequence[Group], metric: str, where: Mapping[str, Any], scale: float = 1.0,
           name: str | None = None) -> Figure:
    """The figure of the one configuration matching ``where`` (absent: mean None)."""
    found = pick(groups, where)
    text = name or label(where)
    if len(found) > 1:
        raise ClaimsError(f"{label(where)} selects {len(found)} configurations for {metric} "
                          "(add axes to the selection)")
    if not found:
        return Figure(text, None)
    stat = (found[0].get("metrics") or {}).get(metric) or {}

    def scaled(key: str) -> float | None:
        v = stat.get(key)
        return None if v is None else float(v) * scale

    return Figure(text, scaled("mean"), scaled("half_width"), int(stat.get("n") or 0),
                  scaled("min"), scaled("max"))


def levels(groups: Sequence[Group], axis: str, where: Mapping[str, Any]) -> list[Any]:
    """The values of ``axis`` among the selected groups, numbers ascending, then the rest."""
    values: list[Any] = []
    for g in pick(groups, where):
        v = value_of(g, axis)
        if v is not None and not any(same(v, x) for x in values):
            values.append(v)
    nums = sorted(v for v in values if isinstance(v, int | float) and not isinstance(v, bool))
    return nums + [v for v in values if v not in nums]


def script_figures(paths: Sequence[tuple[Path, str]]) -> dict[str, dict[str, Any]]:
    """name -> {value, half_width, n, label, source} from the scripts' JSON files."""
    out: dict[str, dict[str, Any]] = {}
    for path, _ in paths:
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ClaimsError(f"{path}: cannot read figures: {exc}") from None
        for name, fig in (doc.get("figures") or {}).items():
            out[name] = {**fig, "source": path.name}
    return out
