"""The demo: one scenario on the virtual mesh and in the simulator, then the evaluation.

``python -m meshsim.demo`` (what ./demo.sh runs) takes the packaged
scenarios/demo.toml and

1. simulates it (``meshsim simulate``) and explains what happened: topology,
   subscriptions, every event with its expected and actual deliveries;
2. as root, runs the same file on the virtual mesh (``meshsim run``): containers
   with systemd, meshsub deployed by the playbook, the nftables medium, random
   waypoint mobility and simulated GPS feeding each device's gpsd;
3. evaluates both runs with ``mesheval`` (Spark, ``local[2]``) into a report with
   tables and plots, and prints the headline table, simulator and virtual mesh side
   by side;
4. prints the command of the live map (``mesheval map``) on the last run, and starts
   it when the demo runs in a terminal (Ctrl-C stops it; ``--no-map`` skips it): a
   demo whose input or output is not a terminal never waits for it.

Everything lands in ./runs/demo-<timestamp>/ (``sim/``, ``vmesh/``, ``report/``) or
``--out``. Without root (or podman) the virtual-mesh step is skipped, and says so.
"""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sys
from collections.abc import Sequence
from importlib import resources
from pathlib import Path

from meshsim.cli import USER_ERRORS, UsageError, _Parser
from meshsim.des.graph import summarize
from meshsim.des.run import RunResult, run_scenario
from meshsim.des.summary import outcomes, totals
from meshsim.host.errors import VmeshError
from meshsim.radio import compute_links, make_model
from meshsim.scenario import Scenario, load_scenario
from meshsub.core.syntax import format_event


def default_scenario() -> Path:
    return Path(str(resources.files("meshsim") / "scenarios" / "demo.toml"))


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value * 1000:.1f}"


def report(result: RunResult, out: Path) -> str:
    """The human-readable account of a run (returned, so tests can read it)."""
    sc, plan, st = result.scenario, result.plan, result.stats
    lines: list[str] = []
    add = lines.append
    add(f"meshsub demo: {sc.protocol.name} on {st.nodes} simulated nodes "
        f"(scenario {sc.meta.name!r}, seed {sc.meta.seed})")
    add("")
    radio = sc.radio
    add("Topology")
    add(f"  {st.nodes} nodes, {sc.nodes.placement} placement on {sc.area.width_m:g} x "
        f"{sc.area.height_m:g} m; {radio.model} radio, range {radio.range_m:g} m, "
        f"{100 * radio.loss:g} % loss per link and frame")
    if sc.contacts is None:
        g = summarize(compute_links(plan.positions, make_model(radio), radio.links))
        diameter = f"diameter {g.diameter} hops" if g.diameter is not None else \
            f"NOT connected ({g.components} components)"
        add(f"  {g.links} links, mean degree {g.mean_degree:.1f} (min {g.min_degree}, "
            f"max {g.max_degree}), {diameter}")
    else:
        add(f"  links from {len(sc.contacts)} contact events")
    add("")
    add(f"Subscriptions ({len(plan.subscriptions)})")
    for s in plan.subscriptions:
        when = f" from t={s.t:g} s" if s.t else ""
        add(f"  node {s.node:>4}  {s.sub_id:<8} {s.expr}{when}")
    add("")
    events = outcomes(plan, st)
    add(f"Events published ({len(events)})")
    add(f"  {'t (s)':>7} {'node':>5}  {'expected':>8} {'delivered':>9} {'hops':>5} "
        f"{'latency ms mean/max':>20}  event")
    for e, pub in zip(events, st.published, strict=True):
        hops = "-" if e.mean_hops is None else f"{e.mean_hops:.1f}"
        flag = "" if e.delivered == e.expected and not e.unexpected else "  <--"
        add(f"  {e.t:7.2f} {e.node:>5}  {e.expected:>8} {e.delivered:>9} {hops:>5} "
            f"{_ms(e.mean_latency_s) + ' / ' + _ms(e.max_latency_s):>20}  "
            f"{format_event(pub.event)}{flag}")
    tot = totals(events)
    ratio = "n/a" if tot.delivery_ratio is None else f"{100 * tot.delivery_ratio:.1f} %"
    add(f"  total: {tot.delivered} of {tot.expected} expected deliveries ({ratio}), "
        f"{tot.unexpected} to non-matching subscriptions")
    add("")
    add("Duplicates")
    add(f"  {tot.duplicates} duplicate deliveries to applications; {st.redundant_rx} redundant "
        "receptions (copies of an event a node already had, suppressed by the protocol)")
    add("")
    add("Transmissions")
    for kind in sorted(st.tx):
        add(f"  {kind:<13} {st.tx[kind]:>7} transmissions {st.tx_bytes[kind]:>10,} bytes")
    add(f"  {'receptions':<13} {sum(st.rx.values()):>7}  ({st.lost} lost to the radio)")
    add("")
    add("Run")
    add(f"  {sc.end_s:g} s of virtual time in {st.wall_s:.2f} s wall, {st.node_events} "
        f"node-events ({st.node_events_per_s:,.0f}/s)")
    add(f"  telemetry: {out}/node-<id>.jsonl ({st.records} records) and "
        f"{out}/manifest.json, run id {result.run}")
    return "\n".join(lines)


