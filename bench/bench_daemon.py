"""meshsubd on the three-namespace line A - B - C (root): memory, CPU, MQTT-to-MQTT latency.

Brings up the end-to-end mesh of ``tests/e2e/mesh.py`` (own mosquitto and
meshsubd per namespace, flooding, A and C out of range), then:

1. resident memory of each idle daemon;
2. publishes ``--rate`` events/s for ``--seconds`` on A's broker (paho, QoS 1,
   the send time in the payload) and receives them on C's broker with
   ``mosquitto_sub`` (its receive timestamp): the latency is MQTT to MQTT over
   two mesh hops;
3. CPU time per frame the relay B forwarded (process CPU from /proc, net of
   B's idle CPU rate), and resident memory under load;
4. CPU time per event the subscriber C delivered to its MQTT application (the
   frame in, the delivery kept in the store, published, its PUBACK recorded; net
   of C's idle rate), and the same path in-process (one node driven directly,
   no broker: the frame decoded, the protocol run, the delivery kept and queued).

Beside the CPU figure, measured in the same run: the bare msgpack + HMAC-SHA256
work a relay cannot avoid per forwarded event (two verifies and decodes, one
encode and tag; ``bench_relay.baseline_us``), and the load average.

Usage: ``sudo .venv/bin/python bench/bench_daemon.py [--rate 100] [--seconds 30]``
(targets: CPU per forwarded frame <= 100 us at 100 and at 1000 events/s, p99 <= 20 ms
at 100 events/s, idle RSS <= 40 MB).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mesh import IFACE, KEY, Mesh, NodeProc, wait_for

from bench_relay import baseline_us
from meshsub.core.api import Message, MessageId
from meshsub.core.content import Event
from meshsub.core.syntax import parse_subscription
from meshsub.protocols.flooding import DATA, encode_body
from meshsub.runtime.config import parse_config
from meshsub.runtime.logging import configure_logging
from meshsub.runtime.node import Node
from meshsub.runtime.sdnotify import SystemdNotifier
from meshsub.wire import FrameCodec, KeyRing

TICK = os.sysconf("SC_CLK_TCK")

PUBLISHER = """
import json, sys, time
import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
port, rate, seconds = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id="bench-pub", protocol=mqtt.MQTTv5)
c.connect("127.0.0.1", port)
c.loop_start()
n = int(rate * seconds)
start = time.time()
infos = []
for i in range(n):
    due = start + i / rate
    delay = due - time.time()
    if delay > 0:
        time.sleep(delay)
    infos.append(c.publish("meshsub/pub/bench/load",
                           json.dumps({"i": i, "t0": time.time()}), qos=1))
for info in infos:
    info.wait_for_publish(30)
print(json.dumps({"published": n, "elapsed_s": time.time() - start}))
c.loop_stop()
c.disconnect()
"""


def proc_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (kB) of ``pid``."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0])
    return out


def cpu_times(pid: int) -> tuple[float, float]:
    """(user, system) CPU seconds of ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) / TICK, int(fields[12]) / TICK


def cpu_seconds(pid: int) -> float:
    return sum(cpu_times(pid))


def pid_of(node: NodeProc) -> int:
    assert node.daemon is not None
    pid = node.daemon.pid  # `ip netns exec` execs the daemon: same pid
    assert b"meshsubd" in Path(f"/proc/{pid}/cmdline").read_bytes()
    return int(pid)


def forwarded(node: NodeProc) -> int:
    """Protocol transmissions of ``node`` (beacons excluded); B originates nothing."""
    tx = node.ctl("status")["transmissions"]
    return int(tx.get("tx_broadcast", 0)) + int(tx.get("tx_unicast", 0))


