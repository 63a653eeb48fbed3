"""The live telemetry feed against a real mosquitto: catch-up, restarts, cursor, losses."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mosquitto import Mosquitto, have_mosquitto
from telemetry_sink import Sink

from meshsub.runtime.livefeed import FeedSettings, TelemetryFeed
from meshsub.runtime.mqtt import MqttSettings
from meshsub.runtime.spool import TelemetrySpool
from meshsub.runtime.store import Store

pytestmark = pytest.mark.skipif(not have_mosquitto(), reason="mosquitto not installed")
NODE = 7
TOPIC = "meshsub/telemetry/7"


class Broker(Mosquitto):
    async def start(self) -> None:  # type: ignore[override]
        await asyncio.to_thread(super().start)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    b = Broker(tmp_path, persistent=True, max_queued=100000)
    await b.start()
    yield b
    b.stop()


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.in_state_dir(tmp_path / "state")
    yield s
    s.close()


@pytest.fixture
def sink(broker: Broker) -> Iterator[Sink]:
    s = Sink(broker.port, TOPIC)
    assert s.subscribed.wait(10)
    yield s
    s.close()


async def until(cond: Callable[[], Any], what: str, timeout: float = 20.0) -> None:
    """Poll ``cond`` (a hang guard, not a timing assertion)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def make_spool(tmp_path: Path, epoch: int, **kw: Any) -> TelemetrySpool:
    return TelemetrySpool(tmp_path / "spool", node=NODE, epoch=epoch, flush_interval_s=0.02,
                          **kw)


def make_feed(broker: Broker, store: Store, spool: TelemetrySpool, **kw: Any) -> TelemetryFeed:
    mqtt = MqttSettings(host="127.0.0.1", port=broker.port, reconnect_min_s=0.05,
                        reconnect_max_s=0.2, telemetry_topic=TOPIC)

    def record(event: str, attrs: Any) -> None:
        spool.emit(event, **attrs)

    feed = TelemetryFeed(mqtt, FeedSettings(TOPIC, **kw), node=NODE, spool_dir=spool.dir,
                         store=store, record=record)
    spool.on_flush, spool.on_delete = feed.wake, feed.reader.deleted
    return feed


def by_epoch(sink: Sink) -> list[tuple[int, int]]:
    return [(r["epoch"], r["rec"]) for r in sink.records()]


async def test_broker_restart_mid_stream_loses_nothing(broker: Broker, store: Store,
                                                       sink: Sink, tmp_path: Path) -> None:
    spool = make_spool(tmp_path, 1, max_file_bytes=2000)  # many small files: rolls too
    feed = make_feed(broker, store, spool, batch_records=7)
    await spool.start()
    await feed.start()
    try:
        for peer in range(100):
            spool.emit("neighbor_up", peer=peer)
        await until(lambda: len(sink.recs()) >= 100, "first hundred")
        broker.stop()
        for peer in range(100, 300):  # written while the broker is gone
            spool.emit("neighbor_up", peer=peer)
            if peer % 50 == 0:
                await asyncio.sleep(0.05)
        await until(lambda: feed.reader.backlog_bytes() > 0, "backlog on disk")
        await broker.start()
        for peer in range(300, 400):
            spool.emit("neighbor_up", peer=peer)
        await until(lambda: set(sink.recs()) >= set(range(400)), "all after the restart")
        await spool.stop()
        await feed.drained()
    finally:
        await feed.stop()
    records = sink.records()
    assert sorted({r["rec"] for r in records}) == list(range(400))
    # repeats (the feed's re-sends, the broker's redeliveries to the sink after its
    # restart) are identical copies, which the collector drops by number
    distinct = {r["rec"]: r for r in records}
    assert all(r == distinct[r["rec"]] for r in records)
    assert feed.counters["connects"] >= 2 and feed.counters["records"] >= 400
    assert feed.cursor is not None and feed.reader.backlog_bytes() == 0
    assert store.feed_cursor() == (feed.cursor.epoch, feed.cursor.n, feed.cursor.offset)
    status = feed.status()
    assert status["state"] == "stopped" and status["lost"] == 0 and status["in_flight"] == 0


async def test_clean_restart_resumes_at_the_cursor(broker: Broker, store: Store, sink: Sink,
                                                   tmp_path: Path) -> None:
    spool = make_spool(tmp_path, 1)
    feed = make_feed(broker, store, spool)
    await spool.start()
    await feed.start()
    # connected first: a feed stopped before it ever connected ships nothing now (its
    # cursor stays, so the next start ships it), and this test is about the cursor
    await until(lambda: feed.state == "connected", "the feed connected")
    for peer in range(30):
        spool.emit("neighbor_up", peer=peer)
    await spool.stop()
    await feed.stop()  # drains, saves the cursor
    await until(lambda: len(sink.recs()) >= 30, "the first epoch at the sink")
    assert sink.recs() == list(range(30))
    spool = make_spool(tmp_path, 2)  # the next boot epoch
    spool.emit("neighbor_up", peer=1)  # buffered before the feed starts: shipped too
    feed = make_feed(broker, store, spool)
    await spool.start()
    await feed.start()
    try:
        await until(lambda: len(sink.recs()) >= 31, "the new epoch's record")
        await spool.stop()
        await feed.drained()
    finally:
        await feed.stop()
    assert by_epoch(sink) == [(1, r) for r in range(30)] + [(2, 0)]  # nothing twice


