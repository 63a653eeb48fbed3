"""An insider's 10,000 beacon ids against one real ``meshsubd`` (issue 25 item 10), no root.

One daemon runs epidemic on the loopback interface (``[link] mode = "batman"``: unicast
only, so no broadcast address is needed) with its own anonymous mosquitto; a live
neighbour (node 2) beacons every second from 127.0.0.1. First an insider with the key
hands the daemon ``--events`` unique ~60 KB events from 127.0.0.3 (the buffer keeps ~270
of them, as in ``bench_insider.py``'s victim), then beacons from ``--ids`` made-up ids
from 127.0.0.2. Printed: RSS before the ids, after them (once the transmitter counts
settle) and 20 s later, the neighbour count and whether node 2 is still one.

This is ``bench_insider.py``'s second phase without namespaces (so without the root
lock). ``--before REV`` measures a git revision's ``daemon/`` (exported with ``git
archive``, run by this venv's Python with ``PYTHONPATH`` on it) and ``--baseline
PYTHON`` another tree's venv (its ``meshsubd``), in turns with this tree, ``--rounds``
runs each, every measurement in a fresh process and its own daemon. Target (issue 25):
RSS +5 MB at most for the ids in every run, live neighbours kept. Figures depend on the
host's load (printed after every run).

    flock -x /tmp/msub-locks/cpu.lock .venv/bin/python bench/bench_insider_ids.py \\
        [--before abb257d] [--baseline /path/to/other/.venv/bin/python] [--rounds 2] \\
        [--events 1500] [--ids 10000]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests" / "e2e"))

import mesh as m  # noqa: E402

import bench_insider as bi  # noqa: E402
import meshsub  # noqa: E402
from meshsub.core.api import MessageId  # noqa: E402
from meshsub.runtime.discovery import Beacon  # noqa: E402
from meshsub.wire import FrameCodec  # noqa: E402


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def blast(frames: list[bytes], source: str, port: int, rate: float) -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((source, 0))
    t0 = time.monotonic()
    for i, frame in enumerate(frames):
        sock.sendto(frame, ("127.0.0.1", port))
        time.sleep(max(0.0, t0 + i / rate - time.monotonic()))
    sock.close()


def measure(args: argparse.Namespace) -> dict[str, object]:
    tmp = Path(tempfile.mkdtemp(prefix="msub-insider-ids-"))
    node = m.NodeProc("c", 2, tmp, udp_port=args.port, mqtt_port=args.port + 1)
    for d in (node.state_dir, node.spool_dir):
        d.mkdir(parents=True)
    conf = tmp / "mosquitto.conf"
    conf.write_text(f"listener {node.mqtt_port} 127.0.0.1\nallow_anonymous true\n")
    broker = subprocess.Popen(["/usr/sbin/mosquitto", "-c", str(conf)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    node.config_path.write_text("\n".join([
        *node.node_toml(), "[link]", 'interface = "lo"', 'mode = "batman"',
        f"port = {node.udp_port}", "[discovery]", "beacon_interval = 1.0",
        "min_interval = 0.5", "neighbor_timeout = 5", "zeroconf = false",
        "[protocol]", 'name = "epidemic"', "[security]", "current_key = 1",
        "[security.keys]", f'1 = "{m.KEY}"', "[mqtt]", 'host = "127.0.0.1"',
        f"port = {node.mqtt_port}", "[storage]", f'state_dir = "{node.state_dir}"',
        f'spool_dir = "{node.spool_dir}"', "[telemetry]", "roll_seconds = 5.0",
        "[log]", 'level = "info"']) + "\n")
    time.sleep(0.5)
    with open(node.daemon_log, "ab") as log:
        node.daemon = subprocess.Popen([str(m.VENV_BIN / "meshsubd"), "--config",
                                        str(node.config_path)], stdout=log, stderr=log)
    stop = threading.Event()

    def live() -> None:  # node 2, a live neighbour beaconing every second
        sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        codec, seq = FrameCodec(2, int(time.time()), bi.KEYS), 0
        while not stop.is_set():
            seq += 1
            beacon = Beacon(2, seq, 1.0, "live", "epidemic").message(MessageId(2, 1, seq))
            for frame in codec.encode(0, beacon):
                sock.sendto(frame, ("127.0.0.1", node.udp_port))
            stop.wait(1.0)

    def id_frames() -> int:
        frames = node.ctl("status")["frames"]
        return int(frames["transmitters"]) + int(frames["counters"].get("transmitters_full", 0))

    out: dict[str, object] = {"code": str(Path(meshsub.__file__).parent)}  # the daemon's too
    try:
        m.wait_for(lambda: (node.state_dir / "meshsubd.sock").exists(), "meshsubd up")
        threading.Thread(target=live, daemon=True).start()
        m.wait_for(lambda: [r["node"] for r in node.ctl("neighbors")] == [2], "node 2 heard")
        blast(bi.junk(args.events, args.size), "127.0.0.3", node.udp_port, args.rate)
        out["buffered"] = bi.settled(lambda: node.ctl("status")["protocol"]["buffered"],
                                     quiet_s=4.0, guard=120.0)
        time.sleep(10.0)
        out["rss_before_kb"] = rss0 = bi.rss_kb(node)
        blast(bi.beacons(args.ids), "127.0.0.2", node.udp_port, args.rate)
        bi.settled(id_frames)
        out["rss_after_kb"] = bi.rss_kb(node)
        rows = node.ctl("neighbors")
        out["neighbors"] = len(rows)
        out["live_neighbor_kept"] = any(r["node"] == 2 for r in rows)
        time.sleep(20.0)
        out["rss_after_20s_kb"] = bi.rss_kb(node)
        out["rss_growth_ids_kb"] = int(str(out["rss_after_kb"])) - rss0
    finally:
        stop.set()
        node.daemon.terminate()
        node.daemon.wait(20)
        broker.terminate()
        broker.wait(10)
        subprocess.run(["rm", "-rf", str(tmp)], check=False)
    return out


def measured(args: argparse.Namespace, python: str, port: int,
             env: dict[str, str] | None = None) -> dict[str, object] | None:
    """One measurement in a fresh process (``python``, ``env``); None if it failed."""
    proc = subprocess.run([python, __file__, "--json", "--events", str(args.events),
                           "--size", str(args.size), "--ids", str(args.ids), "--rate",
                           str(args.rate), "--port", str(port)],
                          capture_output=True, text=True, timeout=900, env=env)
    if proc.returncode != 0:
        print(f"bench_insider_ids: a run failed: {proc.stderr.strip()[-500:]}", file=sys.stderr)
        return None
    result: dict[str, object] = json.loads(proc.stdout.splitlines()[-1])
    return result


def report(label: str, out: dict[str, object], ids: int) -> float:
    """Print one run's line; its RSS growth for the ids in MB."""
    growth = int(str(out["rss_growth_ids_kb"])) / 1e3
    print(f"{label}: {out['buffered']} junk events carried; {ids} ids: "
          f"{out['neighbors']} neighbours, live one kept {out['live_neighbor_kept']}; "
          f"RSS {int(str(out['rss_before_kb'])) / 1e3:.1f} -> "
          f"{int(str(out['rss_after_kb'])) / 1e3:.1f} MB (+{growth:.1f} MB), 20 s later "
          f"{int(str(out['rss_after_20s_kb'])) / 1e3:.1f} MB")
    return growth


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", metavar="REV",
                        help="a git revision whose daemon/ is measured in turns with this tree's")
    parser.add_argument("--baseline", metavar="PYTHON",
                        help="another tree's venv python, measured in turns with this tree")
    parser.add_argument("--rounds", type=int, default=2, help="runs of each tree, in turns")
    parser.add_argument("--events", type=int, default=1500)
    parser.add_argument("--size", type=int, default=60_000)
    parser.add_argument("--ids", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=3000.0, help="frames per second sent")
    parser.add_argument("--port", type=int, default=27700, help="UDP port (MQTT: port+1)")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:  # one measurement, in the process of one of the trees
        print(json.dumps(measure(args)))
        return 0
    with tempfile.TemporaryDirectory(prefix="msub-insider-ids-before-") as tmp:
        trees: list[tuple[str, str, dict[str, str] | None]] = []
        if args.before:
            from bench_sim import export  # the same git-archive export as bench_sim's

            code = export(args.before, Path(tmp)) / "daemon"
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                filter(None, [str(code), os.environ.get("PYTHONPATH")]))}
            trees.append((f"before ({args.before})", sys.executable, env))
        if args.baseline:
            trees.append((f"baseline ({args.baseline})", args.baseline, None))
        trees.append((f"this tree ({sys.executable})", sys.executable, None))
        print("load before:", uptime())
        growths: dict[str, list[float]] = {label: [] for label, _, _ in trees}
        port = args.port
        for n in range(args.rounds):
            for label, python, tree_env in trees:
                port += 10
                out = measured(args, python, port, tree_env)
                if out is None:
                    return 1
                print(json.dumps(out))
                growths[label].append(report(f"{label}, run {n + 1}", out, args.ids))
                if not out["live_neighbor_kept"]:
                    print(f"{label}, run {n + 1}: the live neighbour was NOT kept")
                print("load:", uptime(), flush=True)
    print("load after:", uptime())
    for label, values in growths.items():
        worst = max(values)
        print(f"{label}: RSS growth for the ids per run "
              f"{', '.join(f'+{v:.1f}' for v in values)} MB; target +5 MB at most (rule: "
              f"every run <= +5.0 MB): {'met' if worst <= 5.0 else 'not met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