async def _inprocess_forward_us(events: int, telemetry: bool, tmp: Path) -> float:
    """CPU per forwarded event of one node driven directly (no loop, sockets or peers).

    The relay's Python path alone: the copy from A and the duplicate from C
    decoded, the protocol run, one rebroadcast encoded and sent (to two
    loopback ports nobody reads), with or without the telemetry records.
    """
    ports = _free_ports(3)
    node = await _inprocess_node(2, ports, tmp / f"inproc-{telemetry}", telemetry=telemetry,
                                 params={"jitter": 0.0})
    try:
        a = FrameCodec(1, 1, KeyRing.from_hex({"1": KEY}, 1))
        c = FrameCodec(3, 1, KeyRing.from_hex({"1": KEY}, 1))
        frames = []
        for i in range(events):
            event = Event("bench/load", {"i": i, "t0": time.time()})
            msg = Message(DATA, MessageId(1, 1, i + 1), encode_body(event, time.time()), ttl=8)
            frames.append((a.encode(1, msg)[0], c.encode(1, msg.forwarded().forwarded())[0]))
        start = time.process_time()
        for i, (from_a, from_c) in enumerate(frames):
            node._on_datagram(from_a, ("127.0.0.1", ports[1]))
            node._on_datagram(from_c, ("127.0.0.1", ports[2]))
            if i % 100 == 0:
                await asyncio.sleep(0)  # let the spool flush as it would
        return (time.process_time() - start) / events * 1e6
    finally:
        await node.stop()


async def _inprocess_deliver_us(events: int, tmp: Path, run: int) -> float:
    """CPU per event a subscriber delivers to a local MQTT application, one node driven
    directly: the frame from A decoded, the protocol run, the delivery made durable
    (kept in the store in the batch of its input) and queued to the bridge, which has
    no broker (nothing is published; the queue's bound is raised above ``events``)."""
    port = _free_ports(2)
    node = await _inprocess_node(3, port, tmp / f"deliver-{run}",
                                 telemetry=False, params={"jitter": 0.0, "ttl": 1}, peers=False)
    try:
        assert node.bridge is not None
        node.bridge.settings = dataclasses.replace(node.bridge.settings,
                                                   queue_limit=events + 1,
                                                   held_max_bytes=1 << 30)
        node.bridge.subscriptions["bench"] = "bench/#"
        node._local_subscribe("bench", parse_subscription("bench/#"))
        a = FrameCodec(1, 1, KeyRing.from_hex({"1": KEY}, 1))
        frames = []
        for i in range(events):
            event = Event("bench/load", {"i": i, "t0": time.time()})
            msg = Message(DATA, MessageId(1, 1, i + 1), encode_body(event, time.time()), ttl=1)
            frames.append(a.encode(1, msg)[0])
        start = time.process_time()
        for i, frame in enumerate(frames):
            node._on_datagram(frame, ("127.0.0.1", port[1]))
            if i % 100 == 0:
                await asyncio.sleep(0)  # let the log's checkpointer run as it would
        elapsed = time.process_time() - start
        queued = node.bridge.counters["deliveries_queued"]
        if queued != events:
            raise RuntimeError(f"in-process subscriber queued {queued} of {events} deliveries")
        return elapsed / events * 1e6
    finally:
        await node.stop()


async def _inprocess_node(node_id: int, ports: list[int], state: Path, *, telemetry: bool,
                          params: dict[str, Any], peers: bool = True) -> Node:
    """A started flooding node on ``ports[0]`` (loopback, no interface); ``ports[1]`` is
    also its (absent) broker's port; ``peers``: the other ports are its static peers."""
    config = parse_config({
        "node": {"id": node_id}, "link": {"interface": "", "port": ports[0]},
        "discovery": {"zeroconf": False, "beacon_interval": 60.0,
                      "static_peers": [f"127.0.0.1:{p}" for p in ports[1:]] if peers else []},
        "protocol": {"name": "flooding", "params": params},
        "security": {"current_key": 1, "keys": {"1": KEY}},
        "mqtt": {"port": ports[1]}, "telemetry": {"enabled": telemetry},
        "storage": {"state_dir": str(state), "spool_dir": str(state / "spool")},
        "log": {"level": "critical"},
    })
    node = Node(config, notifier=SystemdNotifier({}))
    await node.start()
    return node


