"""The MQTT bridge: local applications publish, subscribe and receive through the broker.

Topic layout (``docs/mqtt.md``), with ``<p>`` the configured prefix:

- ``<p>/pub/<event topic>``: an application publishes an event, payload a
  JSON object of attributes;
- ``<p>/sub/<sub_id>``: payload a subscription expression (core text syntax)
  subscribes, an empty payload unsubscribes (retain the expression and it
  survives broker and daemon restarts);
- ``<p>/deliver/<sub_id>/<event topic>``: the daemon delivers matching events;
- ``<p>/error``: the daemon reports rejected application messages;
- the configured live telemetry topic: published by ``meshsub.runtime.livefeed``
  on its own connection, never by the bridge.

Durability: the daemon keeps a persistent MQTT v5 session (fixed client id,
``clean_start=False``, a session expiry) and acknowledges a QoS 1 publication
only after the event is committed to the store's outbox (paho's manual
acknowledgement, reached through aiomqtt's client). An event the broker saw
acknowledged therefore survives a SIGKILL; one not yet acknowledged is
redelivered by the broker, and a redelivery of an already persisted packet is
recognised by (packet id, digest) and acknowledged without a second event.

Loops: everything the daemon publishes lives under ``deliver``/``error``/
the telemetry topic and carries provenance user properties; its subscriptions use
"no local"; an incoming message that carries our provenance is dropped
(counted ``loop``), whoever re-published it.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import random
import sqlite3
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aiomqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from meshsub.core.api import Deliver, MessageId, NodeId
from meshsub.core.content import Event, Subscription
from meshsub.core.subids import SubIdError
from meshsub.core.subids import check_sub_id as core_check_sub_id
from meshsub.core.syntax import format_subscription, parse_subscription
from meshsub.core.topics import validate_topic
from meshsub.core.values import ContentError
from meshsub.runtime.logging import get_logger
from meshsub.runtime.store import Ingress, LocalPublisher, OutboxFullError, Store, StoreError

log = get_logger("meshsub.mqtt")

PROP_ORIGIN = "meshsub-origin"
"""User property: the node where the event was published (decimal node id)."""
PROP_EVENT_ID = "meshsub-event-id"
"""User property: the event's ``MessageId`` text."""
PROP_NODE = "meshsub-node"
"""User property: the node whose daemon published this MQTT message."""

_WINDOW = 32
"""Deliveries in flight to the broker at once (QoS 1 acknowledgements awaited together)."""


class PayloadError(ValueError):
    """An application message the bridge rejects; ``reason`` is the counter name."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class MqttSettings:
    """How to reach the local broker and how the bridge behaves."""

    host: str = "localhost"
    port: int = 1883
    prefix: str = "meshsub"
    client_id: str | None = None
    """Fixed per node (default ``meshsubd-<node hex>``) so the session persists."""
    username: str | None = None
    password: str | None = None
    keepalive: int = 30
    session_expiry_s: int = 86400
    reconnect_min_s: float = 0.5
    reconnect_max_s: float = 30.0
    queue_limit: int = 1000
    """Outgoing messages held while the broker is away; beyond it the oldest is dropped."""
    max_payload_bytes: int = 65536
    batch_limit: int = 256
    timeout_s: float = 10.0
    telemetry_topic: str = ""
    """Live telemetry topic (``livefeed``); checked here against the prefix so that the
    bridge can never take the daemon's own records back in. Empty: no live feed."""

    def __post_init__(self) -> None:
        p = self.prefix
        if not p or p.startswith("/") or p.endswith("/") or "+" in p or "#" in p or "$" in p[:1]:
            raise ValueError(f"mqtt prefix {p!r} must be a non-empty topic without wildcards")
        t = self.telemetry_topic
        if t and ("+" in t or "#" in t or t.startswith((f"{p}/pub/", f"{p}/sub/"))):
            raise ValueError(
                f"telemetry topic {t!r} must be a plain topic outside {p}/pub and {p}/sub"
            )
        if not 0 < self.port < 65536:
            raise ValueError(f"mqtt port {self.port} out of range")
        if self.queue_limit < 1 or self.batch_limit < 1:
            raise ValueError("mqtt queue_limit and batch_limit must be positive")
        if not 0 < self.reconnect_min_s <= self.reconnect_max_s:
            raise ValueError("need 0 < reconnect_min_s <= reconnect_max_s")


    @classmethod
    def from_config(cls, mqtt: Any, telemetry_topic: str = "", **overrides: Any) -> MqttSettings:
        """From ``meshsub.runtime.config.MqttConfig`` (and ``telemetry.mqtt_topic``)."""
        return cls(
            host=mqtt.host,
            port=mqtt.port,
            prefix=mqtt.topic_prefix,
            client_id=mqtt.client_id or None,
            keepalive=mqtt.keepalive,
            telemetry_topic=telemetry_topic,
            **overrides,
        )


