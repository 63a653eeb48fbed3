"""``meshsim``: simulate or validate a scenario file.

User errors (bad scenario, bad expression, unknown protocol, unusable run
directory) are one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from meshsim.scenario import Scenario, ScenarioError, load_scenario, make_plan
from meshsim.telemetry_files import RunDirError
from meshsub.core.content import ContentError
from meshsub.core.params import ParameterError
from meshsub.core.registry import UnknownProtocolError

EXIT_USAGE = 2
USER_ERRORS = (ScenarioError, ContentError, ParameterError, UnknownProtocolError, RunDirError)


class UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse, but a usage error is one line (and exit 2) like every other error."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{self.prog}: {message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="meshsim", description="meshsub simulation driver")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)

    def scenario_args(p: argparse.ArgumentParser) -> None:
        p.add_argument("scenario", type=Path, help="scenario file (TOML)")
        p.add_argument("--set", dest="overrides", action="append", default=[],
                       metavar="KEY.PATH=VALUE", help="override a scenario value (TOML syntax)")
        p.add_argument("--seed", type=int, help="override scenario.seed")

    sim = sub.add_parser("simulate", help="run a scenario in the discrete-event simulator")
    scenario_args(sim)
    sim.add_argument("--out", type=Path, required=True, metavar="RUNDIR",
                     help="run directory for the telemetry (must be new or empty)")
    sim.add_argument("--run-id", help="run id in every record (default: derived from "
                                      "scenario name, seed and content)")
    sim.add_argument("--telemetry-format", choices=("jsonl", "parquet"), default="jsonl",
                     help="node-<id>.jsonl files (default) or one telemetry.parquet written "
                     "in batches (same records; mesheval reads it without JSON parsing)")
    sim.add_argument("-q", "--quiet", action="store_true",
                     help="print nothing on success (no progress either)")

    val = sub.add_parser("validate", help="check a scenario file without running it")
    scenario_args(val)

    from meshsim.vmesh.cli import add_parser as add_vmesh_parser

    add_vmesh_parser(sub, _Parser)
    run = sub.add_parser("run", help="run a scenario on the virtual mesh (root: containers)")
    scenario_args(run)
    run.add_argument("--out", type=Path, required=True, metavar="RUNDIR",
                     help="run directory for telemetry, logs and the manifest (new or empty)")
    run.add_argument("--run-id", help="run id in every record (default: scenario name, "
                                      "seed, content and the time)")
    run.add_argument("--name", default="sc", metavar="RUN",
                     help="name of the virtual-mesh run to use (1-5 of [a-z0-9]; default sc)")
    run.add_argument("--keep", action="store_true",
                     help="leave the devices up afterwards (meshsim vmesh ... --name RUN)")
    run.add_argument("-q", "--quiet", action="store_true", help="print no progress")
    sw = sub.add_parser("sweep", help="run a grid of protocols x parameters x seeds "
                                      "(docs/experiments.md)")
    sw.add_argument("sweep", type=Path, help="sweep file (TOML)")
    sw.add_argument("--out", type=Path, required=True, metavar="DIR",
                    help="sweep directory: runs/<point>/ per point, sweep.json (resumable)")
    sw.add_argument("--jobs", type=int, default=1, metavar="N",
                    help="simulations in parallel (processes; default 1)")
    sw.add_argument("--only", metavar="TEXT", action="append",
                    help="run only the points whose id contains TEXT (repeatable: any of them)")
    sw.add_argument("--seeds", type=int, metavar="N",
                    help="run only the first N seeds of every block (a quick plan; the "
                         "others stay pending and a later run adds them)")
    sw.add_argument("--dry-run", action="store_true",
                    help="list the points and whether each would run, run nothing")
    sw.add_argument("--spark", metavar="MASTER",
                    help="run the simulations as tasks of this Spark cluster (e.g. "
                         "spark://host:7077; --out must be a path every worker can write; "
                         "docs/experiments.md); under spark-submit the default")
    sw.add_argument("--name", default="sw", metavar="RUN",
                    help="virtual-mesh run name for vmesh points (default sw)")
    return parser


def _load(args: argparse.Namespace) -> Scenario:
    return load_scenario(args.scenario, args.overrides, seed=args.seed)


def cmd_validate(args: argparse.Namespace) -> int:
    scenario = _load(args)
    plan = make_plan(scenario)
    print(f"{args.scenario}: ok ({scenario.meta.name}: {len(plan.positions)} nodes, "
          f"{scenario.protocol.name}, {len(plan.subscriptions)} subscriptions, "
          f"{len(plan.publications)} publications)")
    return 0


def cmd_simulate(args: argparse.Namespace) -> int:
    from meshsim.des.progress import Progress
    from meshsim.des.run import run_scenario
    from meshsim.des.summary import outcomes, totals
    from meshsim.telemetry_parquet import writer_class

    scenario = _load(args)
    bar = None if args.quiet else Progress(f"meshsim simulate {scenario.meta.name}",
                                           scenario.end_s, unit="s simulated")
    result = run_scenario(scenario, args.out, run_id=args.run_id,
                          progress=bar.update if bar is not None else None,
                          writer_cls=writer_class(args.telemetry_format))
    if bar is not None:
        bar.finish()
    if args.quiet:
        return 0
    st = result.stats
    tot = totals(outcomes(result.plan, st))
    ratio = f"{100 * tot.delivery_ratio:.1f} %" if tot.delivery_ratio is not None else "n/a"
    kinds = ", ".join(f"{k} {v}" for k, v in sorted(st.tx.items())) or "none"
    m = scenario.meta
    print(f"scenario      {m.name} (seed {m.seed}), {scenario.protocol.name}, {st.nodes} nodes, "
          f"{scenario.end_s:g} s simulated ({m.duration_s:g} + {m.drain_s:g} drain)")
    print(f"published     {tot.published} events")
    print(f"delivered     {tot.delivered} of {tot.expected} expected ({ratio}); "
          f"{tot.unexpected} unexpected, {tot.duplicates} duplicate")
    print(f"transmitted   {sum(st.tx.values())} ({kinds}), {sum(st.tx_bytes.values())} bytes, "
          f"{st.lost} receptions lost")
    print(f"wall time     {st.wall_s:.2f} s, {st.node_events} node-events, "
          f"{st.node_events_per_s:,.0f} node-events/s")
    print(f"telemetry     {result.out} (run {result.run}, {st.records} records)")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    import os

    scenario = _load(args)
    make_plan(scenario)  # every scenario error (faults, placement) before any device exists
    if os.geteuid() != 0:
        raise UsageError("meshsim run: needs root (network namespaces, containers)")
    from meshsim.host.errors import VmeshError
    from meshsim.vmesh.scenario_run import RunOptions, agent_summary, run_on_vmesh

    def progress(msg: str) -> None:
        if not args.quiet:
            print(f"meshsim run: {msg}", file=sys.stderr, flush=True)

    try:
        res = run_on_vmesh(scenario, RunOptions(out=args.out, vmesh_run=args.name,
                                                run_id=args.run_id, keep=args.keep,
                                                log=progress))
    except VmeshError as exc:
        print(f"meshsim run: {exc}", file=sys.stderr)
        return 1
    w = agent_summary(res.agents)
    tm = res.timings
    print(f"scenario      {scenario.meta.name} (seed {scenario.meta.seed}), "
          f"{scenario.protocol.name}, {len(res.devices)} devices")
    print(f"workload      {w['subscriptions_done']} subscriptions, {w['publications_done']} "
          f"publications, {w['actions_failed']} not done; {w['deliveries_seen']} deliveries "
          "seen by the applications")
    print(f"times         bring-up {tm.get('bring_up_s', 0):.0f} s, deploy "
          f"{tm.get('deploy_s', 0):.0f} s, scenario {tm.get('scenario_s', 0):.0f} s")
    print(f"telemetry     {res.out} (run {res.run}, {res.records} records); evaluate with "
          f"mesheval {res.out} --out REPORTDIR")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from meshsim.sweep import load_sweep
    from meshsim.sweep.runner import plan_lines, run_sweep

    if args.jobs < 1:
        raise UsageError("meshsim sweep: --jobs must be at least 1")
    if args.seeds is not None and args.seeds < 1:
        raise UsageError("meshsim sweep: --seeds must be at least 1")
    spec = load_sweep(args.sweep)
    if args.dry_run:
        for line in plan_lines(spec, args.out):
            print(line)
        return 0
    spark = args.spark
    if spark is not None and not spark.strip():
        raise UsageError("meshsim sweep: --spark needs a master URL (spark://HOST:PORT, "
                         "local[N], yarn, ...)")
    if spark is not None and args.jobs != 1:
        raise UsageError("meshsim sweep: --jobs and --spark exclude each other (on Spark, "
                         "the cluster's cores decide how many points run at once)")
    if spark is None:
        from meshsim.sweep.cluster import under_spark_submit

        spark = "" if under_spark_submit() else None
    if spark is not None:
        try:
            import pyspark  # noqa: F401
        except ImportError:
            raise UsageError("meshsim sweep: --spark needs pyspark (pip install "
                             "'meshsub[eval]')") from None
    results = run_sweep(spec, args.out, jobs=args.jobs, only=args.only, seeds=args.seeds,
                        vmesh_name=args.name, spark=spark,
                        log=lambda m: print(m, flush=True))
    failed = [r for r in results.values() if r.status == "failed"]
    print(f"sweep {spec.name}: {len(results) - len(failed)} of {len(results)} points finished; "
          f"evaluate with: mesheval {args.out}")
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None) -> int:
    try:
        parser = build_parser()
        args, extra = parser.parse_known_args(argv)
        if args.command == "vmesh" and args.vmesh_command == "deploy":
            args.ansible_args = extra  # ansible-playbook's own, e.g. --tags configure
        elif extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        if args.command == "vmesh":
            from meshsim.vmesh.cli import run_cli

            return run_cli(args)
        if args.command == "run":
            return cmd_run(args)
        if args.command == "validate":
            return cmd_validate(args)
        if args.command == "sweep":
            return cmd_sweep(args)
        return cmd_simulate(args)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    except USER_ERRORS as exc:
        print(f"meshsim: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as exc:  # e.g. the disk filled up while writing telemetry
        print(f"meshsim: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("meshsim: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
