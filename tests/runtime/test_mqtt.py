"""The MQTT bridge against a real mosquitto on a free loopback port."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import sqlite3
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import aiomqtt
import pytest
from hypothesis import given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from mosquitto import Mosquitto, have_mosquitto
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from telemetry_sink import Sink

from meshsub.core.api import Deliver, MessageId
from meshsub.core.content import Event, Subscription
from meshsub.core.syntax import parse_event
from meshsub.runtime.livefeed import FeedSettings, TelemetryFeed
from meshsub.runtime.mqtt import (
    PROP_EVENT_ID,
    PROP_ORIGIN,
    MqttBridge,
    MqttSettings,
    PayloadError,
    _Reconnect,
    broker_queue_limit,
    check_sub_id,
    event_from_payload,
)
from meshsub.runtime.spool import TelemetrySpool
from meshsub.runtime.store import LocalPublisher, Store, StoreError, Undelivered

NODE = 0x2A
pytestmark = pytest.mark.skipif(not have_mosquitto(), reason="mosquitto not installed")


class Broker(Mosquitto):
    """The shared test broker, started from async fixtures and tests."""

    def __init__(self, workdir: Path) -> None:
        super().__init__(workdir, persistent=True, max_queued=1000)

    async def start(self) -> None:  # type: ignore[override]
        await asyncio.to_thread(super().start)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    b = Broker(tmp_path)
    await b.start()
    yield b
    b.stop()


class FakeNode:
    """Records what the bridge hands to the node; assigns ids like the protocol would."""

    def __init__(self, epoch: int = 1) -> None:
        self.epoch = epoch
        self.seq = 0
        self.events: list[tuple[Event, MessageId]] = []
        self.subs: dict[str, Subscription] = {}
        self.unsubs: list[str] = []

    def new_id(self) -> MessageId:
        self.seq += 1
        return MessageId(NODE, self.epoch, self.seq)

    def feed(self, event: Event, event_id: MessageId) -> None:
        self.events.append((event, event_id))

    def subscribe(self, sub_id: str, sub: Subscription) -> None:
        self.subs[sub_id] = sub

    def unsubscribe(self, sub_id: str) -> None:
        self.subs.pop(sub_id, None)
        self.unsubs.append(sub_id)


def _settings(broker: Broker, **kw: Any) -> MqttSettings:
    return MqttSettings(host="127.0.0.1", port=broker.port, reconnect_min_s=0.05,
                        reconnect_max_s=0.2, **kw)


def _bridge(settings: MqttSettings, store: Store, node: FakeNode) -> MqttBridge:
    publisher = LocalPublisher(store, node.new_id, node.feed)
    return MqttBridge(settings, node=NODE, store=store, publisher=publisher,
                      on_subscribe=node.subscribe, on_unsubscribe=node.unsubscribe)


async def until(cond: Callable[[], Any], what: str, timeout: float = 10.0) -> None:
    """Poll ``cond`` (events, not time, are what the tests assert on)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not cond():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store.in_state_dir(tmp_path / "state")
    yield s
    s.close()


@contextlib.asynccontextmanager
async def app_client(broker: Broker, *topics: str) -> AsyncIterator[aiomqtt.Client]:
    async with aiomqtt.Client("127.0.0.1", broker.port,
                              protocol=aiomqtt.ProtocolVersion.V5) as client:
        for topic in topics:
            await client.subscribe(topic, qos=1)
        yield client


async def next_message(client: aiomqtt.Client, timeout: float = 10.0) -> aiomqtt.Message:
    return await asyncio.wait_for(anext(client.messages), timeout)


def persistent_app(broker: Broker, identifier: str) -> aiomqtt.Client:
    """An application client whose session (and what the broker queued for it) persists
    across its reconnections and the broker's restarts."""
    props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
    props.SessionExpiryInterval = 300
    return aiomqtt.Client("127.0.0.1", broker.port, identifier=identifier,
                          protocol=aiomqtt.ProtocolVersion.V5, clean_start=False,
                          properties=props)


async def attrs_n(client: aiomqtt.Client) -> list[int]:
    """The attribute ``n`` of every delivery that arrives until none comes for 0.5 s."""
    got = []
    with contextlib.suppress(TimeoutError):
        while True:
            got.append(json.loads((await next_message(client, 0.5)).payload)["attrs"]["n"])
    return got


async def subscribed_then_broker_away(bridge: MqttBridge, node: FakeNode,
                                      app: Callable[[], aiomqtt.Client],
                                      broker: Broker) -> None:
    """The application subscribes ``s`` to ``t/#`` and reads its deliveries in a persistent
    session; then the broker stops, so what the bridge delivers next queues."""
    async with app() as client:
        await client.subscribe("meshsub/deliver/#", qos=1)
        await client.publish("meshsub/sub/s", b"t/#", qos=1, retain=True)
        await until(lambda: "s" in node.subs, "subscription")
    broker.stop()
    await until(lambda: bridge.state != "connected", "disconnect")


@contextlib.asynccontextmanager
async def running(bridge: MqttBridge) -> AsyncIterator[MqttBridge]:
    await bridge.start()
    try:
        await until(lambda: bridge.state == "connected", "connection")
        yield bridge
    finally:
        await bridge.stop()


# ------------------------------------------------------------------ pure parts


