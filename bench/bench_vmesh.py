"""Figures of the virtual fleet: bring-up, deployment, convergence, CPU and memory per device.

Root only. For each size (default 20, 50 and 100 devices) a fresh run ``bench`` plays
``vmesh-rwp-load.toml`` (random waypoint, simulated GPS into every gpsd, flooding a
sensor workload) with ``meshsim run``'s code for ``--traffic`` seconds, and prints:

- bring-up: networks, containers from the baked image, sshd and systemd up;
- deployment: ``site.yml --tags configure`` (each device's configuration and keys,
  the service started; meshsub itself is baked into the image);
- convergence: until every daemon lists the radio neighbours the scenario gives it;
- CPU per device (its cgroup: systemd, mosquitto, gpsd, meshsubd, the workload agent)
  and the runner's per device (medium ticks, nft, GPS feeder), working-set memory per
  device under the traffic and at rest.

The baseline, measured in the same run (``--baseline N``, default 20; 0 skips it): N
devices from the bare base image deployed with the full ``site.yml`` over SSH, the way
every fleet was deployed before the baked image (the playbook's first run installs
the venv and meshsub on every device). ``--before REF`` runs the first size (or
``--before-nodes``), in the same run, with the code and roles of git revision REF
(a temporary worktree: its own bench script, wheelhouse, baked image and playbook),
so a change to the deployment is shown before and after on the same host under the
same load.
``--profile`` prints, per playbook task, how many devices it changed and the CPU
it cost on the devices and on the controller (bench/ansible_callbacks). The host's
own load is measured before the runs and its load average printed beside every
figure: run this under
``flock -x /tmp/msub-locks/cpu.lock`` (and the root lock), other work on the host
slows every figure down.

    sudo .venv/bin/python bench/bench_vmesh.py [--nodes 20 50 100] [--traffic 60]
        [--baseline N] [--before REF] [--profile]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import Any

from meshsim.vmesh import bake, deploy, lifecycle
from meshsim.vmesh.usage import host_busy_share
from meshsim.vmesh.wheelhouse import build_wheelhouse
from vmesh_load import load_line, load_run, refused, scenario_for

RUN = "bench"
BASELINE_RUN = "bnchb"
READY = ("bring_up_s", "reset_s", "deploy_s", "settle_s")
REPO = Path(__file__).resolve().parents[1]
CALLBACKS = REPO / "bench" / "ansible_callbacks"
PACKAGE_DIRS = ("firmware-sim", "daemon", "workload", "telemetry", "bench")


READY_TARGET_S = 300.0
"""Issue 15: a fleet up, deployed and converged (every daemon lists its radio
neighbours) in at most 5 minutes on this 2-core machine."""


def ready_verdict(nodes: int, ready_s: float, converged: bool) -> str:
    """The issue's verdict for one size, with its rule (tolerance 0)."""
    met = converged and ready_s <= READY_TARGET_S
    return (f"verdict, {nodes} devices (ready = bring-up + deployment + convergence <= "
            f"{READY_TARGET_S:g} s and every daemon converged; tolerance 0): "
            f"{'met' if met else 'NOT met'} (ready {ready_s:.1f} s, "
            f"{'converged' if converged else 'not converged'})")


def profile_env(out: Path) -> dict[str, str]:
    """The environment that makes every playbook of a load run write its task profile."""
    return {"ANSIBLE_CALLBACK_PLUGINS": str(CALLBACKS),
            "ANSIBLE_CALLBACKS_ENABLED": "msub_task_profile",
            "MSUB_TASK_PROFILE": str(out), "MSUB_TASK_PROFILE_RUN": RUN}


