"""The live path end to end: daemons ship their spools over MQTT while things restart.

Two real ``meshsubd`` processes (flooding over loopback UDP, no root: the link
"broadcasts" as unicast copies to static peers) write telemetry (beacons,
publications, tx/rx, deliveries) and ship it live to one private mosquitto;
a ``mesheval collect`` process writes it into its spool. Meanwhile the broker
is restarted twice (once while the collector is away), one daemon is killed
with SIGKILL and started again (a new boot epoch; its cursor was saved up to
a second before, so records come twice), and the collector is restarted.
At the end the daemons stop (SIGTERM: the last spool file is closed, the feed
drains) and the multiset of records in the collector's spool must equal the
multiset of records in the daemons' own spool files: full records, no
duplicate, nothing missing, no temp file left.
"""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import paho.mqtt.client as mqtt
import pytest
from mosquitto import Mosquitto, have_mosquitto
from paho.mqtt.enums import CallbackAPIVersion

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not have_mosquitto(), reason="mosquitto is not installed")]

KEY = "071634b1e493c4a893be58547237e9cb25ee65c9c0a3a2db3f22fae24988d055"  # a test key
TOPIC = "meshsub/telemetry"
RUN = "livepath"


def wait_for(cond: Callable[[], Any], what: str, timeout: float = 60.0) -> None:
    """Poll ``cond``; the timeout is a hang guard, not a timing assertion."""
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def canonical(line: str) -> str:
    """A record as text that compares equal whenever the records are equal."""
    return json.dumps(json.loads(line), sort_keys=True)


def spool_lines(directory: Path, hidden: bool = False) -> list[str]:
    """Every line of the spool's ``*.jsonl`` files (hidden ones, being written, too?)."""
    out: list[str] = []
    if not directory.exists():
        return out
    for path in sorted(directory.iterdir()):
        if path.suffix == ".jsonl" and (hidden or not path.name.startswith(".")):
            out += path.read_text(encoding="utf-8").splitlines()
    return out


class Daemon:
    """One ``meshsubd`` process with its own state, spool, link port and MQTT prefix."""

    def __init__(self, tmp: Path, node: int, port: int, peer: int, broker: int) -> None:
        self.node = node
        self.state = tmp / f"n{node}"
        self.spool = self.state / "spool"
        self.state.mkdir()
        self.config = self.state / "meshsub.toml"
        self.config.write_text(f"""
[node]
id = {node}
name = "n{node}"
[link]
interface = ""
port = {port}
[discovery]
beacon_interval = 0.2
min_interval = 0.1
zeroconf = false
static_peers = ["127.0.0.1:{peer}"]
[protocol]
name = "flooding"
[protocol.params]
ttl = 4
[security]
current_key = 1
[security.keys]
1 = "{KEY}"
[mqtt]
host = "127.0.0.1"
port = {broker}
topic_prefix = "n{node}"
[storage]
state_dir = "{self.state}"
spool_dir = "{self.spool}"
[telemetry]
run = "{RUN}"
roll_seconds = 2.0
mqtt_topic = "{TOPIC}/{node}"
[log]
level = "info"
""", encoding="utf-8")
        self.log = self.state / "meshsubd.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        meshsubd = Path(sys.executable).parent / "meshsubd"
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen([str(meshsubd), "--config", str(self.config)],
                                         stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        wait_for(lambda: self.status_or_none() is not None, f"n{self.node} control socket")

    def signal(self, signum: int) -> int:
        assert self.proc is not None
        self.proc.send_signal(signum)
        code = self.proc.wait(timeout=60)
        self.proc = None
        return code

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def request(self, obj: dict[str, Any]) -> Any:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(self.state / "meshsubd.sock"))
            s.sendall(json.dumps(obj).encode() + b"\n")
            reply = json.loads(s.makefile("rb").readline())
        assert reply["ok"], reply
        return reply["result"]

    def status_or_none(self) -> dict[str, Any] | None:
        if self.proc is None or self.proc.poll() is not None:
            return None
        try:
            return dict(self.request({"cmd": "status"}))
        except (OSError, ValueError):
            return None

    def live(self) -> dict[str, Any]:
        status = self.status_or_none()
        return {} if status is None else dict(status["telemetry"]["live"])

    def written(self) -> int:
        """Records in the local spool so far (the file being written included)."""
        return len(spool_lines(self.spool, hidden=True))


class Collector:
    def __init__(self, port: int, spool: Path, log: Path) -> None:
        self.spool = spool
        self.args = [sys.executable, "-m", "mesheval.cli", "collect",
                     "--broker", f"127.0.0.1:{port}", "--topic", f"{TOPIC}/#",
                     "--spool", str(spool), "--client-id", "msub-live-collector",
                     "--roll-seconds", "0.5", "--reconnect-max", "1"]
        self.log = log
        self.proc: subprocess.Popen[bytes] | None = None
        self.out = ""

    def start(self) -> None:
        mark = self.log.stat().st_size if self.log.exists() else 0
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(self.args, stdout=subprocess.PIPE, stderr=log,
                                         stdin=subprocess.DEVNULL)
        wait_for(lambda: b"connected to" in self.log.read_bytes()[mark:],
                 "collector connected")

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        out, _ = self.proc.communicate(timeout=60)
        self.out = out.decode()
        code = self.proc.returncode
        self.proc = None
        return code

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)

    def records(self) -> list[str]:
        return spool_lines(self.spool)