def _free_ports(n: int) -> list[int]:
    """``n`` UDP ports free on the loopback now."""
    ports = []
    for _ in range(n):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind(("127.0.0.1", 0))
            ports.append(int(sock.getsockname()[1]))
    return ports


KERNEL_COUNTERS = f"""
import json, pathlib
rows = [line.split() for line in open("/proc/net/snmp") if line.startswith("Udp:")]
out = {{"udp_" + k: int(v) for k, v in zip(rows[0][1:], rows[1][1:])}}
stats = pathlib.Path("/sys/class/net/{IFACE}/statistics")
for name in ("rx_dropped", "tx_dropped", "rx_packets", "tx_packets"):
    out["if_" + name] = int((stats / name).read_text())
print(json.dumps(out))
"""


def kernel_counters(ns: str) -> dict[str, int]:
    """The namespace's UDP counters (/proc/net/snmp) and its interface's packet counters."""
    out = subprocess.run(["ip", "netns", "exec", ns, sys.executable, "-c", KERNEL_COUNTERS],
                         capture_output=True, text=True, check=True).stdout
    return {k: int(v) for k, v in json.loads(out).items()}


def _nonzero(counters: dict[str, Any]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counters.items()) if v) or "none"


def missing_runs(expected: int, seen: set[int]) -> str:
    """The events (0 .. expected - 1) not in ``seen``, as runs: "3, 7-9, ..."."""
    runs: list[tuple[int, int]] = []
    for i in sorted(set(range(expected)) - seen):
        if runs and runs[-1][1] == i - 1:
            runs[-1] = (runs[-1][0], i)
        else:
            runs.append((i, i))
    shown = ", ".join(f"{lo}-{hi}" if hi > lo else str(lo) for lo, hi in runs[:12])
    return f"{expected - len(seen)} in {len(runs)} runs: {shown}{' ...' if len(runs) > 12 else ''}"


def print_node(name: str, status: dict[str, Any], kernel: dict[str, int] | None) -> None:
    """One node's counters that account for events: sent, received, dropped, queued."""
    drops = status.get("drops", {})
    link = status.get("link") or {}
    mqtt = status.get("mqtt") or {}
    lc = link.get("counters") or {}
    print(f"  {name}: tx {_nonzero(status.get('transmissions', {}))}; link rx {lc.get('rx')} "
          f"tx {lc.get('tx')}, link drops {_nonzero(link.get('drops') or {})}, kernel drops "
          f"{drops.get('kernel')}")
    print(f"     frame drops {_nonzero(drops.get('frame') or {})}; node drops "
          f"{_nonzero(drops.get('node') or {})}; protocol drops "
          f"{_nonzero(drops.get('protocol') or {})}")
    print(f"     mqtt {_nonzero(mqtt.get('counters') or {})}; queued {mqtt.get('queued')}, "
          f"acks {mqtt.get('acks')}, outbox {status.get('outbox')}, "
          f"held {status.get('held_publications')}")
    if kernel is not None:
        print(f"     namespace kernel counters (delta over the load): {_nonzero(kernel)}")