def test_event_payload_validation() -> None:
    ev = event_from_payload("sensors/temp", b'{"value": 21.5, "room": "lab", "ok": true}')
    assert ev == parse_event("sensors/temp value=21.5 room=lab ok=true")
    assert event_from_payload("a/b", b"").attrs == {}
    cases = {
        b"[1, 2]": "bad_json",
        b"{nope": "bad_json",
        b'{"x": NaN}': "bad_json",
        b'{"x": null}': "bad_attr",
        b'{"x": {"y": 1}}': "bad_attr",
        b'{"bad name": 1}': "bad_attr",
        b"\xff\xfe": "bad_json",
    }
    for payload, reason in cases.items():
        with pytest.raises(PayloadError) as info:
            event_from_payload("t", payload)
        assert info.value.reason == reason, payload
    with pytest.raises(PayloadError, match="exceeds"):
        event_from_payload("t", b"{}" + b" " * 100, max_bytes=10)
    with pytest.raises(PayloadError) as info:
        event_from_payload("a/+/b", b"{}")
    assert info.value.reason == "bad_topic"


def test_sub_ids() -> None:
    assert check_sub_id("kitchen-1.temp_x") == "kitchen-1.temp_x"
    assert check_sub_id("app1/kitchen") == "app1/kitchen"  # <app>/<name>: the ACL's layout
    for bad in ("", "a/b/c", "/b", "a/", "a b", "x" * 65, "a/" + "x" * 65, "ctl-1", "ctl-1/x",
                "é"):
        with pytest.raises(PayloadError):
            check_sub_id(bad)


def test_settings_validation() -> None:
    with pytest.raises(ValueError, match="prefix"):
        MqttSettings(prefix="a/#")
    with pytest.raises(ValueError):
        MqttSettings(port=0)
    with pytest.raises(ValueError, match="telemetry"):
        MqttSettings(telemetry_topic="meshsub/pub/t")  # would loop back in as events


def test_settings_from_config() -> None:
    from meshsub.runtime.config import MqttConfig

    cfg = MqttConfig(host="10.0.0.1", port=1884, client_id="c", topic_prefix="ms", keepalive=20)
    s = MqttSettings.from_config(cfg, telemetry_topic="ms/telemetry/1", queue_limit=5)
    assert (s.host, s.port, s.client_id, s.prefix, s.keepalive, s.queue_limit) == (
        "10.0.0.1", 1884, "c", "ms", 20, 5)


# ------------------------------------------------------------------ with a broker


async def test_publication_is_persisted_acked_and_fed(broker: Broker, store: Store) -> None:
    node = FakeNode()
    bridge = _bridge(_settings(broker), store, node)
    async with running(bridge), app_client(broker) as app:
        await app.publish("meshsub/pub/sensors/temp", b'{"value": 21, "room": "lab"}', qos=1)
        await until(lambda: len(node.events) == 1, "the event")
        event, event_id = node.events[0]
        assert event == parse_event("sensors/temp value=21 room=lab")
        assert event_id == MessageId(NODE, 1, 1)
        assert store.outbox_len() == 0  # fed, so consumed
        assert bridge.counters["events_accepted"] == 1


async def test_bad_payloads_are_reported_and_counted(broker: Broker, store: Store) -> None:
    node = FakeNode()
    async with (running(_bridge(_settings(broker), store, node)) as bridge,
                app_client(broker, "meshsub/error") as app):
        await app.publish("meshsub/pub/t", b"[1]", qos=1)
        err = await next_message(app)
        body = json.loads(err.payload)
        assert body["reason"] == "bad_json" and body["topic"] == "meshsub/pub/t"
        await app.publish("meshsub/sub/s1", b"t x >>> 1", qos=1)
        body = json.loads((await next_message(app)).payload)
        assert body["reason"] == "bad_subscription"
        await app.publish("meshsub/sub/ctl-9", b"t", qos=1)
        body = json.loads((await next_message(app)).payload)
        assert body["reason"] == "bad_sub_id"
        assert node.events == [] and node.subs == {}
        assert bridge.counters["rejected:bad_json"] == 1
        assert bridge.counters["rejected:bad_subscription"] == 1


async def test_subscribe_deliver_once_unsubscribe(broker: Broker, store: Store) -> None:
    node = FakeNode()
    async with (running(_bridge(_settings(broker), store, node)) as bridge,
                app_client(broker, "meshsub/deliver/#") as app):
        await app.publish("meshsub/sub/hot", b"sensors/# value>=20", qos=1, retain=True)
        await until(lambda: "hot" in node.subs, "the subscription")
        assert store.subscriptions() == {"hot": "sensors/# value>=20"}
        event = parse_event("sensors/temp value=25 room=lab")
        d = Deliver("hot", event, MessageId(7, 3, 9), hop=2, published_at=100.0)
        assert bridge.deliver(d, latency_s=0.25) is True
        assert bridge.deliver(d) is True  # a second copy is suppressed
        msg = await next_message(app)
        assert msg.topic.value == "meshsub/deliver/hot/sensors/temp"
        body = json.loads(msg.payload)
        assert body == {"sub_id": "hot", "topic": "sensors/temp",
                        "attrs": {"room": "lab", "value": 25}, "event_id": "7-3-9",
                        "origin": 7, "hop": 2, "node": NODE, "published_at": 100.0,
                        "latency_s": 0.25}
        props = dict(msg.properties.UserProperty)  # type: ignore[union-attr]
        assert props[PROP_ORIGIN] == "7" and props[PROP_EVENT_ID] == "7-3-9"
        await until(lambda: store.delivered_seen(MessageId(7, 3, 9), "hot"), "delivered record")
        assert bridge.deliver(d) is True
        assert bridge.counters["duplicate_delivery"] == 2
        assert bridge.deliver(Deliver("nobody", event, MessageId(7, 3, 10), 1)) is False
        # unsubscribe: an empty retained payload also clears the retained expression
        await app.publish("meshsub/sub/hot", b"", qos=1, retain=True)
        await until(lambda: "hot" not in node.subs, "the unsubscription")
        assert store.subscriptions() == {}
        with pytest.raises(TimeoutError):
            await next_message(app, timeout=0.3)  # exactly one delivery was published


