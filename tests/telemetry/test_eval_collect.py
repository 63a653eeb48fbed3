"""The live collector against a real mosquitto on a free loopback port.

The broker is restarted in the middle, and the collector is stopped while records
keep coming (and the broker restarted again before it comes back): with QoS 1, a
persistent session and broker persistence nothing is lost, redeliveries
and re-sent records are dropped by their (node, epoch, rec) number, and a gap in
the numbering is counted: exactly the records a daemon's spool deleted before its
live feed shipped them.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mosquitto import Mosquitto, have_mosquitto

from meshsub.runtime.livefeed import FeedSettings, TelemetryFeed
from meshsub.runtime.mqtt import MqttSettings
from meshsub.runtime.spool import TelemetrySpool
from meshsub.runtime.store import Store

mqtt = pytest.importorskip("paho.mqtt.client")

pytestmark = pytest.mark.skipif(not have_mosquitto(), reason="mosquitto is not installed")
TOPIC = "meshsub/telemetry"


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


class CollectorProc:
    def __init__(self, port: int, spool: Path, log: Path) -> None:
        self.args = [sys.executable, "-m", "mesheval.cli", "collect",
                     "--broker", f"127.0.0.1:{port}", "--topic", f"{TOPIC}/#",
                     "--spool", str(spool), "--client-id", "msub-test-collector",
                     "--roll-seconds", "0.3", "--roll-lines", "40", "--reconnect-max", "1"]
        self.log = log.open("ab")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)

    def stop(self) -> int:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(timeout=20)


def record(rec: int, node: int = 1, epoch: int = 7) -> str:
    return json.dumps({"run": "live", "node": node, "protocol": "flooding",
                       "ts_ns": 1000 + rec, "event": "tx", "msg_kind": "beacon", "bytes": 40,
                       "epoch": epoch, "rec": rec})


class Publisher:
    def __init__(self, port: int) -> None:
        self.port = port
        self.client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="msub-test-pub",
                                  protocol=mqtt.MQTTv5)
        self.client.connect("127.0.0.1", port)
        self.client.loop_start()
        wait_for(self.client.is_connected, "publisher connection")

    def send(self, recs: list[int], per_message: int = 10, extra: str = "") -> None:
        wait_for(self.client.is_connected, "publisher reconnection")
        for i in range(0, len(recs), per_message):
            lines = [record(r) for r in recs[i:i + per_message]]
            payload = "\n".join(lines + ([extra] if extra and i == 0 else []))
            info = self.client.publish(f"{TOPIC}/1", payload, qos=1)
            info.wait_for_publish(timeout=10)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def spooled(spool: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(spool.glob("*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines()]
    return out


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Mosquitto]:
    b = Mosquitto(tmp_path, max_queued=100000, autosave_s=1)
    b.start()
    yield b
    b.stop()


def test_collector_survives_broker_and_collector_restarts(broker: Mosquitto,
                                                         tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    collector = CollectorProc(broker.port, spool, tmp_path / "collector.log")
    collector.start()
    try:
        pub = Publisher(broker.port)
        try:
            # the collector must have subscribed before the first publish
            wait_for(lambda: b"connected" in (tmp_path / "collector.log").read_bytes(),
                     "collector connection")
            time.sleep(0.5)
            pub.send(list(range(0, 100)))
            wait_for(lambda: len(spooled(spool)) == 100, "batch A in the spool")

            broker.stop()
            broker.start()
            pub.send(list(range(100, 200)), extra="{not json")
            pub.send(list(range(150, 160)))  # re-sent: duplicates
            wait_for(lambda: len(spooled(spool)) == 200, "batch B after the broker restart")

            assert collector.stop() == 0
            pub.send(list(range(200, 250)))  # queued in the collector's session
            pub.send(list(range(260, 270)))  # 250..259 never sent: a gap
            broker.stop()  # the queue survives a broker restart too (persistence)
            broker.start()
            collector.start()
            wait_for(lambda: len(spooled(spool)) == 260, "batch C after the collector restart")
        finally:
            pub.close()
        assert collector.stop() == 0
    finally:
        if collector.proc is not None and collector.proc.poll() is None:
            collector.proc.kill()
    recs = [r["rec"] for r in spooled(spool)]
    assert sorted(recs) == list(range(250)) + list(range(260, 270))  # nothing lost, no dup
    assert not [p for p in spool.iterdir() if p.name.endswith(".tmp")]
    doc = json.loads((spool / ".collector-msub-test-collector.json").read_text())
    assert doc["missing"] == 10
    assert doc["counters"]["duplicates"] >= 10
    assert doc["counters"]["malformed"] == 1
    assert doc["counters"]["records"] == 260


async def test_gaps_are_the_records_a_daemon_lost_at_its_spool_bound(broker: Mosquitto,
                                                                     tmp_path: Path) -> None:
    """A daemon's feed ships some records, then the broker is away long enough for the
    spool bound to delete unshipped ones: the collector's ``missing`` is exactly what the
    daemon counted as lost, everything else arrives once, and the loss is in the data."""
    async def until(cond: Callable[[], bool], what: str) -> None:
        await asyncio.to_thread(wait_for, cond, what)

    spool_dir = tmp_path / "collected"
    collector = CollectorProc(broker.port, spool_dir, tmp_path / "collector.log")
    collector.start()
    store = Store.in_state_dir(tmp_path / "state")
    spool = TelemetrySpool(tmp_path / "daemon-spool", node=1, epoch=7, run="live",
                           protocol="flooding", max_file_bytes=4096,
                           max_total_bytes=4096 * 3, flush_interval_s=0.02)
    mqtt_settings = MqttSettings(host="127.0.0.1", port=broker.port, reconnect_min_s=0.05,
                                 reconnect_max_s=0.2, telemetry_topic=f"{TOPIC}/1")

    def record(event: str, attrs: Any) -> None:  # what the node's record() does
        spool.emit(event, **attrs)

    feed = TelemetryFeed(mqtt_settings, FeedSettings(f"{TOPIC}/1"), node=1,
                         spool_dir=spool.dir, store=store, record=record)
    spool.on_flush, spool.on_delete = feed.wake, feed.reader.deleted
    try:
        await until(lambda: b"connected" in (tmp_path / "collector.log").read_bytes(),
                    "collector connection")
        await asyncio.sleep(0.5)  # subscribed
        await spool.start()
        await feed.start()
        for peer in range(20):
            spool.emit("neighbor_up", peer=peer)
        await until(lambda: feed.counters["records"] >= 20, "first records shipped")
        broker.stop()
        while spool.counters["files_deleted"] < 4:
            for peer in range(30):
                spool.emit("neighbor_up", peer=peer)
            spool.roll()
        feed.note_losses()
        lost = feed.reader.lost
        assert lost > 0
        await asyncio.to_thread(broker.start)
        for peer in range(10):
            spool.emit("neighbor_down", peer=peer)
        await spool.stop()
        await until(lambda: feed.state == "connected", "feed reconnected")
        await feed.drained()
        await until(lambda: len(spooled(spool_dir)) >= spool.next_rec - lost,
                    "the rest collected")
        assert collector.stop() == 0
    finally:
        await feed.stop()
        store.close()
        if collector.proc is not None and collector.proc.poll() is None:
            collector.proc.kill()
    recs = [r["rec"] for r in spooled(spool_dir)]
    assert len(recs) == len(set(recs)) == spool.next_rec - lost
    doc = json.loads((spool_dir / ".collector-msub-test-collector.json").read_text())
    assert doc["missing"] == lost  # really lost: a gap that stays
    unshipped = [r for r in spooled(spool_dir) if r.get("reason") == "telemetry_unshipped"]
    assert unshipped and unshipped[-1]["bytes"] == lost
