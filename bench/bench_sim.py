"""Simulator throughput: node-events (protocol inputs) per wall second.

Every rate is over the whole run: from the call until the run directory is complete
(the last flush, the files closed and renamed, the manifest written), not the
simulation's own clock, which stops before the writer is closed.

Flooding on a random connected 1000-node unit-disk network with a workload of
50 events, run four times in one process, on one core:

- ``baseline``: the telemetry written as before the speed-up, one record per drop
  (``drop_summary_s = 0``) and every line built as a dict and JSON-encoded
  (``core.telemetry.make_record`` + ``dump_line`` order, the old ``RunWriter.record``);
- ``with telemetry files``: as ``meshsim simulate`` writes them by default (JSON Lines,
  one file per node: drop summaries, line patterns, ``rx`` batches);
- ``with telemetry files (Parquet)``: as ``meshsim simulate --telemetry-format parquet``
  writes them (one columnar file, built in batches);
- ``engine only``: into a null sink.

Then the engine and writers of ``--before`` (a git revision: by default main before
issue 16's third round) against this checkout's, each with both formats and engine
only, in fresh processes taking turns (``--rounds``, best of each), on the same
scenario and core.

The issue's target: >= 200,000 node-events/s with telemetry files (63,265 before,
on an idle machine), judged for each format. ``--hesper8000`` adds the 8000-node
HESPER configuration (``hesper-8000-tr100.toml``, target <= 60 s; about 76 s before).
It prints ``uptime`` before and after the figures: on a shared machine only the ratios
of one run compare. ``--records`` also runs the bundled scenarios that finish in
seconds (``RECORD_SCENARIOS`` and every ``vmesh-*``) with both codes and says whether
their node files (lines and SHA-256), deliveries, redundant receptions and node-events
are equal.

    python bench/bench_sim.py [--nodes 1000] [--events 50] [--before REV|none]
                              [--rounds 2] [--hesper8000] [--records]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from meshsim.des.engine import Simulation
from meshsim.des.run import run_scenario
from meshsim.des.summary import outcomes, totals
from meshsim.scenario import Scenario, load_scenario, loads_scenario, make_plan
from meshsim.scenario.plan import Plan
from meshsim.telemetry_files import RunWriter
from meshsim.telemetry_parquet import ParquetRunWriter
from meshsub.core.api import TelemetryValue

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "firmware-sim" / "meshsim" / "scenarios"
BEFORE = "fdcb1de"
"""main before issue 16's third round (columnar writer, duplicate receptions, sizing)."""
TARGET = 200_000
"""node-events/s with telemetry files (issue 16)."""
RECORD_SCENARIOS = ("random50.toml", "flooding-200.toml", "demo.toml", "puma-grid.toml",
                    "voids-hole.toml")
"""Besides every ``vmesh-*.toml``: the bundled scenarios ``--records`` compares."""

SCENARIO = """
[scenario]
name = "bench-flooding"
seed = 11
duration_s = 60.0
drain_s = 5.0

[area]
width_m = {side}
height_m = {side}

[radio]
model = "unit_disk"
range_m = 100.0
loss = 0.02
delay_s = 0.001

[nodes]
count = {nodes}
placement = "random"
connected = true

[protocol]
name = "flooding"

[protocol.flooding]
ttl = 64

[workload.subscribers]
fraction = 0.2
expressions = [{{ expr = "sensors/temp value>=20" }}, {{ expr = "alarms/#" }}]

[workload.generator]
rate_per_s = 1.0
process = "periodic"
count = {events}

[[workload.generator.templates]]
topic = "sensors/temp"
attrs = {{ value = {{ uniform_int = [0, 40] }} }}

[[workload.generator.templates]]
topic = "alarms/smoke"
attrs = {{ level = {{ uniform_int = [1, 5] }} }}
"""


class PerRecordWriter(RunWriter):
    """The writer as before: every line a dict JSON-encoded on its own."""

    def record_many(self, nodes: Iterable[int], ts_ns: int, event: str,
                    attrs: Mapping[str, TelemetryValue]) -> None:
        for node in nodes:
            self._slow_record(node, ts_ns, event, attrs)