async def test_own_publications_never_come_back(broker: Broker, store: Store) -> None:
    node = FakeNode()
    settings = _settings(broker, prefix="loop")
    async with running(_bridge(settings, store, node)) as bridge, app_client(broker, "#") as app:
        await app.publish("loop/sub/all", b"#", qos=1)
        await until(lambda: "all" in node.subs, "the subscription")
        bridge.deliver(Deliver("all", parse_event("x/y a=1"), MessageId(3, 1, 1), 1))
        seen = await next_message(app)
        while not seen.topic.value.startswith("loop/deliver/"):
            seen = await next_message(app)
        # an application (or a broker bridge) re-publishing a delivery into pub/ keeps
        # the provenance properties: the daemon must not take it in as a new event
        props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
        props.UserProperty = list(seen.properties.UserProperty)  # type: ignore[union-attr]
        await app.publish("loop/pub/x/y", b'{"a": 1}', qos=1, properties=props)
        await until(lambda: bridge.counters["dropped:loop"] == 1, "the loop drop")
        # a retained event replayed by a resubscription is not a new event either
        await app.publish("loop/pub/r", b'{"a": 2}', qos=1, retain=True)
        await until(lambda: len(node.events) == 1, "the live copy")
    assert node.events[0][0] == parse_event("r a=2")
    node2 = FakeNode(epoch=2)
    async with running(_bridge(settings, store, node2)) as bridge2:
        await until(lambda: bridge2.counters["dropped:retained_event"] >= 1, "retained drop")
    assert node2.events == []
    assert bridge.counters["events_accepted"] == 1


async def test_broker_down_queues_then_delivers_once(broker: Broker, store: Store) -> None:
    node = FakeNode()
    bridge = _bridge(_settings(broker, queue_limit=3), store, node)
    dropped: list[tuple[str, MessageId, str]] = []
    bridge.on_drop = lambda *d: dropped.append(d)  # the node writes a drop record for each
    # the application keeps a persistent session; the broker saves it across its restart
    app = functools.partial(persistent_app, broker, "app-1")

    async with running(bridge):
        await subscribed_then_broker_away(bridge, node, app, broker)
        for n in range(1, 6):  # 5 deliveries into a queue of 3: the 2 oldest are dropped
            bridge.deliver(Deliver("s", parse_event(f"t/x n={n}"), MessageId(9, 1, n), 1))
        assert bridge.counters["dropped:queue_full"] == 2
        assert dropped == [("mqtt_queue_full", MessageId(9, 1, n), "s") for n in (1, 2)]
        assert bridge.status()["queued"] == 3
        await broker.start()
        await until(lambda: bridge.status()["queued"] == 0, "the queue to drain")
        await until(lambda: store.delivered_seen(MessageId(9, 1, 5), "s"), "delivered")
        assert bridge.counters["connects"] >= 2
        async with app() as client:
            got = await attrs_n(client)
    assert got == [3, 4, 5]
    assert [store.delivered_seen(MessageId(9, 1, n), "s") for n in range(1, 6)] == [
        False, False, True, True, True]


async def test_unpersisted_event_is_not_acked_and_comes_again(broker: Broker, store: Store,
                                                              monkeypatch: pytest.MonkeyPatch
                                                              ) -> None:
    """Acknowledge-after-persist: a failed commit leaves the event with the broker."""
    node = FakeNode()
    bridge = _bridge(_settings(broker), store, node)
    real = store.outbox_add
    failures = [1]

    def flaky(entries: Any, **kw: Any) -> Any:
        if failures:
            failures.pop()
            raise StoreError("disk full")
        return real(entries, **kw)

    monkeypatch.setattr(store, "outbox_add", flaky)
    async with running(bridge), app_client(broker) as app:
        await app.publish("meshsub/pub/t", b'{"a": 1}', qos=1)
        await until(lambda: len(node.events) == 1, "the redelivered event")
        assert bridge.counters["store_errors"] == 1
        assert bridge.counters["connects"] >= 2  # it dropped the session to get it again
        await asyncio.sleep(0.2)
    assert len(node.events) == 1  # exactly once


async def test_events_published_while_daemon_is_down_arrive(broker: Broker,
                                                            store: Store) -> None:
    """The persistent session makes the broker hold QoS 1 events for a stopped daemon."""
    settings = _settings(broker)
    async with running(_bridge(settings, store, FakeNode())):
        pass  # the first connection creates the session
    async with app_client(broker) as app:
        await app.publish("meshsub/pub/t", b'{"a": 1}', qos=1)
        await app.publish("meshsub/sub/later", b"t", qos=1)
    node = FakeNode(epoch=2)
    async with running(_bridge(settings, store, node)):
        await until(lambda: len(node.events) == 1 and "later" in node.subs, "queued messages")
    assert node.events[0][1] == MessageId(NODE, 2, 1)


async def test_restart_restores_subscriptions(broker: Broker, store: Store) -> None:
    store.put_subscription("keep", "a/b x=1", source="mqtt")
    store.put_subscription("ctl-1", "z", source="ctl")
    node = FakeNode()
    bridge = _bridge(_settings(broker), store, node)
    async with running(bridge):
        assert set(node.subs) == {"keep"}
        assert bridge.owns("keep") and not bridge.owns("ctl-1")


