"""Reading a run's ``manifest.json``: what was run, with which seed, and what varied.

The simulator and the virtual mesh write the manifest; keys are looked up in the
few places they live (top level, the resolved scenario, its ``meta`` section) so
that the evaluation does not break when a writer nests a value differently.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SEED_KEYS = frozenset({"seed", "scenario.seed", "meta.seed"})


class ManifestError(ValueError):
    """A manifest that cannot be read; the message names the file."""


@dataclass(frozen=True)
class RunInfo:
    """What the evaluation needs to know about one run."""

    run: str | None
    scenario: str
    seed: int | None
    protocol: str | None
    params: dict[str, Any]
    tier: str
    warmup_s: float
    range_m: float | None
    param_name: str
    param_value: str
    t0_ns: int | None = None
    """When the scenario's clock started (``ts_ns``), if the writer says so: the virtual
    mesh starts its workload some time after the daemons' first records."""
    varied: dict[str, Any] = field(default_factory=dict)
    """Every value a sweep varied for this run (``varied`` of the manifest), by axis."""
    deadline_s: float | None = None
    """An event's lifetime (``evaluate.deadline_s``): deliveries later do not count, and
    only events whose deadline falls within the run are judged. None: no deadline."""
    horizon_s: float | None = None
    """Scenario time the run ends (duration + drain), if the manifest says."""
    raw: dict[str, Any] = field(default_factory=dict, compare=False)

    @property
    def param_number(self) -> float | None:
        """The varied parameter as a number, for plotting against it (else None)."""
        try:
            number = float(self.param_value)
        except ValueError:
            return None
        return number if math.isfinite(number) else None


def _find(doc: Mapping[str, Any], paths: Sequence[str]) -> Any:
    """The first value found at one of the dotted ``paths`` (None if none)."""
    for path in paths:
        node: Any = doc
        for part in path.split("."):
            if not isinstance(node, Mapping) or part not in node:
                break
            node = node[part]
        else:
            return node
    return None


def _number(value: Any, what: str, source: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ManifestError(f"{source}: {what} must be a finite number, not {value!r}")
    if value < 0:
        raise ManifestError(f"{source}: {what} must not be negative")
    return float(value)


def _label(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _varied(doc: Mapping[str, Any], params: Mapping[str, Any]) -> tuple[str, str]:
    """(name, value) of the parameter this run stands for in a sweep.

    In order: an explicit ``varied`` entry; the ``--set`` overrides other than
    the seed; else the protocol parameters as a whole (``params``).
    """
    varied = _varied_values(doc)
    if len(varied) == 1:
        ((name, value),) = varied.items()
        return str(name), _label(value)
    if varied:
        return ",".join(varied), ",".join(_label(v) for v in varied.values())
    overrides = _find(doc, ("overrides", "scenario.overrides"))
    if isinstance(overrides, Sequence) and not isinstance(overrides, str):
        pairs = [str(o).split("=", 1) for o in overrides if "=" in str(o)]
        pairs = [p for p in pairs if p[0].strip() not in SEED_KEYS]
        if len(pairs) == 1:
            return pairs[0][0].strip(), pairs[0][1].strip()
        if pairs:
            return ",".join(p[0].strip() for p in pairs), ",".join(p[1].strip() for p in pairs)
    return "params", _label(dict(params)) if params else "default"


def _varied_values(doc: Mapping[str, Any]) -> dict[str, Any]:
    """``varied`` as {axis: value}: ``{"name": ..., "value": ...}`` or ``{axis: value, ...}``."""
    varied = doc.get("varied")
    if not isinstance(varied, Mapping):
        return {}
    if set(varied) == {"name", "value"}:
        return {str(varied["name"]): varied["value"]}
    return {str(k): v for k, v in varied.items()}


def parse_manifest(doc: Any, source: str = "manifest") -> RunInfo:
    """Turn a manifest document into ``RunInfo``; raise ``ManifestError`` if unusable."""
    if not isinstance(doc, Mapping):
        raise ManifestError(f"{source}: not a JSON object")
    run = _find(doc, ("run", "run_id", "id"))
    scenario = _find(doc, ("scenario_name", "scenario.meta.name", "scenario.name",
                           "scenario.scenario.name", "name"))
    if not isinstance(scenario, str):
        scenario = "unnamed"
    seed = _find(doc, ("seed", "scenario.meta.seed", "scenario.seed", "scenario.scenario.seed"))
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise ManifestError(f"{source}: seed must be an integer, not {seed!r}")
    protocol = _find(doc, ("protocol.name", "protocol", "scenario.protocol.name"))
    params = _find(doc, ("params", "protocol.params", "scenario.protocol.params"))
    warmup = _number(_find(doc, ("warmup_s", "scenario.warmup_s", "scenario.meta.warmup_s",
                                 "scenario.scenario.warmup_s")), "warmup_s", source)
    range_m = _number(_find(doc, ("range_m", "scenario.radio.range_m")), "range_m", source)
    params_dict = dict(params) if isinstance(params, Mapping) else {}
    name, value = _varied(doc, params_dict)
    tier = _find(doc, ("tier",))
    t0_ns = _find(doc, ("t0_ns",))
    if t0_ns is not None and (isinstance(t0_ns, bool) or not isinstance(t0_ns, int)
                              or t0_ns < 0):
        raise ManifestError(f"{source}: t0_ns must be a non-negative integer, not {t0_ns!r}")
    raw_eval = doc.get("evaluate")
    evaluate: Mapping[str, Any] = raw_eval if isinstance(raw_eval, Mapping) else {}
    deadline = _number(evaluate.get("deadline_s"), "evaluate.deadline_s", source)
    duration = _find(doc, ("duration_s", "scenario.meta.duration_s"))
    drain = _find(doc, ("drain_s", "scenario.meta.drain_s"))
    horizon = None
    if duration is not None:
        horizon = (_number(duration, "duration_s", source) or 0.0) + (
            _number(drain, "drain_s", source) or 0.0)
    return RunInfo(
        run=str(run) if run is not None else None,
        scenario=scenario,
        seed=seed,
        protocol=protocol if isinstance(protocol, str) else None,
        params=params_dict,
        tier=str(tier) if tier is not None else "unknown",
        warmup_s=warmup or 0.0,
        range_m=range_m,
        param_name=name,
        param_value=value,
        t0_ns=t0_ns,
        varied=_varied_values(doc),
        deadline_s=deadline if deadline else None,
        horizon_s=horizon,
        raw=dict(doc),
    )


def read_manifest(rundir: Path) -> RunInfo | None:
    """The run info of ``rundir/manifest.json``, or None when there is none."""
    path = rundir / "manifest.json"
    if not path.is_file():
        return None
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ManifestError(f"{path}: cannot read: {exc}") from None
    return parse_manifest(doc, str(path))
