"""A keyless UDP flood at one daemon while a neighbour publishes (issue 25 item 4), root.

The three-namespace mesh of ``tests/e2e/mesh.py`` (A - B - C, flooding): B is the
target. A's application publishes 1 event/s (MQTT, QoS 1) that B's application
subscribes to. An outsider in C's namespace, with an address of its own
(10.99.0.66), sends ``--rate`` frames/s at B's port for ``--seconds``: half with a
valid prefix (our version byte, flags, key id: the daemon must compute an HMAC to
refuse them), half garbage. C's daemon is stopped (it is only the attacker's host).

Printed for a baseline phase without the flood and for the flood phase (same run):
legitimate delivery (events B's subscriber got / events A's broker acknowledged),
``meshsubctl status`` latency (median and max of one call every 2 s), B's CPU (percent
of one core), B's RSS, growth of B's telemetry spool (bytes), the frames the attacker
sent and the rate reached, and what B counted: frames refused by reason, kernel drops of
its socket (the filter's and the receive buffer's). The figures depend on the machine's
load (printed); the lead re-runs on an idle machine.

    sudo flock -x /tmp/msub-locks/cpu.lock .venv/bin/python bench/bench_flood.py
        [--rate 30000] [--seconds 30] [--baseline 10] [--senders 2]

Runs against whatever ``meshsubd`` sits beside the Python running it (another venv's
Python measures another checkout: the "before" figures of docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "e2e"))

from mesh import IFACE, Mesh, NodeProc, sh, wait_for

TICK = os.sysconf("SC_CLK_TCK")
ATTACKER = "10.99.0.66"

SENDER = r"""
import os, random, socket, sys, time
host, port, rate, seconds, seed = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), \
    float(sys.argv[4]), int(sys.argv[5])
rng = random.Random(seed)
frames = []
for i in range(2048):
    body = os.urandom(rng.randrange(60, 400))
    # half with a valid prefix (version 1, no flags, key id 1), half garbage
    frames.append(bytes((1, 0, 1)) + body if i % 2 else bytes((rng.randrange(2, 256),)) + body)
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
s.bind((sys.argv[6], 0))
sent, start, batch = 0, time.monotonic(), 64
end = start + seconds
while True:
    now = time.monotonic()
    if now >= end:
        break
    due = start + sent / rate
    if due > now:
        time.sleep(min(due - now, 0.01))
        continue
    for _ in range(batch):
        try:
            s.sendto(frames[sent & 2047], (host, port))
        except OSError:
            pass
        sent += 1
print(sent, time.monotonic() - start)
"""

PUBLISHER = r"""
import json, sys, time
import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
port, seconds, tag = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="bench-flood-pub-" + tag,
                protocol=mqtt.MQTTv5)
c.connect("127.0.0.1", port)
c.loop_start()
acked, start, i = 0, time.time(), 0
while time.time() < start + seconds:
    info = c.publish("meshsub/pub/flood/legit", json.dumps({"phase": tag, "i": i}), qos=1)
    info.wait_for_publish(10)
    acked += info.is_published()
    i += 1
    time.sleep(max(0.0, start + i - time.time()))
print(acked)
c.loop_stop()
c.disconnect()
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def pid_of(node: NodeProc) -> int:
    assert node.daemon is not None
    return int(node.daemon.pid)


def spool_bytes(node: NodeProc) -> int:
    return sum(p.stat().st_size for p in node.spool_dir.rglob("*") if p.is_file()) \
        if node.spool_dir.exists() else 0


def kernel_drops(node: NodeProc) -> int:
    text = sh("cat", "/proc/net/udp", ns=node.ns).stdout
    for line in text.splitlines()[1:]:
        fields = line.split()
        if int(fields[1].split(":")[1], 16) == node.udp_port:
            return int(fields[-1])
    return 0


def status_latency(node: NodeProc) -> float:
    start = time.monotonic()
    node.ctl("status")
    return time.monotonic() - start