# ---------------------------------------------------------------- payloads


def check_sub_id(sub_id: str) -> str:
    """A subscription id (``meshsub.core.subids``); ``PayloadError`` ``bad_sub_id`` if not."""
    try:
        return core_check_sub_id(sub_id)
    except SubIdError as exc:
        raise PayloadError("bad_sub_id", str(exc)) from None


def event_from_payload(topic: str, payload: bytes, max_bytes: int = 65536) -> Event:
    """An event from its MQTT topic (below ``<p>/pub/``) and JSON attribute object."""
    if len(payload) > max_bytes:
        raise PayloadError("too_large", f"payload of {len(payload)} bytes exceeds {max_bytes}")
    try:
        validate_topic(topic)
    except ContentError as exc:
        raise PayloadError("bad_topic", str(exc)) from None
    if not payload.strip():
        attrs: Any = {}
    else:
        try:
            attrs = json.loads(payload, parse_constant=_reject_constant)
        except (ValueError, UnicodeDecodeError) as exc:
            raise PayloadError("bad_json", f"payload is not JSON: {exc}") from None
    if not isinstance(attrs, dict):
        raise PayloadError("bad_json", f"payload must be a JSON object, not {type(attrs).__name__}")
    for name, value in attrs.items():
        if isinstance(value, dict | list) or value is None:
            raise PayloadError(
                "bad_attr", f"attribute {name!r}: values must be numbers, strings or booleans"
            )
    try:
        return Event(topic, attrs)
    except ContentError as exc:
        raise PayloadError("bad_attr", str(exc)) from None


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a finite number")


def delivery_payload(
    delivery: Deliver, *, latency_s: float | None = None, node: NodeId | None = None
) -> dict[str, Any]:
    """The JSON object an application receives for one delivery."""
    obj: dict[str, Any] = {
        "sub_id": delivery.sub_id,
        "topic": delivery.event.topic,
        "attrs": dict(delivery.event.attrs),
        "event_id": str(delivery.event_id),
        "origin": delivery.event_id.origin,
        "hop": delivery.hop,
    }
    if node is not None:
        obj["node"] = node
    if delivery.published_at is not None:
        obj["published_at"] = delivery.published_at
    if latency_s is not None and math.isfinite(latency_s):
        obj["latency_s"] = round(latency_s, 6)
    return obj


def provenance(node: NodeId, origin: NodeId, event_id: MessageId | None) -> Properties:
    """PUBLISH properties saying which daemon (and which origin) a message came from."""
    props = Properties(PacketTypes.PUBLISH)  # type: ignore[no-untyped-call]
    user = [(PROP_ORIGIN, str(origin)), (PROP_NODE, str(node))]
    if event_id is not None:
        user.append((PROP_EVENT_ID, str(event_id)))
    props.UserProperty = user
    props.ContentType = "application/json"
    return props


