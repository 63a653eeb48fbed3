"""The optimum's one entry point from the batch job: per-event rows in, per-run metrics out.

Kept narrow on purpose: the job collects ``Evaluation.event_detail`` (one small row per
measured event) and this module does the rest on the driver, run by run, from each
run's directory (``optimum.evaluate``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mesheval.manifest import RunInfo
from mesheval.optimum.evaluate import NS, EventRow, RunContext, run_metrics
from mesheval.settings import RunSettings


def rows_by_run(detail: Iterable[Any]) -> dict[str, list[EventRow]]:
    """Spark rows of ``event_detail`` -> EventRows grouped by run (sorted by publish time)."""
    out: dict[str, list[EventRow]] = {}
    for r in detail:
        hits = tuple((int(h["node"]), None if h["hop"] is None else int(h["hop"]))
                     for h in (r["hits"] or ()))
        out.setdefault(r["run"], []).append(EventRow(
            run=r["run"], event_id=r["event_id"], pub_node=int(r["pub_node"]),
            pub_s=(int(r["pub_ts"]) - int(r["t0_ns"])) / NS,
            interested=tuple(int(n) for n in (r["interested"] or ())), hits=hits,
            data_tx=int(r["data_tx"] or 0)))
    for rows in out.values():
        rows.sort(key=lambda e: (e.pub_s, e.event_id))
    return out


def optimum_by_run(detail: Iterable[Any], settings: Sequence[RunSettings],
                   rundirs: Sequence[Path], manifests: Mapping[int, RunInfo | None],
                   ) -> tuple[dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Per-run optimum metrics (``optimum.evaluate.run_metrics``) and per-event rows."""
    rows = rows_by_run(detail)
    runs: dict[str, dict[str, Any]] = {}
    events: list[dict[str, Any]] = []
    for s in settings:
        info = manifests.get(s.rundir)
        if info is None:
            runs[s.run] = {"opt_error": "no manifest.json"}
            continue
        ctx = RunContext(rundirs[s.rundir], info.raw,
                         s.deadline_ns / NS if s.deadline_ns is not None else None)
        metrics, per_event = run_metrics(rows.get(s.run, []), ctx)
        runs[s.run] = metrics
        events += per_event
    return runs, events


def dumps(rows: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(json.dumps(r, sort_keys=True) for r in rows) + ("\n" if rows else "")