def load() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def with_files(scenario: Scenario, plan: Plan, out: Path, name: str, **kwargs: Any) -> float:
    """Run into a run directory as ``meshsim simulate`` does; print and return the rate
    over the whole call (the files flushed, closed and renamed, the manifest written:
    the simulation's own clock stops before that)."""
    started = time.perf_counter()
    result = run_scenario(scenario, out, plan=plan, **kwargs)
    took = time.perf_counter() - started
    st = result.stats
    tot = totals(outcomes(plan, st))
    print(f"{name}: {st.node_events:,} node-events in {took:.2f} s with the run directory "
          f"complete (simulation {st.wall_s:.2f} s) = {st.node_events / took:,.0f} "
          f"node-events/s; {st.records:,} records, {sum(st.tx.values()):,} tx, delivered "
          f"{tot.delivered}/{tot.expected}", flush=True)
    return st.node_events / took


def bench_scenario(nodes: int, events: int) -> tuple[Scenario, float]:
    """The flooding scenario; keep the mean degree about 12 whatever the node count:
    n * pi * r^2 / A = 12."""
    side = math.sqrt(nodes * math.pi * 100.0**2 / 12.0)
    return loads_scenario(SCENARIO.format(side=round(side, 1), nodes=nodes,
                                          events=events)), side


def measure(nodes: int, events: int) -> None:
    """One measurement (with files in each format, then engine only) as a JSON line: the
    code is whichever ``meshsub``/``meshsim`` this process imports. Every rate is over
    the whole call (set-up, run, the last flush, closing and renaming the files, the
    manifest): the simulation's own ``node_events_per_s`` stops its clock before the
    writer is closed, and a user waits for the files. Each rate also per CPU second of
    the process (``time.process_time`` over the same call), which waiting for a loaded
    machine's CPU does not lower."""
    scenario, _ = bench_scenario(nodes, events)
    plan = make_plan(scenario)
    warm_up()
    cpu: dict[str, float] = {}
    wall: dict[str, float] = {}

    def timed(name: str, run: Any) -> Any:
        started, started_cpu = time.perf_counter(), time.process_time()
        result = run()
        cpu[name] = time.process_time() - started_cpu
        wall[name] = time.perf_counter() - started
        return result

    with tempfile.TemporaryDirectory() as tmp:
        files = timed("files", lambda: run_scenario(scenario, Path(tmp) / "run",
                                                    plan=plan).stats)
        timed("parquet", lambda: run_scenario(
            scenario, Path(tmp) / "pq", plan=plan, writer_cls=ParquetRunWriter).stats)
    timed("engine", lambda: Simulation(scenario, plan=plan).run())
    tot = totals(outcomes(plan, files))
    print(json.dumps({**{k: files.node_events / v for k, v in wall.items()},
                      **{f"{k}_cpu": files.node_events / v for k, v in cpu.items()},
                      "node_events": files.node_events, "records": files.records,
                      "delivered": tot.delivered, "expected": tot.expected}))


def warm_up() -> None:
    """Import what the Parquet writer uses before anything is timed: pyarrow loads pandas
    on its first conversion, most of a second once per process (a sweep's worker pays
    it once for all its runs), for either revision's writer."""
    import pyarrow as pa

    pa.array([0])


def record_scenarios() -> list[str]:
    return [*RECORD_SCENARIOS, *sorted(p.name for p in SCENARIOS.glob("vmesh-*.toml"))]


def measure_records() -> None:
    """Every ``record_scenarios()`` run's node files and counts, as a JSON line."""
    from meshsim.telemetry_files import node_files_digest

    out = {}
    for name in record_scenarios():
        with tempfile.TemporaryDirectory() as tmp:
            st = run_scenario(load_scenario(SCENARIOS / name), Path(tmp) / "run",
                              run_id="records").stats
            out[name] = [*node_files_digest(Path(tmp) / "run"), len(st.deliveries),
                         st.redundant_rx, st.node_events]
    print(json.dumps(out))


