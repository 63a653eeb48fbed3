"""The MQTT bridge: local applications publish, subscribe and receive through the broker.

Topic layout (``docs/mqtt.md``), with ``<p>`` the configured prefix:

- ``<p>/pub/<event topic>``: an application publishes an event, payload a
  JSON object of attributes;
- ``<p>/sub/<app>/<name>`` (or ``<p>/sub/<name>``): payload a subscription
  expression (core text syntax; `a | b`, a disjunction, is one core subscription
  per alternative, delivered once under the id) subscribes, an empty payload unsubscribes
  (retain the expression and it survives broker and daemon restarts); the
  subscription id is ``<app>/<name>``, and the broker's ACL lets each
  application write only below its own user name;
- ``<p>/deliver/<sub_id>/<event topic>``: the daemon delivers matching events
  (so an application reads only ``<p>/deliver/<app>/#``);
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

Every delivery is kept in the store from the moment its event is marked seen
(``Store.undelivered_add``, in the node's batch that marks it) until the broker
acknowledged it (``Store.delivered_add`` forgets it): the event is refused ever
after, so a daemon killed (SIGKILL, OOM; a power cut: docs/operations.md) or stopped
with deliveries queued publishes them at its next start, ahead of anything new
(at least once: a kill between a PUBACK and its record publishes it again). Bounded by
``queue_limit`` entries and ``held_max_bytes`` bytes, a delivery of a remote event
dropped before one of a local event (counted ``dropped:queue_full``).

Loops: everything the daemon publishes lives under ``deliver``/``error``/
the telemetry topic and carries provenance user properties; its subscriptions use
"no local"; an incoming message that carries our provenance is dropped
(counted ``loop``), whoever re-published it.

Hostile input: no message stops the bridge. Payloads are parsed with bounded
nesting (``boundedjson``); whatever a message makes go wrong is counted
(``rejected:<reason>``, ``rejected:internal`` for a bug) and the message is
acknowledged, so the broker does not redeliver it for ever, across daemon
restarts included. Only a store that cannot write leaves a message
unacknowledged (it comes again). At most ``max_subscriptions`` MQTT
subscriptions (``rejected:too_many``). The bridge logs in with the configured
user and password (and TLS if configured), warns at start when the broker's
configured queue is shorter than its own, and counts the publications the
broker reports dropping (``$SYS/broker/publish/messages/dropped``).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import json
import math
import random
import sqlite3
import ssl
from collections import Counter, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiomqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from meshsub.core.api import Deliver, MessageId, NodeId
from meshsub.core.content import Event, Subscription
from meshsub.core.disjunction import members
from meshsub.core.subids import SubIdError
from meshsub.core.subids import check_sub_id as core_check_sub_id
from meshsub.core.syntax import format_alternatives, parse_alternatives
from meshsub.core.topics import validate_topic
from meshsub.core.values import ContentError
from meshsub.runtime import boundedjson
from meshsub.runtime.durableacks import DurableAcks
from meshsub.runtime.logging import get_logger
from meshsub.runtime.mqttwindow import (
    INFLIGHT_MAX,
    PackedProperties,
    follow_receive_maximum,
    publish_window,
)
from meshsub.runtime.store import (
    Ingress,
    LocalPublisher,
    OutboxFullError,
    Store,
    StoreError,
    Undelivered,
)

log = get_logger("meshsub.mqtt")

PROP_ORIGIN = "meshsub-origin"
"""User property: the node where the event was published (decimal node id)."""
PROP_EVENT_ID = "meshsub-event-id"
"""User property: the event's ``MessageId`` text."""
PROP_NODE = "meshsub-node"
"""User property: the node whose daemon published this MQTT message."""

