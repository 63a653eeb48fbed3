"""Figures of the virtual mesh: bring-up time, playbook time, memory per device at rest.

Root only. Brings up N devices (default 20) as run ``bench``, deploys with the
playbook, waits until every daemon lists all others... or the settle time passes,
then reads memory: the container's cgroup (podman stats) and meshsubd's RSS/PSS.
Everything is removed at the end, also on failure.

    sudo .venv/bin/python bench/bench_vmesh.py [--nodes 20] [--settle 30]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "firmware-sim"))

from meshsim.vmesh import image, lifecycle  # noqa: E402
from meshsim.vmesh.nodes import PODMAN, exec_in  # noqa: E402

RUN = "bench"
BIN = Path(sys.executable).parent


def playbook(inventory: Path) -> tuple[float, int, str]:
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "deploy/ansible/ansible.cfg"),
               ANSIBLE_NOCOLOR="1", PATH=f"{BIN}:{os.environ.get('PATH', '')}")
    t0 = time.monotonic()
    res = subprocess.run([str(BIN / "ansible-playbook"), "-i", str(inventory), "site.yml",
                          "-e", "meshsub_serial=100%"], cwd=REPO / "deploy/ansible", env=env,
                         capture_output=True, text=True, check=False)
    return time.monotonic() - t0, res.returncode, res.stdout


def mib(text: str) -> float:
    m = re.match(r"([\d.]+)\s*([kKMG]i?B|B)", text.strip())
    if not m:
        return float("nan")
    scale = {"B": 1 / 2**20, "kB": 1 / 1024, "KiB": 1 / 1024, "MB": 1.0, "MiB": 1.0,
             "GB": 1024.0, "GiB": 1024.0}
    return float(m.group(1)) * scale.get(m.group(2), 1.0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=20)
    ap.add_argument("--settle", type=float, default=30.0, help="seconds at rest before memory")
    args = ap.parse_args()
    if os.geteuid() != 0:
        print("bench_vmesh: needs root", file=sys.stderr)
        return 2
    image.ensure_image(log=print)  # not part of the bring-up figure
    try:
        lifecycle.teardown(RUN)
        res = lifecycle.up(args.nodes, RUN, log=print)
        print(f"bring-up of {args.nodes} devices:   {res.seconds:.1f} s "
              f"(incl. wheelhouse build)")
        secs, rc, out = playbook(res.inventory)
        recap = re.findall(r"^\S+\s+:\s+ok=\d+\s+changed=(\d+).*failed=(\d+)", out, re.M)
        print(f"playbook, first run:          {secs:.1f} s (rc {rc}, "
              f"{sum(int(f) for _, f in recap)} failed hosts)")
        secs2, rc2, out2 = playbook(res.inventory)
        changed = sum(int(c) for c, _ in
                      re.findall(r"^\S+\s+:\s+ok=\d+\s+changed=(\d+).*failed=(\d+)", out2, re.M))
        print(f"playbook, second run:         {secs2:.1f} s (rc {rc2}, changed={changed})")
        time.sleep(args.settle)
        stats = json.loads(subprocess.run(
            [*PODMAN, "stats", "--no-stream", "--format", "json",
             *(n.container for n in res.plan.nodes)],
            capture_output=True, text=True, check=True).stdout)
        cont = [mib(s["mem_usage"].split("/")[0]) for s in stats]
        rss, pss = [], []
        for n in res.plan.nodes:
            pid = exec_in(n.container, ["systemctl", "show", "-p", "MainPID", "--value",
                                        "meshsubd"]).strip()
            smaps = exec_in(n.container, ["cat", f"/proc/{pid}/smaps_rollup"], check=False)
            vals = dict(re.findall(r"^(\w+):\s+(\d+) kB", smaps, re.M))
            if "Rss" in vals:
                rss.append(int(vals["Rss"]) / 1024)
                pss.append(int(vals["Pss"]) / 1024)
        neigh = [len(json.loads(exec_in(n.container, ["/opt/meshsub/bin/meshsubctl", "--json",
                                                      "neighbors"], check=False) or "[]"))
                 for n in res.plan.nodes]
        print(f"memory per device at rest:    container {statistics.mean(cont):.1f} MiB "
              f"(min {min(cont):.1f}, max {max(cont):.1f}; cgroup, all processes)")
        if rss:
            print(f"  of which meshsubd:          RSS {statistics.mean(rss):.1f} MiB, "
                  f"PSS {statistics.mean(pss):.1f} MiB")
        print(f"neighbours per device:        mean {statistics.mean(neigh):.1f} "
              f"of {args.nodes - 1}")
        load = os.getloadavg()
        print(f"host load (1/5/15 min):       {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} "
              f"on {os.cpu_count()} cores")
    finally:
        lifecycle.teardown(RUN, purge=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