def hasprovenance(properties: Properties | None) -> bool:
    """True if a message carries meshsub provenance (it came out of a daemon)."""
    if properties is None:
        return False
    user = getattr(properties, "UserProperty", None) or []
    return any(key == PROP_ORIGIN for key, _ in user)


# ---------------------------------------------------------------- the bridge


@dataclass(slots=True)
class _Outgoing:
    topic: str
    payload: bytes
    qos: int
    properties: Properties
    delivered: tuple[MessageId, str] | None = None


@dataclass(slots=True)
class _Pending:
    message: aiomqtt.Message
    event: Event
    ingress: Ingress | None = None


class _Reconnect(Exception):
    """Drop the connection so that the broker redelivers unacknowledged messages."""


class MqttBridge:
    """Connects the node to the local broker; survives the broker coming and going.

    The node injects ``publisher`` (events: persist, then feed the protocol),
    ``on_subscribe``/``on_unsubscribe`` (feed ``LocalSubscribe``/
    ``LocalUnsubscribe``) and calls ``deliver`` for every ``Deliver`` action
    of an MQTT subscription.
    """

    def __init__(
        self,
        settings: MqttSettings,
        *,
        node: NodeId,
        store: Store,
        publisher: LocalPublisher,
        on_subscribe: Callable[[str, Subscription], None],
        on_unsubscribe: Callable[[str], None],
    ) -> None:
        self.settings = settings
        self.node = node
        self.store = store
        self.publisher = publisher
        self.on_subscribe = on_subscribe
        self.on_unsubscribe = on_unsubscribe
        self.client_id = settings.client_id or f"meshsubd-{node:08x}"
        p = settings.prefix
        self._pub_prefix = f"{p}/pub/"
        self._sub_prefix = f"{p}/sub/"
        self.state = "stopped"
        self.counters: Counter[str] = Counter()
        self.subscriptions: dict[str, str] = {}
        self._out: deque[_Outgoing] = deque()
        self._wake = asyncio.Event()
        self._idle = asyncio.Event()
        self._idle.set()
        self._in_flight: set[tuple[MessageId, str]] = set()
        self._to_record: list[tuple[MessageId, str]] = []
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Restore persisted MQTT subscriptions into the node, then connect in the background."""
        for sub_id, text in self.store.subscriptions(source="mqtt").items():
            try:
                sub = parse_subscription(text)
            except ContentError as exc:
                self.counters["rejected:bad_stored_subscription"] += 1
                log.error("dropping unreadable stored subscription", sub_id=sub_id, exc=exc)
                self.store.delete_subscription(sub_id)
                continue
            self.subscriptions[sub_id] = text
            self._call(self.on_subscribe, sub_id, sub)
        self.state = "connecting"
        self._task = asyncio.get_running_loop().create_task(self._run(), name="mqtt-bridge")

    async def stop(self, drain_timeout_s: float = 2.0) -> None:
        """Drain queued deliveries for a moment if connected, then disconnect."""
        if self._task is None:
            return
        if self.state == "connected" and (self._out or not self._idle.is_set()):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._drained(), drain_timeout_s)
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        self._record_delivered()
        if self._out:
            self.counters["dropped:shutdown"] += len(self._out)
            log.warning("undelivered MQTT messages at shutdown", count=len(self._out))
        self.state = "stopped"

    async def _drained(self) -> None:
        while self._out or not self._idle.is_set():
            await asyncio.sleep(0.01)

    def status(self) -> dict[str, Any]:
        s = self.settings
        return {
            "state": self.state,
            "broker": f"{s.host}:{s.port}",
            "client_id": self.client_id,
            "prefix": s.prefix,
            "queued": len(self._out),
            "subscriptions": len(self.subscriptions),
            "counters": dict(self.counters),
        }

    # ------------------------------------------------------------ outgoing

    def owns(self, sub_id: str) -> bool:
        return sub_id in self.subscriptions

    def deliver(self, delivery: Deliver, *, latency_s: float | None = None) -> bool:
        """Queue a delivery for the application; False if ``sub_id`` is not an MQTT one.

        Each (event id, subscription) is published once, across reconnects
        and restarts: ids are remembered (in the store) once the broker
        acknowledged the delivery.
        """
        if delivery.sub_id not in self.subscriptions:
            return False
        key = (delivery.event_id, delivery.sub_id)
        try:
            seen = key in self._in_flight or self.store.delivered_seen(*key)
        except sqlite3.Error as exc:  # deliver rather than lose it; a duplicate is the risk
            self.counters["store_errors"] += 1
            log.error("cannot check delivered ids", exc=exc)
            seen = False
        if seen:
            self.counters["duplicate_delivery"] += 1
            return True
        payload = delivery_payload(delivery, latency_s=latency_s, node=self.node)
        topic = f"{self.settings.prefix}/deliver/{delivery.sub_id}/{delivery.event.topic}"
        props = provenance(self.node, delivery.event_id.origin, delivery.event_id)
        self._in_flight.add(key)
        self._enqueue(_Outgoing(topic, _json(payload), 1, props, key))
        self.counters["deliveries_queued"] += 1
        return True

    def _enqueue(self, item: _Outgoing) -> None:
        if len(self._out) >= self.settings.queue_limit:
            old = self._out.popleft()
            self.counters["dropped:queue_full"] += 1
            if old.delivered is not None:
                self._in_flight.discard(old.delivered)
            if _sparse(self.counters["dropped:queue_full"]):
                log.warning("MQTT queue full: dropping the oldest messages", topic=old.topic,
                            dropped=self.counters["dropped:queue_full"])
        self._out.append(item)
        self._wake.set()

    def _report(self, topic: str, reason: str, error: str) -> None:
        """Count a rejected application message and tell the application on ``<p>/error``."""
        self.counters[f"rejected:{reason}"] += 1
        if _sparse(self.counters[f"rejected:{reason}"]):  # a broken app must not flood the log
            log.warning("rejected application message", topic=topic, reason=reason,
                        error=error, count=self.counters[f"rejected:{reason}"])
        if self.state != "connected" or len(self._out) >= self.settings.queue_limit:
            self.counters["dropped:error_report"] += 1  # never evict a delivery for a report
            return
        body = {"topic": topic, "reason": reason, "error": error, "node": self.node}
        self._enqueue(_Outgoing(f"{self.settings.prefix}/error", _json(body), 0,
                                provenance(self.node, self.node, None)))

    # ------------------------------------------------------------ connection

    def _make_client(self) -> aiomqtt.Client:
        s = self.settings
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = s.session_expiry_s
        # let the broker have up to a batch of unacknowledged events in flight to us
        props.ReceiveMaximum = s.batch_limit
        client = aiomqtt.Client(
            s.host,
            s.port,
            identifier=self.client_id,
            username=s.username,
            password=s.password,
            protocol=aiomqtt.ProtocolVersion.V5,
            clean_start=False,
            properties=props,
            keepalive=s.keepalive,
            timeout=s.timeout_s,
        )
        # acknowledge only after the outbox commit (aiomqtt exposes no switch for it)
        client._client.manual_ack_set(True)
        return client

    async def _run(self) -> None:
        delay = self.settings.reconnect_min_s
        while True:
            self.state = "connecting"
            try:
                client = self._make_client()
                async with client:
                    self.state = "connected"
                    self.counters["connects"] += 1
                    log.info("connected to broker",
                             broker=f"{self.settings.host}:{self.settings.port}")
                    delay = self.settings.reconnect_min_s
                    await self._session(client)
            except (aiomqtt.MqttError, OSError, _Reconnect) as exc:
                self.counters["disconnects"] += 1
                log.warning("broker unavailable", exc=exc, retry_s=round(delay, 2))
            except Exception as exc:  # a bug here must not end the bridge: log, back off, retry
                self.counters["errors"] += 1
                log.error("MQTT bridge failure", exc=exc, retry_s=round(delay, 2))
            finally:
                self._idle.set()
            self.state = "disconnected"
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))
            delay = min(delay * 2, self.settings.reconnect_max_s)

    async def _session(self, client: aiomqtt.Client) -> None:
        opts = SubscribeOptions(qos=1, noLocal=True)
        await client.subscribe([(f"{self._pub_prefix}#", opts), (f"{self._sub_prefix}+", opts)])
        writer = asyncio.create_task(self._writer(client))
        reader = asyncio.create_task(self._reader(client))
        try:
            done, _ = await asyncio.wait({writer, reader}, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                task.result()  # re-raise why it ended
        finally:
            for task in (writer, reader):
                task.cancel()
            await asyncio.gather(writer, reader, return_exceptions=True)

    async def _writer(self, client: aiomqtt.Client) -> None:
        while True:
            if not self._out:
                self._record_delivered()
                self._idle.set()
                self._wake.clear()
                await self._wake.wait()
                continue
            self._idle.clear()
            # a window of publications awaiting their PUBACKs together; paho sends
            # them in call order, so the order of deliveries is kept
            window = [self._out.popleft() for _ in range(min(len(self._out), _WINDOW))]
            tasks = [
                asyncio.ensure_future(
                    client.publish(i.topic, i.payload, qos=i.qos, properties=i.properties)
                )
                for i in window
            ]
            error: BaseException | None = None
            try:
                await asyncio.wait(tasks)
            finally:
                # also on cancellation: what the broker acknowledged is done, the rest
                # goes back to the head of the queue, in order
                failed: list[_Outgoing] = []
                for item, task in zip(window, tasks, strict=True):
                    if not task.done() or task.cancelled() or task.exception() is not None:
                        task.cancel()
                        failed.append(item)
                        if task.done() and not task.cancelled() and error is None:
                            error = task.exception()
                        continue
                    self.counters["published"] += 1
                    if item.delivered is not None:
                        self._to_record.append(item.delivered)
                self._out.extendleft(reversed(failed))
            if len(self._to_record) >= 64:
                self._record_delivered()
            if error is not None:
                raise error

    def _record_delivered(self) -> None:
        if not self._to_record:
            return
        batch, self._to_record = self._to_record, []
        try:
            self.store.delivered_add(batch)
        except StoreError as exc:
            self.counters["store_errors"] += 1
            log.error("cannot record deliveries", exc=exc)
        for key in batch:
            self._in_flight.discard(key)

    async def _reader(self, client: aiomqtt.Client) -> None:
        messages = client.messages
        while True:
            batch = [await anext(messages)]
            while len(messages) and len(batch) < self.settings.batch_limit:
                batch.append(await anext(messages))
            self.handle_batch(batch, client)

    # ------------------------------------------------------------ incoming

    def handle_batch(self, batch: list[aiomqtt.Message], client: aiomqtt.Client) -> None:
        """Process received messages in order; acknowledge each once it is safe."""
        pending: list[_Pending] = []
        for message in batch:
            topic = message.topic.value
            if hasprovenance(message.properties):
                self.counters["dropped:loop"] += 1
                self._ack(client, message)
                continue
            if topic.startswith(self._pub_prefix):
                item = self._accept_publication(message, topic[len(self._pub_prefix):], client)
                if item is not None:
                    pending.append(item)
            elif topic.startswith(self._sub_prefix):
                self._commit(pending, client)
                pending = []
                self._subscription_message(topic[len(self._sub_prefix):], message.payload)
                self._ack(client, message)
            else:  # not ours (a broker-side mapping); acknowledge and forget
                self.counters["dropped:foreign_topic"] += 1
                self._ack(client, message)
        self._commit(pending, client)

    def _accept_publication(
        self, message: aiomqtt.Message, event_topic: str, client: aiomqtt.Client
    ) -> _Pending | None:
        payload = _payload_bytes(message.payload)
        if message.retain:
            # a stale retained copy replayed by a (re)subscription, not a new event
            self.counters["dropped:retained_event"] += 1
            self._ack(client, message)
            return None
        try:
            event = event_from_payload(event_topic, payload, self.settings.max_payload_bytes)
        except PayloadError as exc:
            self._report(message.topic.value, exc.reason, str(exc))
            self._ack(client, message)
            return None
        ingress = None
        if message.qos > 0:
            digest = hashlib.blake2b(event_topic.encode() + b"\0" + payload, digest_size=16)
            ingress = Ingress(message.mid, digest.digest())
            if self.store.ingress_seen(ingress) is not None:
                self.counters["redelivered"] += 1
                self._ack(client, message)
                return None
        return _Pending(message, event, ingress)

    def _commit(self, pending: list[_Pending], client: aiomqtt.Client) -> None:
        """Persist a run of publications in one commit, acknowledge them, then feed the node."""
        if not pending:
            return
        try:
            ids = self.publisher.persist([(p.event, p.ingress) for p in pending])
        except OutboxFullError as exc:
            for p in pending:
                self._report(p.message.topic.value, "outbox_full", str(exc))
                self._ack(client, p.message)
            return
        except StoreError as exc:
            # not acknowledged: the broker redelivers after the reconnect
            self.counters["store_errors"] += 1
            log.error("cannot persist publications", exc=exc, count=len(pending))
            raise _Reconnect(str(exc)) from None
        for p in pending:
            self._ack(client, p.message)
        self.counters["events_accepted"] += len(pending)
        try:
            self.publisher.feed_many([(p.event, i) for p, i in zip(pending, ids, strict=True)])
        except StoreError as exc:  # fed but not forgotten: re-fed (same ids) at next start
            self.counters["store_errors"] += 1
            log.error("cannot clear fed publications from the outbox", exc=exc)

    def _subscription_message(self, sub_id: str, raw: Any) -> None:
        topic = f"{self._sub_prefix}{sub_id}"
        try:
            check_sub_id(sub_id)
        except PayloadError as exc:
            self._report(topic, exc.reason, str(exc))
            return
        payload = _payload_bytes(raw)
        if not payload.strip():
            if sub_id in self.subscriptions:
                self.store.delete_subscription(sub_id)  # StoreError: not acked, comes again
                del self.subscriptions[sub_id]
                self.counters["unsubscribed"] += 1
                self._call(self.on_unsubscribe, sub_id)
            return
        try:
            text = payload.decode("utf-8")
            sub = parse_subscription(text)
        except (UnicodeDecodeError, ContentError) as exc:
            self._report(topic, "bad_subscription", str(exc))
            return
        canonical = format_subscription(sub)
        if self.subscriptions.get(sub_id) == canonical:
            return  # the retained copy again after a reconnect: nothing changed
        self.store.put_subscription(sub_id, canonical, source="mqtt")  # StoreError: comes again
        if sub_id in self.subscriptions:
            self._call(self.on_unsubscribe, sub_id)
        self.subscriptions[sub_id] = canonical
        self.counters["subscribed"] += 1
        self._call(self.on_subscribe, sub_id, sub)

    def _ack(self, client: aiomqtt.Client, message: aiomqtt.Message) -> None:
        if message.qos > 0:
            client._client.ack(message.mid, message.qos)

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:  # the node's bug must not take the bridge down
            self.counters["callback_errors"] += 1
            log.error("node callback failed", callback=getattr(fn, "__name__", "?"), exc=exc)


def _sparse(count: int) -> bool:
    """Log the 1st, 2nd, 4th, 8th, ... occurrence of a repeated event."""
    return count & (count - 1) == 0


def _payload_bytes(payload: Any) -> bytes:
    if isinstance(payload, bytes | bytearray):
        return bytes(payload)
    if payload is None:
        return b""
    return str(payload).encode()


def _json(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()

