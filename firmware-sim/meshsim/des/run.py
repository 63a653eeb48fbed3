"""Run a scenario into a run directory: engine + telemetry files + manifest."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from meshsim.des.engine import Simulation, default_run_id
from meshsim.des.stats import SimStats
from meshsim.mobility.log import LOG_NAME, write_mobility_log
from meshsim.scenario.model import Scenario, to_plain
from meshsim.scenario.plan import Plan, make_plan, manifest_facts
from meshsim.telemetry_files import RunWriter, base_manifest
from meshsub.core.params import params_to_dict
from meshsub.core.protocol import DROP_SUMMARY_S


@dataclass(frozen=True, slots=True)
class RunResult:
    run: str
    scenario: Scenario
    plan: Plan
    stats: SimStats
    out: Path | None


def run_scenario(scenario: Scenario, out: Path | None, *, run_id: str | None = None,
                 plan: Plan | None = None, varied: Mapping[str, Any] | None = None,
                 drop_summary_s: float = DROP_SUMMARY_S,
                 progress: Callable[[float], None] | None = None,
                 writer_cls: type[RunWriter] = RunWriter) -> RunResult:
    """Simulate ``scenario``; with ``out``, write RUNDIR/node-<id>.jsonl, mobility.log
    (every node's track: replays the run's positions as scripted mobility) and
    manifest.json.

    ``drop_summary_s``: the protocols' drop-summary interval (docs/telemetry.md, "Drop
    summaries"; 0: a record per drop).

    ``writer_cls``: the telemetry writer (a benchmark's baseline writes lines the old way).

    ``progress``: called with the virtual seconds done, many times during the run.

    ``varied`` (``{"name": ..., "value": ...}``) goes into the manifest: the parameter a
    sweep varies, which mesheval groups and plots by (else it guesses from the overrides).

    Raises ``meshsim.telemetry_files.RunDirError`` if ``out`` is not usable and
    ``meshsim.scenario.ScenarioError`` if the plan cannot be made (e.g. no
    connected placement).
    """
    run = run_id or default_run_id(scenario)
    plan = plan if plan is not None else make_plan(scenario)
    writer = writer_cls(out, run, scenario.protocol.name) if out is not None else None
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    sim = Simulation(scenario, writer, plan=plan, drop_summary_s=drop_summary_s)
    stats = sim.run(progress)
    if writer is not None:
        manifest = base_manifest(
            run=run, scenario_name=scenario.meta.name, seed=scenario.meta.seed,
            protocol=scenario.protocol.name, params=params_to_dict(scenario.protocol.params),
            warmup_s=scenario.meta.warmup_s, nodes=len(plan.positions),
            scenario=to_plain(scenario), document=scenario.source,
            overrides=list(scenario.overrides),
        )
        manifest["range_m"] = scenario.radio.range_m
        if varied is not None:
            manifest["varied"] = dict(varied)
        manifest["started"] = started
        manifest["duration_s"] = scenario.meta.duration_s
        manifest["drain_s"] = scenario.meta.drain_s
        manifest["epoch"] = 1
        manifest.update(manifest_facts(scenario, plan))
        m = scenario.mobility
        points = write_mobility_log(plan.trajectories, writer.run_dir / LOG_NAME, header=(
            f"meshsim mobility log: run {run}, scenario {scenario.meta.name}, seed "
            f"{scenario.meta.seed}, model {m.model}\n"
            "t node x y (s, m); replay: [mobility] model = \"scripted\", file = this file"))
        manifest["mobility_log"] = {"file": LOG_NAME, "model": m.model, "points": points}
        manifest["stats"] = {
            "node_events": stats.node_events, "published": len(stats.published),
            "deliveries": len(stats.deliveries), "tx": dict(stats.tx),
            "tx_bytes": dict(stats.tx_bytes), "lost": stats.lost,
            "wall_s": round(stats.wall_s, 3),
        }
        if stats.unrecorded:  # what is not in the telemetry is still counted
            manifest["stats"]["unrecorded"] = dict(sorted(stats.unrecorded.items()))
        writer.close(manifest)
    return RunResult(run, scenario, plan, stats, out)