def compare_records(rev: str) -> None:
    """``rev``'s records against this checkout's on every ``record_scenarios()`` run."""
    with tempfile.TemporaryDirectory() as tmp:
        old = measured(export(rev, Path(tmp)), 0, 0, what=["--measure-records"])
    new = measured(None, 0, 0, what=["--measure-records"])
    differ = sorted(name for name in new if old.get(name) != new[name])
    lines = sum(v[0] for v in new.values())
    print(f"records: {len(new)} bundled scenarios, {lines:,} lines; node files, deliveries, "
          f"redundant receptions and node-events equal to {rev}'s (rule: every one "
          f"identical): {'yes' if not differ else 'NO, ' + ', '.join(differ)}")


def export(rev: str, into: Path) -> Path:
    """The ``daemon`` and ``firmware-sim`` trees of ``rev`` (git archive) under ``into``."""
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "daemon", "firmware-sim"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def measure_hesper() -> None:
    """The 8000-node HESPER configuration with files, timed, as a JSON line."""
    hesper = load_scenario(SCENARIOS / "hesper-8000-tr100.toml")
    with tempfile.TemporaryDirectory() as tmp:
        started = time.perf_counter()
        st = run_scenario(hesper, Path(tmp) / "run").stats
        took = time.perf_counter() - started
    print(json.dumps({"took": took, "wall_s": st.wall_s, "node_events": st.node_events,
                      "records": st.records, "deliveries": len(st.deliveries)}))


def measured(tree: Path | None, nodes: int, events: int, *,
             hesper: bool = False, what: list[str] | None = None) -> dict[str, Any]:
    """A measurement in a fresh process, of ``tree``'s code (None: this checkout's)."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = f"{tree / 'daemon'}{os.pathsep}{tree / 'firmware-sim'}"
    if what is None:
        what = ["--measure-hesper"] if hesper else ["--measure", "--nodes", str(nodes),
                                                     "--events", str(events)]
    out = subprocess.run([sys.executable, __file__, *what], env=env, capture_output=True,
                         text=True, check=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def against(rev: str, rounds: int, nodes: int, events: int) -> None:
    """``rev``'s engine against this checkout's, in turns, best of ``rounds`` each."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = export(rev, Path(tmp))
        runs: dict[str, list[dict[str, Any]]] = {rev: [], "this checkout": []}
        for _ in range(rounds):
            runs[rev].append(measured(tree, nodes, events))
            runs["this checkout"].append(measured(None, nodes, events))
    keys = ("files", "parquet", "engine", "files_cpu", "parquet_cpu", "engine_cpu")
    best = {}
    for name, results in runs.items():
        best[name] = b = {k: max(r[k] for r in results) for k in keys}
        last = results[-1]
        print(f"{name}: with telemetry files {b['files']:,.0f} node-events/s (Parquet "
              f"{b['parquet']:,.0f}), engine only {b['engine']:,.0f}; per CPU second "
              f"{b['files_cpu']:,.0f} (Parquet {b['parquet_cpu']:,.0f}), engine only "
              f"{b['engine_cpu']:,.0f} (best of {rounds}; {last['node_events']:,} "
              f"node-events, {last['records']:,} records, delivered {last['delivered']}/"
              f"{last['expected']})")
    for name, results in runs.items():  # the spread behind each best
        print(f"{name}, every round, per CPU second: " + "; ".join(
            f"{k[:-4]} " + ", ".join(f"{r[k]:,.0f}" for r in results)
            for k in keys if k.endswith("_cpu")))
    old, new = best[rev], best["this checkout"]
    for unit, suffix in (("wall", ""), ("CPU", "_cpu")):
        print(f"speed-up over {rev} in this run ({unit} time, best against best): "
              f"{new['files' + suffix] / old['files' + suffix]:.2f}x with telemetry files "
              f"(JSON Lines), {new['parquet' + suffix] / old['parquet' + suffix]:.2f}x with "
              f"Parquet, {new['engine' + suffix] / old['engine' + suffix]:.2f}x engine only")
    paired = {k: statistics.median(n[k] / o[k] for o, n in zip(runs[rev], runs["this checkout"],
                                                               strict=True))
              for k in ("files_cpu", "parquet_cpu", "engine_cpu")}
    print(f"speed-up over {rev}, median of the {rounds} rounds' ratios (CPU time; each round "
          f"runs both codes back to back, so a slower minute of the machine slows both): "
          f"{paired['files_cpu']:.2f}x with telemetry files (JSON Lines), "
          f"{paired['parquet_cpu']:.2f}x with Parquet, {paired['engine_cpu']:.2f}x engine only")
    for fmt, key in (("JSON Lines", "files"), ("Parquet", "parquet")):
        print(f"this checkout, best of {rounds}, {fmt}: {verdict(new[key])} (per CPU "
              f"second {new[key + '_cpu']:,.0f})")


