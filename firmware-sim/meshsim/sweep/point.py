"""Run one grid point: a pure function of (sweep spec, point), writing only its own RUNDIR.

``run_point`` loads the point's scenario with its overrides (and the sweep's ``derive``
hook, if any), hashes the fully resolved scenario with the point's tier and evaluation
settings, and skips the run when ``RUNDIR/sweep-point.json`` already holds that hash (a
finished run of the same input). Otherwise it runs the scenario into a fresh RUNDIR,
adds the point to the manifest (``varied``, ``evaluate``, ``sweep``) and writes the stamp
last, so a run interrupted half-way is never taken for a finished one.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib.util
import json
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from meshsim.scenario import Scenario, load_scenario
from meshsim.sweep.points import Point
from meshsim.sweep.spec import SweepError, SweepSpec
from meshsim.telemetry_files import MANIFEST, atomic_write_text

STAMP = "sweep-point.json"
RUNS = "runs"


@dataclass(frozen=True)
class PointResult:
    id: str
    status: str
    """``done`` (ran now), ``kept`` (finished earlier with the same input) or ``failed``."""
    wall_s: float
    rundir: Path
    digest: str
    derived: tuple[str, ...] = ()
    error: str = ""
    attempts: int = 1
    """Task attempts it took (a Spark task killed or failed is retried; 1 elsewhere)."""


def rundir_of(out: Path, point: Point) -> Path:
    return out / RUNS / point.id


def run_id(spec: SweepSpec, point: Point) -> str:
    return f"{spec.name}.{point.id}"


def derive_hook(spec: SweepSpec) -> Callable[[Scenario, Point], Sequence[str]] | None:
    """The sweep's ``derive = "file.py:function"`` (path relative to the sweep file):
    called with the loaded scenario and the point, it returns more overrides (values
    computed from the scenario, e.g. a rate from a contact trace's centrality)."""
    if not spec.derive:
        return None
    file, _, name = spec.derive.partition(":")
    path = Path(file) if Path(file).is_absolute() else spec.path.parent / file
    module_spec = importlib.util.spec_from_file_location(f"_sweep_derive_{path.stem}", path)
    if module_spec is None or module_spec.loader is None or not path.is_file():
        raise SweepError("sweep.derive", f"cannot load {str(path)!r}")
    module = importlib.util.module_from_spec(module_spec)
    # registered before it runs, as an import would: a dataclass in the hook's file looks
    # its module up by name
    sys.modules[module_spec.name] = module
    module_spec.loader.exec_module(module)
    hook = getattr(module, name or "derive", None)
    if not callable(hook):
        raise SweepError("sweep.derive", f"{str(path)!r} has no function {name or 'derive'!r}")
    return hook  # type: ignore[no-any-return]


def resolve(spec: SweepSpec, point: Point) -> tuple[Scenario, tuple[str, ...]]:
    """The point's scenario (overrides applied, then the derive hook's) and what the hook
    added."""
    scenario = load_scenario(point.scenario, point.overrides)
    hook = derive_hook(spec)
    if hook is None:
        return scenario, ()
    derived = tuple(str(o) for o in hook(scenario, point))
    if not derived:
        return scenario, ()
    return load_scenario(point.scenario, (*point.overrides, *derived)), derived


def input_digest(scenario: Scenario, point: Point) -> str:
    """What decides a run's outcome, as the user wrote it: the scenario document after
    every override (the derive hook's included), the bytes of every file it names (a
    contact trace, a mobility script), the tier, the evaluation settings and the axis
    values. Not the code: a new default field of the scenario model changes nothing here,
    and a change to a protocol needs the affected runs deleted (docs/experiments.md)."""
    doc = {"scenario": scenario.source, "files": _files(scenario.source, point.scenario.parent),
           "tier": point.tier, "evaluate": dict(point.evaluate), "values": dict(point.values)}
    text = json.dumps(doc, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def _files(doc: Any, base: Path) -> dict[str, str]:
    """sha256 of every file a ``file`` key of the document names (missing: "missing")."""
    out: dict[str, str] = {}

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key == "file" and isinstance(value, str):
                    path = Path(value) if Path(value).is_absolute() else base / value
                    try:
                        out[value] = hashlib.sha256(path.read_bytes()).hexdigest()
                    except OSError:
                        out[value] = "missing"
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(doc)
    return out


def finished(rundir: Path, digest: str) -> dict[str, Any] | None:
    """The stamp of a finished run of this input, or None."""
    try:
        stamp = json.loads((rundir / STAMP).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(stamp, dict) and stamp.get("digest") == digest
    return stamp if ok and (rundir / MANIFEST).is_file() else None


def run_point(spec: SweepSpec, point: Point, out: Path, *, vmesh_name: str = "sw",
              log: Callable[[str], None] | None = None,
              progress: Callable[[float], None] | None = None) -> PointResult:
    """Run ``point`` into ``out/runs/<point id>`` unless it finished there with the same input.

    ``progress``: called with the virtual seconds done, many times during a simulator
    run (``meshsim.des.run.run_scenario``'s); a virtual-mesh run does not call it."""
    rundir = rundir_of(out, point)
    scenario, derived = resolve(spec, point)
    digest = input_digest(scenario, point)
    stamp = finished(rundir, digest)
    if stamp is not None:
        return PointResult(point.id, "kept", float(stamp.get("wall_s", 0.0)), rundir, digest,
                           derived)
    if rundir.exists():
        shutil.rmtree(rundir)
    started = time.perf_counter()
    rid = run_id(spec, point)
    if point.tier == "vmesh":
        from meshsim.vmesh.scenario_run import RunOptions, run_on_vmesh

        run_on_vmesh(scenario, RunOptions(out=rundir, vmesh_run=vmesh_name, run_id=rid,
                                          log=log or (lambda _m: None)))
    else:
        from meshsim.des.run import run_scenario
        from meshsim.telemetry_parquet import writer_class

        run_scenario(scenario, rundir, run_id=rid, varied=point.varied, progress=progress,
                     writer_cls=writer_class(spec.telemetry_format))
    wall = time.perf_counter() - started
    manifest = json.loads((rundir / MANIFEST).read_text(encoding="utf-8"))
    manifest["varied"] = point.varied
    manifest["evaluate"] = dict(point.evaluate)
    manifest["sweep"] = {"name": spec.name, "file": str(spec.path), "point": point.id,
                         "block": point.block, "derived": list(derived)}
    atomic_write_text(rundir / MANIFEST, json.dumps(manifest, indent=1, default=str) + "\n")
    atomic_write_text(rundir / STAMP, json.dumps({
        "digest": digest, "point": point.as_dict(), "derived": list(derived),
        "wall_s": round(wall, 3),
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}, indent=1) + "\n")
    return PointResult(point.id, "done", wall, rundir, digest, derived)