class Workload(threading.Thread):
    """Publishes events on both daemons through their control sockets until stopped;
    a daemon that is restarting simply misses a few."""

    def __init__(self, daemons: list[Daemon]) -> None:
        super().__init__(daemon=True)
        self.daemons = daemons
        self.stopped = threading.Event()
        self.published = 0

    def run(self) -> None:
        i = 0
        while not self.stopped.wait(0.03):
            i += 1
            daemon = self.daemons[i % len(self.daemons)]
            try:
                daemon.request({"cmd": "pub", "event": f"sensors/t{daemon.node} v={i}"})
                self.published += 1
            except (OSError, ValueError, AssertionError):
                pass


def subscribe_retained(port: int, prefix: str, expression: str) -> None:
    """An application's retained subscription (kept by the broker and the daemon)."""
    client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=f"msub-app-{prefix}",
                         protocol=mqtt.MQTTv5)
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        client.publish(f"{prefix}/sub/all", expression, qos=1, retain=True) \
            .wait_for_publish(timeout=10)
    finally:
        client.disconnect()
        client.loop_stop()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[Mosquitto, list[Daemon], Collector]]:
    broker = Mosquitto(tmp_path, persistent=True, max_queued=1_000_000)
    p1, p2 = free_udp_port(), free_udp_port()
    daemons = [Daemon(tmp_path, 1, p1, p2, broker.port), Daemon(tmp_path, 2, p2, p1, broker.port)]
    collector = Collector(broker.port, tmp_path / "collected", tmp_path / "collector.log")
    try:
        yield broker, daemons, collector
    finally:  # every process goes, whatever happened
        for daemon in daemons:
            daemon.kill()
        collector.kill()
        broker.stop()


def test_collected_spool_equals_the_daemons_spools(
        world: tuple[Mosquitto, list[Daemon], Collector]) -> None:
    broker, daemons, collector = world
    d1, d2 = daemons
    broker.start()
    collector.start()
    for daemon in daemons:
        daemon.start()
    for daemon in daemons:
        subscribe_retained(broker.port, f"n{daemon.node}", "sensors/#")
    wait_for(lambda: all(d.live().get("state") == "connected" for d in daemons),
             "both feeds connected")
    workload = Workload(daemons)
    workload.start()
    try:
        def collected_grows(by: int) -> None:
            target = len(collector.records()) + by
            wait_for(lambda: len(collector.records()) >= target, f"{by} more records collected")

        def written_while_broker_down() -> None:
            # the feeds noticed (they are retrying), and records pile up on disk meanwhile
            wait_for(lambda: all(d.live().get("state") in ("connecting", "disconnected")
                                 for d in daemons), "both feeds without a broker")
            before = [d.written() for d in daemons]
            wait_for(lambda: all(d.written() >= b + 200 for d, b in zip(daemons, before,
                                                                       strict=True)),
                     "records written while the broker is down")

        collected_grows(300)

        # 1: the broker restarts while both daemons write
        broker.stop()
        written_while_broker_down()
        broker.start()
        collected_grows(300)

        # 2: daemon 2 dies (SIGKILL: no drain, cursor up to a second old) and comes back
        assert d2.proc is not None
        d2.proc.kill()
        d2.proc.wait(timeout=10)
        d2.proc = None
        d2.start()
        wait_for(lambda: d2.live().get("state") == "connected", "restarted daemon connected")
        collected_grows(300)

        # 3: the collector goes away, the broker restarts meanwhile, the collector returns
        assert collector.stop() == 0
        broker.stop()
        written_while_broker_down()
        broker.start()
        collector.start()
        collected_grows(300)
        # before the end, both feeds are back and following (a daemon stopped while its
        # feed waits to reconnect keeps the rest for its next start, which this test
        # would not see)
        wait_for(lambda: all(d.live().get("state") == "connected"
                             and d.live()["backlog_bytes"] < 32768 for d in daemons),
                 "both feeds caught up")
        connects = d1.live()["counters"]["connects"]
    finally:
        workload.stopped.set()
        workload.join(timeout=10)

    # the end: SIGTERM closes and renames the last spool file, the feed drains
    assert [d.signal(signal.SIGTERM) for d in daemons] == [0, 0]
    for daemon in daemons:
        assert not [p for p in daemon.spool.iterdir() if p.name.startswith(".current")]
    local = Counter(canonical(line) for d in daemons for line in spool_lines(d.spool))
    with contextlib.suppress(AssertionError):  # the comparison below says what is missing
        wait_for(lambda: len(collector.records()) >= sum(local.values()),
                 f"the collector has all {sum(local.values())} records")
    assert collector.stop() == 0

    collected = Counter(canonical(line) for line in collector.records())
    missing, extra = local - collected, collected - local
    assert not missing and not extra, (len(missing), len(extra))
    assert collected == local  # the same records, each as often (once)
    keys = Counter((r["run"], r["node"], r["epoch"], r["rec"])
                   for r in map(json.loads, collected))
    assert max(keys.values()) == 1
    assert not [p.name for p in collector.spool.iterdir() if p.name.endswith(".tmp")]

    # what happened on the way, for the log and as a check that the restarts really hit
    summary = json.loads(collector.out.strip().splitlines()[-1])
    epochs = {(r["node"], r["epoch"]) for r in map(json.loads, collected)}
    events = Counter(r["event"] for r in map(json.loads, collected))
    assert connects >= 3  # daemon 1's feed reconnected after each broker restart
    assert len({e for n, e in epochs if n == 2}) == 2  # daemon 2 ran in two boot epochs
    assert summary["missing"] == 0
    assert {"tx", "rx", "publish", "deliver"} <= set(events)
    print(f"\nlive path: {sum(local.values())} records local = collected "
          f"({dict(events)}), epochs {sorted(epochs)}, published {workload.published}, "
          f"collector {summary}, daemon 1 feed connects {connects}")