def print_profile(label: str, path: Path) -> None:
    """Per task: devices changed, wall time, devices' and controller's CPU (s)."""
    if not path.exists():
        print(f"{label}: no task profile", flush=True)
        return
    prof = json.loads(path.read_text())
    total = prof["total"]
    print(f"\n{label}: per task ({total['devices']} devices; wall {total['wall_s']:.1f} s, "
          f"devices' CPU {total['devices_cpu_s']:.1f} s, controller's CPU "
          f"{total['controller_cpu_s']:.1f} s)")
    print(f"{'changed':>7} {'ok':>4} {'skip':>4} {'wall':>7} {'dev CPU':>8} {'ctl CPU':>8}  task")
    # flush_handlers runs as one entry per device with no result of its own: left out
    ran = [t for t in prof["tasks"] if t["changed"] + t["ok"] + t["skipped"] + t["failed"]]
    for t in ran:  # a task skipped everywhere still costs the controller
        print(f"{t['changed']:>7} {t['ok']:>4} {t['skipped']:>4} {t['wall_s']:>6.1f}s "
              f"{t['devices_cpu_s']:>7.1f}s {t['controller_cpu_s']:>7.1f}s  {t['task']}")
    changed = sum(t["changed"] for t in prof["tasks"])
    idle = sum(t["wall_s"] for t in prof["tasks"] if t not in ran)
    print(f"{changed:>7} changes in all; {len(ran)} tasks with results (handlers included; "
          f"{len(prof['tasks']) - len(ran)} entries without, {idle:.1f} s); {load_line()}",
          flush=True)


def before(ref: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The same sizes with revision ``ref``'s code, roles and bench (its JSON line)."""
    tree = work / "before"
    subprocess.run(["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), ref],
                   check=True, capture_output=True, text=True)
    try:
        env = dict(os.environ, PYTHONPATH=os.pathsep.join(str(tree / d) for d in PACKAGE_DIRS))
        if args.profile:
            env.update(profile_env(work / "before-profile.json"))
        cmd = [sys.executable, str(tree / "bench" / "bench_vmesh.py"), "--nodes",
               *map(str, args.before_nodes or args.nodes[:1]), "--traffic", str(args.traffic),
               "--baseline", "0", "--every", str(args.every)]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        lines = proc.stdout.strip().splitlines()
        if proc.returncode != 0 or not lines or not lines[-1].startswith("{"):
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
            raise SystemExit(f"bench_vmesh: the run of {ref} failed: {' | '.join(tail)}")
        result: dict[str, Any] = json.loads(lines[-1])
        return result
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(tree)],
                       check=False, capture_output=True)