def print_account(st: dict[str, dict[str, Any]], delivered: int) -> bool:
    """published = delivered + each counted loss, from the three daemons' counters (A
    originates, B relays, C delivers to one subscription); True if nothing is unexplained.

    Flooding forwards a new event once, so B's broadcasts are the events B heard and C's
    queued deliveries the events C heard: the shortfall of each hop must be within that
    receiver's kernel drops (its socket's receive buffer, which also drops duplicates)."""
    def mqtt(name: str) -> dict[str, int]:
        return dict((st[name].get("mqtt") or {}).get("counters") or {})

    def tx(name: str) -> int:
        return int((st[name].get("transmissions") or {}).get("tx_broadcast", 0))

    def kernel(name: str) -> int:
        return int((st[name].get("drops") or {}).get("kernel") or 0)

    published = mqtt("a").get("events_accepted", 0)
    a_sent, b_heard, c_heard = tx("a"), tx("b"), mqtt("c").get("deliveries_queued", 0)
    c = mqtt("c")
    queue_full, shutdown = c.get("dropped:queue_full", 0), c.get("dropped:shutdown", 0)
    acked_by_c_broker = c.get("published", 0)
    queued = int((st["c"].get("mqtt") or {}).get("queued") or 0)
    parts = {
        "not sent by A (outbox, held)": published - a_sent,
        "lost A -> B": a_sent - b_heard,
        "lost B -> C": b_heard - c_heard,
        "C's delivery queue full (counted)": queue_full,
        "C's delivery queue at shutdown (counted)": shutdown,
        "still in C's delivery queue": queued,
        "acknowledged by C's broker, not received by the subscriber": acked_by_c_broker
        - delivered,
    }
    unexplained = published - delivered - sum(parts.values())
    terms = [f"delivered {delivered}", *(f"{k} {v}" for k, v in parts.items() if v),
             f"unexplained {unexplained}"]
    print(f"  account: published (A accepted) {published} = " + " + ".join(terms))
    ok = unexplained == 0
    for hop, lost, receiver in (("A -> B", parts["lost A -> B"], "b"),
                                ("B -> C", parts["lost B -> C"], "c")):
        if lost:
            covered = lost <= kernel(receiver)
            ok = ok and covered
            print(f"    lost {hop}: {lost}, {receiver.upper()}'s kernel receive drops "
                  f"{kernel(receiver)}: {'counted' if covered else 'NOT COVERED by a counter'}")
    if parts["acknowledged by C's broker, not received by the subscriber"]:
        ok = False
    print(f"  every lost event counted: {'yes' if ok else 'NO'}")
    return ok


def account(mesh: Mesh, expected: int, seen: set[int], kernel0: dict[str, dict[str, int]]) -> None:
    """Where every published event went: each node's counters and its namespace's kernel
    counters (deltas over the load), so that published = delivered + counted drops."""
    if len(seen) < expected:
        print(f"  missing on C: {missing_runs(expected, seen)}")
    statuses = {name: node.try_status() or {} for name, node in mesh.nodes.items()}
    for name, node in mesh.nodes.items():
        k1 = kernel_counters(node.ns)
        print_node(name, statuses[name], {k: v - kernel0[name].get(k, 0) for k, v in k1.items()})
    print_account(statuses, len(seen))


def spool_times(spool_dir: Path, event: str) -> dict[str, int]:
    """event_id -> ts_ns of the first telemetry record ``event`` in a node's spool (closed
    and current files; the spool flushes once a second)."""
    out: dict[str, int] = {}
    for path in sorted(spool_dir.glob("*.jsonl")) + sorted(spool_dir.glob(".*.jsonl")):
        for line in path.read_text(errors="replace").splitlines():
            if f'"event":"{event}"' not in line:
                continue
            rec = json.loads(line)
            key = rec.get("event_id")
            if key is not None and key not in out:
                out[key] = int(rec["ts_ns"])
    return out


