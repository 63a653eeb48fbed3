"""The live telemetry feed on loopback: catch-up throughput by batch size and window, live latency.

A spool of ``--records`` synthetic daemon records (tx/rx/deliver/publish, about
the size the daemon writes) is shipped by ``meshsub.runtime.livefeed`` from a
fresh cursor to a private mosquitto; a subscriber in a child process (paho, QoS
1) counts the records and reports when it has them all. For each setting it
prints records/s, messages/s and the feed's CPU time per record (this
process's CPU: the event loop, the reader threads and the MQTT client; the
subscriber and the broker run elsewhere). Then it writes records live at
``--rate`` per second through a running spool (flush every second, as the
daemon does) and prints the latency from ``emit`` to arrival.

With ``--collector`` the subscriber is ``mesheval collect`` (fsynced spool files,
acknowledgement after the rename) instead, the end-to-end path.

Usage: ``.venv/bin/python bench/bench_livefeed.py [--records 50000] [--rate 200]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "runtime"))

from mosquitto import Mosquitto, have_mosquitto

from meshsub.runtime.livefeed import FeedSettings, TelemetryFeed
from meshsub.runtime.logging import configure_logging
from meshsub.runtime.mqtt import MqttSettings
from meshsub.runtime.spool import TelemetrySpool
from meshsub.runtime.store import Store

NODE = 9
TOPIC = "meshsub/telemetry/9"

SINK = """
import json, sys, time
import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
port, topic, want, cid = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]
seen, lat = set(), []
def on_connect(c, u, f, r, p):
    c.subscribe(topic, qos=1)
def on_subscribe(*a):
    print(json.dumps({"ready": time.time()}), flush=True)
def on_message(c, u, m):
    now = time.time_ns()
    for line in m.payload.splitlines():
        r = json.loads(line)
        seen.add(r["rec"])
        lat.append((now - r["ts_ns"]) / 1e9)
    if len(seen) >= want:
        print(json.dumps({"done": time.time(), "lat": sorted(lat)}), flush=True)
        c.disconnect()
c = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=cid, protocol=mqtt.MQTTv5)
c.on_connect, c.on_subscribe, c.on_message = on_connect, on_subscribe, on_message
c.connect("127.0.0.1", port)
c.loop_forever()
"""


def emit_one(spool: TelemetrySpool, i: int) -> None:
    kind = i % 4
    if kind == 0:
        spool.emit("tx", msg_kind="data", msg_type=16, bytes=212, event_id=f"9-1-{i:x}", hop=1)
    elif kind == 1:
        spool.emit("rx", msg_kind="data", msg_type=16, bytes=212, event_id=f"3-1-{i:x}",
                   hop=2, peer=3)
    elif kind == 2:
        spool.emit("deliver", event_id=f"3-1-{i:x}", sub_id="hot", hop=2,
                   topic="sensors/temperature/lab")
    else:
        spool.emit("publish", event_id=f"9-1-{i:x}", topic="sensors/temperature/lab",
                   content='sensors/temperature/lab room="lab 1" value=21.5')


async def make_spool(directory: Path, records: int) -> int:
    spool = TelemetrySpool(directory, node=NODE, epoch=1, max_total_bytes=10**10,
                           max_buffer_records=10**9, flush_interval_s=3600)
    await spool.start()
    for i in range(records):
        emit_one(spool, i)
        if i % 5000 == 4999:
            spool.flush()
    await spool.stop()
    return sum(p.stat().st_size for p in directory.iterdir())


class Sink:
    """The subscriber, in a child process: ``mesheval collect`` or the paho counter."""

    def __init__(self, port: int, want: int, client_id: str, collector: Path | None) -> None:
        self.collector = collector
        self.client = client_id
        if collector is None:
            self.proc = subprocess.Popen([sys.executable, "-c", SINK, str(port), TOPIC,
                                          str(want), client_id], stdout=subprocess.PIPE,
                                         text=True)
            assert self.proc.stdout is not None
            json.loads(self.proc.stdout.readline())  # subscribed
        else:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "mesheval.cli", "collect", "--broker",
                 f"127.0.0.1:{port}", "--topic", TOPIC, "--spool", str(collector),
                 "--client-id", client_id], stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True)
            assert self.proc.stderr is not None
            while "connected to" not in self.proc.stderr.readline():
                pass
            time.sleep(0.5)  # subscribed
        self.want = want

    def finished(self) -> dict[str, object]:
        if self.collector is None:
            assert self.proc.stdout is not None
            doc: dict[str, object] = json.loads(self.proc.stdout.readline())
            self.proc.wait(timeout=30)
            return doc
        state = self.collector / f".collector-{self.client}.json"
        while True:
            try:
                if json.loads(state.read_text())["counters"]["records"] >= self.want:
                    break
            except (OSError, ValueError, KeyError):
                pass
            time.sleep(0.01)
        done = time.time()
        self.proc.terminate()
        self.proc.communicate(timeout=30)
        return {"done": done}


async def ship(broker: Mosquitto, work: Path, spool_dir: Path, records: int,
               settings: FeedSettings, collector: bool, run: int) -> tuple[float, float, int]:
    """Seconds from start to the last record at the sink, CPU seconds, messages."""
    cid = f"bench-sink-{run}"
    sink_dir = work / f"collected-{run}" if collector else None
    sink = Sink(broker.port, records, cid, sink_dir)
    store = Store.in_state_dir(work / f"state-{run}")
    mqtt = MqttSettings(host="127.0.0.1", port=broker.port, telemetry_topic=TOPIC)
    feed = TelemetryFeed(mqtt, settings, node=NODE, spool_dir=spool_dir, store=store)
    cpu0, t0 = time.process_time(), time.time()
    await feed.start()
    done = await asyncio.to_thread(sink.finished)
    cpu = time.process_time() - cpu0
    await feed.stop()
    store.close()
    return float(done["done"]) - t0, cpu, feed.counters["messages"]  # type: ignore[arg-type]


async def live_latency(broker: Mosquitto, work: Path, rate: float, seconds: float,
                       settings: FeedSettings) -> list[float]:
    n = int(rate * seconds)
    sink = Sink(broker.port, n, "bench-live", None)
    store = Store.in_state_dir(work / "state-live")
    spool = TelemetrySpool(work / "live-spool", node=NODE, epoch=1)  # flush every second
    mqtt = MqttSettings(host="127.0.0.1", port=broker.port, telemetry_topic=TOPIC)
    feed = TelemetryFeed(mqtt, settings, node=NODE, spool_dir=spool.dir, store=store)
    spool.on_flush, spool.on_delete = feed.wake, feed.reader.deleted
    await spool.start()
    await feed.start()
    start = time.monotonic()
    for i in range(n):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            await asyncio.sleep(delay)
        emit_one(spool, i)
    done = await asyncio.to_thread(sink.finished)
    await spool.stop()
    await feed.stop()
    store.close()
    return list(done["lat"])  # type: ignore[call-overload]


async def main(args: argparse.Namespace) -> None:
    configure_logging("error")
    with tempfile.TemporaryDirectory(prefix="msub-bench-feed-") as tmp:
        work = Path(tmp)
        broker = Mosquitto(work, persistent=False, max_queued=10**6)
        broker.start()
        try:
            spool_dir = work / "spool"
            size = await make_spool(spool_dir, args.records)
            print(f"spool: {args.records} records, {size / 1e6:.1f} MB, "
                  f"{size / args.records:.0f} B/record; sink: "
                  f"{'mesheval collect' if args.collector else 'paho subscriber'}\n")
            print("| batch records | window | records/s | messages/s | feed CPU µs/record |")
            print("|---:|---:|---:|---:|---:|")
            grid = [(b, 8) for b in args.batches] + [(args.batch, w) for w in args.windows]
            for run, (batch, window) in enumerate(grid, 1):
                settings = FeedSettings(TOPIC, batch_records=batch, batch_bytes=1 << 20,
                                        window=window)
                secs, cpu, messages = await ship(broker, work, spool_dir, args.records,
                                                 settings, args.collector, run)
                print(f"| {batch} | {window} | {args.records / secs:,.0f} | "
                      f"{messages / secs:,.0f} | {cpu / args.records * 1e6:.1f} |",
                      flush=True)
            lat = await live_latency(broker, work, args.rate, args.seconds,
                                     FeedSettings(TOPIC))
            q = statistics.quantiles(lat, n=100)
            print(f"\nlive at {args.rate:.0f} records/s for {args.seconds:.0f} s "
                  f"(spool flush 1 s, default settings): latency emit -> subscriber "
                  f"median {statistics.median(lat):.3f} s, p99 {q[98]:.3f} s, "
                  f"max {max(lat):.3f} s")
        finally:
            broker.stop()


if __name__ == "__main__":
    if not have_mosquitto():
        sys.exit("bench_livefeed: mosquitto is not installed")
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--records", type=int, default=50000)
    p.add_argument("--batches", type=int, nargs="+", default=[1, 10, 50, 200, 500, 2000])
    p.add_argument("--batch", type=int, default=500, help="batch size for the window sweep")
    p.add_argument("--windows", type=int, nargs="+", default=[1, 4, 16])
    p.add_argument("--rate", type=float, default=200.0)
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--collector", action="store_true")
    asyncio.run(main(p.parse_args()))
