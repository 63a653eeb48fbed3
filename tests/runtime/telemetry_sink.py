"""A QoS 1 subscriber with a persistent session, for tests of the live telemetry feed.

It receives what a collector would (messages queued while it or the broker was
away included) and keeps every line of every payload, duplicates too, so a test
can tell a lost record from a re-sent one.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties


class Sink:
    def __init__(self, port: int, topic: str, client_id: str = "msub-test-sink") -> None:
        self.topic = topic
        self._lock = threading.Lock()
        self._lines: list[str] = []
        self.messages: list[mqtt.MQTTMessage] = []
        self.subscribed = threading.Event()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                                  protocol=mqtt.MQTTv5)
        self.client.reconnect_delay_set(1, 1)
        self.client.on_connect = self._on_connect
        self.client.on_subscribe = lambda *_: self.subscribed.set()
        self.client.on_message = self._on_message
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = 3600
        self.client.connect_async("127.0.0.1", port, clean_start=False, properties=props)
        self.client.loop_start()

    def _on_connect(self, client: mqtt.Client, *_: Any) -> None:
        client.subscribe(self.topic, qos=1)

    def _on_message(self, client: mqtt.Client, userdata: Any, msg: mqtt.MQTTMessage) -> None:
        with self._lock:
            self.messages.append(msg)
            self._lines += msg.payload.decode().splitlines()

    def records(self) -> list[dict[str, Any]]:
        with self._lock:
            lines = list(self._lines)
        return [json.loads(line) for line in lines]

    def recs(self) -> list[int]:
        return [r["rec"] for r in self.records()]

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()