_WINDOW = INFLIGHT_MAX
"""Deliveries handed to paho at once (it keeps as many in flight as the broker allows)."""
"""Deliveries in flight to the broker at once (QoS 1 acknowledgements awaited together)."""
MAX_PAYLOAD_DEPTH = 2
"""An event is one JSON object of plain values: deeper nesting is refused before parsing."""
BROKER_DROPPED_TOPIC = "$SYS/broker/publish/messages/dropped"
"""mosquitto's count of publications it dropped at its queue or in-flight limits."""


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
    password: str | None = field(default=None, repr=False)
    tls_ca_file: str | None = None
    """Verify the broker with this CA bundle (TLS on); ``None``: plain TCP (loopback)."""
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    keepalive: int = 30
    session_expiry_s: int = 86400
    reconnect_min_s: float = 0.5
    reconnect_max_s: float = 30.0
    queue_limit: int = 1000
    """Deliveries kept (queued, in memory and in the store) until the broker acknowledges
    them; beyond, the oldest of a remote event is dropped (of a local one if none)."""
    held_max_bytes: int = 8 * 1024 * 1024
    """Bytes (topics and payloads) of the deliveries kept, the same way."""
    max_payload_bytes: int = 65536
    batch_limit: int = 256
    max_subscriptions: int = 1000
    """MQTT subscriptions the node takes; beyond, ``rejected:too_many``."""
    outbox_limit: int = 10000
    """Publications the daemon holds unfed (``LocalPublisher.limit``): the broker's queue
    for the daemon should be at least as long."""
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
        if min(self.queue_limit, self.batch_limit, self.max_subscriptions,
               self.held_max_bytes) < 1:
            raise ValueError("mqtt queue_limit, batch_limit, max_subscriptions and "
                             "held_max_bytes must be positive")
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError("mqtt tls_cert_file and tls_key_file go together")
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
            username=mqtt.username or None,
            password=mqtt.password or None,
            tls_ca_file=mqtt.tls_ca_file or None,
            tls_cert_file=mqtt.tls_cert_file or None,
            tls_key_file=mqtt.tls_key_file or None,
            keepalive=mqtt.keepalive,
            max_subscriptions=mqtt.max_subscriptions,
            telemetry_topic=telemetry_topic,
            **overrides,
        )

    def tls(self) -> aiomqtt.TLSParameters | None:
        """aiomqtt's TLS settings (verifying the broker), or None for plain TCP."""
        if self.tls_ca_file is None:
            return None
        return aiomqtt.TLSParameters(ca_certs=self.tls_ca_file, certfile=self.tls_cert_file,
                                     keyfile=self.tls_key_file,
                                     cert_reqs=ssl.CERT_REQUIRED)


# ---------------------------------------------------------------- payloads


