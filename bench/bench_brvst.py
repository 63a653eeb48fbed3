"""BRVST's simulation cost: CPU seconds per simulated second, before and after (issue 18).

The paper's set-up (``brvst-400.toml``: 400 walking nodes, 16 grids, 200 subscriptions
and 200 publications a minute) run for ``--duration`` simulated seconds (warm-up
``--warmup``) in fresh processes taking turns: the code of ``--before`` (a git revision,
``git archive`` of its ``daemon`` and ``firmware-sim``, as bench/bench_sim.py does) and
this checkout's, ``--rounds`` times each, every run into Parquet telemetry (``--sink
null``: engine only, the protocol's and the engine's cost without a writer).
Every figure is printed with the load average read just before its run: on a shared
machine only the ratios of one invocation compare (take the cpu lock, DEVELOPERS.md).

``--records`` runs the bundled BRVST scenarios (``RECORD_SCENARIOS``) and the paper's
set-up shortened to ``--duration`` with both codes and says whether their node files
(lines and SHA-256 of the JSON Lines records), deliveries and node-events are equal.

``--set KEY=VALUE`` adds scenario overrides to every run (a proposal's figures, e.g.
``--set protocol.brvst.reliable_control=false``); ``--protocol flooding`` measures the
reference on the same scenario (TTL 32, as experiments/brvst.sweep.toml runs it).

    python bench/bench_brvst.py [--before REV|none] [--rounds 2] [--duration 120]
                                [--warmup 60] [--sink parquet|null] [--protocol brvst|flooding]
                                [--records] [--set K=V ...]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_sim import export

REPO = Path(__file__).resolve().parents[1]
SCENARIOS = REPO / "firmware-sim" / "meshsim" / "scenarios"
PAPER = SCENARIOS / "brvst-400.toml"
RECORD_SCENARIOS = ("brvst-lattice.toml", "vmesh-brvst-walk.toml")
"""The bundled BRVST scenarios besides the paper's set-up (which ``--records`` shortens)."""


def overrides(duration: float, warmup: float, extra: list[str]) -> list[str]:
    return [f"scenario.duration_s={duration}", f"scenario.warmup_s={warmup}", *extra]


def measure(duration: float, warmup: float, extra: list[str], sink: str) -> None:
    """One run, timed in CPU seconds of this process (set-up, run, the last flush), as a
    JSON line; the code is whichever ``meshsub``/``meshsim`` this process imports.
    ``sink``: ``parquet`` (the plan's telemetry) or ``null`` (engine only, no writer).
    One run per process: the ARV memo of a first run would speed up a second."""
    from meshsim.des.engine import Simulation
    from meshsim.des.run import run_scenario
    from meshsim.des.summary import outcomes, totals
    from meshsim.scenario import load_scenario, make_plan
    from meshsim.telemetry_parquet import ParquetRunWriter

    scenario = load_scenario(PAPER, overrides(duration, warmup, extra))
    plan = make_plan(scenario)
    with tempfile.TemporaryDirectory() as tmp:
        started = time.process_time()
        if sink == "parquet":
            stats = run_scenario(scenario, Path(tmp) / "run", plan=plan,
                                 writer_cls=ParquetRunWriter).stats
        else:
            stats = Simulation(scenario, plan=plan).run()
        cpu_s = time.process_time() - started
    tot = totals(outcomes(plan, stats))
    print(json.dumps({"delivered": tot.delivered, "expected": tot.expected,
                      "simulated_s": scenario.end_s, "cpu_s": cpu_s,
                      "node_events": stats.node_events, "records": stats.records,
                      "deliveries": len(stats.deliveries), "tx": sum(stats.tx.values()),
                      "tx_by_kind": dict(sorted(stats.tx.items()))}))


def measure_records(duration: float, warmup: float) -> None:
    """Node-file digests, deliveries and node-events of every compared run, as a JSON line."""
    from meshsim.des.run import run_scenario
    from meshsim.scenario import load_scenario
    from meshsim.telemetry_files import node_files_digest

    runs = {name: load_scenario(SCENARIOS / name) for name in RECORD_SCENARIOS}
    runs[f"brvst-400 ({duration:g} s)"] = load_scenario(PAPER, overrides(duration, warmup, []))
    out = {}
    for name, scenario in runs.items():
        with tempfile.TemporaryDirectory() as tmp:
            st = run_scenario(scenario, Path(tmp) / "run", run_id="records").stats
            out[name] = [*node_files_digest(Path(tmp) / "run"), len(st.deliveries),
                         st.node_events]
    print(json.dumps(out))