async def test_redelivered_packet_is_recognised(store: Store) -> None:
    """Same packet id and bytes after a crash between commit and PUBACK: one event."""
    node = FakeNode()
    bridge = MqttBridge(MqttSettings(), node=NODE, store=store,
                        publisher=LocalPublisher(store, node.new_id, node.feed),
                        on_subscribe=node.subscribe, on_unsubscribe=node.unsubscribe)
    msg = _msg("meshsub/pub/t", b'{"a": 1}', 17)
    client: Any = _FakeClient()
    bridge.handle_batch([msg], client)
    bridge.handle_batch([msg], client)
    bridge.handle_batch([_msg("meshsub/pub/t", b'{"a": 2}', 17)], client)  # mid reused, new data
    await bridge.acks.settled()  # publications are acknowledged after their fsync
    assert [e.attrs["a"] for e, _ in node.events] == [1, 2]
    assert client._client.acks == [17, 17, 17]
    assert bridge.counters["redelivered"] == 1


async def test_live_telemetry_written_while_offline_arrives_when_connected(
        broker: Broker, store: Store, tmp_path: Path) -> None:
    """The bridge no longer publishes telemetry (it used to, QoS 0, only while connected,
    so records written while the broker was away were lost). The live feed ships the
    spool: what was written offline arrives, in order, QoS 1, once the broker is back."""
    topic = f"meshsub/telemetry/{NODE}"
    sink = Sink(broker.port, topic)
    spool = TelemetrySpool(tmp_path / "spool", node=NODE, epoch=1, flush_interval_s=0.05)
    feed = TelemetryFeed(_settings(broker, telemetry_topic=topic), FeedSettings(topic),
                         node=NODE, spool_dir=spool.dir, store=store)
    spool.on_flush, spool.on_delete = feed.wake, feed.reader.deleted
    try:
        await until(sink.subscribed.is_set, "sink subscribed")
        broker.stop()
        await spool.start()
        await feed.start()
        for peer in range(50):
            spool.emit("neighbor_up", peer=peer)
        await until(lambda: feed.reader.backlog_bytes() > 0, "records on disk")
        assert feed.state != "connected" and feed.counters["records"] == 0
        await broker.start()
        await until(lambda: len(sink.recs()) >= 50, "records after the broker came")
        assert sink.recs() == list(range(50))
        assert all(m.qos == 1 for m in sink.messages)
        assert ("meshsub-node", str(NODE)) in sink.messages[0].properties.UserProperty
        assert not hasattr(MqttBridge, "publish_telemetry")
    finally:
        await feed.stop()
        await spool.stop()
        sink.close()


class _FakePaho:
    def __init__(self) -> None:
        self.acks: list[int] = []

    def ack(self, mid: int, qos: int) -> None:
        self.acks.append(mid)


class _FakeClient:
    def __init__(self) -> None:
        self._client = _FakePaho()


def _msg(topic: str, payload: bytes, mid: int, retain: bool = False) -> aiomqtt.Message:
    return aiomqtt.Message(topic, payload, qos=1, retain=retain, mid=mid, properties=None)