def phase(mesh: Mesh, tag: str, seconds: float, rate: float, senders: int) -> dict[str, Any]:
    a, b, c = mesh.nodes["a"], mesh.nodes["b"], mesh.nodes["c"]
    pid = pid_of(b)
    sub = b.mqtt_sub("meshsub/deliver/flood/#")
    sub.wait_ready(b, "meshsub/deliver/flood/probe")
    cpu0, rss0, spool0, drops0 = cpu_seconds(pid), rss_kb(pid), spool_bytes(b), kernel_drops(b)
    refused0 = b.ctl("status")["drops"]["frame"]
    wall0 = time.monotonic()
    floods = [subprocess.Popen(["ip", "netns", "exec", c.ns, sys.executable, "-c", SENDER,
                                b.address, str(b.udp_port), str(rate / senders), str(seconds),
                                str(k), ATTACKER], stdout=subprocess.PIPE, text=True)
              for k in range(senders if rate > 0 else 0)]
    pub = subprocess.Popen(["ip", "netns", "exec", a.ns, sys.executable, "-c", PUBLISHER,
                            str(a.mqtt_port), str(seconds), tag], stdout=subprocess.PIPE,
                           text=True)
    latencies = []
    while pub.poll() is None:
        latencies.append(status_latency(b))
        time.sleep(2.0)
    acked = int(pub.communicate()[0].strip() or 0)
    sent, spent = 0, 0.0
    for proc in floods:
        n, dt = proc.communicate(timeout=60)[0].split()
        sent, spent = sent + int(n), max(spent, float(dt))
    # up to 15 s for the last deliveries; what has not arrived by then is reported as
    # lost (the delivery figure), not raised: a daemon that loses events under the flood
    # is exactly what the bench must measure
    settle = time.monotonic() + 15.0
    while len(sub.events(phase=tag)) < acked and time.monotonic() < settle:
        time.sleep(0.2)
    wall = time.monotonic() - wall0
    got = len({d["attrs"]["i"] for d in sub.events(phase=tag)})
    sub.close()
    status = b.ctl("status")
    refused = {k: v - refused0.get(k, 0) for k, v in status["drops"]["frame"].items()
               if v - refused0.get(k, 0)}
    return {
        "phase": tag, "published": acked, "delivered": got,
        "delivery": round(got / acked, 3) if acked else None,
        "status_p50_s": round(statistics.median(latencies), 3) if latencies else None,
        "status_max_s": round(max(latencies), 3) if latencies else None,
        "cpu_pct": round(100 * (cpu_seconds(pid) - cpu0) / wall, 1),
        "rss_kb": rss_kb(pid), "rss_growth_kb": rss_kb(pid) - rss0,
        "spool_growth_bytes": spool_bytes(b) - spool0,
        "attack_sent": sent, "attack_rate": round(sent / spent) if spent else 0,
        "kernel_drops": kernel_drops(b) - drops0, "refused_by_codec": refused,
        "admission": status.get("admission", {}).get("dropped"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=30000.0, help="attack frames per second")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--baseline", type=float, default=10.0,
                        help="seconds of the same measurement without the flood first")
    parser.add_argument("--senders", type=int, default=2, help="attacker processes")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_flood: needs root (network namespaces)", file=sys.stderr)
        return 2
    print("load before:", subprocess.run(["uptime"], capture_output=True, text=True).stdout
          .strip())
    with tempfile.TemporaryDirectory(prefix="msub-flood-") as tmp:
        mesh = Mesh(Path(tmp))
        with mesh.running():
            mesh.wait_neighbors()
            b, c = mesh.nodes["b"], mesh.nodes["c"]
            b.mqtt_pub("meshsub/sub/flood", "flood/#", retain=True)
            wait_for(lambda: any(r["sub_id"] == "flood" for r in b.ctl("subscriptions")),
                     "B's subscription")
            c.kill_daemon()  # C's namespace is only the attacker's host now
            sh("ip", "addr", "add", f"{ATTACKER}/24", "dev", IFACE, ns=c.ns)
            rows = [phase(mesh, "baseline", args.baseline, 0.0, args.senders),
                    phase(mesh, "flood", args.seconds, args.rate, args.senders)]
    for row in rows:
        print(json.dumps(row))
    print("load after:", subprocess.run(["uptime"], capture_output=True, text=True).stdout
          .strip())
    flood = rows[1]
    print(f"flood: {flood['attack_rate']} frames/s sent for {args.seconds:.0f} s; legitimate "
          f"delivery {flood['delivered']}/{flood['published']}; status median "
          f"{flood['status_p50_s']} s, max {flood['status_max_s']} s; CPU "
          f"{flood['cpu_pct']} %; RSS {flood['rss_kb']} kB; spool +{flood['spool_growth_bytes']}"
          " bytes")
    return 0


if __name__ == "__main__":
    random.seed(1)
    sys.exit(main())
