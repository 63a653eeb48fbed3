"""The live telemetry feed: the spool, shipped to an MQTT topic at least once.

The spool on disk is the queue. The feed reads it in order (``SpoolReader``)
and publishes batches of JSON Lines with QoS 1 on its own broker connection;
the broker's PUBACK moves the *cursor*, the spool position up to which
everything was acknowledged. So:

- records written while the broker is away are not lost: after the
  (re)connect the feed catches up from the cursor through the closed files
  and the current one, then follows new records as the spool flushes them;
- memory is bounded (``window`` batches of at most ``batch_bytes``), a slow or
  absent broker only grows the backlog on disk, and the protocol path does no
  more than before (the spool's buffered write); reads run in a worker thread;
- batches in flight when the connection breaks are re-sent first, in order;
- the cursor is saved in the node's SQLite state *after* the acknowledgement
  (at most every ``save_every_s`` and at every stop or disconnect). The feed is
  at-least-once: after a crash it re-sends what was acknowledged since the
  last save, and the collector drops those copies by (run, node, epoch, rec);
- records the spool deleted at its size bound before they were read are
  counted (``lost``; ``SpoolReader``), shown in the status and written into the
  spool as a ``counter`` record with ``reason="telemetry_unshipped"``.

A node whose feed never shipped anything (no cursor) starts with the oldest
file in its spool.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import time
from collections import Counter, deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiomqtt
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from meshsub.core.api import NodeId
from meshsub.runtime.logging import get_logger
from meshsub.runtime.mqtt import MqttSettings, provenance
from meshsub.runtime.spoolreader import Chunk, Position, SpoolReader
from meshsub.runtime.store import Store, StoreError

log = get_logger("meshsub.livefeed")


@dataclass(frozen=True, slots=True)
class FeedSettings:
    """How the feed batches; defaults measured in ``bench/bench_livefeed.py``."""

    topic: str
    batch_records: int = 500
    """Records per MQTT message at most (a catch-up sends full batches)."""
    batch_bytes: int = 128 * 1024
    """Payload bytes per message at most (a single longer record goes alone)."""
    window: int = 8
    """Messages awaiting their PUBACK at once; below the broker's receive maximum
    (mosquitto: 20) so the broker never has to hold back our messages."""
    save_every_s: float = 1.0
    poll_s: float = 1.0
    """Look at the spool at least this often even without a flush (renames)."""

    def __post_init__(self) -> None:
        if not self.topic:
            raise ValueError("the live feed needs a topic")
        if self.batch_records < 1 or self.batch_bytes < 1024:
            raise ValueError("batch_records must be >= 1 and batch_bytes >= 1024")
        if not 1 <= self.window <= 20:
            raise ValueError("window must be 1..20")
        if self.save_every_s <= 0 or self.poll_s <= 0:
            raise ValueError("save_every_s and poll_s must be positive")

    @classmethod
    def from_config(cls, telemetry: Any) -> FeedSettings:
        """From ``meshsub.runtime.config.TelemetryConfig``."""
        return cls(topic=telemetry.mqtt_topic)


class TelemetryFeed:
    """Ships ``node``'s spool files to ``settings.topic``; ``start``/``stop``.

    Wire the spool to it: ``spool.on_flush = feed.wake`` and
    ``spool.on_delete = feed.reader.deleted``.
    """

    def __init__(
        self,
        mqtt: MqttSettings,
        settings: FeedSettings,
        *,
        node: NodeId,
        spool_dir: Path,
        store: Store,
        record: Callable[[str, Mapping[str, Any]], None] | None = None,
    ) -> None:
        self.mqtt = mqtt
        self.settings = settings
        self.node = node
        self.store = store
        self.client_id = f"{mqtt.client_id or f'meshsubd-{node:08x}'}-telemetry"
        self._record = record
        saved = store.feed_cursor()
        self.cursor: Position | None = Position(*saved) if saved is not None else None
        self.reader = SpoolReader(spool_dir, node, self.cursor)
        self.state = "stopped"
        self.counters: Counter[str] = Counter()
        self._props = provenance(node, node, None)
        self._wake = asyncio.Event()
        self._wakes = 0  # wake() calls so far
        self._idle_at = -1  # the wake count at which everything written was acknowledged
        self._resend: deque[Chunk] = deque()  # unacknowledged, from a broken connection
        self._in_flight = 0
        self._read: asyncio.Future[Chunk | None] | None = None
        self._saved = self.cursor
        self._saved_at = float("-inf")  # the first acknowledgement is saved at once
        self._reported_lost = 0
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self.state = "connecting"
        self._task = asyncio.get_running_loop().create_task(self._run(), name="telemetry-feed")

    async def stop(self, drain_timeout_s: float = 5.0) -> None:
        """Ship what the (stopped) spool holds for a moment if connected, save the cursor."""
        if self._task is None:
            return
        if self.state == "connected":
            try:
                await asyncio.wait_for(self.drained(), drain_timeout_s)
            except TimeoutError:
                log.warning("telemetry feed stopped before the broker acknowledged everything",
                            backlog_bytes=self.reader.backlog_bytes())
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task
        self._task = None
        if self._read is not None:  # a read in progress: its lines stay unacknowledged
            with contextlib.suppress(Exception):
                await self._read
        self._save(force=True)
        self.reader.close()
        self.state = "stopped"

    async def drained(self) -> None:
        """Until everything the spool had written when called has been acknowledged."""
        self.wake()
        target = self._wakes
        while self._idle_at < target:
            await asyncio.sleep(0.01)

    def wake(self) -> None:
        """The spool wrote new lines (its ``on_flush``)."""
        self._wakes += 1
        self._wake.set()

    def note_losses(self) -> None:
        """Write a counter record when the spool deleted records before they were shipped
        (called periodically by the node), so the loss is in the data, not only the log."""
        lost = self.reader.lost
        if lost == self._reported_lost:
            return
        log.warning("spool full: records deleted before the live feed shipped them",
                    lost=lost - self._reported_lost, total=lost)
        self._reported_lost = lost
        if self._record is not None:
            self._record("counter", {"reason": "telemetry_unshipped", "bytes": lost})

    def status(self) -> dict[str, Any]:
        c = self.cursor
        return {
            "state": self.state,
            "topic": self.settings.topic,
            "client_id": self.client_id,
            "acked": None if c is None else {"epoch": c.epoch, "file": c.n, "offset": c.offset},
            "in_flight": self._in_flight + len(self._resend),
            "backlog_bytes": self.reader.backlog_bytes(),
            "lost": self.reader.lost,
            "counters": {**dict(self.counters), **dict(self.reader.counters)},
        }

    # ------------------------------------------------------------ connection

    def _make_client(self) -> aiomqtt.Client:
        s = self.mqtt
        props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        props.SessionExpiryInterval = 0  # nothing to keep: the cursor is our session
        return aiomqtt.Client(
            s.host, s.port, identifier=self.client_id, username=s.username,
            password=s.password, tls_params=s.tls(), protocol=aiomqtt.ProtocolVersion.V5,
            clean_start=True,
            properties=props, keepalive=s.keepalive, timeout=s.timeout_s,
        )

    async def _run(self) -> None:
        delay = self.mqtt.reconnect_min_s
        while True:
            self.state = "connecting"
            try:
                async with self._make_client() as client:
                    self.state = "connected"
                    self.counters["connects"] += 1
                    delay = self.mqtt.reconnect_min_s
                    await self._ship(client)
            except (aiomqtt.MqttError, OSError) as exc:
                self.counters["disconnects"] += 1
                log.warning("telemetry feed: broker unavailable", exc=exc,
                            retry_s=round(delay, 2))
            except Exception as exc:  # a bug must not end the feed: log, back off, retry
                self.counters["errors"] += 1
                log.error("telemetry feed failure", exc=exc, retry_s=round(delay, 2))
            self.state = "disconnected"
            self._save(force=True)
            await asyncio.sleep(delay * random.uniform(0.8, 1.2))
            delay = min(delay * 2, self.mqtt.reconnect_max_s)

    async def _ship(self, client: aiomqtt.Client) -> None:
        """Publish in order with up to ``window`` PUBACKs outstanding, until the connection
        fails; what is unacknowledged then is re-sent first on the next connection."""
        s = self.settings
        in_flight: deque[tuple[Chunk, asyncio.Task[None]]] = deque()
        gone = asyncio.ensure_future(_until_disconnected(client))
        try:
            while True:
                while len(in_flight) < s.window:
                    wakes = self._wakes
                    chunk = self._resend.popleft() if self._resend else await self._next_chunk()
                    if chunk is None:
                        if not in_flight:
                            self._idle_at = wakes  # all that was written is acknowledged
                        break
                    task = asyncio.ensure_future(client.publish(
                        s.topic, chunk.data, qos=1, properties=self._props))
                    in_flight.append((chunk, task))
                    self._in_flight = len(in_flight)
                if not in_flight:
                    woken = asyncio.ensure_future(self._wake.wait())
                    await asyncio.wait([woken, gone], timeout=s.poll_s,
                                       return_when=asyncio.FIRST_COMPLETED)
                    woken.cancel()
                    self._wake.clear()
                    if gone.done():
                        gone.result()  # raises: the broker went away while we were idle
                    continue
                chunk, task = in_flight[0]
                # a lost connection fails a publish only at its timeout: watch it too
                await asyncio.wait([task, gone], return_when=asyncio.FIRST_COMPLETED)
                if not task.done():
                    gone.result()  # raises
                task.result()  # raises why the publication failed
                in_flight.popleft()
                self._in_flight = len(in_flight)
                self._acknowledged(chunk)
        finally:
            gone.cancel()
            for _, task in in_flight:
                task.cancel()
            await asyncio.gather(gone, *(task for _, task in in_flight),
                                 return_exceptions=True)
            if in_flight:
                self.counters["resent_messages"] += len(in_flight)
            self._resend.extendleft(reversed([chunk for chunk, _ in in_flight]))
            self._in_flight = 0

    async def _next_chunk(self) -> Chunk | None:
        """The next batch from the spool (read in a worker thread). A read interrupted by
        a cancellation is not lost: the next call picks its result up."""
        if self._read is None:
            s = self.settings
            self._read = asyncio.ensure_future(
                asyncio.to_thread(self.reader.read, s.batch_records, s.batch_bytes))
        try:
            return await asyncio.shield(self._read)
        except OSError as exc:
            self.counters["read_errors"] += 1
            log.error("telemetry feed cannot read the spool", exc=exc)
            return None
        finally:
            if self._read is not None and self._read.done():
                self._read = None

    def _acknowledged(self, chunk: Chunk) -> None:
        self.cursor = chunk.end
        self.counters["messages"] += 1
        self.counters["records"] += chunk.records
        self._save()

    def _save(self, force: bool = False) -> None:
        c = self.cursor
        if c is None or c == self._saved:
            return
        now = time.monotonic()
        if not force and now - self._saved_at < self.settings.save_every_s:
            return
        try:
            self.store.save_feed_cursor(c.epoch, c.n, c.offset)
        except StoreError as exc:  # the next save catches up; until then re-sends, no loss
            self.counters["store_errors"] += 1
            log.error("cannot save the telemetry feed cursor", exc=exc)
            return
        self._saved, self._saved_at = c, now


async def _until_disconnected(client: aiomqtt.Client) -> None:
    """Raise ``MqttError`` when the connection is lost (the feed subscribes to nothing, so
    the message iterator only ends that way, as the bridge's reader does)."""
    async for _ in client.messages:
        pass
    raise aiomqtt.MqttError("disconnected")
