"""Run a whole sweep: every point once, in parallel, resumable, with progress and manifest.

Points of the simulator tier run in a process pool (``--jobs``); virtual-mesh points run
one at a time in this process afterwards (they need root and all of the machine's
containers). ``DIR/sweep.json`` is rewritten after every point: the spec, every point with
its axis values, seed, status (``done``, ``kept``, ``failed``, ``pending``), wall time and
input digest; mesheval reads it to evaluate the sweep as one report.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meshsim.scenario import ScenarioError, load_scenario
from meshsim.sweep.point import PointResult, run_point, rundir_of
from meshsim.sweep.points import Point, expand
from meshsim.sweep.spec import SweepError, SweepSpec
from meshsim.telemetry_files import atomic_write_text
from meshsub import __version__

MANIFEST = "sweep.json"
Log = Callable[[str], None]


@dataclass
class Progress:
    """Counts and the time-left estimate: mean wall time of the points run so far, times
    the points left, over the parallel jobs."""

    total: int
    jobs: int
    started: float = field(default_factory=time.perf_counter)
    finished: int = 0
    ran_s: list[float] = field(default_factory=list)

    def line(self, result: PointResult) -> str:
        self.finished += 1
        if result.status == "done":
            self.ran_s.append(result.wall_s)
        elapsed = time.perf_counter() - self.started
        left = self.total - self.finished
        eta = (sum(self.ran_s) / len(self.ran_s) * left / self.jobs) if self.ran_s else None
        what = {"done": f"ran in {result.wall_s:.1f} s", "kept": "unchanged, kept",
                "failed": f"FAILED: {result.error}"}[result.status]
        tail = f"elapsed {_dur(elapsed)}" + (f", about {_dur(eta)} left" if eta and left
                                              else "")
        return f"[{self.finished}/{self.total}] {result.id}: {what} ({tail})"


def _dur(value: float) -> str:
    seconds = round(value)
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def check_points(spec: SweepSpec, points: Sequence[Point]) -> None:
    """Load the scenario of one seed of every combination: a bad override fails here,
    before any run (the error names the point)."""
    seen: set[tuple[str, tuple[str, ...]]] = set()
    for p in points:
        key = (p.block, tuple(sorted(f"{k}={v}" for k, v in p.values.items())))
        if key in seen:
            continue
        seen.add(key)
        try:
            load_scenario(p.scenario, p.overrides)
        except ScenarioError as exc:
            raise SweepError(exc.path, f"{exc.problem} (point {p.id})") from None


def run_one(spec: SweepSpec, point: Point, out: Path) -> PointResult:
    """One simulated point, its input errors as a failed result (the same in a local
    process, a pool process or a Spark task)."""
    try:
        return run_point(spec, point, out)
    except (ScenarioError, OSError, ValueError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return PointResult(point.id, "failed", 0.0, rundir_of(out, point), "", error=first)


def _earlier(out: Path) -> dict[str, dict[str, Any]]:
    """Rows of the previous sweep.json by point id (points this invocation does not run
    keep their earlier status)."""
    try:
        doc = json.loads((out / MANIFEST).read_text(encoding="utf-8"))
        return {str(r["id"]): r for r in doc.get("points", []) if isinstance(r, dict)}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}


def write_manifest(spec: SweepSpec, out: Path, points: Sequence[Point],
                   results: dict[str, PointResult], started: str, done: bool,
                   earlier: dict[str, dict[str, Any]] | None = None) -> None:
    rows = []
    for p in expand(spec):
        r = results.get(p.id)
        if r is None and earlier and p.id in earlier and p.id not in {q.id for q in points}:
            rows.append({**p.as_dict(), **{k: earlier[p.id].get(k) for k in (
                "status", "wall_s", "rundir", "digest", "derived", "error", "attempts")}})
            continue
        rows.append({**p.as_dict(), "status": r.status if r else "pending",
                     "wall_s": round(r.wall_s, 3) if r else None,
                     "rundir": str((out / "runs" / p.id).relative_to(out)),
                     "digest": r.digest if r else None, "derived": list(r.derived) if r else [],
                     "error": r.error if r else "", "attempts": r.attempts if r else None})
    doc: dict[str, Any] = {
        "sweep": spec.name, "file": str(spec.path), "digest": spec.digest,
        "meshsub_version": __version__, "started": started,
        "finished": dt.datetime.now(dt.UTC).isoformat(timespec="seconds") if done else None,
        "evaluate": dict(spec.evaluate),
        "axes": {a.name: [lv.value for lv in a.levels] for a in spec.axes.values()},
        "blocks": [{"name": b.name, "axes": list(b.axes), "pin": dict(b.pin),
                    "scenario": str(b.scenario), "tier": b.tier, "seeds": list(b.seeds)}
                   for b in spec.blocks],
        "spec": spec.source, "points": rows,
    }
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / MANIFEST, json.dumps(doc, indent=1, default=str) + "\n")


def first_seeds(spec: SweepSpec, points: Sequence[Point], count: int) -> list[Point]:
    """The points of the first ``count`` seeds of their block: a quick plan of the same
    sweep (a later run without the limit keeps these and adds the other seeds)."""
    keep = {b.name: set(b.seeds[:count]) for b in spec.blocks}
    return [p for p in points if p.seed in keep[p.block]]


def run_sweep(spec: SweepSpec, out: Path, *, jobs: int = 1, log: Log = print,
              only: str | Sequence[str] | None = None, seeds: int | None = None,
              vmesh_name: str = "sw", spark: str | None = None) -> dict[str, PointResult]:
    """Run every point not already finished with the same input; return the results.
    ``only`` (the points whose id contains one of these texts) and ``seeds`` run a subset;
    the others keep their earlier status. ``spark`` (a Spark master URL, or "" under
    ``spark-submit``) runs the simulated points as tasks of that cluster instead of a
    local process pool (``meshsim.sweep.cluster``)."""
    points = expand(spec)
    if only:
        texts = [only] if isinstance(only, str) else list(only)
        points = [p for p in points if any(t in p.id for t in texts)]
    if seeds is not None:
        points = first_seeds(spec, points, seeds)
    check_points(spec, points)
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    results: dict[str, PointResult] = {}
    earlier = _earlier(out)
    write_manifest(spec, out, points, results, started, False, earlier)
    sim = [p for p in points if p.tier == "simulation"]
    vmesh = [p for p in points if p.tier == "vmesh"]
    session = None
    if spark is not None and sim:
        from meshsim.sweep import cluster

        session = cluster.session(spark or None)
        jobs = cluster.slots(session)
    progress = Progress(len(points), max(1, jobs))
    where = "Spark task slot(s)" if session is not None else "job(s)"
    log(f"sweep {spec.name}: {len(points)} points ({len(sim)} simulated with {jobs} {where}, "
        f"{len(vmesh)} on the virtual mesh) -> {out}")

    lock = threading.Lock()  # Spark's results arrive on the driver's threads

    def record(result: PointResult) -> None:
        with lock:
            results[result.id] = result
            log(progress.line(result))
            write_manifest(spec, out, points, results, started, False, earlier)

    if session is not None:
        cluster.run_on_spark(session, spec, sim, out, record, log)
    elif jobs <= 1:
        for p in sim:
            record(run_one(spec, p, out))
    else:
        with ProcessPoolExecutor(max_workers=jobs) as pool:
            futures: list[Future[PointResult]] = [pool.submit(run_one, spec, p, out)
                                                  for p in sim]
            for fut in futures:
                record(fut.result())
    for p in vmesh:
        try:
            record(run_point(spec, p, out, vmesh_name=vmesh_name, log=log))
        except Exception as exc:  # a vmesh failure must not lose the manifest
            record(PointResult(p.id, "failed", 0.0, rundir_of(out, p), "",
                               error=str(exc).splitlines()[0] if str(exc) else repr(exc)))
    write_manifest(spec, out, points, results, started, True, earlier)
    return results


def plan_lines(spec: SweepSpec, out: Path) -> list[str]:
    """What a dry run prints: every point with its overrides, and whether a finished run
    of the same overrides is there (the full input, derived values and all, is checked
    when the sweep runs; a dry run does not build the points' scenarios)."""
    from meshsim.sweep.point import STAMP

    lines = []
    for p in expand(spec):
        try:
            stamp = json.loads((rundir_of(out, p) / STAMP).read_text(encoding="utf-8"))
            same = stamp.get("point", {}).get("overrides") == list(p.overrides)
        except (OSError, ValueError, AttributeError):
            same = False
        state = "finished earlier" if same else "to run"
        lines.append(f"{p.id}  [{p.tier}] {state}: {' '.join(p.overrides)}")
    return lines
