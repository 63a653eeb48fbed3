"""A rolling upgrade under traffic on a virtual fleet: what the applications lose.

Root only. For each protocol (default epidemic, then flooding) a fresh run ``upg`` of
``--nodes`` devices (default 20) plays ``vmesh-upgrade.toml`` (a static grid, half
the devices subscribed to everything, a steady sensor workload from all of them);
``--rollout-at`` seconds into the traffic the playbook (``site.yml``, as in the
field) upgrades meshsub to a newer build of this checkout (``<version>.post1``) a
quarter of the fleet at a time (``serial: 25%``), each batch back up (READY=1)
before the next starts. Printed per protocol:

- the rollout: its duration, batches, each daemon's downtime (systemd's timestamps)
  and the version every daemon runs at the end;
- the deliveries (``meshsim.vmesh.delivery``): what the applications were owed (every
  acknowledged event, to every matching subscription on another device) and what
  they got, for events published before the rollout (the baseline of the same run),
  during it and after it; acknowledged events the daemons have no record of.

The rule printed with each verdict: a store-carry-forward protocol (epidemic) must
lose nothing acknowledged; flooding's loss is reported (bounded by the events that
were in flight through a restarting device). Run under
``flock -x /tmp/msub-locks/cpu.lock`` (and the root lock).

    sudo .venv/bin/python bench/bench_upgrade.py [--nodes 20] [--protocols epidemic flooding]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from collections import Counter
from functools import partial
from pathlib import Path
from typing import Any

from meshsim.scenario import load_scenario
from meshsim.vmesh import lifecycle
from meshsim.vmesh.delivery import account, frames_before_restore, trace
from meshsim.vmesh.plan import NodePlan
from meshsim.vmesh.runstate import run_dir
from meshsim.vmesh.scenario_run import SCENARIO_INVENTORY, RunOptions, run_on_vmesh
from meshsim.vmesh.upgrade import newer_build, restart_times, rollout, running_versions
from meshsim.vmesh.wheelhouse import source_version
from vmesh_load import load_line, refused

REPO = Path(__file__).resolve().parents[1]
SCENARIO = REPO / "firmware-sim" / "meshsim" / "scenarios" / "vmesh-upgrade.toml"
RUN = "upg"
TRACE_MAX = 10
"""Lost deliveries traced through the subscriber's records (``delivery.trace``)."""


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted((out / "nodes").rglob("*.jsonl"))
            for line in path.read_text().splitlines()]


def scenario_for(protocol: str, nodes: int, duration: float, rate: float) -> Any:
    """The upgrade scenario (``ScenarioError`` names a bad value, e.g. traffic shorter
    than the scenario's warm-up)."""
    return load_scenario(SCENARIO, [f"nodes.count={nodes}", f"protocol.name={protocol}",
                                    f"scenario.duration_s={duration}",
                                    f"workload.generator.rate_per_s={rate}"])


def one(protocol: str, nodes: int, duration: float, rollout_at: float, rate: float,
        wheels: Path, serial: str, keep: Path | None = None) -> dict[str, Any]:
    scenario = scenario_for(protocol, nodes, duration, rate)
    seen: dict[str, Any] = {}

    def upgrade(t0: float, devmap: dict[int, NodePlan]) -> None:
        time.sleep(max(0.0, t0 + rollout_at - time.time()))
        seen["rollout"] = rollout(run_dir(RUN) / SCENARIO_INVENTORY,
                                  [d.hostname for d in devmap.values()], wheels,
                                  serial=serial, log=lambda m: print(f"upgrade: {m}", flush=True))

    def start(t0: float, devmap: dict[int, NodePlan]) -> None:
        seen["t0"] = t0
        seen["devmap"] = devmap
        seen["thread"] = threading.Thread(target=upgrade, args=(t0, devmap), daemon=True)
        seen["thread"].start()

    def end(devmap: dict[int, NodePlan]) -> None:
        seen["thread"].join()
        seen["versions"] = running_versions(list(devmap.values()))
        seen["restarts"] = restart_times(list(devmap.values()))
        seen["load"] = load_line()

    lifecycle.teardown(RUN)
    with tempfile.TemporaryDirectory(prefix="msub-upg-") as tmp:
        out = keep / protocol if keep is not None else Path(tmp) / "run"
        try:
            res = run_on_vmesh(scenario, RunOptions(
                out=out, vmesh_run=RUN, keep=True,
                log=lambda m: print(f"run: {m}", flush=True), on_start=start, on_end=end))
            ro = seen["rollout"]
            ro.downtime = seen["restarts"]
            t0 = seen["t0"]
            recs = records(res.out)
            acct = account(recs, res.agents, windows={
                "before": (t0, ro.started), "during": (ro.started, ro.ended),
                "after": (ro.ended, t0 + duration)})
            by_node = {sid: ro.downtime[d.hostname] for sid, d in seen["devmap"].items()
                       if d.hostname in ro.downtime}
            early = frames_before_restore(recs)
            traces = [trace(recs, lost, by_node, res.agents.get(lost[0]))
                      for lost in sorted(acct.lost)[:TRACE_MAX]]
        finally:
            lifecycle.teardown(RUN, purge=True)
    return {"protocol": protocol, "nodes": nodes, "rollout": ro.summary(),
            "versions": sorted(set(map(str, seen["versions"].values()))),
            "deliveries": acct.summary(), "timings": res.timings, "load": seen["load"],
            "traffic_s": duration, "rollout_at_s": rollout_at, "traces": traces,
            "early": {"daemons": len(early),
                      "frames": dict(sum(early.values(), Counter()))}}