def baseline(nodes: int) -> dict[str, float | int]:
    """N devices from the base image, the full playbook over SSH (the old way)."""
    try:
        lifecycle.teardown(BASELINE_RUN)
        t = time.monotonic()
        res = lifecycle.up(nodes, BASELINE_RUN, image_kind="base",
                           log=lambda m: print(f"baseline: {m}", flush=True))
        up_s = time.monotonic() - t - res.prepare_s
        t = time.monotonic()
        done = deploy.deploy(res.inventory)
        return {"bring_up_s": up_s, "deploy_s": time.monotonic() - t, "changes": done.changed}
    finally:
        lifecycle.teardown(BASELINE_RUN, purge=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[20, 50, 100])
    ap.add_argument("--traffic", type=float, default=60.0, help="scenario seconds per size")
    ap.add_argument("--baseline", type=int, default=20, metavar="N",
                    help="devices of the full-playbook baseline (0: none)")
    ap.add_argument("--before", metavar="REF",
                    help="also run with git revision REF's code and roles (first, in this run)")
    ap.add_argument("--before-nodes", type=int, nargs="+", metavar="N",
                    help="the sizes of the --before run (default: the first of --nodes)")
    ap.add_argument("--profile", action="store_true",
                    help="per playbook task: changes, devices' and controller's CPU")
    ap.add_argument("--every", type=float, default=10.0, help="CPU sampling period (s)")
    args = ap.parse_args()
    if refused("bench_vmesh", "--nodes/--traffic",
               *(partial(scenario_for, n, args.traffic)
                 for n in {*args.nodes, *(args.before_nodes or [])})):
        return 2
    if os.geteuid() != 0:
        print("bench_vmesh: needs root", file=sys.stderr)
        return 2
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="msub-wheels-") as tmp:  # not in the figures
        build_wheelhouse(Path(tmp) / "wheels", agent=True)
        print(f"baked image: {bake.ensure_baked(Path(tmp) / 'wheels', log=print)}", flush=True)
    print(f"playbook strategy: {deploy.strategy_name()} ({deploy.MITOGEN_ENV}=0 for Ansible's "
          "own linear)", flush=True)
    others = host_busy_share(10.0)
    print(f"host busy before the runs (other work): {100 * others:.0f} % of {cores} cores; "
          f"{load_line()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="msub-bench-vmesh-") as tmp:
        return measure(args, Path(tmp), others, cores)


def measure(args: argparse.Namespace, work: Path, others: float, cores: int) -> int:
    """The runs (``--before`` first), then every table; ``work`` holds the profiles."""
    old = None
    if args.before:
        old = before(args.before, args, work)
        print(f"{args.before}: done; {load_line()}", flush=True)
    rows = []
    for n in args.nodes:
        if args.profile:
            os.environ.update(profile_env(work / f"profile-{n}.json"))
        r = load_run(n, args.traffic, run=RUN, every_s=args.every)
        rows.append(r)
        print(f"{n} devices done; {load_line()}", flush=True)
    base = baseline(args.baseline) if args.baseline > 0 else None
    if args.profile:
        if args.before:
            print_profile(f"{args.before}, {(args.before_nodes or args.nodes)[0]} devices, "
                          "configure",
                          work / "before-profile.json")
        for n in args.nodes:
            print_profile(f"this tree, {n} devices, configure", work / f"profile-{n}.json")

    print(f"\nvmesh-rwp-load, {args.traffic:.0f} s of traffic per size; host busy with other "
          f"work before the runs: {100 * others:.0f} % of {cores} cores")
    print(f"{'devices':>7} {'bring-up':>9} {'deploy':>8} {'converge':>9} {'ready':>8} "
          f"{'converged':>9} {'CPU/dev':>8} {'runner/dev':>10} {'mem/dev':>8} {'at rest':>8}"
          f"  load 1/5/15")
    for r in rows:
        t = r.timings
        cpu, runner = r.usage.per_device(r.nodes) if r.usage else (float("nan"),) * 2
        mem = r.usage.mem_mib if r.usage else float("nan")
        print(f"{r.nodes:>7} {t.get('bring_up_s', 0):>8.1f}s {t.get('deploy_s', 0):>7.1f}s "
              f"{t.get('settle_s', 0):>8.1f}s {r.ready_s:>7.1f}s "
              f"{'yes' if r.settle.get('complete') else 'NO':>9} {100 * cpu:>7.2f}% "
              f"{100 * runner:>9.2f}% {mem:>6.1f}Mi {r.mem_rest_mib:>6.1f}Mi"
              f"  {r.load[0]:.1f} {r.load[1]:.1f} {r.load[2]:.1f}")
    print("CPU in % of one core; memory: cgroup working set per device (MiB); ready = "
          "bring-up + reset + deployment + convergence")
    for r in rows:
        print(ready_verdict(r.nodes, r.ready_s, bool(r.settle.get("complete"))))
    if old is not None:
        print(f"before: {args.before}'s code and roles, the same sizes in this run")
        for o in old["runs"]:
            t = o["timings"]
            now = next((r for r in rows if r.nodes == o["nodes"]), None)
            after = (f"  (this tree's deployment: {now.timings.get('deploy_s', 0):.1f} s)"
                     if now else "")
            print(f"{o['nodes']:>7} {t.get('bring_up_s', 0):>8.1f}s {t.get('deploy_s', 0):>7.1f}s "
                  f"{t.get('settle_s', 0):>8.1f}s {sum(t.get(k, 0) for k in READY):>7.1f}s "
                  f"{'yes' if o.get('settle') else 'NO':>9}  load {o['load'][0]:.1f} "
                  f"{o['load'][1]:.1f} {o['load'][2]:.1f}{after}")
    if base is not None:
        print(f"baseline, {args.baseline} devices from the base image, full site.yml over "
              f"SSH: bring-up {base['bring_up_s']:.1f} s, deployment {base['deploy_s']:.1f} s "
              f"({base['changes']} changes); {load_line()}")
        same = next((r for r in rows if r.nodes == args.baseline), None)
        if same is not None:
            print(f"  baked image + configure on {same.nodes} devices: deployment "
                  f"{same.timings.get('deploy_s', 0):.1f} s, "
                  f"{base['deploy_s'] / max(same.timings.get('deploy_s', 1e-9), 1e-9):.1f}x "
                  "faster")
    print(json.dumps({"traffic_s": args.traffic, "host_busy_before": others,
                      "strategy": deploy.strategy_name(),
                      "runs": [{"nodes": r.nodes, "timings": r.timings, "ready_s": r.ready_s,
                                "settle": r.settle.get("complete"), "medium": r.medium,
                                "usage": r.usage.__dict__ if r.usage else None,
                                "mem_rest_mib": r.mem_rest_mib, "load": r.load,
                                "deliveries": r.deliveries} for r in rows],
                      "baseline": base, "before": old}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
