"""The daemon's memory under an insider's junk events and made-up ids, without root.

The memory half of ``bench/bench_insider.py`` (issue 25 items 2 and 10) on one wired
node in this process, linked over loopback UDP (as ``tests/e2e/test_node_loopback.py``
runs it): an epidemic node with its SQLite state, and an insider with the fleet key on
a socket beside it. Two attacks, each on a fresh node:

- ``junk``: ``--events`` unique ~60 KB events with a remaining lifetime of 1e12 s (the
  frames of ``bench_insider.junk``), enough to fill the buffer's 16 MB byte cap;
- ``ids``: beacons from ``--ids`` made-up node ids (``bench_insider.beacons``).

Printed per attack: the process's RSS before and after (the node's growth: the
insider's frames are built before the first reading), and what the node holds and
counted. Targets (issue 25): junk RSS <= 60 MB for a daemon starting at ~45 MB, i.e.
growth <= 15 MB; ids growth <= 5 MB with live tables capped. ``--baseline PATH`` runs
the same attacks first against another checkout's ``daemon/`` directory (e.g. a
``git worktree`` of main), in the same run, so both figures share the host's load
(printed).

    flock -x /tmp/msub-locks/cpu.lock .venv/bin/python bench/bench_insider_memory.py
        [--events 1500] [--ids 10000] [--baseline /tmp/main-checkout]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def rss_mb() -> float:
    for line in Path(f"/proc/{os.getpid()}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1e3
    return 0.0


async def attack(what: str, count: int) -> dict[str, Any]:
    sys.path[:0] = [str(ROOT / "tests" / "e2e"), str(ROOT / "bench")]
    from test_node_loopback import free_udp_port, make_config

    import bench_insider
    from meshsub.runtime.node import Node

    frames = bench_insider.beacons(count) if what == "ids" else bench_insider.junk(count, 60_000)
    with tempfile.TemporaryDirectory(prefix="msub-insmem-") as tmp:
        port, src = free_udp_port(), free_udp_port()
        node = Node(make_config(Path(tmp), 3, port, [src],
                                protocol={"name": "epidemic", "params": {}},
                                security={"keys": {"1": bench_insider.KEY}},
                                log={"level": "error"}))
        await node.start()
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
                sock.bind(("127.0.0.1", src))
                await asyncio.sleep(2.0)
                gc.collect()
                before = rss_mb()
                for i, frame in enumerate(frames):
                    sock.sendto(frame, ("127.0.0.1", port))
                    if i % 20 == 19:
                        await asyncio.sleep(0.002)  # no kernel drops: every frame counts
                last = -1
                while True:  # until the node has taken in everything sent
                    await asyncio.sleep(3.0)
                    taken = node.status()["frames"]["counters"].get("frames_in", 0)
                    if taken == last:
                        break
                    last = taken
            gc.collect()
            after = rss_mb()
            status = node.status()
            return {"attack": what, "count": count, "rss_before_mb": round(before, 1),
                    "rss_after_mb": round(after, 1), "growth_mb": round(after - before, 1),
                    "frames_in": last, "kernel_drops": node.link.poll_kernel_drops()
                    if node.link else None,
                    "buffered": status["protocol"].get("buffered"),
                    "drops": status["protocol"].get("drops"),
                    "neighbors": len(node.neighbors()), "transmitters": len(node.codec.replay)}
        finally:
            await node.stop()


def run(code: str | None, what: str, count: int) -> dict[str, Any]:
    """One attack in a fresh interpreter (``code``: another checkout's daemon/ first)."""
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [code, env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, __file__, "--one", what, str(count)], env=env,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0:
        return {"attack": what, "error": proc.stderr.strip().splitlines()[-1:]}
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1500)
    parser.add_argument("--ids", type=int, default=10_000)
    parser.add_argument("--baseline", type=Path, help="another checkout measured first")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(asyncio.run(attack(args.one[0], int(args.one[1])))))
        return 0
    uptime = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    print("load before:", uptime)
    codes: list[tuple[str, str | None]] = [("this checkout", None)]
    if args.baseline is not None:
        codes.insert(0, (f"baseline {args.baseline}", str(args.baseline / "daemon")))
    for label, code in codes:
        for what, count in (("junk", args.events), ("ids", args.ids)):
            result = run(code, what, count)
            print(label, json.dumps(result))
    print("load after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout
          .strip())
    return 0


if __name__ == "__main__":
    sys.exit(main())