def report(r: dict[str, Any]) -> None:
    ro, d = r["rollout"], r["deliveries"]
    print(f"\n{r['protocol']}, {r['nodes']} devices, rollout {ro['serial']} at a time from "
          f"t = {r['rollout_at_s']:g} s of {r['traffic_s']:g} s of traffic; {r['load']}")
    print(f"rollout: {ro['seconds']} s, {len(ro['batches'])} batches of "
          f"{[len(b) for b in ro['batches']]} devices, failed {ro['failed'] or 'none'}, not "
          f"reached {ro['not_reached'] or 'none'}; daemon downtime mean "
          f"{ro['downtime_s']['mean']} s, max {ro['downtime_s']['max']} s")
    print(f"versions running at the end: {r['versions']} (new build {ro['version']})")
    print(f"acknowledged {d['acknowledged']}, accepted by the daemons {d['accepted']}, "
          f"acknowledged but never accepted {d['unaccepted']}; duplicates {d['duplicates']}, "
          f"deliveries nobody was owed {d['unowed']}")
    print(f"{'published':>10} {'events':>7} {'owed':>6} {'delivered':>9} {'lost':>5} {'ratio':>7}")
    for name in ("before", "during", "after"):
        w = d["windows"][name]
        ratio = f"{w['delivered'] / w['owed']:.4f}" if w["owed"] else "n/a"
        print(f"{name:>10} {w['events']:>7} {w['owed']:>6} {w['delivered']:>9} {w['lost']:>5} "
              f"{ratio:>7}")
    print(f"{'all':>10} {'':>7} {d['owed']:>6} {d['delivered']:>9} {d['lost']:>5} "
          f"{d['delivery_ratio'] if d['delivery_ratio'] is not None else 'n/a':>7}")
    if r["protocol"] in ("epidemic",):
        ok = d["lost"] == 0 and d["unaccepted"] == 0
        print(f"verdict (store-carry-forward: nothing acknowledged lost, tolerance 0): "
              f"{'holds' if ok else 'FAILS'} (lost {d['lost']}, unaccepted {d['unaccepted']})")
    else:
        print(f"loss during the rollout: {d['windows']['during']['lost']} of "
              f"{d['windows']['during']['owed']} owed deliveries; before it (baseline of the "
              f"same run): {d['windows']['before']['lost']} of {d['windows']['before']['owed']}")
    early = r["early"]
    print(f"restarted subscribers that took frames before their subscriptions were "
          f"restored: {early['daemons']}, frames by kind: {early['frames'] or 'none'}")
    for lines in r["traces"]:  # where each lost delivery went missing (the first few)
        print("\n".join(lines))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=20)
    ap.add_argument("--protocols", nargs="+", default=["epidemic", "flooding"])
    ap.add_argument("--traffic", type=float, default=420.0, help="scenario seconds")
    ap.add_argument("--rollout-at", type=float, default=60.0, help="seconds into the traffic")
    ap.add_argument("--rate", type=float, default=1.0, help="events per second, whole fleet")
    ap.add_argument("--serial", default="25%", help="devices per batch (Ansible serial)")
    ap.add_argument("--keep", type=Path, metavar="DIR",
                    help="keep each run's artefacts (telemetry, journals, agents' reports) "
                         "in DIR/<protocol>")
    args = ap.parse_args()
    if refused("bench_upgrade", "--nodes/--protocols/--traffic/--rate",
               *(partial(scenario_for, p, args.nodes, args.traffic, args.rate)
                 for p in args.protocols)):
        return 2
    if not 0 <= args.rollout_at < args.traffic:
        print(f"bench_upgrade: --rollout-at {args.rollout_at:g} s is not within the "
              f"{args.traffic:g} s of traffic (0 <= s < --traffic)", file=sys.stderr)
        return 2
    if os.geteuid() != 0:
        print("bench_upgrade: needs root", file=sys.stderr)
        return 2
    results = []
    with tempfile.TemporaryDirectory(prefix="msub-newer-") as tmp:
        wheels = Path(tmp) / "wheels"
        version = newer_build(wheels, f"{source_version()}.post1")
        print(f"newer build: meshsub {version}; {load_line()}", flush=True)
        for protocol in args.protocols:
            results.append(one(protocol, args.nodes, args.traffic, args.rollout_at, args.rate,
                               wheels, args.serial, args.keep))
            report(results[-1])
    print(json.dumps(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