def check_sub_id(sub_id: str) -> str:
    """A subscription id (``meshsub.core.subids``: ``<app>/<name>`` or ``<name>``);
    ``PayloadError`` ``bad_sub_id`` if not."""
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
            attrs = boundedjson.loads(payload, max_depth=MAX_PAYLOAD_DEPTH,
                                      parse_constant=_reject_constant)
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
    user = [(PROP_ORIGIN, str(origin)), (PROP_NODE, str(node))]
    if event_id is not None:
        user.append((PROP_EVENT_ID, str(event_id)))
    return PackedProperties("application/json", user)  # packed once, not per PUBLISH


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

    @property
    def size(self) -> int:
        """Bytes against ``held_max_bytes`` (as ``Undelivered.size``)."""
        return len(self.topic.encode()) + len(self.payload)


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
        self._members: dict[str, list[str]] = {}
        """Each MQTT subscription's core subscription ids (more than one for a disjunction)."""
        self._kept: dict[tuple[MessageId, str], int] = {}
        """Every delivery queued or in flight, with its size: the rows of ``undelivered``
        this process wrote or restored (the bound counts them; a pair here is not queued
        twice)."""
        self._kept_bytes = 0
        self._to_record: list[tuple[MessageId, str]] = []
        self._task: asyncio.Task[None] | None = None
        self._broker_dropped: int | None = None
        """The broker's cumulative dropped-publication count when we last read it."""
        self.acks = DurableAcks(store.sync_wal, self._sync_failed)
        """PUBACKs of publications wait for the fsync of their commit, off the loop."""
        self.on_drop: Callable[[str, MessageId, str], None] | None = None
        """Told of each delivery dropped (reason, event id, subscription): the node writes
        a ``drop`` telemetry record for it, so that every lost delivery is accounted."""

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Restore persisted MQTT subscriptions into the node, then connect in the background."""
        if self.acks.closed:  # started again after a stop
            self.acks = DurableAcks(self.store.sync_wal, self._sync_failed)
        for sub_id, text in self.store.subscriptions(source="mqtt").items():
            try:
                alternatives = parse_alternatives(text)
            except ContentError as exc:
                self.counters["rejected:bad_stored_subscription"] += 1
                log.error("dropping unreadable stored subscription", sub_id=sub_id, exc=exc)
                self.store.delete_subscription(sub_id)
                continue
            self.subscriptions[sub_id] = text
            self._subscribe_members(sub_id, alternatives)
        self._restore_undelivered()
        self.state = "connecting"
        self._task = asyncio.get_running_loop().create_task(self._run(), name="mqtt-bridge")

    def check_broker_queue(self, config_path: Path) -> int | None:
        """Warn when the broker's configuration queues fewer messages per client than
        this daemon holds: beyond it the broker drops silently. The broker's limit
        (None if its configuration cannot be read)."""
        limit = broker_queue_limit(config_path)
        own = max(self.settings.outbox_limit, self.settings.queue_limit)
        if limit is not None and 0 < limit < own:
            self.counters["broker_queue_short"] = 1
            log.warning("the broker queues fewer messages per client than meshsubd holds: "
                        "raise max_queued_messages", broker=limit, meshsubd=own,
                        config=str(config_path))
        return limit

    async def stop(self, drain_timeout_s: float = 2.0) -> None:
        """Drain queued deliveries for a moment if connected, then disconnect."""
        if self._task is None:
            return
        if self.state == "connected" and (self._out or not self._idle.is_set()):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._drained(), drain_timeout_s)
        while True:
            self._task.cancel()
            # asyncio.wait_for (aiomqtt's, Python 3.11) can swallow a cancellation that
            # races with the answer it waits for: cancel again until the task ends
            done, _ = await asyncio.wait({self._task}, timeout=1.0)
            if done:
                break
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        self.acks.close()
        self._record_delivered()
        self._release_queue()
        self.state = "stopped"

    def _release_queue(self) -> None:
        """Forget the queue at a stop: its deliveries are in the store already (kept since
        their events were marked seen) and the next start publishes them. One the store
        does not hold (it refused the row, or the node's batch that wrote it failed to
        commit) is lost here: counted (``dropped:shutdown``) and recorded
        (``mqtt_shutdown``). Error reports (QoS 0, no promise) are not kept."""
        deliveries = [item for item in self._out if item.delivered is not None]
        self.counters["dropped:error_report"] += len(self._out) - len(deliveries)
        try:
            stored = {(u.event_id, u.sub_id) for u in self._read_kept()}
        except (sqlite3.Error, ValueError) as exc:  # cannot tell: they may well be there
            self.counters["store_errors"] += 1
            log.error("cannot check the kept MQTT deliveries at shutdown", exc=exc,
                      queued=len(deliveries))
            stored = {item.delivered for item in deliveries if item.delivered is not None}
        unkept = [item for item in deliveries if item.delivered not in stored]
        self.counters["held_at_stop"] += len(deliveries) - len(unkept)
        if unkept:
            self.counters["dropped:shutdown"] += len(unkept)
            for item in unkept:
                self._dropped("mqtt_shutdown", item)
            log.warning("MQTT deliveries the store did not keep dropped at shutdown",
                        count=len(unkept))
        if len(deliveries) > len(unkept):
            log.info("MQTT deliveries kept for the next start",
                     count=len(deliveries) - len(unkept))
        self._out.clear()
        self._kept.clear()
        self._kept_bytes = 0

    def _restore_undelivered(self) -> None:
        """Queue what an earlier process kept, in its order, ahead of every new delivery
        (the start runs before the link takes a frame); each is published once (``_kept``
        refuses the same pair again, and the store forgets it when the broker acknowledged
        it). A pair recorded as delivered is forgotten, and the bound applies as to new
        deliveries (a smaller ``queue_limit`` since the kill drops, counted)."""
        try:
            held = self._read_kept()
            done = {(u.event_id, u.sub_id) for u in held
                    if self.store.delivered_seen(u.event_id, u.sub_id)}
            if done:
                self.store.undelivered_add([], forget=done)
        except (StoreError, sqlite3.Error, ValueError) as exc:  # they stay; the start goes on
            self.counters["store_errors"] += 1
            log.error("cannot read the MQTT deliveries kept by the last run", exc=exc)
            return
        restored = 0
        for u in held:
            key = (u.event_id, u.sub_id)
            if key in done:
                continue
            item = _Outgoing(u.topic, u.payload, 1,
                             provenance(self.node, u.event_id.origin, u.event_id), key)
            restored += self._keep(item, write=False)
        self.counters["restored"] += restored
        if restored:
            log.info("queued the MQTT deliveries kept by the last run", count=restored)

    def _read_kept(self) -> list[Undelivered]:
        """The store's kept deliveries; the rows it could not read back (and deleted)
        are deliveries lost: counted (``dropped:unreadable``) and logged."""
        before = self.store.undelivered_unreadable
        held = self.store.undelivered()
        lost = self.store.undelivered_unreadable - before
        if lost:
            self.counters["dropped:unreadable"] += lost
            log.error("deleted kept MQTT deliveries that could not be read back", count=lost)
        return held

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
            "kept": len(self._kept),
            "kept_bytes": self._kept_bytes,
            "acks": self.acks.status(),
            "subscriptions": len(self.subscriptions),
            "counters": dict(self.counters),
        }

    # ------------------------------------------------------------ outgoing

    def owns(self, sub_id: str) -> bool:
        return sub_id in self.subscriptions

    def deliver(self, delivery: Deliver, *, latency_s: float | None = None) -> bool:
        """Keep and queue a delivery for the application; False if ``sub_id`` is not an
        MQTT one.

        Each (event id, subscription) is published once, across reconnects and
        restarts: the delivery is kept in the store before it is queued (in the node's
        batch that marked its event seen) and forgotten there in the commit that
        records the broker's acknowledgement, and a pair kept or recorded is not
        queued again. A kill between that acknowledgement and its commit publishes it
        a second time at the next start (docs/mqtt.md).
        """
        if delivery.sub_id not in self.subscriptions:
            return False
        key = (delivery.event_id, delivery.sub_id)
        try:
            seen = key in self._kept or self.store.delivered_seen(*key)
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
        if self._keep(_Outgoing(topic, _json(payload), 1, props, key), write=True):
            self.counters["deliveries_queued"] += 1
        return True

    def _keep(self, item: _Outgoing, *, write: bool) -> bool:
        """Make room within the bound, keep ``item`` in the store (``write``; a restored
        one is there) and queue it; False if it is itself the one dropped.

        The bound (``queue_limit`` deliveries, ``held_max_bytes`` bytes) counts every
        delivery kept: queued, in flight, or acknowledged and not yet recorded. To make
        room the oldest queued delivery of a remote event goes first; one of an event
        published on this node only for another local one (a node's own publications
        outrank what it relays, as in its buffer). The victims' rows are forgotten in the
        commit that keeps the new one.
        """
        assert item.delivered is not None
        size = item.size
        victims = self._make_room(size, local=item.delivered[0].origin == self.node)
        if victims is None:
            self._drop_kept(item, forget=not write)
            return False
        try:
            if write:
                self.store.undelivered_add(
                    [Undelivered(*item.delivered, item.topic, item.payload)],
                    forget=[v.delivered for v in victims if v.delivered is not None])
            elif victims:
                self.store.undelivered_add(
                    [], forget=[v.delivered for v in victims if v.delivered is not None])
        except (StoreError, sqlite3.Error) as exc:  # publish it anyway: only a kill loses it
            self.counters["store_errors"] += 1
            log.error("cannot keep an MQTT delivery in the store", exc=exc)
        for victim in victims:
            self._drop_kept(victim, forget=False)
        self._kept[item.delivered] = size
        self._kept_bytes += size
        self._enqueue(item)
        return True

    def _make_room(self, size: int, *, local: bool) -> list[_Outgoing] | None:
        """The queued deliveries to drop so that one more of ``size`` bytes fits (taken out
        of the queue), or None (nothing taken) if it cannot fit."""
        s = self.settings
        excess = len(self._kept) + 1 - s.queue_limit
        excess_bytes = self._kept_bytes + size - s.held_max_bytes
        if excess <= 0 and excess_bytes <= 0:
            return []
        queued = [i for i in self._out if i.delivered is not None]
        order = [i for i in queued if i.delivered is not None
                 and i.delivered[0].origin != self.node]
        if local:
            order += [i for i in queued if i.delivered is not None
                      and i.delivered[0].origin == self.node]
        victims: list[_Outgoing] = []
        for victim in order:
            if excess <= 0 and excess_bytes <= 0:
                break
            victims.append(victim)
            excess -= 1
            excess_bytes -= victim.size
        if excess > 0 or excess_bytes > 0:
            return None
        gone = {id(v) for v in victims}
        self._out = deque(i for i in self._out if id(i) not in gone)
        return victims

    def _drop_kept(self, item: _Outgoing, *, forget: bool) -> None:
        """Count and record a delivery dropped at the bound (``forget``: its row too)."""
        assert item.delivered is not None
        size = self._kept.pop(item.delivered, None)
        if size is not None:
            self._kept_bytes -= size
        if forget:
            try:
                self.store.undelivered_add([], forget=[item.delivered])
            except (StoreError, sqlite3.Error) as exc:
                self.counters["store_errors"] += 1
                log.error("cannot forget a dropped MQTT delivery", exc=exc)
        self.counters["dropped:queue_full"] += 1
        self._dropped("mqtt_queue_full", item)
        if _sparse(self.counters["dropped:queue_full"]):
            log.warning("MQTT deliveries at their bound: dropping", topic=item.topic,
                        dropped=self.counters["dropped:queue_full"])

    def _enqueue(self, item: _Outgoing) -> None:
        self._out.append(item)
        self._wake.set()

    def _dropped(self, reason: str, item: _Outgoing) -> None:
        if item.delivered is not None and self.on_drop is not None:
            self._call(self.on_drop, reason, *item.delivered)

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
            tls_params=s.tls(),
            protocol=aiomqtt.ProtocolVersion.V5,
            clean_start=False,
            properties=props,
            keepalive=s.keepalive,
            timeout=s.timeout_s,
            max_inflight_messages=INFLIGHT_MAX,
        )
        follow_receive_maximum(client)  # at most what the broker's CONNACK allows
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
        # one SUBSCRIBE: the broker's own drop count rides along (an ACL that denies it
        # fails that filter alone, and the count is simply never read)
        await client.subscribe([(f"{self._pub_prefix}#", opts), (f"{self._sub_prefix}+", opts),
                                (f"{self._sub_prefix}+/+", opts),
                                (BROKER_DROPPED_TOPIC, SubscribeOptions(qos=0))])
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
            # PUBACKs for this session that wait for an fsync are not sent: the broker
            # sends those messages again and they are recognised as redeliveries
            self.counters["acks_abandoned"] += self.acks.drop_waiting()

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
            acked = [False] * len(window)
            error: BaseException | None = None
            try:
                error = await publish_window(client, window, acked, self.settings.timeout_s)
            finally:
                # also on cancellation: what the broker acknowledged is done, the rest
                # goes back to the head of the queue, in order
                failed: list[_Outgoing] = []
                for item, ok in zip(window, acked, strict=True):
                    if not ok:
                        failed.append(item)
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
        except StoreError as exc:  # still kept: the next start publishes them again
            self.counters["store_errors"] += 1
            log.error("cannot record deliveries", exc=exc)
        for key in batch:
            self._kept_bytes -= self._kept.pop(key, 0)

    async def _reader(self, client: aiomqtt.Client) -> None:
        messages = client.messages
        while True:
            batch = [await anext(messages)]
            while len(messages) and len(batch) < self.settings.batch_limit:
                batch.append(await anext(messages))
            self.handle_batch(batch, client)

    # ------------------------------------------------------------ incoming

    def handle_batch(self, batch: list[aiomqtt.Message], client: aiomqtt.Client) -> None:
        """Process received messages in order; acknowledge each once it is safe.

        A message that makes anything but the store fail is counted
        (``rejected:internal``) and acknowledged: no message can stop the bridge
        or come back for ever. A store failure raises ``_Reconnect`` (unacknowledged,
        the broker redelivers once the store works).
        """
        pending: list[_Pending] = []
        for message in batch:
            try:
                pending = self._handle(message, client, pending)
            except (_Reconnect, StoreError, sqlite3.Error) as exc:
                raise _Reconnect(str(exc)) from None
            except Exception as exc:  # a bug or an input nobody foresaw: never fatal
                self.counters["rejected:internal"] += 1
                log.error("application message failed", topic=_topic_text(message), exc=exc)
                self._ack(client, message)
        self._commit(pending, client)

    def _handle(self, message: aiomqtt.Message, client: aiomqtt.Client,
                pending: list[_Pending]) -> list[_Pending]:
        """One message; returns the publications still waiting for their commit."""
        topic = message.topic.value
        if topic == BROKER_DROPPED_TOPIC:
            self._broker_stats(message.payload)
            return pending
        if hasprovenance(message.properties):
            self.counters["dropped:loop"] += 1
            self._ack(client, message)
            return pending
        if topic.startswith(self._pub_prefix):
            item = self._accept_publication(message, topic[len(self._pub_prefix):], client)
            if item is not None:
                pending.append(item)
            return pending
        if topic.startswith(self._sub_prefix):
            self._commit(pending, client)
            self._subscription_message(topic[len(self._sub_prefix):], message.payload)
            self._ack(client, message)
            return []
        self.counters["dropped:foreign_topic"] += 1  # not ours (a broker-side mapping)
        self._ack(client, message)
        return pending

    def _broker_stats(self, payload: Any) -> None:
        """The broker's cumulative dropped count: count what it grew by since we connected."""
        try:
            value = int(_payload_bytes(payload).strip())
        except ValueError:
            self.counters["broker_stats_unreadable"] += 1
            return
        if self._broker_dropped is not None and value > self._broker_dropped:
            grown = value - self._broker_dropped
            self.counters["broker_dropped"] += grown
            log.warning("the broker dropped publications at its queue limits", count=grown,
                        total=self.counters["broker_dropped"])
        self._broker_dropped = value

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
                self._ack_durable(client, [message])  # its commit may not be synced yet
                return None
        return _Pending(message, event, ingress)

    def _commit(self, pending: list[_Pending], client: aiomqtt.Client) -> None:
        """Persist a run of publications in one commit, acknowledge them, then feed the node."""
        if not pending:
            return
        try:
            # written, not yet synced: the event goes out now, the PUBACKs after the
            # fsync (runtime/durableacks.py); a power cut before it loses only
            # publications nobody acknowledged
            ids = self.publisher.persist([(p.event, p.ingress) for p in pending], durable=False)
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
        self._ack_durable(client, [p.message for p in pending])
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
                self._unsubscribe_members(sub_id)
            return
        try:
            text = payload.decode("utf-8")
            alternatives = parse_alternatives(text)
        except (UnicodeDecodeError, ContentError) as exc:
            self._report(topic, "bad_subscription", str(exc))
            return
        canonical = format_alternatives(alternatives)
        if self.subscriptions.get(sub_id) == canonical:
            return  # the retained copy again after a reconnect: nothing changed
        if sub_id not in self.subscriptions and \
                len(self.subscriptions) >= self.settings.max_subscriptions:
            self._report(topic, "too_many",
                         f"the node takes at most {self.settings.max_subscriptions} "
                         "MQTT subscriptions")
            return
        self.store.put_subscription(sub_id, canonical, source="mqtt")  # StoreError: comes again
        if sub_id in self.subscriptions:
            self._unsubscribe_members(sub_id)
        self.subscriptions[sub_id] = canonical
        self.counters["subscribed"] += 1
        self._subscribe_members(sub_id, alternatives)

    def _subscribe_members(self, sub_id: str, alternatives: tuple[Subscription, ...]) -> None:
        """A disjunction is one core subscription per alternative (``meshsub.core.disjunction``);
        deliveries come back under ``sub_id`` once per event."""
        pairs = members(sub_id, alternatives)
        self._members[sub_id] = [member for member, _ in pairs]
        for member, sub in pairs:
            self._call(self.on_subscribe, member, sub)

    def _unsubscribe_members(self, sub_id: str) -> None:
        for member in self._members.pop(sub_id, [sub_id]):
            self._call(self.on_unsubscribe, member)

    def _ack(self, client: aiomqtt.Client, message: aiomqtt.Message) -> None:
        """Acknowledge now, or behind acknowledgements still waiting for their fsync."""
        if message.qos > 0:
            self.acks.ack(functools.partial(client._client.ack, message.mid, message.qos))

    def _ack_durable(self, client: aiomqtt.Client, messages: list[aiomqtt.Message]) -> None:
        """Acknowledge once an fsync makes what was committed so far durable."""
        ack = client._client.ack
        self.acks.ack_durable([functools.partial(ack, m.mid, m.qos) for m in messages
                               if m.qos > 0])

    def _sync_failed(self, exc: BaseException) -> None:
        self.counters["store_errors"] += 1
        log.error("cannot sync accepted publications to disk: not acknowledged", exc=exc)

    def _call(self, fn: Callable[..., None], *args: Any) -> None:
        try:
            fn(*args)
        except Exception as exc:  # the node's bug must not take the bridge down
            self.counters["callback_errors"] += 1
            log.error("node callback failed", callback=getattr(fn, "__name__", "?"), exc=exc)


def broker_queue_limit(path: Path) -> int | None:
    """mosquitto's ``max_queued_messages`` from its configuration file and the files of
    its ``include_dir`` (the last setting wins, as in mosquitto); its default of 1000
    when unset; None if the file cannot be read."""
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    files = [lines]
    for line in lines:
        words = line.split()
        if len(words) == 2 and words[0] == "include_dir":
            with contextlib.suppress(OSError):
                for conf in sorted(Path(words[1]).glob("*.conf")):
                    files.append(conf.read_text(encoding="utf-8", errors="replace")
                                 .splitlines())
    limit = 1000
    for text in files:
        for line in text:
            words = line.split()
            if len(words) == 2 and words[0] == "max_queued_messages" and words[1].isdigit():
                limit = int(words[1])
    return limit


def _topic_text(message: aiomqtt.Message) -> str:
    try:
        return str(message.topic.value)
    except Exception:  # a message object broken enough not to have one
        return "?"


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