def verdict(rate: float) -> str:
    """The issue's target judged on one rate: met when ``rate >= TARGET`` (no tolerance;
    under load a rate is a lower bound, so "not met" may be the load's)."""
    return (f"target >= {TARGET:,} node-events/s: {'met' if rate >= TARGET else 'not met'} "
            f"({rate:,.0f})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--before", default=BEFORE,
                        help=f"git revision to compare with (default {BEFORE}; none: skip)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--hesper8000", action="store_true",
                        help="also time the 8000-node HESPER configuration (minutes)")
    parser.add_argument("--records", action="store_true",
                        help="also compare the records of the bundled scenarios with --before")
    parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--measure-records", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--measure-hesper", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure_hesper:
        measure_hesper()
        return
    if args.measure_records:
        measure_records()
        return
    if args.measure:
        measure(args.nodes, args.events)
        return
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    print(f"load before: {load()}")
    scenario, side = bench_scenario(args.nodes, args.events)
    started = time.perf_counter()
    plan = make_plan(scenario)
    warm_up()
    print(f"plan: {args.nodes} nodes on {side:.0f} m x {side:.0f} m (connected placement), "
          f"{len(plan.subscriptions)} subscriptions, {len(plan.publications)} events "
          f"in {time.perf_counter() - started:.2f} s")

    with tempfile.TemporaryDirectory() as tmp:
        before = with_files(scenario, plan, Path(tmp) / "before", "baseline (one record per "
                            "drop, per-record JSON writer)", drop_summary_s=0.0,
                            writer_cls=PerRecordWriter)
        now = with_files(scenario, plan, Path(tmp) / "now", "with telemetry files")
        columnar = with_files(scenario, plan, Path(tmp) / "pq",
                              "with telemetry files (Parquet)", writer_cls=ParquetRunWriter)

    sim = Simulation(scenario, plan=plan)
    st = sim.run()
    print(f"engine only (null sink): {st.node_events:,} node-events in {st.wall_s:.2f} s = "
          f"{st.node_events_per_s:,.0f} node-events/s")
    print(f"speed-up with telemetry files: {now / before:.2f}x over the baseline in this run "
          f"(Parquet {columnar / before:.2f}x); JSON Lines: {verdict(now)}; Parquet: "
          f"{verdict(columnar)}")

    if args.before != "none":
        against(args.before, args.rounds, args.nodes, args.events)
        if args.records:
            compare_records(args.before)

    if args.hesper8000:
        if args.before != "none":
            with tempfile.TemporaryDirectory() as tmp:
                old = measured(export(args.before, Path(tmp)), 0, 0, hesper=True)
            print(f"hesper-8000-tr100 at {args.before}: {old['took']:.1f} s with telemetry "
                  f"files, {old['node_events']:,} node-events, {old['records']:,} records, "
                  f"{old['deliveries']:,} deliveries")
        new = measured(None, 0, 0, hesper=True)
        print(f"hesper-8000-tr100: {new['took']:.1f} s with telemetry files (simulation "
              f"{new['wall_s']:.1f} s), {new['node_events']:,} node-events, "
              f"{new['records']:,} records, {new['deliveries']:,} deliveries; target <= 60 s: "
              f"{'met' if new['took'] <= 60 else 'not met'}")
    print(f"load after: {load()}")


if __name__ == "__main__":
    main()
