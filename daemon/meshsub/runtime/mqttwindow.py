"""A window of QoS 1 publications handed to paho at once, their PUBACKs awaited together.

``aiomqtt.Client.publish`` costs, per message, a task (the caller's), an
``asyncio.Event``, and ``asyncio.wait_for`` (a second task), plus a
"pending publish calls" log call beyond ten in flight: under load that capped
the bridge's deliveries to the application at about a hundred per second,
below the mesh's rate (issue 12). Here each message is one ``paho.publish``
call, and one future completes when the window's last PUBACK arrives.

The PUBACK still reaches us through aiomqtt: its ``on_publish`` handler pops
the message id from ``Client._pending_publishes`` and calls ``set()`` on what
it finds, which is an ``_Ack`` of ours. (Private attributes of aiomqtt 2.x:
the bridge already switches paho's manual acknowledgement on the same way.)
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Sequence
from typing import Any, Protocol

import aiomqtt
from paho.mqtt.client import MQTT_ERR_SUCCESS
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

INFLIGHT_MAX = 256
"""QoS 1 publications the bridge keeps in flight to the broker, if the broker's Receive
Maximum allows as many. paho's default, 20, made a PUBACK round trip per 20
deliveries the limit: under 1000 per second on a busy 2-core machine (issue 12)."""

_CONTENT_TYPE = 0x03
_USER_PROPERTY = 0x26
"""MQTT 5.0 property identifiers (OASIS MQTT 5.0, section 2.2.2.2)."""


class Publication(Protocol):
    topic: str
    payload: bytes
    qos: int
    properties: Properties


def _utf8(text: str) -> bytes:
    data = text.encode()
    if len(data) > 0xFFFF:
        raise ValueError("an MQTT string is at most 65535 bytes")
    return struct.pack("!H", len(data)) + data


def _varint(value: int) -> bytes:
    """An MQTT Variable Byte Integer (OASIS MQTT 5.0, section 1.5.5)."""
    out = bytearray()
    while True:
        value, digit = divmod(value, 128)
        out.append(digit | (0x80 if value else 0))
        if not value:
            return bytes(out)


class PackedProperties(Properties):
    """PUBLISH properties (a content type and user properties) packed once, by hand.

    paho's ``Properties`` builds its name tables in ``__init__`` and walks
    them again in ``pack()``, which paho calls for every PUBLISH: about
    120 us per delivery, more than the rest of a delivery's path (issue 12).
    This packs the same bytes as paho (content type first, then the user
    properties in order; a test compares them) when it is made. It is
    read-only: the attributes are set once, and ``pack`` returns the bytes.
    """

    ContentType: str
    UserProperty: list[tuple[str, str]]
    _packed: bytes

    def __init__(self, content_type: str, user: Sequence[tuple[str, str]]) -> None:
        # not Properties.__init__: its tables are what this avoids
        body = bytes([_CONTENT_TYPE]) + _utf8(content_type) + b"".join(
            bytes([_USER_PROPERTY]) + _utf8(key) + _utf8(value) for key, value in user)
        packed = _varint(len(body)) + body
        object.__setattr__(self, "packetType", PacketTypes.PUBLISH)
        object.__setattr__(self, "ContentType", content_type)
        object.__setattr__(self, "UserProperty", list(user))
        object.__setattr__(self, "_packed", packed)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("PackedProperties are read-only")

    def pack(self) -> bytes:
        return self._packed

    def isEmpty(self) -> bool:  # paho's name
        return False

    def json(self) -> dict[str, Any]:
        return {"ContentType": self.ContentType, "UserProperty": self.UserProperty}

    def __str__(self) -> str:  # paho's debug log prints the properties of a PUBLISH
        return f"[ContentType : {self.ContentType}, UserProperty : {self.UserProperty}]"

    __repr__ = __str__


def follow_receive_maximum(client: aiomqtt.Client) -> None:
    """Keep paho's in-flight limit within the broker's Receive Maximum (MQTT 5.0, 3.2.2.3.3).

    ``client`` is made with ``max_inflight_messages=INFLIGHT_MAX``; paho itself
    ignores the Receive Maximum of the CONNACK (mosquitto announces its
    ``max_inflight_messages``, 20 by default), so this lowers paho's limit to it
    when the CONNACK arrives, before anything is published. (paho's setter
    refuses a connected client; the attribute behind it is what it checks.)
    """
    paho: Any = client._client
    on_connect = paho.on_connect

    def capped(mqttc: Any, userdata: Any, flags: Any, reason: Any,
               properties: Any = None) -> None:
        announced = getattr(properties, "ReceiveMaximum", None)
        limit = INFLIGHT_MAX if not announced else min(INFLIGHT_MAX, int(announced))
        mqttc._max_inflight_messages = limit
        on_connect(mqttc, userdata, flags, reason, properties)

    paho.on_connect = capped


def inflight_limit(client: aiomqtt.Client) -> int:
    """paho's in-flight limit now (after the CONNACK: what the broker allows)."""
    limit: int = client._client._max_inflight_messages
    return limit


class _Window:
    """The PUBACKs a window still waits for; ``done`` resolves at the last one."""

    __slots__ = ("acked", "done", "left")

    def __init__(self, done: asyncio.Future[None], acked: list[bool]) -> None:
        self.done = done
        self.acked = acked
        self.left = 0


class _Ack:
    """Stands in for aiomqtt's per-message event: ``set()`` is the PUBACK."""

    __slots__ = ("index", "window")

    def __init__(self, window: _Window, index: int) -> None:
        self.window = window
        self.index = index

    def set(self) -> None:
        window = self.window
        if window.acked[self.index]:
            return
        window.acked[self.index] = True
        window.left -= 1
        if window.left == 0 and not window.done.done():
            window.done.set_result(None)


async def publish_window(client: aiomqtt.Client, window: Sequence[Publication],
                         acked: list[bool], timeout_s: float) -> BaseException | None:
    """Publish ``window`` in order; set ``acked[i]`` for each one the broker acknowledged.

    Returns why the window did not complete (paho refused a publication, no
    PUBACK within ``timeout_s``, the connection ended), or ``None``.
    ``acked`` is filled in place, so that a caller cancelled meanwhile still
    knows which publications are done (the others go back to its queue).
    """
    paho: Any = client._client
    pending: dict[int, Any] = client._pending_publishes
    loop = asyncio.get_running_loop()
    state = _Window(loop.create_future(), acked)
    mine: list[int] = []
    error: BaseException | None = None
    try:
        for index, item in enumerate(window):
            info = paho.publish(item.topic, item.payload, item.qos, False, item.properties)
            if info.rc != MQTT_ERR_SUCCESS:
                error = aiomqtt.MqttCodeError(info.rc, "Could not publish message")
                break
            if item.qos == 0 or info.is_published():
                acked[index] = True
                continue
            pending[info.mid] = _Ack(state, index)
            mine.append(info.mid)
            state.left += 1
        if state.left:
            disconnected = client._disconnected
            await asyncio.wait((state.done, disconnected), timeout=timeout_s,
                               return_when=asyncio.FIRST_COMPLETED)
            if not state.done.done() and error is None:
                if disconnected.done() and not disconnected.cancelled():
                    error = disconnected.exception() or aiomqtt.MqttError("disconnected")
                else:
                    error = aiomqtt.MqttError("publication not acknowledged in time")
    finally:
        for mid in mine:  # aiomqtt popped the acknowledged ones; forget the rest
            ack = pending.get(mid)
            if isinstance(ack, _Ack) and ack.window is state:
                del pending[mid]
    return error
