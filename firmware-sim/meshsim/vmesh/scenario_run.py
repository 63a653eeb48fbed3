"""``meshsim run``: a scenario file on the virtual mesh, with real daemons and wall-clock time.

The same file runs under ``meshsim simulate``; here every node is a container with
systemd, meshsub is deployed by the playbook as on a Pi fleet, the medium gives each
directed pair of nodes the radio model's verdict, mobility moves nodes (the medium
follows each tick, and the simulated GPS feeds each device's gpsd), and the workload
is played by each device's applications over MQTT. The run:

1. validates the scenario and plans it (the simulator's plan: same positions,
   subscriptions and publications);
2. brings up the devices from the baked image (reusing a healthy run of the same
   size, or with ``reuse_larger`` the first N devices of a larger one), wipes what
   an earlier run left on reused devices (and stops the daemons of devices this
   scenario does not use), installs the medium with the start positions and starts
   the GPS feed, then deploys with the playbook's ``configure`` tasks (each device's
   configuration and keys; meshsub itself is in the image);
3. waits until the daemons see their radio neighbours, fixes ``t0`` and starts
   the agents, the mobility clock and contact replay;
4. at ``t0 + duration + drain`` stops the daemons (their spool files close) and
   collects telemetry, journals, agent reports and the mobility and medium logs
   into RUNDIR, writes ``manifest.json`` (tier ``vmesh``, ``t0_ns``) and tears
   down unless asked to keep the devices.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meshsim.des.engine import default_run_id
from meshsim.gps.feeder import GpsFeeder
from meshsim.host.errors import VmeshError
from meshsim.medium import Medium, delay_config, htb
from meshsim.mobility import Trajectories, trajectories_for, write_mobility_log
from meshsim.radio import make_model
from meshsim.scenario.model import Scenario, to_plain
from meshsim.scenario.plan import Plan, make_plan, manifest_facts
from meshsim.telemetry_files import atomic_write_text, base_manifest, prepare_run_dir
from meshsim.vmesh import deploy, devices, lifecycle, nodes
from meshsim.vmesh.faults import VmeshFaults
from meshsim.vmesh.inventory import GPSD_UDP_PORT, write_inventory
from meshsim.vmesh.plan import NodePlan
from meshsim.vmesh.roles import role_host_vars
from meshsim.vmesh.timeline import Timeline
from meshsim.workload.schedule import schedules
from meshsub.core.geo import LocalFrame
from meshsub.core.params import params_to_dict

Log = Callable[[str], None]
MAX_DEVICES = 250
SCENARIO_INVENTORY = "scenario-inventory.yml"
BEACON_INTERVAL_S = 2.0
AGENT_START_WORKERS = 32
"""Agent starts at once (two ``podman exec`` each); ``t0`` leaves time for the slowest."""


@dataclass
class RunOptions:
    out: Path
    vmesh_run: str = "sc"
    run_id: str | None = None
    keep: bool = False
    settle_timeout_s: float = 60.0
    """How long to wait for the daemons to see their radio neighbours before t0."""
    lead_s: float = 2.0
    """Between starting the agents and t0 (they must be listening when it begins)."""
    log: Log = field(default=lambda _m: None)
    on_start: Callable[[float, dict[int, NodePlan]], None] | None = None
    """Called with t0 and the devices once the workload is scheduled (tests, captures)."""
    on_end: Callable[[dict[int, NodePlan]], None] | None = None
    """Called with the devices when the scenario's time is over, before the daemons stop
    (a test waits here for what it began in ``on_start``)."""
    reuse_larger: bool = False
    """Run on the first N devices of a larger healthy run (a test session's fleet)."""
    inventory_vars: dict[str, Any] = field(default_factory=dict)
    """More group variables for the devices' configuration (e.g. the live telemetry topic
    and a collector bridge: docs/operations.md, "A fleet on one map")."""


@dataclass
class VmeshRunResult:
    run: str
    out: Path
    plan: Plan
    devices: dict[int, str]
    t0: float
    timings: dict[str, float]
    agents: dict[int, dict[str, Any] | None]
    records: int
    manifest: dict[str, Any]


def _device_map(plan: Plan, vplan_nodes: tuple[NodePlan, ...]) -> dict[int, NodePlan]:
    """Scenario node ids, in order, onto devices 1..N."""
    return dict(zip(sorted(plan.positions), vplan_nodes, strict=True))


class ScenarioClock:
    """Scenario time from the wall clock; 0 until ``t0`` is fixed (start positions hold)."""

    def __init__(self) -> None:
        self.t0: float | None = None

    def now(self) -> float:
        return 0.0 if self.t0 is None else max(0.0, time.time() - self.t0)


def run_on_vmesh(scenario: Scenario, opts: RunOptions) -> VmeshRunResult:
    """Run ``scenario`` on containers; see the module docstring."""

    plan = make_plan(scenario)
    count = len(plan.positions)
    if count > MAX_DEVICES:
        raise VmeshError(f"{count} nodes: the virtual mesh runs at most {MAX_DEVICES} devices "
                         "(use meshsim simulate for more)")
    out = prepare_run_dir(opts.out)
    run = opts.run_id or f"{default_run_id(scenario)}-vm{time.strftime('%H%M%S')}"
    log = opts.log
    timings: dict[str, float] = {}
    started = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    trajectories = trajectories_for(scenario, plan)
    write_mobility_log(trajectories, out / "mobility.log")
    timeline = Timeline.of(scenario, trajectories, tuple(sorted(plan.positions)))
    clock = ScenarioClock()
    faults = VmeshFaults({}, timeline, lambda: clock.t0)

    t = time.monotonic()
    arches = scenario.nodes.arch or None
    if arches is not None and len(arches) > 1:  # by node id: the devices in the plan's order
        by_id = dict(zip(scenario.nodes.ids, arches, strict=True))
        arches = tuple(by_id[sid] for sid in sorted(plan.positions))
    up = lifecycle.up(count, opts.vmesh_run, protocol=scenario.protocol.name,
                      reuse_larger=opts.reuse_larger, arch=arches, log=log)
    timings["prepare_s"] = up.prepare_s  # wheelhouse, image (a bake if its inputs changed)
    timings["bring_up_s"] = time.monotonic() - t - up.prepare_s
    devmap = _device_map(plan, up.devices)
    faults.devmap = devmap
    faults.install(plan.faults, plan.absent)  # absent nodes start without links
    medium = Medium(netns=up.plan.medium_netns,
                    ports={sid: dev.medium_port for sid, dev in devmap.items()},
                    model=make_model(scenario.radio), overrides=scenario.radio.links)
    feeder = None
    try:
        t = time.monotonic()
        if up.reused:  # fresh devices from the image have nothing to forget
            devices.each(up.plan.nodes, lambda dev: devices.reset(dev.container))
        timings["reset_s"] = time.monotonic() - t
        medium.install()
        start_links = timeline.apply_start(medium)
        delay = delay_config(scenario.radio)
        if delay is not None:
            medium.start_delay(delay)
        for dev in up.plan.nodes:  # a radio serialises at the transmitter
            if scenario.radio.bitrate_bps is not None and dev in up.devices:
                htb.set_rate(dev.netns, "mesh0", scenario.radio.bitrate_bps)
            elif up.reused:  # an earlier scenario's rate must not slow this one down
                htb.clear_rate(dev.netns, "mesh0")
        if scenario.gps.enabled:
            feeder = _gps_feeder(scenario, devmap, trajectories, clock, out)
            feeder.start()
        t = time.monotonic()
        inventory = _write_inventory(scenario, plan, up, devmap, run, opts.inventory_vars)
        deployment = deploy.deploy(inventory, "--tags", "configure")
        timings["deploy_s"] = time.monotonic() - t
        log(f"deployed to {count} devices in {timings['deploy_s']:.1f} s "
            f"({deployment.changed} changes)")

        t = time.monotonic()
        settled = _settle(devmap, start_links, opts.settle_timeout_s, log,
                          positions=scenario.gps.enabled)
        timings["settle_s"] = time.monotonic() - t
        t0, settled["agents"] = start_agents(devmap, plan, scenario.end_s, opts.lead_s, log)
        clock.t0 = t0  # the feeder's positions follow the clock from now on
        if opts.on_start is not None:
            opts.on_start(t0, devmap)
        log(f"t0 = {dt.datetime.fromtimestamp(t0).isoformat(timespec='seconds')}; running "
            f"{scenario.meta.duration_s:g} s + {scenario.meta.drain_s:g} s drain")
        medium_stats = timeline.play(medium, t0, scenario.end_s)
        if delay is not None:
            held = medium.stop_delay()
            medium_stats["delayed_packets"] = held.released if held is not None else None
        timings["scenario_s"] = time.time() - t0
        if opts.on_end is not None:
            opts.on_end(devmap)
        if feeder is not None:
            feeder.stop()
            feeder = None

        t = time.monotonic()
        agents, records = _collect(devmap, out, log)
        timings["collect_s"] = time.monotonic() - t
        medium_stats["faults"] = faults.done
        manifest = _manifest(scenario, run, plan, started, t0, timings, settled, medium_stats,
                             agents, records, devmap, opts)
        atomic_write_text(out / "manifest.json", json.dumps(manifest, indent=2) + "\n")
        return VmeshRunResult(run, out, plan, {s: d.container for s, d in devmap.items()}, t0,
                              timings, agents, records, manifest)
    finally:
        if feeder is not None:
            feeder.stop()
        if not opts.keep:
            medium.remove()
            lifecycle.teardown(opts.vmesh_run, log=log)


def start_agents(devmap: dict[int, NodePlan], plan: Plan, end_s: float, lead_s: float,
                 log: Log) -> tuple[float, dict[str, float]]:
    """Fix ``t0`` and start every device's workload agent, all at once; returns ``t0``.

    An agent runs the actions that fell due before it started at once, so one that
    starts after ``t0`` subscribes late and misses events it was meant to get. Started
    one after another, 20 agents took about 2 s each on a loaded 2-core host (two
    ``podman exec`` each): the last subscribed 41 s late. So the exec latency is
    measured on every device first, ``t0`` leaves three times the slowest for the
    two execs of a start, and the starts run in parallel. A start that still ends
    after ``t0`` is logged and recorded (``late_s``).
    """
    with ThreadPoolExecutor(max_workers=max(1, min(len(devmap), AGENT_START_WORKERS))) as pool:
        t = time.monotonic()
        list(pool.map(lambda dev: nodes.exec_in(dev.container, ["true"]), devmap.values()))
        probe = time.monotonic() - t
        t0 = time.time() + lead_s + 3.0 * probe
        scheds = schedules(plan, t0=t0, end_s=end_s, nodes=list(devmap))
        list(pool.map(lambda item: devices.start_agent(devmap[item[0]].container,
                                                       item[1].to_json()), scheds.items()))
    late = time.time() - t0
    if late > 0:
        log(f"the workload agents started {late:.1f} s after t0: early actions run late")
    return t0, {"exec_probe_s": round(probe, 3), "late_s": round(max(0.0, late), 3)}


def _gps_feeder(scenario: Scenario, devmap: dict[int, NodePlan], trajectories: Trajectories,
                clock: ScenarioClock, out: Path) -> GpsFeeder:
    """Each device's gpsd fed from the true trajectory; start positions until t0."""
    (out / "_gps").mkdir()
    return GpsFeeder(
        targets={sid: (dev.mgmt_ip, GPSD_UDP_PORT) for sid, dev in devmap.items()},
        frame=LocalFrame(scenario.area.origin_lat, scenario.area.origin_lon),
        position=lambda node, _t: trajectories.position(node, clock.now()),
        settings=scenario.gps, seed=scenario.meta.seed, log_path=out / "_gps" / "fixes.jsonl")


def _write_inventory(scenario: Scenario, plan: Plan, up: lifecycle.UpResult,
                     devmap: dict[int, NodePlan], run: str,
                     extra_vars: dict[str, Any]) -> Path:
    """The run's inventory with this scenario's node ids, positions and protocol."""
    host_vars: dict[str, dict[str, Any]] = {}
    roles = role_host_vars(scenario, list(devmap))
    for sid, dev in devmap.items():
        x, y = plan.positions[sid]
        host_vars[dev.hostname] = {"meshsub_node_id": sid,
                                   "meshsub_static_position": {"x": x, "y": y}, **roles[sid]}
    group_vars = {
        "meshsub_protocol": scenario.protocol.name,
        "meshsub_protocol_params": {k: v for k, v in params_to_dict(scenario.protocol.params)
                                    .items() if v is not None},  # unset: the default
        "meshsub_location_source": "gpsd" if scenario.gps.enabled else "static",
        "meshsub_origin": {"lat": scenario.area.origin_lat, "lon": scenario.area.origin_lon},
        "meshsub_payload_size": scenario.radio.payload_size,
        "meshsub_telemetry_run": run,
        "meshsub_telemetry_state_every_s": scenario.meta.state_every_s,
        "meshsub_beacon_interval": BEACON_INTERVAL_S,
        **extra_vars,
    }
    used = dataclasses.replace(up.plan, nodes=tuple(devmap.values()))  # only these deploy
    arches = {n.hostname: a for n, a in zip(up.plan.nodes, up.arches, strict=False)}
    return write_inventory(used, up.rundir, scenario.protocol.name, name=SCENARIO_INVENTORY,
                           host_vars=host_vars, group_vars=group_vars, writer="meshsim run",
                           arches=arches)


def _settle(devmap: dict[int, NodePlan], expected: dict[int, set[int]], timeout_s: float,
            log: Log, *, positions: bool = False) -> dict[str, Any]:
    """Wait until each daemon lists its radio neighbours and, with ``positions`` (the
    scenario's simulated GPS), has a position fix (or the time is up; recorded).

    Without the fix a run would begin with devices that do not know where they are:
    a location-aware protocol then spends its first seconds of the scenario on
    start-up (a GIANT broker advertises only once it knows its cell; on a busy host
    a fix can come seconds after the daemon's start), and t0 is when the scenario's
    timeline assumes a ready fleet."""
    deadline = time.monotonic() + timeout_s
    missing: dict[int, set[int]] = {s: set(n) for s, n in expected.items() if n}
    unfixed: set[int] = set(devmap) if positions else set()

    def still_missing(sid: int) -> set[int]:
        seen = devices.ctl_json(devmap[sid].container, "neighbors")
        have = {int(n["node"]) for n in seen} if isinstance(seen, list) else set()
        return expected[sid] - have

    def has_fix(sid: int) -> bool:
        status = devices.ctl_json(devmap[sid].container, "status")
        return isinstance(status, dict) and status.get("position") is not None

    while True:
        asked = sorted(missing)
        for sid, left in zip(asked, devices.each(asked, still_missing), strict=True):
            missing[sid] = left
            if not left:
                del missing[sid]
        asked = sorted(unfixed)
        unfixed -= {sid for sid, fix in zip(asked, devices.each(asked, has_fix), strict=True)
                    if fix}
        if not (missing or unfixed) or time.monotonic() > deadline:
            break
        time.sleep(1.0)
    if missing:
        log(f"{len(missing)} daemons still miss radio neighbours after {timeout_s:g} s: "
            + ", ".join(f"{s}: {sorted(m)}" for s, m in sorted(missing.items())[:5]))
    if unfixed:
        log(f"{len(unfixed)} daemons have no position fix after {timeout_s:g} s: "
            + ", ".join(str(s) for s in sorted(unfixed)[:10]))
    return {"complete": not (missing or unfixed),
            "missing": {str(s): sorted(m) for s, m in missing.items()},
            "unfixed": sorted(unfixed)}


def _collect(devmap: dict[int, NodePlan], out: Path,
             log: Log) -> tuple[dict[int, dict[str, Any] | None], int]:
    """Stop agents and daemons; copy telemetry, journals and agent reports into ``out``."""
    deadline = time.monotonic() + 30.0

    def agent_done(dev: NodePlan) -> None:  # agents end on their own at end_s
        while devices.agent_running(dev.container) and time.monotonic() < deadline:
            time.sleep(0.5)
        if devices.agent_running(dev.container):
            devices.stop_agent(dev.container)  # SIGTERM: the report is still written

    devices.each(devmap.values(), agent_done)
    logs, workload = out / "logs", out / "workload"
    logs.mkdir(exist_ok=True)
    workload.mkdir(exist_ok=True)

    def collect_one(item: tuple[int, NodePlan]) -> tuple[dict[str, Any] | None, int]:
        sid, dev = item
        devices.stop_daemon(dev.container)
        folder = out / "nodes" / str(sid)
        devices.collect_spool(dev.container, folder, dev.node_id)
        lines = sum(p.read_bytes().count(b"\n") for p in folder.glob("*.jsonl"))
        (logs / f"meshsubd-{sid}.log").write_text(devices.journal(dev.container))
        report = devices.agent_report(dev.container)
        if report is not None:
            (workload / f"agent-{sid}.json").write_text(json.dumps(report))
        return report, lines

    results = devices.each(devmap.items(), collect_one)
    agents = {sid: report for sid, (report, _) in zip(devmap, results, strict=True)}
    records = sum(lines for _, lines in results)
    missing = sorted(s for s, a in agents.items() if a is None)
    if missing:
        log(f"no workload report from nodes {missing} (their actions are unknown)")
    log(f"collected {records} records from {len(devmap)} devices")
    return agents, records


def agent_summary(agents: dict[int, dict[str, Any] | None]) -> dict[str, Any]:
    """What the applications did and saw, from the agents' reports."""
    actions = [a for r in agents.values() if r for a in r.get("actions", [])]
    return {
        "reports_missing": sorted(s for s, r in agents.items() if r is None),
        "subscriptions_done": sum(1 for a in actions if a["op"] == "sub" and a.get("done")),
        "unsubscriptions_done": sum(1 for a in actions
                                    if a["op"] == "unsub" and a.get("done")),
        "publications_done": sum(1 for a in actions if a["op"] == "pub" and a.get("done")),
        "actions_failed": sum(1 for a in actions if not a.get("done")),
        "deliveries_seen": sum(len(r.get("deliveries", [])) for r in agents.values() if r),
    }


def _manifest(scenario: Scenario, run: str, plan: Plan, started: str, t0: float,
              timings: dict[str, float], settled: dict[str, Any], medium_stats: dict[str, Any],
              agents: dict[int, dict[str, Any] | None], records: int,
              devmap: dict[int, NodePlan], opts: RunOptions) -> dict[str, Any]:
    manifest = base_manifest(
        run=run, scenario_name=scenario.meta.name, seed=scenario.meta.seed,
        protocol=scenario.protocol.name, params=params_to_dict(scenario.protocol.params),
        warmup_s=scenario.meta.warmup_s, nodes=len(plan.positions),
        scenario=to_plain(scenario), document=scenario.source,
        overrides=list(scenario.overrides), tier="vmesh")
    manifest.update(manifest_facts(scenario, plan))
    manifest.update({
        "started": started,
        "t0_ns": round(t0 * 1e9),
        "range_m": scenario.radio.range_m,
        "duration_s": scenario.meta.duration_s,
        "drain_s": scenario.meta.drain_s,
        "records": records,
        "devices": {str(s): d.container for s, d in devmap.items()},
        "vmesh_run": opts.vmesh_run,
        "stats": {
            "timings_s": {k: round(v, 2) for k, v in timings.items()},
            "settle": settled,
            "medium": medium_stats,
            "workload": agent_summary(agents),
        },
    })
    return manifest