def in_process(tree: Path | None, what: list[str]) -> dict[str, Any]:
    """A measurement in a fresh process, of ``tree``'s code (None: this checkout's)."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = f"{tree / 'daemon'}{os.pathsep}{tree / 'firmware-sim'}"
    out = subprocess.run([sys.executable, __file__, *what], env=env, capture_output=True,
                         text=True, check=True).stdout
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    return result


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load {one:.2f} {five:.2f} {fifteen:.2f}"


def against(rev: str | None, args: argparse.Namespace) -> None:
    """``rev``'s code against this checkout's, in turns, ``args.rounds`` times each."""
    what = ["--measure", "--duration", str(args.duration), "--warmup", str(args.warmup),
            "--sink", args.sink, *(f"--set={s}" for s in args.set)]
    print(f"uptime: {load()}; brvst-400 for {args.duration:g} s simulated (warm-up "
          f"{args.warmup:g} s), telemetry {args.sink}, overrides {args.set or 'none'}")
    with tempfile.TemporaryDirectory() as tmp:
        trees: dict[str, Path | None] = {"this checkout": None}
        if rev is not None:
            trees = {rev: export(rev, Path(tmp)), **trees}
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
        for r in range(args.rounds):
            for name, tree in trees.items():
                before = load()
                res = in_process(tree, what)
                runs[name].append(res)
                sim = res["simulated_s"]
                print(f"round {r + 1}, {name}: {res['cpu_s'] / sim:.3f} CPU s per simulated "
                      f"s ({before}; {res['cpu_s']:.1f} CPU s, {res['node_events']:,} "
                      f"node-events, {res['tx']:,} transmissions {res['tx_by_kind']}, "
                      f"delivered {res['delivered']:,} of {res['expected']:,} expected)",
                      flush=True)
    for name, results in runs.items():
        sim = results[0]["simulated_s"]
        print(f"{name}: best of {len(results)}: "
              f"{min(r['cpu_s'] for r in results) / sim:.3f} CPU s per simulated s")
    if rev is not None:
        pairs = list(zip(runs[rev], runs["this checkout"], strict=True))
        paired = statistics.median(o["cpu_s"] / n["cpu_s"] for o, n in pairs)
        print(f"speed-up over {rev}, median of the rounds' ratios (each round runs both "
              f"codes back to back): {paired:.2f}x")
        same = all(o[k] == n[k] for o, n in pairs
                   for k in ("node_events", "records", "deliveries", "tx_by_kind"))
        print(f"node-events, records, deliveries and transmissions by kind equal in every "
              f"round (rule: identical): {'yes' if same else 'NO'}")
    print(f"uptime: {load()}")


def compare_records(rev: str, args: argparse.Namespace) -> None:
    """``rev``'s records against this checkout's on the compared runs."""
    what = ["--measure-records", "--duration", str(args.duration), "--warmup",
            str(args.warmup)]
    with tempfile.TemporaryDirectory() as tmp:
        old = in_process(export(rev, Path(tmp)), what)
    new = in_process(None, what)
    for name in new:
        o, n = old.get(name), new[name]
        print(f"{name}: {n[0]:,} record lines, {n[2]:,} deliveries, {n[3]:,} node-events; "
              f"equal to {rev}'s (rule: lines, SHA-256, deliveries, node-events identical): "
              f"{'yes' if o == n else f'NO ({o} against {n})'}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--before", default="main", help="git revision to compare ('none': only "
                    "this checkout)")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--duration", type=float, default=120.0)
    ap.add_argument("--warmup", type=float, default=60.0)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--protocol", choices=("brvst", "flooding"), default="brvst")
    ap.add_argument("--sink", choices=("parquet", "null"), default="parquet")
    ap.add_argument("--records", action="store_true")
    ap.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--measure-records", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.duration <= 0 or not 0 <= args.warmup < args.duration or args.rounds < 1:
        ap.error("needs --duration > --warmup >= 0 and --rounds >= 1")
    if args.protocol == "flooding":
        args.set += ['protocol.name="flooding"', "protocol.flooding.ttl=32"]
    if args.measure:
        measure(args.duration, args.warmup, args.set, args.sink)
    elif args.measure_records:
        measure_records(args.duration, args.warmup)
    elif args.records:
        compare_records(args.before, args)
    else:
        against(None if args.before == "none" else args.before, args)


if __name__ == "__main__":
    main()