def vmesh_available() -> str | None:
    """Why the virtual mesh cannot run here, or None if it can."""
    if os.geteuid() != 0:
        return "the virtual mesh needs root (network namespaces, containers)"
    missing = [t for t in ("podman", "debootstrap", "nft", "tcpdump") if shutil.which(t) is None]
    if missing:
        return f"the virtual mesh needs {', '.join(missing)} (scripts/bootstrap.sh installs them)"
    return None


def _progress(msg: str) -> None:
    print(f"  [vmesh] {msg}", flush=True)


def run_vmesh(scenario: Scenario, out: Path) -> str:
    """Run on the virtual mesh; a short account of it."""
    from meshsim.vmesh.scenario_run import RunOptions, agent_summary, run_on_vmesh

    res = run_on_vmesh(scenario, RunOptions(out=out, vmesh_run="demo", log=_progress))
    w = agent_summary(res.agents)
    tm = res.timings
    return "\n".join([
        f"Virtual mesh: {len(res.devices)} containers with systemd, meshsub deployed by "
        "deploy/ansible/site.yml",
        f"  bring-up {tm.get('bring_up_s', 0):.0f} s, playbook {tm.get('deploy_s', 0):.0f} s, "
        f"scenario {tm.get('scenario_s', 0):.0f} s; medium updates: "
        f"{res.manifest['stats']['medium'].get('updates')} (median "
        f"{res.manifest['stats']['medium'].get('update_median_s')} s)",
        f"  applications: {w['subscriptions_done']} subscriptions and "
        f"{w['publications_done']} events acknowledged by the local brokers "
        f"({w['actions_failed']} not done), {w['deliveries_seen']} deliveries received",
        f"  telemetry: {out}/nodes/<id>/ ({res.records} records), journals in {out}/logs/, "
        f"run id {res.run}",
    ])


MAP_PORT = 8765


def open_map(rundir: Path, status: int, *, start: bool, port: int = MAP_PORT) -> int:
    """Print the live map's command for ``rundir``; run it when a person is watching.

    The map serves until Ctrl-C, so it starts only when both stdin and stdout are
    terminals: a scripted or CI demo prints the command and ends.
    """
    print(f"\nLive map of this run (replay with a time slider):\n"
          f"  mesheval map {rundir} --port {port}\n"
          f"  then open http://127.0.0.1:{port}/ (docs/operations.md, \"Live map\")",
          flush=True)
    if not (start and sys.stdin.isatty() and sys.stdout.isatty()):
        return status
    from mesheval.livemap.server import map_main

    print("Starting it now; Ctrl-C stops it.", flush=True)
    map_status = map_main([str(rundir), "--port", str(port)])
    return status or map_status


def main(argv: Sequence[str] | None = None) -> int:
    parser = _Parser(prog="meshsim.demo", description=__doc__.splitlines()[0])
    parser.add_argument("--scenario", type=Path, default=None, help="scenario file "
                        "(default: the packaged scenarios/demo.toml)")
    parser.add_argument("--out", type=Path, help="output directory (default ./runs/demo-<time>)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY.PATH=VALUE")
    parser.add_argument("--seed", type=int)
    parser.add_argument("--tier", choices=("auto", "sim", "vmesh"), default="auto",
                        help="sim: simulator only; vmesh: also the virtual mesh (root); "
                             "auto: the virtual mesh where it can run")
    parser.add_argument("--no-report", action="store_true",
                        help="skip the Spark evaluation and its report")
    parser.add_argument("--no-map", action="store_true",
                        help="do not start the live map at the end (its command is printed)")
    parser.add_argument("--map-port", type=int, default=MAP_PORT, metavar="PORT",
                        help="port of the live map (default: %(default)s; 0: any free port)")
    try:
        args = parser.parse_args(argv)
        scenario = load_scenario(args.scenario or default_scenario(), args.overrides,
                                 seed=args.seed)
        why_not = vmesh_available() if args.tier != "sim" else "--tier sim"
        if args.tier == "vmesh" and why_not:
            raise UsageError(f"meshsim.demo: {why_not}")
        stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S")
        out = args.out or Path("runs") / f"demo-{stamp}"
        result = run_scenario(scenario, out / "sim")
        print(report(result, out / "sim"))
        rundirs = [out / "sim"]
        print()
        if why_not is None:
            print("Running the same scenario on the virtual mesh (the first run builds the "
                  "device image: a few minutes)", flush=True)
            print(run_vmesh(scenario, out / "vmesh"))
            rundirs.append(out / "vmesh")
        else:
            print(f"Virtual mesh skipped: {why_not}")
        status = 0
        if not args.no_report:
            from mesheval.cli import main as mesheval_main

            print("\nEvaluation (mesheval, Spark local[2]):", flush=True)
            status = mesheval_main([*map(str, rundirs), "--out", str(out / "report")])
        return open_map(rundirs[-1], status, start=not args.no_map, port=args.map_port)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    except USER_ERRORS as exc:
        print(f"meshsim.demo: {exc}", file=sys.stderr)
        return 2
    except VmeshError as exc:
        print(f"meshsim.demo: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
