"""Reading a sweep file (TOML): axes, grid blocks, seeds, and what every point sets.

```toml
[sweep]
name = "hesper"
scenario = "../firmware-sim/meshsim/scenarios/hesper-4000-tr70.toml"  # relative to this file
seeds = 5                          # 1..5, or a list [3, 7, 11]
seed_keys = ["scenario.seed"]      # where each seed goes (default)
tier = "simulation"                # or "vmesh" (``meshsim run``: root, one at a time)
telemetry_format = "jsonl"         # or "parquet": one columnar file per simulated run
set = { "scenario.duration_s" = 421.0 }      # overrides of every point
evaluate = { message_bits = 320 }            # how mesheval evaluates the sweep

[[sweep.axis]]                     # a categorical axis: one table of overrides per level
name = "protocol"
levels = [
  { value = "HESPER-I", set = { "protocol.name" = "hesper", "protocol.hesper.variant" = "I" } },
  { value = "DF", set = { "protocol.name" = "df" } },
]

[[sweep.axis]]                     # a numeric axis: its value goes to every key in ``keys``
name = "subscribers"
values = [20, 80, 200]
keys = ["workload.subscribers.count"]
set = { "scenario.duration_s" = "= 30 + subscribers * 0.5" }   # "= ..." is arithmetic

[[grid]]                           # points: the product of ``axes`` (or a list: ``points``)
axes = ["protocol", "subscribers"]
pin = { }                          # other axes held at one of their levels
```

Keys starting ``evaluate.`` go to the run manifest's ``evaluate`` section (mesheval reads
``evaluate.deadline_s``), not to the scenario. Every error names its key path (one line,
exit status 2 at the CLI), and every override is checked by loading the scenario of every
point before anything runs.
"""

from __future__ import annotations

import hashlib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meshsim.scenario.reader import ScenarioError, Table, type_name
from meshsim.sweep.expr import ExpressionError, check
from meshsim.telemetry_parquet import FORMATS

TIERS = ("simulation", "vmesh")
EVALUATE = "evaluate."


class SweepError(ScenarioError):
    """A bad sweep file; ``path`` names the key."""


Scalar = int | float | str | bool


@dataclass(frozen=True)
class Level:
    value: Scalar
    sets: Mapping[str, Any]
    """key path -> value, or ``"= expression"`` over the point's axis values."""
    vars: Mapping[str, float] = field(default_factory=dict)
    """Numbers this level names for expressions (and the derive hook), e.g. a trace's
    length: ``vars = { days = 1.5 }`` makes ``"= days * 86400"`` work."""


@dataclass(frozen=True)
class Axis:
    name: str
    levels: tuple[Level, ...]

    def level(self, value: Any) -> Level:
        for lv in self.levels:
            if same_value(lv.value, value):
                return lv
        raise KeyError(value)


def same_value(a: Any, b: Any) -> bool:
    """Numbers compare by value (20 == 20.0), everything else by type and value."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        return a == b
    return type(a) is type(b) and a == b


@dataclass(frozen=True)
class Block:
    name: str
    axes: tuple[str, ...]
    points: tuple[Mapping[str, Scalar], ...]
    """An explicit list of combinations (empty: the product of ``axes``)."""

    pin: Mapping[str, Scalar]
    scenario: Path
    sets: Mapping[str, Any]
    tier: str
    seeds: tuple[int, ...]
    skip: tuple[Mapping[str, Scalar], ...] = ()
    """Combinations of the product left out (a combination matching every value of one)."""


@dataclass(frozen=True)
class SweepSpec:
    name: str
    path: Path
    axes: Mapping[str, Axis]
    blocks: tuple[Block, ...]
    seed_keys: tuple[str, ...]
    evaluate: Mapping[str, Any]
    derive: str | None
    source: Mapping[str, Any] = field(compare=False)
    digest: str = ""
    """sha256 of the sweep file's text."""
    telemetry_format: str = "jsonl"
    """How simulated runs write their telemetry (``meshsim.telemetry_parquet.FORMATS``):
    JSON Lines node files, or one Parquet file (docs/experiments.md)."""


