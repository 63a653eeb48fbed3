"""An insider's 10,000 beacon ids against one real ``meshsubd`` (issue 25 item 10), no root.

One daemon runs epidemic on the loopback interface (``[link] mode = "batman"``: unicast
only, so no broadcast address is needed) with its own anonymous mosquitto; a live
neighbour (node 2) beacons every second from 127.0.0.1. First an insider with the key
hands the daemon ``--events`` unique ~60 KB events from 127.0.0.3 (the buffer keeps ~270
of them, as in ``bench_insider.py``'s victim), then beacons from ``--ids`` made-up ids
from 127.0.0.2. Printed: RSS before the ids, after them (once the transmitter counts
settle) and 20 s later, the neighbour count and whether node 2 is still one.

This is ``bench_insider.py``'s second phase without namespaces (so without the root
lock); ``--baseline PYTHON`` runs the same measurement first with another tree's venv
(its ``meshsubd``), e.g. main's, in the same run. Target (issue 25): RSS +5 MB at most
for the ids, live neighbours kept. Figures depend on the host's load (printed).

    flock -x /tmp/msub-locks/cpu.lock .venv/bin/python bench/bench_insider_ids.py \\
        [--baseline /path/to/main/.venv/bin/python] [--events 1500] [--ids 10000]
"""

from __future__ import annotations

import argparse
import json
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

    out: dict[str, object] = {}
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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", help="another tree's venv python, measured first")
    parser.add_argument("--events", type=int, default=1500)
    parser.add_argument("--size", type=int, default=60_000)
    parser.add_argument("--ids", type=int, default=10_000)
    parser.add_argument("--rate", type=float, default=3000.0, help="frames per second sent")
    parser.add_argument("--port", type=int, default=27700, help="UDP port (MQTT: port+1)")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.json:  # one measurement, for a baseline run under another interpreter
        print(json.dumps(measure(args)))
        return 0
    print("load before:", uptime())
    runs: list[tuple[str, dict[str, object]]] = []
    if args.baseline:
        proc = subprocess.run([args.baseline, __file__, "--json", "--events", str(args.events),
                               "--size", str(args.size), "--ids", str(args.ids), "--rate",
                               str(args.rate), "--port", str(args.port + 10)],
                              capture_output=True, text=True, timeout=900)
        if proc.returncode != 0:
            print(f"bench_insider_ids: baseline failed: {proc.stderr.strip()[-500:]}",
                  file=sys.stderr)
            return 1
        runs.append((f"baseline ({args.baseline})", json.loads(proc.stdout.splitlines()[-1])))
    runs.append((f"this tree ({sys.executable})", measure(args)))
    print("load after:", uptime())
    for label, out in runs:
        print(json.dumps(out))
        growth = int(str(out["rss_growth_ids_kb"])) / 1e3
        print(f"{label}: {out['buffered']} junk events carried; {args.ids} ids: "
              f"{out['neighbors']} neighbours, live one kept {out['live_neighbor_kept']}; "
              f"RSS {int(str(out['rss_before_kb'])) / 1e3:.1f} -> "
              f"{int(str(out['rss_after_kb'])) / 1e3:.1f} MB (+{growth:.1f} MB; target "
              f"<= +5: {'met' if growth <= 5.0 else 'not met'}), 20 s later "
              f"{int(str(out['rss_after_20s_kb'])) / 1e3:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