async def test_crash_resends_since_the_saved_cursor_never_less(broker: Broker, store: Store,
                                                               sink: Sink,
                                                               tmp_path: Path) -> None:
    """At-least-once: the cursor is saved after the broker's acknowledgement, at most every
    save_every_s; a crash in between re-sends records the collector drops by number."""
    spool = make_spool(tmp_path, 1)
    feed = make_feed(broker, store, spool, batch_records=5, save_every_s=3600)
    await spool.start()
    await feed.start()
    for peer in range(5):
        spool.emit("neighbor_up", peer=peer)
    await until(lambda: feed.counters["records"] == 5, "first batch acknowledged")
    saved = store.feed_cursor()  # the first acknowledgement is saved at once
    for peer in range(5, 40):
        spool.emit("neighbor_up", peer=peer)
    await until(lambda: feed.counters["records"] == 40, "all acknowledged")
    assert store.feed_cursor() == saved  # not saved again yet
    assert feed._task is not None
    feed._task.cancel()  # the process dies: no stop(), no save
    await asyncio.gather(feed._task, return_exceptions=True)
    await spool.stop()
    feed.reader.close()
    spool = make_spool(tmp_path, 2)
    feed = make_feed(broker, store, spool)
    await spool.start()
    await feed.start()
    try:
        spool.emit("neighbor_up", peer=0)
        await until(lambda: (2, 0) in by_epoch(sink), "the new epoch")
    finally:
        await spool.stop()
        await feed.stop()
    got = by_epoch(sink)
    assert got[:40] == [(1, r) for r in range(40)]
    assert got[40:] == [(1, r) for r in range(5, 40)] + [(2, 0)]  # re-sent, in order


async def test_records_deleted_before_shipping_are_counted_and_written_down(
        broker: Broker, store: Store, sink: Sink, tmp_path: Path) -> None:
    spool = make_spool(tmp_path, 1, max_file_bytes=4096, max_total_bytes=4096 * 3)
    feed = make_feed(broker, store, spool)
    broker.stop()
    await spool.start()
    await feed.start()
    try:
        while spool.counters["files_deleted"] < 4:  # the broker is away: the backlog overflows
            for peer in range(30):
                spool.emit("neighbor_up", peer=peer)
            spool.roll()
        feed.note_losses()  # the node's housekeeping does this every second
        lost = feed.reader.lost
        assert lost > 0 and feed.status()["lost"] == lost
        await broker.start()
        await spool.stop()  # the counter record goes into the last file
        await until(lambda: feed.state == "connected", "connected")
        await feed.drained()
    finally:
        await feed.stop()
    await until(lambda: len(set(sink.recs())) + lost >= spool.next_rec, "the rest at the sink")
    recs = sink.recs()
    assert len(recs) == len(set(recs))
    # every number the spool gave out was shipped or counted as lost (none skipped silently)
    assert len(recs) + lost == spool.next_rec
    counters = [r for r in sink.records() if r["event"] == "counter"
                and r["reason"] == "telemetry_unshipped"]
    assert counters and counters[-1]["bytes"] == lost


async def test_the_feed_notices_the_broker_leaving_without_sending(
        broker: Broker, store: Store, sink: Sink, tmp_path: Path) -> None:
    """aiomqtt fails a publication only at its timeout: the feed watches the connection
    itself, so it reconnects at once instead of after ``timeout_s`` of silence, and its
    status says so even when it has nothing to send."""
    spool = make_spool(tmp_path, 1)
    feed = make_feed(broker, store, spool)
    await spool.start()
    await feed.start()
    try:
        spool.emit("neighbor_up", peer=1)
        await until(lambda: feed.counters["records"] == 1, "shipped")
        broker.stop()  # the feed is idle: nothing in flight, nothing to send
        await until(lambda: feed.state != "connected", "the loss noticed", timeout=5.0)
        assert feed.counters["disconnects"] == 1
        await broker.start()
        await until(lambda: feed.counters["connects"] == 2, "reconnected")
    finally:
        await spool.stop()
        await feed.stop()


def test_bad_settings() -> None:
    for kw in ({"topic": ""}, {"topic": "t", "window": 0}, {"topic": "t", "window": 21},
               {"topic": "t", "batch_records": 0}, {"topic": "t", "batch_bytes": 10},
               {"topic": "t", "poll_s": 0}):
        with pytest.raises(ValueError):
            FeedSettings(**kw)


async def test_without_a_broker_the_cursor_stays_and_stop_is_prompt(store: Store,
                                                                   tmp_path: Path) -> None:
    mqtt = MqttSettings(host="127.0.0.1", port=1, reconnect_min_s=0.05, reconnect_max_s=0.1)
    spool = make_spool(tmp_path, 1)
    feed = TelemetryFeed(mqtt, FeedSettings(TOPIC), node=NODE, spool_dir=spool.dir,
                         store=store)
    spool.on_flush = feed.wake
    await spool.start()
    await feed.start()
    spool.emit("neighbor_up", peer=1)
    await until(lambda: feed.counters["disconnects"] >= 2, "retrying")
    await spool.stop()
    await feed.stop()
    assert store.feed_cursor() is None and feed.cursor is None
    status = feed.status()
    assert status["backlog_bytes"] > 0 and status["acked"] is None
    assert status["state"] == "stopped" and status["counters"].get("records", 0) == 0
    # a new feed on the same state starts at the oldest file: the record is not lost
    again = TelemetryFeed(mqtt, FeedSettings(TOPIC), node=NODE, spool_dir=spool.dir,
                          store=store)
    chunk = again.reader.read(10, 4096)
    assert chunk is not None and chunk.records == 1 and chunk.end.file == (1, 1)