def load_sweep(path: str | Path) -> SweepSpec:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SweepError("", f"cannot read sweep {str(path)!r}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise SweepError("", f"sweep {str(path)!r} is not UTF-8 text") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SweepError("", f"{path}: invalid TOML: {exc}") from None
    try:
        # absolute: the sweep's scenarios and derive hook are named relative to its file,
        # and a Spark task runs in its worker's directory, not the driver's
        return _spec(doc, path.absolute(), hashlib.sha256(text.encode()).hexdigest())
    except ScenarioError as exc:
        if isinstance(exc, SweepError):
            raise
        raise SweepError(exc.path, exc.problem) from None


def _spec(doc: dict[str, Any], path: Path, digest: str) -> SweepSpec:
    root = Table(doc, "")
    sw = root.table("sweep", required=True)
    name = sw.string("name")
    if not name.strip() or any(c in name for c in "/\\"):
        raise sw.err("name", "must be a non-empty name without slashes")
    base = path.parent
    scenario = sw.opt_string("scenario")
    seeds = _seeds(sw, "seeds", (1,))
    tier = sw.string("tier", "simulation", choices=TIERS)
    common = _sets(sw, "set")
    seed_keys = tuple(_strings(sw, "seed_keys", ["scenario.seed"]))
    evaluate = dict(sw.table("evaluate").data)
    for key, value in evaluate.items():
        if isinstance(value, Mapping | list):
            raise SweepError(f"sweep.evaluate.{key}", f"expected a number, string or boolean, "
                                                       f"got {type_name(value)}")
    derive = sw.opt_string("derive")
    telemetry_format = sw.string("telemetry_format", "jsonl", choices=FORMATS)
    axes: dict[str, Axis] = {}
    for at in sw.tables("axis"):
        axis = _axis(at)
        if axis.name in axes:
            raise at.err("name", f"axis {axis.name!r} is defined twice")
        axes[axis.name] = axis
    sw.done()
    blocks = []
    for i, bt in enumerate(root.tables("grid")):
        blocks.append(_block(bt, i, axes, base, scenario, common, tier, seeds))
    root.done()
    if not blocks:
        raise SweepError("grid", "a sweep needs at least one [[grid]] block")
    if telemetry_format != "jsonl" and any(b.tier != "simulation" for b in blocks):
        raise sw.err("telemetry_format", "a virtual-mesh run writes the daemons' JSON Lines: "
                                         f"{telemetry_format} is for the simulation tier only")
    names = [b.name for b in blocks]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise SweepError("grid", f"block name {dup!r} appears twice")
    known = set(axes) | {"seed"} | {v for a in axes.values() for lv in a.levels
                                    for v in lv.vars}
    for where, sets in _all_sets(axes, blocks):
        for key, value in sets.items():
            if isinstance(value, str) and value.startswith("="):
                try:
                    check(value[1:], known)
                except ExpressionError as exc:
                    raise SweepError(f"{where}.{key}", str(exc)) from None
    return SweepSpec(name, path, axes, tuple(blocks), seed_keys, evaluate, derive, doc, digest,
                     telemetry_format)


def _all_sets(axes: Mapping[str, Axis], blocks: list[Block]) -> list[tuple[str, Mapping[str, Any]]]:
    out: list[tuple[str, Mapping[str, Any]]] = []
    for axis in axes.values():
        out += [(f"sweep.axis.{axis.name}[{lv.value!r}].set", lv.sets) for lv in axis.levels]
    out += [(f"grid.{b.name}.set", b.sets) for b in blocks]
    return out


def _seeds(t: Table, key: str, default: tuple[int, ...]) -> tuple[int, ...]:
    raw = t.raw(key, None)
    if raw is None:
        return default
    if isinstance(raw, int) and not isinstance(raw, bool):
        if raw < 1:
            raise t.err(key, f"must be >= 1 (got {raw})")
        return tuple(range(1, raw + 1))
    if isinstance(raw, list) and raw and all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in raw):
        if len(set(raw)) != len(raw):
            raise t.err(key, "a seed appears twice")
        return tuple(raw)
    raise t.err(key, "expected a count >= 1 or a non-empty array of seeds >= 0")


def _strings(t: Table, key: str, default: list[str]) -> list[str]:
    raw = t.raw(key, default)
    if not isinstance(raw, list) or not all(isinstance(v, str) and v for v in raw):
        raise t.err(key, "expected an array of key paths")
    return raw


def _sets(t: Table, key: str) -> dict[str, Any]:
    sets = dict(t.table(key).data)
    for k in sets:
        if not k or k.startswith(".") or k.endswith("."):
            raise t.err(key, f"bad key path {k!r}")
    return sets


def _vars(t: Table) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, value in t.table("vars").data.items():
        if not str(key).isidentifier() or key == "seed":
            raise t.err("vars", f"{key!r} must be an identifier other than 'seed'")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise SweepError(f"{t.path}.vars.{key}", f"expected a number, got "
                                                      f"{type_name(value)}")
        out[str(key)] = value
    return out


