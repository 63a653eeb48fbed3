"""A window of QoS 1 publications through paho, PUBACKs awaited together (real mosquitto)."""

from __future__ import annotations

import asyncio
import os
import signal
from dataclasses import dataclass
from pathlib import Path

import aiomqtt
import pytest
from mosquitto import Mosquitto, have_mosquitto
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from meshsub.runtime.mqttwindow import (
    INFLIGHT_MAX,
    PackedProperties,
    follow_receive_maximum,
    inflight_limit,
    publish_window,
)

pytestmark = pytest.mark.skipif(not have_mosquitto(), reason="mosquitto not installed")


@dataclass
class Item:
    topic: str
    payload: bytes
    qos: int
    properties: Properties


def items(n: int, qos: int = 1) -> list[Item]:
    props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    return [Item(f"w/{qos}/{i}", str(i).encode(), qos, props) for i in range(n)]


def client(broker: Mosquitto, name: str) -> aiomqtt.Client:
    return aiomqtt.Client("127.0.0.1", broker.port, identifier=name,
                          protocol=aiomqtt.ProtocolVersion.V5)


async def test_a_window_larger_than_pahos_in_flight_limit_arrives_whole_and_in_order(
        tmp_path: Path) -> None:
    broker = Mosquitto(tmp_path)
    await asyncio.to_thread(broker.start)
    try:
        async with client(broker, "app") as app, client(broker, "bridge") as bridge:
            await app.subscribe("w/#", qos=1)
            window = items(45) + items(2, qos=0)  # paho keeps 20 QoS 1 messages in flight
            acked = [False] * len(window)
            assert await publish_window(bridge, window, acked, 30.0) is None
            assert all(acked)
            assert not bridge._pending_publishes  # nothing of ours left behind
            got = []
            async with asyncio.timeout(30):
                async for message in app.messages:
                    got.append(message.topic.value)
                    if len(got) == len(window):
                        break
            # paho sends QoS 0 at once and holds QoS 1 beyond its in-flight limit, so
            # only the QoS 1 order is promised (as with aiomqtt's publish)
            assert [t for t in got if t.startswith("w/1/")] == [i.topic for i in window[:45]]
            assert sorted(got) == sorted(i.topic for i in window)
    finally:
        broker.stop()


async def test_without_pubacks_the_window_reports_an_error_and_nothing_acknowledged(
        tmp_path: Path) -> None:
    broker = Mosquitto(tmp_path)
    await asyncio.to_thread(broker.start)
    assert broker.proc is not None
    try:
        async with client(broker, "bridge") as bridge:
            os.kill(broker.proc.pid, signal.SIGSTOP)  # the broker can acknowledge nothing
            try:
                acked = [False] * 5
                error = await publish_window(bridge, items(5), acked, 0.5)
            finally:
                os.kill(broker.proc.pid, signal.SIGCONT)
            assert isinstance(error, aiomqtt.MqttError)
            assert acked == [False] * 5  # all of them go back to the bridge's queue
            assert not bridge._pending_publishes
    finally:
        broker.stop()


@pytest.mark.parametrize("user", [
    [("meshsub-origin", "1"), ("meshsub-node", "2"), ("meshsub-event-id", "1-7-42")],
    [],
    [("k\u00e9y", "v" * 300), ("", "")],  # non-ASCII, a length above 255, empty strings
])
def test_packed_properties_are_the_bytes_paho_packs(user: list[tuple[str, str]]) -> None:
    reference = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    reference.ContentType = "application/json"
    if user:
        reference.UserProperty = user
    packed = PackedProperties("application/json", user)
    assert packed.pack() == reference.pack()
    assert str(packed) == str(reference) or not user  # paho omits an empty list
    with pytest.raises(AttributeError):
        packed.ContentType = "text/plain"


async def test_packed_properties_reach_a_subscriber(tmp_path: Path) -> None:
    broker = Mosquitto(tmp_path)
    await asyncio.to_thread(broker.start)
    try:
        async with client(broker, "app") as app, client(broker, "bridge") as bridge:
            await app.subscribe("p/#", qos=1)
            user = [("meshsub-origin", "3"), ("meshsub-event-id", "3-1-9")]
            window = [Item("p/1", b"{}", 1, PackedProperties("application/json", user))]
            acked = [False]
            assert await publish_window(bridge, window, acked, 30.0) is None and acked[0]
            async with asyncio.timeout(30):
                message = await anext(aiter(app.messages))
            assert message.properties is not None
            assert message.properties.ContentType == "application/json"
            assert message.properties.UserProperty == user
    finally:
        broker.stop()


@pytest.mark.parametrize(("broker_limit", "expected"), [
    ("", 20), ("max_inflight_messages 256\n", 256), ("max_inflight_messages 5\n", 5)])
async def test_in_flight_deliveries_follow_the_brokers_receive_maximum(
        tmp_path: Path, broker_limit: str, expected: int) -> None:
    """paho keeps 20 publications in flight whatever the broker allows, and ignores the
    Receive Maximum of its CONNACK: the bridge asks for INFLIGHT_MAX and takes the
    broker's limit (mosquitto's ``max_inflight_messages``, 20 by default)."""
    broker = Mosquitto(tmp_path, extra=broker_limit)
    await asyncio.to_thread(broker.start)
    try:
        bridge = aiomqtt.Client("127.0.0.1", broker.port, identifier="bridge",
                                protocol=aiomqtt.ProtocolVersion.V5,
                                max_inflight_messages=INFLIGHT_MAX)
        follow_receive_maximum(bridge)
        async with client(broker, "app") as app, bridge:
            assert inflight_limit(bridge) == expected
            await app.subscribe("w/#", qos=1)
            window = items(300)
            acked = [False] * len(window)
            assert await publish_window(bridge, window, acked, 30.0) is None and all(acked)
    finally:
        broker.stop()