async def test_subscription_replace_idempotence_and_store_failure(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    node = FakeNode()
    calls: list[str] = []
    bridge = MqttBridge(MqttSettings(), node=NODE, store=store,
                        publisher=LocalPublisher(store, node.new_id, node.feed),
                        on_subscribe=lambda i, s: calls.append(f"+{i}"),
                        on_unsubscribe=lambda i: calls.append(f"-{i}"))
    client: Any = _FakeClient()
    bridge.handle_batch([_msg("meshsub/sub/a", b"t x=1", 1)], client)
    bridge.handle_batch([_msg("meshsub/sub/a", b"t   x=1", 2, retain=True)], client)  # same
    bridge.handle_batch([_msg("meshsub/sub/a", b"t x=2", 3)], client)  # replaced
    assert calls == ["+a", "-a", "+a"]
    assert store.subscriptions() == {"a": "t x=2"}

    def broken(*args: Any, **kw: Any) -> None:
        raise StoreError("disk I/O error")

    monkeypatch.setattr(store, "put_subscription", broken)
    with pytest.raises(_Reconnect):  # the bridge reconnects: the broker sends it again
        bridge.handle_batch([_msg("meshsub/sub/b", b"t", 4)], client)
    assert client._client.acks == [1, 2, 3]  # 4 not acknowledged: the broker sends it again
    assert "b" not in bridge.subscriptions and calls[-1] == "+a"


async def test_mixed_batch_keeps_order(store: Store) -> None:
    """A subscription between publications is applied between them, acks follow commits."""
    node = FakeNode()
    order: list[str] = []
    publisher = LocalPublisher(store, node.new_id,
                               lambda e, i: order.append(f"pub {e.attrs['n']}"))
    bridge = MqttBridge(MqttSettings(), node=NODE, store=store, publisher=publisher,
                        on_subscribe=lambda i, s: order.append(f"sub {i}"),
                        on_unsubscribe=lambda i: order.append(f"unsub {i}"))
    client: Any = _FakeClient()
    bridge.handle_batch([
        _msg("meshsub/pub/t", b'{"n": 1}', 1),
        _msg("meshsub/pub/t", b'{"n": 2}', 2),
        _msg("meshsub/sub/s", b"t", 3),
        _msg("meshsub/pub/t", b"not json", 4),
        _msg("meshsub/pub/t", b'{"n": 3}', 5),
        _msg("meshsub/sub/s", b"", 6),
    ], client)
    assert order == ["pub 1", "pub 2", "sub s", "pub 3", "unsub s"]
    await bridge.acks.settled()
    assert client._client.acks == [1, 2, 3, 4, 5, 6]  # in the order of the PUBLISH packets
    assert sorted(client._client.acks) == [1, 2, 3, 4, 5, 6]
    assert bridge.counters["rejected:bad_json"] == 1
    assert store.outbox_len() == 0


# ------------------------------------------------------------------ hostile input (issue 25)

NESTED = b'{"a":' + b"[" * 30_000 + b"]" * 30_000 + b"}"  # ~60 KB, deeper than json recurses


def test_deeply_nested_payload_is_bad_json_not_a_recursion_error() -> None:
    for payload in (NESTED, b"[" * 60_000, b'{"a": {"b": {"c": 1}}}'):
        with pytest.raises(PayloadError) as info:
            event_from_payload("t", payload)
        assert info.value.reason == "bad_json" and "nested" in str(info.value)
    # nesting inside strings is text, not structure
    assert event_from_payload("t", b'{"s": "[[[[{{{{"}').attrs == {"s": "[[[[{{{{"}


async def test_a_nested_payload_does_not_stop_the_bridge(broker: Broker, store: Store) -> None:
    """Issue 25 item 1: one such QoS 1 message made the bridge reconnect 63 times in 30 s and
    accept nothing after it."""
    node = FakeNode()
    bridge = _bridge(_settings(broker), store, node)
    async with running(bridge), app_client(broker) as app:
        await app.publish("meshsub/pub/t", NESTED, qos=1)
        await app.publish("meshsub/pub/t", b'{"after": 1}', qos=1)
        await until(lambda: len(node.events) == 1, "the event after the bad one")
        assert bridge.counters["rejected:bad_json"] == 1
        assert bridge.counters["connects"] == 1 and bridge.counters["disconnects"] == 0


async def test_a_nested_payload_waiting_in_the_session_does_not_stop_a_restart(
        broker: Broker, store: Store) -> None:
    """The persistent session hands the message to the next daemon start: it is answered
    the same way there (counted, acknowledged), and it is not redelivered again."""
    settings = _settings(broker)
    async with running(_bridge(settings, store, FakeNode())):
        pass  # the first connection creates the session
    async with app_client(broker) as app:
        await app.publish("meshsub/pub/t", NESTED, qos=1)
        await app.publish("meshsub/pub/t", b'{"after": 1}', qos=1)
    node = FakeNode(epoch=2)
    bridge = _bridge(settings, store, node)
    async with running(bridge):
        await until(lambda: len(node.events) == 1, "the event queued behind the bad one")
        assert bridge.counters["rejected:bad_json"] == 1 and bridge.counters["connects"] == 1
    again = _bridge(settings, store, FakeNode(epoch=3))
    async with running(again):
        await asyncio.sleep(0.3)
        assert again.counters["rejected:bad_json"] == 0  # acknowledged: never comes back


async def test_an_unforeseen_failure_is_counted_and_acknowledged(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    node = FakeNode()
    bridge = _bridge(MqttSettings(), store, node)
    client: Any = _FakeClient()

    def bug(*args: Any, **kw: Any) -> None:
        raise KeyError("a bug")

    monkeypatch.setattr("meshsub.runtime.mqtt.event_from_payload", bug)
    bridge.handle_batch([_msg("meshsub/pub/t", b"{}", 1), _msg("meshsub/sub/s", b"t", 2)],
                        client)
    assert client._client.acks == [1, 2] and bridge.counters["rejected:internal"] == 1
    assert "s" in node.subs


async def test_subscriptions_are_capped_per_node(store: Store) -> None:
    node = FakeNode()
    bridge = _bridge(MqttSettings(max_subscriptions=3), store, node)
    client: Any = _FakeClient()
    bridge.handle_batch([_msg(f"meshsub/sub/app/s{i}", b"t", i + 1) for i in range(5)], client)
    assert sorted(node.subs) == ["app/s0", "app/s1", "app/s2"]
    assert bridge.counters["rejected:too_many"] == 2 and client._client.acks == [1, 2, 3, 4, 5]
    bridge.handle_batch([_msg("meshsub/sub/app/s1", b"t x=2", 6)], client)  # a change is fine
    bridge.handle_batch([_msg("meshsub/sub/app/s0", b"", 7)], client)  # room for one more
    bridge.handle_batch([_msg("meshsub/sub/app/s4", b"t", 8)], client)
    assert sorted(node.subs) == ["app/s1", "app/s2", "app/s4"]


async def test_per_application_subscription_topics(broker: Broker, store: Store) -> None:
    node = FakeNode()
    bridge = _bridge(_settings(broker), store, node)
    async with running(bridge), app_client(broker, "meshsub/deliver/app1/#") as app:
        await app.publish("meshsub/sub/app1/temps", b"sensors/#", qos=1, retain=True)
        await until(lambda: "app1/temps" in node.subs, "the subscription")
        bridge.deliver(Deliver("app1/temps", parse_event("sensors/t v=1"), MessageId(7, 1, 1),
                               hop=1))
        got = await next_message(app)
        assert str(got.topic) == "meshsub/deliver/app1/temps/sensors/t"
        assert json.loads(got.payload)["sub_id"] == "app1/temps"
        await app.publish("meshsub/sub/app1/temps", b"", qos=1, retain=True)
        await until(lambda: "app1/temps" not in node.subs, "unsubscribed")


def test_broker_queue_limit_is_read_from_its_configuration(tmp_path: Path) -> None:
    (tmp_path / "conf.d").mkdir()
    main = tmp_path / "mosquitto.conf"
    main.write_text(f"pid_file /run/x.pid\ninclude_dir {tmp_path / 'conf.d'}\n")
    assert broker_queue_limit(main) == 1000  # mosquitto's default
    (tmp_path / "conf.d" / "meshsub.conf").write_text("max_queued_messages 200\n")
    assert broker_queue_limit(main) == 200
    assert broker_queue_limit(tmp_path / "missing.conf") is None


def test_a_short_broker_queue_is_warned_about(tmp_path: Path, store: Store) -> None:
    conf = tmp_path / "mosquitto.conf"
    conf.write_text("max_queued_messages 500\n")
    bridge = _bridge(MqttSettings(outbox_limit=10000), store, FakeNode())
    assert bridge.check_broker_queue(conf) == 500
    assert bridge.counters["broker_queue_short"] == 1
    conf.write_text("max_queued_messages 10000\n")
    fine = _bridge(MqttSettings(outbox_limit=10000), store, FakeNode())
    assert fine.check_broker_queue(conf) == 10000 and "broker_queue_short" not in fine.counters


async def test_publications_the_broker_drops_are_counted(tmp_path: Path, store: Store) -> None:
    """Issue 25 item 6: mosquitto dropped ~88,000 publications silently at its queue limit;
    the daemon reads the broker's own count and reports what it grew by."""
    (tmp_path / "b").mkdir()
    broker = Mosquitto(tmp_path / "b", persistent=False, max_queued=5, sys_interval=1)
    await asyncio.to_thread(broker.start)
    try:
        bridge = _bridge(MqttSettings(host="127.0.0.1", port=broker.port,
                                      reconnect_min_s=0.05), store, FakeNode())
        async with running(bridge):
            # a slow application: its persistent session is away while 50 messages wait
            async with aiomqtt.Client("127.0.0.1", broker.port, identifier="slow-app",
                                      protocol=aiomqtt.ProtocolVersion.V5, clean_start=False,
                                      properties=_session_props()) as app:
                await app.subscribe("app/news", qos=1)
            async with aiomqtt.Client("127.0.0.1", broker.port,
                                      protocol=aiomqtt.ProtocolVersion.V5) as publisher:
                for _ in range(50):
                    await publisher.publish("app/news", b"{}", qos=1)
            await until(lambda: bridge.counters["broker_dropped"] >= 45, "the broker's count",
                        timeout=20.0)
    finally:
        broker.stop()


def _session_props() -> Properties:
    props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
    props.SessionExpiryInterval = 3600
    return props


async def test_a_disjunction_is_one_core_subscription_per_alternative(
        broker: Broker, store: Store) -> None:
    """``a | b``: the node gets one member per alternative, the store the canonical text;
    a replacement or an unsubscription removes every member; a restart restores them."""
    node = FakeNode()
    async with (running(_bridge(_settings(broker), store, node)) as bridge,
                app_client(broker, "meshsub/deliver/#") as app):
        await app.publish("meshsub/sub/any", b"news a=true  |  news b=true", qos=1, retain=True)
        await until(lambda: "any|1" in node.subs, "the members")
        assert set(node.subs) == {"any|0", "any|1"}
        assert store.subscriptions() == {"any": "news a=true | news b=true"}
        d = Deliver("any", parse_event("news a=true b=true"), MessageId(7, 3, 9), hop=1)
        assert bridge.deliver(d) is True  # the protocol delivers under the group's id
        msg = await next_message(app)
        assert msg.topic.value == "meshsub/deliver/any/news"
        await app.publish("meshsub/sub/any", b"news c=true", qos=1, retain=True)
        await until(lambda: "any" in node.subs, "the replacement")
        assert set(node.subs) == {"any"}
        await app.publish("meshsub/sub/any", b"news a=true | news d=true", qos=1, retain=True)
        await until(lambda: "any|1" in node.subs, "the members again")
        assert set(node.subs) == {"any|0", "any|1"}
    restarted = FakeNode()  # restored from the store (and the retained copy: unchanged)
    async with (running(_bridge(_settings(broker), store, restarted)),
                app_client(broker, "meshsub/deliver/#") as app):
        assert set(restarted.subs) == {"any|0", "any|1"}
        await app.publish("meshsub/sub/any", b"", qos=1, retain=True)
        await until(lambda: not restarted.subs, "the unsubscription of every member")


async def test_publication_goes_out_before_its_fsync_and_is_acked_after(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The event is fed to the node at once; its PUBACK waits for the WAL's fsync, which
    runs off the event loop (it used to be a durable commit in the loop before the feed)."""
    import threading
    node = FakeNode()
    bridge = MqttBridge(MqttSettings(), node=NODE, store=store,
                        publisher=LocalPublisher(store, node.new_id, node.feed),
                        on_subscribe=node.subscribe, on_unsubscribe=node.unsubscribe)
    go, synced = threading.Event(), []
    real = store.sync_wal

    def slow_sync() -> None:
        go.wait(5)
        real()
        synced.append(True)

    monkeypatch.setattr(store, "sync_wal", slow_sync)
    bridge.acks._sync = slow_sync
    client: Any = _FakeClient()
    bridge.handle_batch([_msg("meshsub/pub/t", b'{"a": 1}', 7)], client)
    assert [e.attrs["a"] for e, _ in node.events] == [1]  # on its way, not yet synced
    await asyncio.sleep(0.05)
    assert client._client.acks == [] and not synced
    go.set()
    await bridge.acks.settled()
    assert client._client.acks == [7] and synced
    bridge.acks.close()


async def test_deliveries_queued_at_stop_arrive_once_after_restart(broker: Broker,
                                                                   store: Store) -> None:
    """The broker is away: each delivery is kept in the store as it is queued (bounded,
    the oldest dropped), so the stop has nothing left to write; the next process
    publishes them in order and once each (the events behind them stay marked seen, so
    nothing else would ever bring them again)."""
    app = functools.partial(persistent_app, broker, "app-held")

    def deliver(bridge: MqttBridge, n: int) -> None:
        bridge.deliver(Deliver("s", parse_event(f"t/x n={n}"), MessageId(9, 1, n), 1))

    settings = _settings(broker, held_max_bytes=350)
    node = FakeNode()
    first = _bridge(settings, store, node)
    dropped: list[tuple[str, MessageId, str]] = []
    first.on_drop = lambda *d: dropped.append(d)
    async with running(first):
        await subscribed_then_broker_away(first, node, app, broker)
        for n in range(1, 5):  # 4 deliveries, room for the newest 3 (113 bytes each)
            deliver(first, n)
            # kept before the bridge could publish it: a SIGKILL now loses nothing
            assert store.undelivered()[-1].event_id == MessageId(9, 1, n)
        assert dropped == [("mqtt_queue_full", MessageId(9, 1, 1), "s")]
        assert [u.event_id.seq for u in store.undelivered()] == [2, 3, 4]
        assert first.status()["kept"] == 3
    assert first.counters["held_at_stop"] == 3 and first.counters["dropped:shutdown"] == 0
    assert [u.event_id.seq for u in store.undelivered()] == [2, 3, 4]

    await broker.start()
    settings = _settings(broker)  # room for all: the bound would race the publication
    second = _bridge(settings, store, FakeNode(epoch=2))
    async with running(second):
        deliver(second, 3)  # the same event again (a neighbour's retransmission): not twice
        deliver(second, 5)  # a new one goes after what the last process kept
        await until(lambda: store.delivered_seen(MessageId(9, 1, 5), "s"), "delivered")
        assert second.counters["restored"] == 3
        assert second.counters["duplicate_delivery"] == 1
        await until(lambda: store.undelivered() == [], "the kept rows forgotten")
        assert second.status()["kept"] == 0 and second.status()["kept_bytes"] == 0
    async with app() as client:
        got = await attrs_n(client)
    assert got == [2, 3, 4, 5], dict(second.counters)
    third = _bridge(settings, store, FakeNode(epoch=3))
    async with running(third):  # published and recorded: never again
        assert third.counters["restored"] == 0


async def test_kept_deliveries_outlive_a_process_that_never_stopped(
        broker: Broker, tmp_path: Path) -> None:
    """A SIGKILL runs no stop: the next process, on its own connection to the file, finds
    every delivery the first one queued, in order, and publishes each once."""
    app = functools.partial(persistent_app, broker, "app-killed")
    first_store = Store.in_state_dir(tmp_path / "killed")
    node = FakeNode()
    first = _bridge(_settings(broker), first_store, node)
    await first.start()
    await until(lambda: first.state == "connected", "connection")
    await subscribed_then_broker_away(first, node, app, broker)
    for n in range(1, 6):
        first.deliver(Deliver("s", parse_event(f"t/x n={n}"), MessageId(9, 1, n), 1))
    assert first._task is not None
    first._task.cancel()  # abandoned as a killed process leaves it: no stop, no close
    await broker.start()
    with Store.in_state_dir(tmp_path / "killed") as second_store:
        second = _bridge(_settings(broker), second_store, FakeNode(epoch=2))
        async with running(second):
            await until(lambda: second_store.delivered_seen(MessageId(9, 1, 5), "s"),
                        "delivered")
            assert second.counters["restored"] == 5
        async with app() as client:
            assert await attrs_n(client) == [1, 2, 3, 4, 5]
        assert second_store.undelivered() == []
    first_store.close()


def test_local_events_outrank_remote_ones_at_the_bound(store: Store) -> None:
    """At ``queue_limit`` the oldest queued delivery of a remote event makes room; one of
    an event published on this node goes only for another local one; the store's rows
    are the queue's at every step (no broker: everything stays queued)."""
    bridge = _bridge(MqttSettings(queue_limit=3), store, FakeNode())
    bridge.subscriptions["s"] = "t/#"
    dropped: list[MessageId] = []
    bridge.on_drop = lambda _reason, event_id, _sub: dropped.append(event_id)

    def deliver(n: int, local: bool) -> list[int]:
        origin = NODE if local else 9
        bridge.deliver(Deliver("s", parse_event(f"t/x n={n}"), MessageId(origin, 1, n), 1))
        rows = [u.event_id.seq for u in store.undelivered()]
        assert rows == [i.delivered[0].seq for i in bridge._out if i.delivered]
        return rows

    deliver(1, False), deliver(2, True), deliver(3, False)
    assert deliver(4, True) == [2, 3, 4]  # remote 1 went
    assert deliver(5, False) == [2, 4, 5]  # remote 3 went
    assert deliver(6, False) == [2, 4, 6]
    assert deliver(7, True) == [2, 4, 7]  # remote 6 went, not a local one
    assert deliver(8, False) == [2, 4, 7]  # only local ones left: the remote newcomer goes
    assert deliver(9, True) == [4, 7, 9]  # a local newcomer displaces the oldest local
    assert [d.seq for d in dropped] == [1, 3, 5, 6, 8, 2]
    assert bridge.counters["dropped:queue_full"] == 6


@hsettings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 300)), max_size=40),
       st.integers(1, 6), st.integers(200, 1500))