def _scalar(value: Any, where: str) -> Scalar:
    if isinstance(value, bool | int | float | str):
        return value
    raise SweepError(where, f"expected a number, string or boolean, got {type_name(value)}")


def _axis(t: Table) -> Axis:
    name = t.string("name")
    if not name.isidentifier() or name == "seed":
        raise t.err("name", f"must be an identifier other than 'seed' (got {name!r})")
    common = _sets(t, "set")
    levels: list[Level] = []
    if t.has("levels"):
        for lt in t.tables("levels"):
            value = _scalar(lt.raw("value"), f"{lt.path}.value")
            levels.append(Level(value, {**common, **_sets(lt, "set")}, _vars(lt)))
            lt.done()
        if t.has("values") or t.has("keys"):
            raise t.err("values", "give either levels or values (with keys), not both")
    else:
        values = t.array("values")
        keys = _strings(t, "keys", [])
        if not keys and not common:
            raise t.err("keys", "an axis with values needs keys and/or set")
        for i, v in enumerate(values):
            value = _scalar(v, f"{t.path}.values[{i}]")
            levels.append(Level(value, {**{k: value for k in keys}, **common}))
    t.done()
    if not levels:
        raise t.err("levels", "an axis needs at least one level")
    seen = [lv.value for lv in levels]
    if len(set(map(repr, seen))) != len(seen):
        raise t.err("levels", "a value appears twice")
    return Axis(name, tuple(levels))


def _block(t: Table, i: int, axes: Mapping[str, Axis], base: Path, scenario: str | None,
           common: Mapping[str, Any], tier: str, seeds: tuple[int, ...]) -> Block:
    name = t.string("name", f"g{i}")
    if not name.replace("-", "").replace("_", "").isalnum():
        raise t.err("name", f"use letters, digits, - and _ (got {name!r})")
    names = tuple(_strings(t, "axes", []))
    for a in names:
        if a not in axes:
            raise t.err("axes", f"unknown axis {a!r} (known: {', '.join(axes) or 'none'})")
    pin = {str(k): _scalar(v, f"{t.path}.pin.{k}") for k, v in t.table("pin").data.items()}
    points: list[Mapping[str, Scalar]] = []
    for j, raw in enumerate(t.array("points", [])):
        if not isinstance(raw, Mapping):
            raise SweepError(f"{t.path}.points[{j}]", "expected a table {axis = value, ...}")
        points.append({str(k): _scalar(v, f"{t.path}.points[{j}].{k}") for k, v in raw.items()})
    skip: list[Mapping[str, Scalar]] = []
    for j, raw in enumerate(t.array("skip", [])):
        if not isinstance(raw, Mapping):
            raise SweepError(f"{t.path}.skip[{j}]", "expected a table {axis = value, ...}")
        skip.append({str(k): _scalar(v, f"{t.path}.skip[{j}].{k}") for k, v in raw.items()})
    if skip and not names:
        raise t.err("skip", "skip leaves combinations out of a product (axes)")
    if points and names:
        raise t.err("points", "give either axes (a product) or points (a list), not both")
    if not points and not names:
        raise t.err("axes", "a block needs axes or points")
    combos = [("pin", pin)] + [(f"points[{j}]", p) for j, p in enumerate(points)]
    combos += [(f"skip[{j}]", p) for j, p in enumerate(skip)]
    for where, combo in combos:
        for a, v in combo.items():
            if a not in axes:
                raise SweepError(f"{t.path}.{where}.{a}", "unknown axis")
            try:
                axes[a].level(v)
            except KeyError:
                raise SweepError(f"{t.path}.{where}.{a}", f"{v!r} is not a level of axis "
                                 f"{a!r}") from None
    overlap = set(pin) & (set(names) | {a for p in points for a in p})
    if overlap:
        raise t.err("pin", f"axis {sorted(overlap)[0]!r} is both pinned and varied")
    sc = t.opt_string("scenario") or scenario
    if sc is None:
        raise t.err("scenario", "no scenario: set sweep.scenario or this block's scenario")
    block = Block(
        name=name, axes=names, points=tuple(points), pin=pin, skip=tuple(skip),
        scenario=(base / sc) if not Path(sc).is_absolute() else Path(sc),
        sets={**common, **_sets(t, "set")},
        tier=t.string("tier", tier, choices=TIERS),
        seeds=_seeds(t, "seeds", seeds),
    )
    t.done()
    return block
