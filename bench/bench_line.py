"""The line A - B - C on loopback, without root: where every event goes, and where its time goes.

Three real meshsubd (flooding, telemetry on, each with its own mosquitto) on
127.0.0.1, each "broadcast" a unicast copy to its static peers: A hears only
B, B hears A and C, C hears only B (the e2e mesh of ``bench_daemon.py``,
without namespaces). ``--rate`` events/s for ``--seconds`` are published with
QoS 1 on A's broker (paho, the send time in the payload) and received on C's
broker by ``mosquitto_sub``. Printed: how many arrived, the events missing (as
runs), every node's counters that account for an event (sent, received,
dropped by reason, queued, waiting for an fsync), the latency MQTT(A) ->
MQTT(C) and its split by segment from the daemons' telemetry records.

    .venv/bin/python bench/bench_line.py [--rate 1000] [--seconds 10]
    .venv/bin/python bench/bench_line.py --commits 1000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_daemon import PUBLISHER, missing_runs, percentile, print_account, print_node, segments
from bench_relay import KEY, VENV_BIN, free_tcp_port, free_udp

PEERS = {"a": ["b"], "b": ["a", "c"], "c": ["b"]}


def write_config(work: Path, name: str, node_id: int, ports: dict[str, int],
                 mqtt_port: int) -> Path:
    state = work / name
    state.mkdir()
    peers = ", ".join(f'"127.0.0.1:{ports[p]}"' for p in PEERS[name])
    config = state / "meshsub.toml"
    config.write_text("\n".join([
        "[node]", f"id = {node_id}", f'name = "line-{name}"',
        "[link]", 'interface = ""', f"port = {ports[name]}",
        "[discovery]", "beacon_interval = 1.0", "min_interval = 0.5", "neighbor_timeout = 5",
        "zeroconf = false", f"static_peers = [{peers}]",
        "[protocol]", 'name = "flooding"',
        "[security]", "current_key = 1", "[security.keys]", f'1 = "{KEY}"',
        "[mqtt]", 'host = "127.0.0.1"', f"port = {mqtt_port}",
        "[storage]", f'state_dir = "{state / "state"}"', f'spool_dir = "{state / "spool"}"',
        "[telemetry]", "roll_seconds = 5.0",
        "[log]", 'level = "info"',
    ]) + "\n")
    return config


def ctl(work: Path, name: str, *args: str) -> Any:
    proc = subprocess.run([str(VENV_BIN / "meshsubctl"), "--json", "--state-dir",
                           str(work / name / "state"), *args], capture_output=True, text=True,
                          timeout=30, check=False)
    return json.loads(proc.stdout) if proc.returncode == 0 else {}


def wait(cond: Any, what: str, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return
        time.sleep(0.2)
    raise SystemExit(f"bench_line: timed out waiting for {what}")


def commit_latency(publications: int, background: bool) -> list[float]:
    """Seconds per accepted publication's commits (outbox and ingress written unsynced as
    the bridge does, then the removal after the feed), 100 per second, with SQLite's own
    checkpoint in the committing thread or a worker checkpointing every 0.1 s as the node
    does (``Node._checkpoints``)."""
    import threading

    from meshsub.core.api import MessageId
    from meshsub.core.content import Event
    from meshsub.runtime.store import Ingress, LocalPublisher, Store

    work = Path(tempfile.mkdtemp(prefix="msub-commits-"))
    store = Store(work / "meshsub.db")
    ids = iter(range(1, publications + 1))
    publisher = LocalPublisher(store, lambda: MessageId(1, 1, next(ids)), lambda e, i: None)
    stop = threading.Event()

    def checkpoints() -> None:
        seen = store.commits
        while not stop.wait(0.1):
            if store.commits != seen:
                seen = store.commits
                store.checkpoint_wal()

    worker = threading.Thread(target=checkpoints)
    if background:
        worker.start()
    took = []
    try:
        for i in range(publications):
            start = time.perf_counter()
            event = Event("bench/load", {"i": i, "t0": time.time()})
            (event_id,) = publisher.persist([(event, Ingress(i % 65535, os.urandom(16)))],
                                            durable=False)
            publisher.feed_many([(event, event_id)])
            took.append(time.perf_counter() - start)
            time.sleep(0.01)
    finally:
        stop.set()
        if background:
            worker.join()
        store.close()
        shutil.rmtree(work, ignore_errors=True)
    return took


def commits_main(publications: int) -> int:
    load = os.getloadavg()
    print(f"commit latency per accepted publication, {publications} at 100/s; load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for background, label in ((False, "SQLite's checkpoint in the loop (before)"),
                              (True, "checkpoints in a worker every 0.1 s (after)")):
        took = commit_latency(publications, background)
        print(f"  {label:<45} p50 {percentile(took, 0.5) * 1e3:6.2f} ms  p99 "
              f"{percentile(took, 0.99) * 1e3:6.2f} ms  max {max(took) * 1e3:6.2f} ms")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=1000.0, help="events per second")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of the load")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--commits", type=int, default=0, metavar="N",
                        help="instead: the store's commit latency for N publications, "
                             "SQLite's own checkpoint against the node's background one")
    args = parser.parse_args(argv)
    if args.commits:
        return commits_main(args.commits)
    mosquitto = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
    work = Path(tempfile.mkdtemp(prefix="msub-line-"))
    procs: list[subprocess.Popen[bytes]] = []
    try:
        ports: dict[str, int] = {}
        for name in PEERS:
            udp = free_udp("127.0.0.1")
            ports[name] = udp.getsockname()[1]
            udp.close()
        mqtt = {name: free_tcp_port() for name in PEERS}
        pids = {}
        for node_id, name in enumerate(PEERS, start=1):
            conf = work / f"mosquitto-{name}.conf"
            conf.write_text(f"listener {mqtt[name]} 127.0.0.1\nallow_anonymous true\n"
                            "max_queued_messages 100000\nmax_inflight_messages 256\n")
            procs.append(subprocess.Popen([mosquitto, "-c", str(conf)],
                                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            config = write_config(work, name, node_id, ports, mqtt[name])
            log = open(work / name / "log", "wb")  # noqa: SIM115 (the child owns it)
            daemon = subprocess.Popen([str(VENV_BIN / "meshsubd"), "--config", str(config)],
                                      stdout=log, stderr=log)
            log.close()
            procs.append(daemon)
            pids[name] = daemon.pid
        wait(lambda: all((work / n / "state" / "meshsubd.sock").exists() for n in PEERS),
             "the daemons")
        wait(lambda: len(ctl(work, "b", "neighbors")) == 2 and len(ctl(work, "a", "neighbors"))
             and len(ctl(work, "c", "neighbors")), "the neighbours")
        out = open(work / "deliveries", "wb")  # noqa: SIM115
        sub = subprocess.Popen(
            ["mosquitto_sub", "-V", "5", "-q", "1", "-p", str(mqtt["c"]),
             "-t", "meshsub/deliver/bench/#", "-F", "%U %p"], stdout=out,
            stderr=subprocess.DEVNULL)
        procs.insert(0, sub)
        subprocess.run(["mosquitto_pub", "-V", "5", "-q", "1", "-r", "-p", str(mqtt["c"]),
                        "-t", "meshsub/sub/bench", "-m", "bench/#"], check=True)
        wait(lambda: any(r.get("sub_id") == "bench" for r in ctl(work, "c", "subscriptions")),
             "the subscription on C")
        time.sleep(2.0)  # the subscription floods to A (flooding: not needed, but settle)
        pub = subprocess.run([sys.executable, "-c", PUBLISHER, str(mqtt["a"]), str(args.rate),
                              str(args.seconds)], capture_output=True, text=True, check=True)
        expected = int(args.rate * args.seconds)
        path = work / "deliveries"
        last, quiet = -1, time.monotonic()
        deadline = time.monotonic() + 120.0
        while time.monotonic() < deadline:
            count = path.read_bytes().count(b"\n")
            if count >= expected:
                break
            if count != last:
                last, quiet = count, time.monotonic()
            elif time.monotonic() - quiet > 20.0:
                break
            time.sleep(0.5)
        deliveries = []
        for line in path.read_text(errors="replace").splitlines():
            stamp, _, payload = line.partition(" ")
            try:
                deliveries.append((float(stamp), json.loads(payload)))
            except ValueError:
                continue
        seen = {d["attrs"]["i"] for _, d in deliveries if "i" in d.get("attrs", {})}
        latencies = [r - d["attrs"]["t0"] for r, d in deliveries if "t0" in d.get("attrs", {})]
        load = os.getloadavg()
        print(f"line benchmark: A - B - C on loopback, flooding, {args.rate:g} events/s for "
              f"{args.seconds:g} s; load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        print(f"  publisher: {pub.stdout.strip()}")
        print(f"  delivered on C: {len(seen)}/{expected} distinct, {len(deliveries)} deliveries")
        if len(seen) < expected:
            print(f"  missing on C: {missing_runs(expected, seen)}")
        statuses = {name: ctl(work, name, "status") for name in PEERS}
        for name in PEERS:
            print_node(name, statuses[name], None)
        print_account(statuses, len(seen))
        if latencies:
            print(f"  latency MQTT(A) -> MQTT(C), 2 hops: p50 "
                  f"{percentile(latencies, 0.5) * 1e3:.2f} ms  p99 "
                  f"{percentile(latencies, 0.99) * 1e3:.2f} ms  max {max(latencies) * 1e3:.2f} ms")
            segments(work / "a" / "spool", work / "c" / "spool", deliveries)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
        if args.keep:
            print(f"  work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