def test_kept_deliveries_stay_within_their_bound_and_mirror_the_queue(
        steps: list[tuple[bool, int]], limit: int, max_bytes: int) -> None:
    """Any run of deliveries (local or remote, any size) with the broker away: the rows
    are exactly the queue, in order; at most ``limit`` of them and ``max_bytes`` bytes;
    every delivery is kept or counted as dropped; a local one is dropped only when no
    remote one queued before it survives the step (or when it alone is over the bytes)."""
    with tempfile.TemporaryDirectory(prefix="msub-prop-") as tmp, \
            Store.in_state_dir(Path(tmp)) as store:
        bridge = _bridge(MqttSettings(queue_limit=limit, held_max_bytes=max_bytes), store,
                         FakeNode())
        bridge.subscriptions["s"] = "t/#"
        dropped: set[MessageId] = set()
        bridge.on_drop = lambda _reason, event_id, _sub: dropped.add(event_id)
        sizes: dict[MessageId, int] = {}
        drop_kept = bridge._drop_kept

        def spy(item: Any, *, forget: bool) -> None:
            sizes[item.delivered[0]] = item.size
            drop_kept(item, forget=forget)

        bridge._drop_kept = spy  # type: ignore[method-assign]
        for n, (local, body) in enumerate(steps, 1):
            before, dropped_before = {u.event_id for u in store.undelivered()}, set(dropped)
            event = parse_event(f"t/x n={n} b=\"{'x' * body}\"")
            bridge.deliver(Deliver("s", event, MessageId(NODE if local else 9, 1, n), 1))
            rows = store.undelivered()
            assert [(u.event_id, u.topic, u.payload) for u in rows] == [
                (i.delivered[0], i.topic, i.payload) for i in bridge._out if i.delivered]
            assert len(rows) <= limit and sum(u.size for u in rows) <= max_bytes
            assert bridge.status()["kept_bytes"] == sum(u.size for u in rows)
            kept = {u.event_id for u in rows}
            assert len(kept) + len(dropped) == n and not kept & dropped
            # a local one goes only with every remote one queued (or alone over the bytes)
            if any(e.origin == NODE and sizes[e] <= max_bytes for e in dropped - dropped_before):
                assert all(e.origin == NODE for e in before & kept)
        assert bridge.counters["dropped:queue_full"] == len(dropped)