def segments(spool_a: Path, spool_c: Path,
             deliveries: list[tuple[float, dict[str, Any]]]) -> None:
    """Where the latency is spent, per event, from the daemons' own telemetry records:
    the publisher's send -> A's ``publish`` record (A's broker, A's intake and commit),
    -> C's ``deliver`` record (A's send, the relay B, C's receive), -> C's subscriber
    (C's MQTT delivery, C's broker, ``mosquitto_sub``)."""
    time.sleep(1.5)  # one spool flush
    published, delivered = spool_times(spool_a, "publish"), spool_times(spool_c, "deliver")
    parts: dict[str, list[float]] = {"intake (A)": [], "mesh (A -> B -> C)": [],
                                     "delivery (C)": []}
    for received, d in deliveries:
        key = d.get("event_id")
        if key not in published or key not in delivered or "t0" not in d.get("attrs", {}):
            continue
        t_pub, t_del = published[key] / 1e9, delivered[key] / 1e9
        parts["intake (A)"].append(t_pub - d["attrs"]["t0"])
        parts["mesh (A -> B -> C)"].append(t_del - t_pub)
        parts["delivery (C)"].append(received - t_del)
    print("  latency by segment (the daemons' telemetry records):")
    for name, values in parts.items():
        if values:
            print(f"    {name:<20} p50 {percentile(values, 0.5) * 1e3:7.2f} ms  p99 "
                  f"{percentile(values, 0.99) * 1e3:7.2f} ms  max {max(values) * 1e3:7.2f} ms"
                  f"  (n={len(values)})")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0, help="events per second")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of the load")
    parser.add_argument("--idle", type=float, default=15.0, help="idle settling time (s)")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench_daemon: needs root (network namespaces)", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="msub-bench-") as tmp:
        mesh = Mesh(Path(tmp))
        with mesh.running():
            status = run(mesh, args)
        configure_logging("critical")  # the in-process node has no broker: quiet
        with_tel = asyncio.run(_inprocess_forward_us(3000, True, Path(tmp)))
        without = asyncio.run(_inprocess_forward_us(3000, False, Path(tmp)))
        print(f"  relay Python path per forwarded event, in-process (2 frames in, 1 out): "
              f"{with_tel:.0f} us with telemetry, {without:.0f} us without")
        deliver = [asyncio.run(_inprocess_deliver_us(1000, Path(tmp), n)) for n in range(5)]
        mean = statistics.fmean(deliver)
        half = 2.776 * statistics.stdev(deliver) / len(deliver) ** 0.5  # t(0.975, 4)
        load = os.getloadavg()
        print(f"  subscriber Python path per delivered event, in-process (1 frame in, the "
              f"delivery kept and queued), 5 runs of 1000: mean {mean:.1f} us, 95 % interval "
              f"+-{half:.1f} us (runs {', '.join(f'{d:.1f}' for d in deliver)}); load average "
              f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        return status


def run(mesh: Mesh, args: argparse.Namespace) -> int:
    a, b, c = mesh.nodes["a"], mesh.nodes["b"], mesh.nodes["c"]
    mesh.wait_neighbors()
    pids = {name: pid_of(node) for name, node in mesh.nodes.items()}

    sub = c.mqtt_sub("meshsub/deliver/bench/#")
    sub.wait_ready(c, "meshsub/deliver/bench/probe")
    c.mqtt_pub("meshsub/sub/bench", "bench/#", retain=True)
    wait_for(lambda: any(r["sub_id"] == "bench" for r in c.ctl("subscriptions")),
             "bench subscription on C")

    time.sleep(args.idle)  # idle: beacons only
    idle_cpu0, idle_c0 = cpu_seconds(pids["b"]), cpu_seconds(pids["c"])
    t_idle0 = time.monotonic()
    time.sleep(args.idle)
    idle_rate = (cpu_seconds(pids["b"]) - idle_cpu0) / (time.monotonic() - t_idle0)
    idle_rate_c = (cpu_seconds(pids["c"]) - idle_c0) / (time.monotonic() - t_idle0)
    idle_rss = {name: proc_status(pid)["VmRSS"] for name, pid in pids.items()}

    kernel0 = {name: kernel_counters(node.ns) for name, node in mesh.nodes.items()}
    fwd0, (user0, sys0), t0 = forwarded(b), cpu_times(pids["b"]), time.monotonic()
    c_cpu0 = cpu_seconds(pids["c"])
    pub = subprocess.run(
        ["ip", "netns", "exec", a.ns, sys.executable, "-c", PUBLISHER, str(a.mqtt_port),
         str(args.rate), str(args.seconds)], capture_output=True, text=True, check=True)
    expected = int(args.rate * args.seconds)
    peak_rss = {name: proc_status(pid)["VmRSS"] for name, pid in pids.items()}
    deadline = time.monotonic() + 120.0  # a hang guard: report what arrived, do not raise
    last, quiet_since = -1, time.monotonic()
    while time.monotonic() < deadline:  # count lines, not parsed JSON: cheap at 1000/s
        arrived = sum('"bench/load"' in line for line in list(sub.lines))
        if arrived >= expected:
            break
        if arrived != last:
            last, quiet_since = arrived, time.monotonic()
        elif time.monotonic() - quiet_since > 30.0:  # nothing more in 30 s: report the rest
            break
        time.sleep(1.0)
    fwd1, (user1, sys1), t1 = forwarded(b), cpu_times(pids["b"]), time.monotonic()
    c_cpu = cpu_seconds(pids["c"]) - c_cpu0
    hwm = {name: proc_status(pid)["VmHWM"] for name, pid in pids.items()}

    latencies = []
    seen: set[int] = set()
    for received, d in sub.deliveries():
        if "event_id" not in d or "i" not in d["attrs"]:
            continue
        seen.add(d["attrs"]["i"])
        latencies.append(received - d["attrs"]["t0"])
    frames = fwd1 - fwd0
    user, system = user1 - user0, sys1 - sys0
    cpu = user + system
    cpu_net = cpu - idle_rate * (t1 - t0)

    load = os.getloadavg()
    print(f"meshsubd benchmark: line A - B - C in network namespaces, flooding, "
          f"{args.rate:g} events/s for {args.seconds:g} s; load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"  publisher: {pub.stdout.strip()}")
    print(f"  delivered on C: {len(seen)}/{expected} distinct, {len(latencies)} deliveries")
    account(mesh, expected, seen, kernel0)
    print("  resident memory, idle (MiB):        "
          + "  ".join(f"{n}={kb / 1024:.1f}" for n, kb in idle_rss.items()))
    print("  resident memory, under load (MiB):  "
          + "  ".join(f"{n}={kb / 1024:.1f}" for n, kb in peak_rss.items()))
    print("  peak resident memory, VmHWM (MiB):  "
          + "  ".join(f"{n}={kb / 1024:.1f}" for n, kb in hwm.items()))
    print(f"  relay B: {frames} messages sent in {t1 - t0:.1f} s, CPU {cpu:.2f} s "
          f"(idle rate {idle_rate * 1000:.1f} ms/s)")
    if frames:
        print(f"  CPU per forwarded frame on B: {cpu / frames * 1e6:.0f} us gross "
              f"(user {user / frames * 1e6:.0f} us, system {system / frames * 1e6:.0f} us), "
              f"{cpu_net / frames * 1e6:.0f} us net of idle; bare msgpack+HMAC work of a "
              f"relay, same run: {baseline_us():.1f} us")
    if seen:
        print(f"  subscriber C: CPU per delivered event {c_cpu / len(seen) * 1e6:.0f} us gross, "
              f"{(c_cpu - idle_rate_c * (t1 - t0)) / len(seen) * 1e6:.0f} us net of idle "
              f"(idle rate {idle_rate_c * 1000:.1f} ms/s)")
    if latencies:
        print(f"  latency MQTT(A) -> MQTT(C), 2 hops: p50 {percentile(latencies, 0.5) * 1e3:.2f} ms"
              f"  p99 {percentile(latencies, 0.99) * 1e3:.2f} ms"
              f"  mean {statistics.fmean(latencies) * 1e3:.2f} ms"
              f"  max {max(latencies) * 1e3:.2f} ms")
        segments(a.spool_dir, c.spool_dir, sub.deliveries())
    sub.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