async def test_kept_deliveries_that_cannot_be_read_stay_kept(
        broker: Broker, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A start that cannot read what an earlier process kept goes on; the rows stay for a
    later start, and what this process delivers is kept beside them."""
    settings = _settings(broker)
    held = Undelivered(MessageId(9, 1, 1), "s", "meshsub/deliver/s/t", b"{}")
    store.undelivered_add([held])
    store.put_subscription("s", "t/#", source="mqtt")
    real = store.undelivered

    def broken() -> Any:
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(store, "undelivered", broken)
    bridge = _bridge(settings, store, FakeNode())
    dropped: list[tuple[str, MessageId, str]] = []
    bridge.on_drop = lambda *d: dropped.append(d)
    await bridge.start()
    broker.stop()
    bridge.deliver(Deliver("s", parse_event("t/x n=2"), MessageId(9, 1, 2), 1))
    await bridge.stop()
    # the start's read and the stop's check failed; the stop cannot tell, so it drops none
    assert bridge.counters["store_errors"] == 2 and bridge.counters["restored"] == 0
    assert dropped == [] and bridge.counters["held_at_stop"] == 1
    monkeypatch.setattr(store, "undelivered", real)
    assert [u.event_id for u in store.undelivered()] == [MessageId(9, 1, 1), MessageId(9, 1, 2)]


def test_a_kept_delivery_that_cannot_be_read_back_is_a_counted_drop(store: Store) -> None:
    """A damaged row (not a message id) is deleted by the store and counted here as a lost
    delivery; the readable rows are queued as usual."""
    store.undelivered_add([Undelivered(MessageId(9, 1, n), "s", "meshsub/deliver/s/t", b"{}")
                           for n in (1, 2)])
    store._db.execute("UPDATE undelivered SET event_id='garbage' WHERE event_id=?",
                      (str(MessageId(9, 1, 1)),))
    store._db.commit()
    bridge = _bridge(MqttSettings(), store, FakeNode())
    bridge._restore_undelivered()
    assert bridge.counters["dropped:unreadable"] == 1 and bridge.counters["restored"] == 1
    assert [i.delivered for i in bridge._out] == [(MessageId(9, 1, 2), "s")]
    assert store.undelivered() == [Undelivered(MessageId(9, 1, 2), "s",
                                               "meshsub/deliver/s/t", b"{}")]


async def test_a_delivery_the_store_refuses_is_published_and_counted_at_a_stop(
        broker: Broker, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store that cannot keep a delivery does not hold it back (this process still
    publishes it); still queued at a stop, it is the one a stop drops: counted."""
    bridge = _bridge(_settings(broker), store, FakeNode())
    bridge.subscriptions["s"] = "t/#"

    def refuse(*_a: Any, **_k: Any) -> None:
        raise StoreError("disk full")

    monkeypatch.setattr(store, "undelivered_add", refuse)
    dropped: list[tuple[str, MessageId, str]] = []
    bridge.on_drop = lambda *d: dropped.append(d)
    await bridge.start()
    broker.stop()
    bridge.deliver(Deliver("s", parse_event("t/x n=1"), MessageId(9, 1, 1), 1))
    assert bridge.status()["queued"] == 1 and bridge.counters["store_errors"] == 1
    await bridge.stop()
    assert dropped == [("mqtt_shutdown", MessageId(9, 1, 1), "s")]
    assert bridge.counters["dropped:shutdown"] == 1


async def test_a_delivery_whose_batch_failed_is_counted_at_a_stop(
        broker: Broker, store: Store) -> None:
    """The node's batch that kept a delivery fails to commit (undone, with its event's
    marks): this process still publishes it, and a stop before then counts its loss
    instead of believing it kept."""
    bridge = _bridge(_settings(broker), store, FakeNode())
    bridge.subscriptions["s"] = "t/#"
    dropped: list[tuple[str, MessageId, str]] = []
    bridge.on_drop = lambda *d: dropped.append(d)
    await bridge.start()
    broker.stop()
    bridge.deliver(Deliver("s", parse_event("t/x n=1"), MessageId(9, 1, 1), 1))
    with pytest.raises(RuntimeError), store.batch():
        bridge.deliver(Deliver("s", parse_event("t/x n=2"), MessageId(9, 1, 2), 1))
        raise RuntimeError("the commit failed")
    assert bridge.status()["queued"] == 2
    await bridge.stop()
    assert dropped == [("mqtt_shutdown", MessageId(9, 1, 2), "s")]
    assert bridge.counters["held_at_stop"] == 1
    assert [u.event_id for u in store.undelivered()] == [MessageId(9, 1, 1)]
