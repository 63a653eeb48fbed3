"""The field daemon's main loop: every runtime component wired to one sans-I/O protocol.

Inputs reach the protocol from the link (frames), discovery (neighbour
up/changed/down), the location service (own position), the MQTT bridge and
the control socket (publish/subscribe) and the timers; the actions it returns
become link sends, deliveries to MQTT or ``meshsubctl sub`` streams, timers
and telemetry records (the same ``tx``/``rx``/... records the simulator
writes, stamped with the wall clock), which the live feed may also ship to
an MQTT topic.

The protocol's clock is the wall clock (``time.time``): flooding-style
protocols carry the publication time to compute delivery latency on another
node, which is meaningful only between clocks that agree (NTP/GPS in the
field, one host in the namespace tests).

Accepted publications wait in the outbox while the link cannot carry a frame
(interface missing, down, without carrier or address): "accepted by the
protocol" is only meaningful when the protocol can send, so an event
acknowledged to MQTT meanwhile is fed when the link returns, or at the next
start (``HeldPublisher``). A publication whose own transmission the kernel
refuses because the link died in that instant stays in the outbox too
(``LinkUnavailable``). Losing the link also ends every contact: the protocol
sees its neighbours go down, and meets them again, from scratch, once the
link is back, so store-carry-forward protocols exchange what they carry.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import gc
import inspect
import math
import os
import secrets
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from meshsub import __version__
from meshsub.core.api import (
    Action,
    Broadcast,
    CancelTimer,
    CoreType,
    Deliver,
    Emit,
    EnergyChanged,
    FrameReceived,
    Input,
    LocalPublish,
    LocalSubscribe,
    LocalUnsubscribe,
    MessageId,
    Position,
    PositionChanged,
    SendTo,
    SendToMany,
    SetTimer,
    Stopping,
    TelemetryValue,
    TimerFired,
)
from meshsub.core.content import Event, Subscription
from meshsub.core.params import params_to_dict
from meshsub.core.protocol import Protocol
from meshsub.core.syntax import format_subscription
from meshsub.runtime.admission import Admission
from meshsub.runtime.batman import BatmanCandidate, BatmanPoller, candidate_addresses
from meshsub.runtime.config import Config, ConfigError, diff_configs, load_config
from meshsub.runtime.control import SOCKET_NAME, ControlError, ControlHandlers, ControlServer
from meshsub.runtime.discovery import BeaconTiming, Discovery, DnsSd, interface_network
from meshsub.runtime.frameio import LINK_PROTOCOL_ID, FrameIO
from meshsub.runtime.link import Address, Link, LinkError, LinkState
from meshsub.runtime.livefeed import FeedSettings, TelemetryFeed
from meshsub.runtime.location import LocationService, make_source, make_tracker
from meshsub.runtime.logging import configure_logging, get_logger
from meshsub.runtime.logging import set_level as set_log_level
from meshsub.runtime.metrics import CONTENT_TYPE as METRICS_CONTENT_TYPE
from meshsub.runtime.metrics import render as render_metrics
from meshsub.runtime.metricsserver import MetricsServer
from meshsub.runtime.mqtt import MqttBridge, MqttSettings, delivery_payload
from meshsub.runtime.neighbors import EventKind, NeighborEvent, NeighborTable, to_input
from meshsub.runtime.power import EnergyReading, read_power_supply
from meshsub.runtime.protocolcheck import lookup as protocol_lookup
from meshsub.runtime.sdnotify import SignalHandlers, SystemdNotifier
from meshsub.runtime.spool import TelemetrySpool
from meshsub.runtime.store import LocalPublisher, ReplayKeeper, Store, StoreError
from meshsub.runtime.timers import Timers
from meshsub.wire import FrameCodec, KeyRing

log = get_logger("meshsub.node")

EXIT_OK = 0
EXIT_FAILURE = 1
PLAUSIBLE_CLOCK_S = 1_735_689_600
"""2025-01-01: a real-time clock before this has never been set (epochs seed from it)."""
HOUSEKEEPING_S = 1.0
CHECKPOINT_S = 0.1
"""How often the store's write-ahead log is checkpointed off the loop (see _checkpoints)."""
STATUS_EVERY_S = 10.0


class StartupError(RuntimeError):
    """The daemon cannot start as configured; one line for the operator."""


class LinkUnavailable(RuntimeError):
    """A local publication's transmission failed because the link cannot carry frames."""


class HeldPublisher(LocalPublisher):
    """A ``LocalPublisher`` that keeps accepted events in the outbox while ``ready()`` is false.

    Persisting (and so acknowledging to MQTT) goes on; feeding the protocol
    waits, and ``refeed_pending`` hands everything over once the link is up.
    A feed that raises ``LinkUnavailable`` (the link died during it) holds
    that event and the rest of the batch the same way.
    """

    def __init__(self, *args: Any, ready: Callable[[], bool], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._ready = ready
        self.held = 0
        """Events waiting in the outbox for the link now."""
        self.held_total = 0
        """Events that ever had to wait for the link (this run)."""

    def _hold(self, count: int) -> None:
        self.held += count
        self.held_total += count

    def feed_many(self, items: Sequence[tuple[Event, MessageId]]) -> int:
        done: list[MessageId] = []
        for index, (event, event_id) in enumerate(items):
            if not self._ready():
                self._hold(len(items) - index)
                break
            try:
                self._feed(event, event_id)
            except LinkUnavailable:
                self._hold(len(items) - index)
                break
            except Exception:  # the node failed: keep the entry for the next start
                self.feed_errors += 1
                continue
            done.append(event_id)
        if done:
            self.store.outbox_remove_many(done)
            self.fed += len(done)
        return len(done)

    def hold_pending(self) -> None:
        """At a start without a link: everything a previous run left waits for it."""
        self.held = 0
        self._hold(self.store.outbox_len())

    def refeed_pending(self) -> int:
        """Feed what waits in the outbox; what the link still cannot take stays held."""
        self.held = 0
        return super().refeed_pending()


def _peer_addresses(config: Config) -> list[Address]:
    return [(p.host, p.port) for p in config.discovery.static_peers]


def _make_protocol(config: Config, epoch: int, store: Store) -> Protocol:
    cls = protocol_lookup(config.protocol.name)
    kwargs: dict[str, Any] = {"epoch": epoch, "params": config.protocol.params,
                              "seed": secrets.randbits(32), "capabilities": config.node.roles,
                              "state_every_s": config.telemetry.state_every_s
                              if config.telemetry.enabled else 0.0}
    if cls.buffer_store:
        kwargs["store"] = store.buffer()  # store-carry-forward survives a restart
    return cls(config.node.id, **kwargs)


class Node:
    """One running daemon. ``await start()``, then ``await wait()``, then ``await stop()``."""

    def __init__(
        self,
        config: Config,
        *,
        notifier: SystemdNotifier | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config
        self.node = config.node.id
        self.clock = clock
        self.notifier = notifier if notifier is not None else SystemdNotifier()
        self.counters: Counter[str] = Counter()
        self.position: Position | None = None
        self.started_at = clock()
        self.state = "created"
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._started = False
        self._last_tick = time.monotonic()
        self._last_status = ""
        self._dnssd_task: asyncio.Task[None] | None = None
        self._energy_due = 0.0
        self.energy: EnergyReading | None = None
        """The last power-supply reading fed to the protocol (``None``: none yet)."""
        self._kernel_drops_noted = 0
        self._kernel_drops_at = -math.inf
        self.store: Store | None = None
        self.spool: TelemetrySpool | None = None
        self.feed: TelemetryFeed | None = None
        self.control: ControlServer | None = None
        self.metrics: MetricsServer | None = None
        self.link: Link | None = None
        self.discovery: Discovery | None = None
        self.location: LocationService | None = None
        self.bridge: MqttBridge | None = None
        self.poller: BatmanPoller | None = None
        self.dnssd: DnsSd | None = None
        self.signals: SignalHandlers | None = None

    # ================================================================ startup

    async def start(self) -> None:
        """Open state, build and start every component; raises ``StartupError``."""
        cfg = self.config
        self.state = "starting"
        try:
            self.store = Store.in_state_dir(Path(cfg.storage.state_dir))
            self.epoch = self.store.next_epoch()
        except StoreError as exc:
            raise StartupError(str(exc)) from None
        keys = KeyRing(cfg.security.keys, cfg.security.current_key)
        self.codec = FrameCodec(self.node, self.epoch, keys, payload_size=cfg.link.payload_size)
        self.replay = ReplayKeeper(self.store, self.codec.replay)
        try:
            restored = self.replay.load()
        except StoreError as exc:
            raise StartupError(str(exc)) from None
        if self.clock() < PLAUSIBLE_CLOCK_S:
            log.warning("the real-time clock is not set: a node that lost its state gets an "
                        "epoch from it that neighbours may refuse as a replay",
                        clock=int(self.clock()), epoch=self.epoch)
        self.admission = Admission(keys.key_ids, record=self.record)
        self.protocol = _make_protocol(cfg, self.epoch, self.store)
        self.timers = Timers(self._on_timer, self.clock)
        await self._start_spool()
        self.link = Link(
            interface=cfg.link.interface,
            port=cfg.link.port,
            on_datagram=self._on_datagram,
            max_datagram=cfg.link.payload_size,
            max_receive=self.codec.max_frame,
            family=cfg.link.family,
            mode=cfg.link.mode,
            multicast_group=cfg.link.multicast_group,
            broadcast_peers=[] if cfg.link.interface else _peer_addresses(cfg),
            receive_buffer=cfg.link.receive_buffer,
            on_state=self._on_link_state,
            paused=True,  # no frame before the node's own state is back (resume below)
            drain=self._batch,
        )
        self.frames = FrameIO(codec=self.codec, link=self.link, protocol=self.protocol,
                              record=self.record)
        self._source = ""
        self.frames.on_refused = lambda reason: self.admission.refused(
            reason, self._source, self.clock())
        self.table = NeighborTable(timeout_beacons=cfg.discovery.neighbor_timeout,
                                   move_threshold=cfg.location.movement_threshold)
        d = cfg.discovery
        self.discovery = Discovery(
            node=self.node, name=cfg.node.name, protocol=self.protocol.name, table=self.table,
            timing=BeaconTiming(d.beacon_interval, d.min_interval, d.beacon_jitter,
                                d.control_budget),
            transmit=self.frames.send_beacon, new_message_id=self.protocol.new_message_id,
            on_event=self._on_neighbor_event, clock=self.clock, position=lambda: self.position,
            learn=self.link.learn, capabilities=self.protocol.capabilities,
            broadcast=cfg.link.mode != "batman",
        )
        self.publisher = HeldPublisher(self.store, self.protocol.new_message_id,
                                       self._feed_publication, ready=self._can_publish)
        try:
            settings = MqttSettings.from_config(cfg.mqtt, cfg.telemetry.mqtt_topic)
        except ValueError as exc:  # what the file-level checks cannot see (key combinations)
            raise ConfigError("mqtt", str(exc)) from None
        self.bridge = MqttBridge(
            settings,
            node=self.node, store=self.store, publisher=self.publisher,
            on_subscribe=self._local_subscribe, on_unsubscribe=self._local_unsubscribe,
        )
        self.bridge.on_drop = self._delivery_dropped
        self.bridge.check_broker_queue(Path(cfg.mqtt.broker_config))
        for warning in cfg.security.warnings:
            log.warning("weak fleet key", problem=warning)
        self.feed = self._make_feed(settings)
        self.control = ControlServer(
            Path(cfg.storage.control_dir) / SOCKET_NAME,
            ControlHandlers(status=self.status, neighbors=self.neighbors,
                            subscriptions=self.subscriptions, publish=self._ctl_publish,
                            subscribe=self._local_subscribe,
                            unsubscribe=self._local_unsubscribe),
        )
        if cfg.metrics.listen:
            self.metrics = MetricsServer(cfg.metrics.host, cfg.metrics.port, self.render_metrics,
                                         content_type=METRICS_CONTENT_TYPE)
        source = make_source(cfg.location, self.clock)
        if source is not None:
            tracker = make_tracker(cfg.location, cfg.location.source)
            self.location = LocationService(source, tracker, self._on_position, clock=self.clock)
        try:
            await self.control.start()
        except (ControlError, OSError) as exc:
            raise StartupError(str(exc)) from None
        if self.metrics is not None:
            try:
                await self.metrics.start()
            except OSError as exc:
                raise StartupError(f"metrics.listen {cfg.metrics.listen}: "
                                   f"{exc.strerror or exc}") from None
        try:
            await self.link.start()
        except (LinkError, OSError) as exc:
            raise StartupError(str(exc)) from None
        await self._link_settled()
        await self.bridge.start()  # restores the persisted MQTT subscriptions first
        # Only now does the protocol take frames. The link is bound already (sends go
        # out; what arrives waits in the socket's buffer): a frame read before the
        # persisted subscriptions are back meets a protocol without them, and an event
        # in it (a neighbour's retransmission to the previous process, at once after a
        # restart) is carried and marked seen but never delivered (docs/vmesh.md,
        # "Rolling upgrades").
        self.link.resume()
        if self.feed is not None:
            await self.feed.start()
        self._started = True
        self._poll_energy()  # the protocol knows its energy before the first contact
        if not self._link_up:
            self.publisher.hold_pending()
        self._on_link_up()  # if it is up already: re-feed the outbox, register DNS-SD
        await self.discovery.start()
        self.discovery.set_peers("static", _peer_addresses(cfg))
        if self.location is not None:
            await self.location.start()
        if cfg.link.mode == "batman":
            self.poller = BatmanPoller(mesh_interface=cfg.link.interface or "bat0",
                                       family=cfg.link.family,
                                       interval=cfg.link.batman_poll_interval,
                                       on_candidates=self._on_batman)
            await self.poller.start()
        self.signals = SignalHandlers(self.request_stop, self.reload)
        self.signals.install()
        self._tasks = [asyncio.create_task(self._housekeeping(), name="housekeeping"),
                       asyncio.create_task(self._checkpoints(), name="checkpoints"),
                       asyncio.create_task(self.notifier.watchdog_loop(self._healthy),
                                           name="watchdog")]
        self.state = "running"
        self.notifier.ready(self._status_line())
        log.info("meshsubd running", node=self.node, epoch=self.epoch,
                 protocol=self.protocol.name, link=self.link.state.value,
                 outbox=self.store.outbox_len(), replay_restored=restored)

    async def _link_settled(self, guard_s: float = 5.0) -> None:
        """Until the link is bound or knows it must wait (readiness means one of them)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + guard_s
        while self.link is not None and self.link.state == LinkState.STOPPED \
                and loop.time() < deadline:
            await asyncio.sleep(0.01)

    async def _start_spool(self) -> None:
        cfg = self.config
        if not cfg.telemetry.enabled:
            return
        spool = TelemetrySpool.from_config(cfg.telemetry, Path(cfg.storage.spool_dir),
                                           node=self.node, epoch=self.epoch,
                                           run=cfg.telemetry.run,
                                           protocol=self.protocol.name)
        try:
            await spool.start()
        except OSError as exc:
            raise StartupError(str(exc)) from None
        self.spool = spool

    def _make_feed(self, mqtt: MqttSettings) -> TelemetryFeed | None:
        """The live feed ships the spool's files, so it exists only beside a spool."""
        cfg = self.config.telemetry
        if self.spool is None or self.store is None or not cfg.mqtt_topic:
            return None
        feed = TelemetryFeed(mqtt, FeedSettings.from_config(cfg), node=self.node,
                             spool_dir=self.spool.dir, store=self.store, record=self.record)
        self.spool.on_flush = feed.wake
        self.spool.on_delete = feed.reader.deleted
        return feed

    # ============================================================== lifecycle

    def request_stop(self, *_: object) -> None:
        """SIGTERM/SIGINT: leave ``wait()``; a second request while stopping is harmless."""
        self._stop.set()

    async def wait(self) -> None:
        await self._stop.wait()

    async def stop(self) -> None:
        """Drain and close in dependency order; every step runs even if one fails."""
        if self.state == "stopped":
            return
        self.state = "stopping"
        self.notifier.stopping("draining")
        steps: list[tuple[str, Callable[[], Any]]] = [
            ("signals", lambda: self.signals.remove() if self.signals else None),
            ("control", lambda: self.control.stop() if self.control else None),
            ("metrics", lambda: self.metrics.stop() if self.metrics else None),
            ("location", lambda: self.location.stop() if self.location else None),
            ("batman", lambda: self.poller.stop() if self.poller else None),
            ("dnssd", self._stop_dnssd),
            ("discovery", lambda: self.discovery.stop() if self.discovery else None),
            ("tasks", self._cancel_tasks),
            ("timers", lambda: self.timers.cancel_all() if hasattr(self, "timers") else None),
            ("link", lambda: self.link.stop() if self.link else None),  # no input after this
            ("protocol summaries", self._stop_protocol),  # before the spool closes
            ("mqtt", lambda: self.bridge.stop() if self.bridge else None),  # drains deliveries
            ("replay state", lambda: self.replay.save() if hasattr(self, "replay") else None),
            # the last loss account goes into the spool's last file
            ("telemetry losses", lambda: self.feed.note_losses() if self.feed else None),
            ("spool", lambda: self.spool.stop() if self.spool else None),
            # after the spool closed its last file: ship the rest, save the cursor
            ("telemetry feed", lambda: self.feed.stop() if self.feed else None),
            ("store", lambda: self.store.close() if self.store else None),
        ]
        for name, step in steps:
            try:
                result = step()
                if inspect.isawaitable(result):
                    await result
            except Exception as exc:  # keep draining the rest
                log.error("stop step failed", step=name, exc=exc)
        self.notifier.close()
        self.state = "stopped"
        log.info("meshsubd stopped", node=self.node)

    def _stop_protocol(self) -> None:
        """The protocol's last input: it records what it still holds (pending drop
        summaries); whatever else it asks for is not carried out any more."""
        if not hasattr(self, "protocol"):
            return
        for action in self.protocol.handle(Stopping(self.clock())):
            if isinstance(action, Emit):
                self.record(action.event, action.attrs)
        if hasattr(self, "frames"):
            self.frames.flush_summaries()

    async def _cancel_tasks(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    def _delivery_dropped(self, reason: str, event_id: MessageId, sub_id: str) -> None:
        """A delivery the MQTT bridge could not keep (its queue's bound): one ``drop``
        record per event, beside the bridge's counter in ``status``."""
        self.record("drop", {"reason": reason, "event_id": str(event_id), "sub_id": sub_id})

    def _note_kernel_drops(self) -> None:
        """Datagrams the kernel dropped for our socket (refused by the admission's
        prefix filter, or the receive buffer was full): a ``counter`` record with the
        running total when it grew, at most one per admission summary interval, so
        that a flood the filter absorbs writes a few records, not one a second."""
        if self.link is None:
            return
        total = self.link.poll_kernel_drops()
        now = time.monotonic()
        if total != self._kernel_drops_noted and (
                now - self._kernel_drops_at >= self.admission.summary_s):
            self._kernel_drops_noted, self._kernel_drops_at = total, now
            self.record("counter", {"reason": "udp_receive_drops", "bytes": total})
            log.warning("kernel dropped datagrams (prefix filter or receive buffer full)",
                        total=total, receive_buffer=self.link.receive_buffer_granted,
                        kernel_filter=self.admission.filter_attached)

    def _healthy(self) -> bool:
        """The loop turns: housekeeping ran recently (the watchdog ping depends on it)."""
        return time.monotonic() - self._last_tick < 5 * HOUSEKEEPING_S + 5

    async def _housekeeping(self) -> None:
        last_status = 0.0
        while True:
            await asyncio.sleep(HOUSEKEEPING_S)
            self._last_tick = time.monotonic()
            now = self.clock()
            self.codec.expire(now)
            self.admission.tick(now)
            self.frames.tick(now)
            self.replay.tick(now)
            self._forget_addresses()
            self._poll_energy()
            if self.publisher.held and self._link_up:  # a refused send, the link still up
                self._refeed()
            self._note_kernel_drops()
            if self.feed is not None:
                self.feed.note_losses()
            line = self._status_line()
            if line != self._last_status or self._last_tick - last_status >= STATUS_EVERY_S:
                self.notifier.status(line)
                self._last_status, last_status = line, self._last_tick

    async def _checkpoints(self) -> None:
        """Checkpoint the store's write-ahead log in a worker thread every
        ``CHECKPOINT_S`` when anything was committed, so that SQLite's own checkpoint (two
        fsyncs, in the thread that commits: this loop; every 256 pages, ~0.4 s of
        publications at 100 events/s) is not reached: it doubled the 99th percentile of
        a publication's commits (bench_line.py --commits; store.checkpoint_wal)."""
        store = self.store
        if store is None:
            return
        loop = asyncio.get_running_loop()
        with concurrent.futures.ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="meshsub-checkpoint") as worker:
            seen = store.commits
            while True:
                await asyncio.sleep(CHECKPOINT_S)
                if store.commits == seen:
                    continue  # nothing written since the last one
                seen = store.commits
                try:
                    await loop.run_in_executor(worker, store.checkpoint_wal)
                except sqlite3.Error as exc:  # SQLite's own checkpoint still bounds the log
                    self.counters["checkpoint_errors"] += 1
                    if self.counters["checkpoint_errors"] == 1:
                        log.warning("background checkpoint failed", exc=exc)

    def _forget_addresses(self) -> None:
        """The link learns an address per transmitter; keep only those the replay table
        still tracks, so that ids an insider makes up do not pile up there."""
        link = self.link
        if link is not None and len(link.addresses) > len(self.codec.replay):
            for node in [n for n in link.addresses if n not in self.codec.replay]:
                link.forget(node)

    def _poll_energy(self) -> None:
        """Every ``energy.poll_s``: the power-supply reading, fed to the protocol if it changed."""
        cfg = self.config.energy
        now = time.monotonic()
        if cfg.source == "none" or now < self._energy_due:
            return
        self._energy_due = now + cfg.poll_s
        reading = read_power_supply(Path(cfg.power_supply_dir))
        if reading is None or reading == self.energy:
            return
        self.energy = reading
        self.handle(EnergyChanged(self.clock(), reading.fraction, reading.on_mains))

    def _status_line(self) -> str:
        link = self.link.state.value if self.link else "-"
        mqtt = self.bridge.state if self.bridge else "-"
        return (f"link {link}, {len(self.table) if hasattr(self, 'table') else 0} neighbours, "
                f"mqtt {mqtt}, position {'fix' if self.position else 'none'}")

    # ============================================================ SIGHUP

    def reload(self) -> None:
        """Re-read the configuration file; apply what can change, log what needs a restart."""
        path = self.config.source
        if not path:
            log.warning("reload: configuration has no file to re-read")
            return
        self.notifier.reloading()
        try:
            new = load_config(path)
        except ConfigError as exc:
            log.error("reload refused: the old configuration keeps running", error=str(exc))
            self.counters["reload_errors"] += 1
            self.notifier.ready(self._status_line())
            return
        diff = diff_configs(self.config, new)
        applied = self._apply_reload(new, diff.reloadable)
        if diff.restart_required:
            log.warning("reload: changes need a restart", keys=",".join(diff.restart_required))
        if self.spool is not None:
            self.spool.roll()
        self.counters["reloads"] += 1
        log.info("reloaded", applied=",".join(applied) or "nothing")
        self.notifier.ready(self._status_line())

    def _apply_reload(self, new: Config, keys: Sequence[str]) -> list[str]:
        cfg = self.config
        applied: list[str] = []
        if any(k.startswith("log.") for k in keys):
            set_log_level(new.log.level_number)
            cfg = dataclasses.replace(cfg, log=new.log)
            applied.append("log.level")
        if any(k.startswith("discovery.static_peers") for k in keys):
            cfg = dataclasses.replace(cfg, discovery=dataclasses.replace(
                cfg.discovery, static_peers=new.discovery.static_peers))
            if self.discovery is not None:
                self.discovery.set_peers("static", _peer_addresses(cfg))
            if self.link is not None and not cfg.link.interface:
                self.link.broadcast_peers = _peer_addresses(cfg)
            applied.append("discovery.static_peers")
        if any(k.startswith("protocol.params") for k in keys):
            fixed = self.protocol.update_params(new.protocol.params)
            if fixed:
                log.warning("reload: protocol parameters need a restart",
                            params=",".join(fixed))
            else:
                cfg = dataclasses.replace(cfg, protocol=new.protocol)
                applied.append("protocol.params")
        self.config = cfg
        return applied

    # ======================================================= protocol I/O

    def record(self, event: str, attrs: Mapping[str, TelemetryValue]) -> None:
        """One telemetry record for this node (the spool numbers them: ``rec``)."""
        if self.spool is None:
            return
        self.spool.emit_deferred(event, time.time_ns(), attrs)  # encoded at the flush

    def handle(self, inp: Input) -> None:
        """Feed one input to the protocol and carry out its actions; never raises.

        One store batch: what the input makes the protocol write (its buffer: the
        events it now knows) and the deliveries it makes the MQTT bridge keep are one
        commit, made before the bridge can publish any of them (``Store.batch``)."""
        with self._batch():
            try:
                actions = self.protocol.handle(inp)
            except Exception as exc:  # a protocol bug must not stop the node
                self.counters["protocol_errors"] += 1
                log.error("protocol failed on input", input=type(inp).__name__, exc=exc)
                return
            self._apply(actions)

    @contextlib.contextmanager
    def _batch(self) -> Iterator[None]:
        """``Store.batch`` around a protocol input or a drain of the link's socket (nested:
        one commit for the drain); a failed commit is counted and logged, never raised:
        its writes are undone together, so no event is marked seen without its kept
        deliveries (those already queued are still published by this process; one still
        queued at its stop is a counted drop, ``MqttBridge._release_queue``)."""
        if self.store is None:
            yield
            return
        try:
            with self.store.batch():
                yield
        except StoreError as exc:
            self.counters["store_errors"] += 1
            log.error("cannot commit the node's state", exc=exc)

    def _apply(self, actions: Sequence[Action]) -> None:
        for action in actions:
            try:
                match action:
                    case Broadcast(message=message):
                        self.frames.transmit(message, None)
                    case SendTo(node=dest, message=message):
                        self.frames.transmit(message, (dest,))
                    case SendToMany(nodes=dests, message=message):
                        self.frames.transmit(message, dests)
                    case Deliver():
                        self._deliver(action)
                    case SetTimer(name=name, at=at):
                        self.timers.set(name, at)
                    case CancelTimer(name=name):
                        self.timers.cancel(name)
                    case Emit(event=event, attrs=attrs):
                        self.record(event, attrs)
            except Exception as exc:  # one failed action must not lose the others
                self.counters["action_errors"] += 1
                log.error("action failed", action=type(action).__name__, exc=exc)

    def _deliver(self, delivery: Deliver) -> None:
        latency = None
        if delivery.published_at is not None:
            latency = self.clock() - delivery.published_at
        if self.control is not None and self.control.owns(delivery.sub_id):
            self.control.deliver(delivery.sub_id,
                                 delivery_payload(delivery, latency_s=latency, node=self.node))
            self.counters["delivered_control"] += 1
        elif self.bridge is not None and self.bridge.deliver(delivery, latency_s=latency):
            self.counters["delivered_mqtt"] += 1
        else:
            self.counters["deliver_unowned"] += 1

    def _on_timer(self, name: str) -> None:
        self.handle(TimerFired(self.clock(), name))

    # ---------------------------------------------------------------- link

    @property
    def _link_up(self) -> bool:
        return self.link is not None and self.link.state == LinkState.UP

    def _on_datagram(self, data: bytes, addr: Address) -> None:
        now = self.clock()
        if not self.admission.admit(data, addr[0], now):
            return
        self._source = addr[0]
        decoded = self.frames.decode(data, now)
        if decoded is None:
            return
        if self.link is not None and decoded.newest:  # a late frame never moves an address
            self.link.learn(decoded.transmitter, addr)
        message = decoded.message
        if decoded.protocol_id == LINK_PROTOCOL_ID:
            if message.type == CoreType.BEACON and self.discovery is not None:
                self.discovery.on_beacon(message, decoded.transmitter, addr, now,
                                         epoch=decoded.transmitter_epoch)
            else:
                self.frames.link_unknown_type(message, decoded.transmitter)
            return
        self.handle(FrameReceived(now, decoded.transmitter, message,
                                  self.config.link.interface))

    def _can_publish(self) -> bool:
        """Feed local publications now? Not before the start restored the node's
        subscriptions (a ``meshsubctl pub`` while it starts: the outbox keeps it for the
        start's re-feed), not while the link cannot carry a frame, nor while earlier
        ones still wait for the re-feed (acceptance order is kept)."""
        return (self._started and self.link is not None and self.publisher.held == 0
                and self.link.can_send())

    def _on_link_state(self, state: LinkState) -> None:
        if state == LinkState.UP:
            if self.link is not None and self.link.sock is not None:
                self.admission.attach(self.link.sock)
            asyncio.get_running_loop().call_soon(self._on_link_up)
        elif self._started and state != LinkState.STOPPED:  # not at shutdown
            # after the current input: a refused send can report the loss mid-_apply
            asyncio.get_running_loop().call_soon(self._lose_neighbors)

    def _lose_neighbors(self) -> None:
        """Without a link there are no neighbours: end every contact now, so that the
        protocol stops sending into the void and meets them anew when it returns."""
        if not hasattr(self, "table") or self._link_up:
            return
        gone = 0
        for neighbor in list(self.table):
            for event in self.table.remove(neighbor.node):
                self._on_neighbor_event(event)
                gone += 1
        if gone:
            log.info("link lost: neighbours down", neighbors=gone)

    def _on_link_up(self) -> None:
        if not self._started or not self._link_up:
            return
        self._refeed()
        wanted = self.config.discovery.zeroconf and bool(self.config.link.interface)
        if wanted and (self._dnssd_task is None or self._dnssd_task.done()):
            self._dnssd_task = asyncio.create_task(self._update_dnssd(), name="dnssd")
        if self.discovery is not None:
            self.discovery.kick()

    def _refeed(self) -> None:
        """Feed the outbox (held or left by a crash) to the protocol, in acceptance order."""
        try:
            fed = self.publisher.refeed_pending()
        except StoreError as exc:
            self.counters["store_errors"] += 1
            log.error("cannot re-feed the outbox", exc=exc)
            return
        if fed:
            log.info("outbox re-fed", events=fed)

    async def _update_dnssd(self) -> None:
        link = self.link
        if link is None or link.info is None:
            return
        addr = link.info.ipv4 if link.family == "ipv4" else link.info.ipv6_link_local
        if addr is None:
            return
        try:
            if self.dnssd is None:
                dnssd = DnsSd(node=self.node, name=self.config.node.name,
                              port=self.config.link.port, protocol=self.protocol.name,
                              addresses=[addr], on_peer=self._on_dnssd_peer,
                              interfaces=[addr] if link.family == "ipv4" else None,
                              network=(interface_network(link.info.name, addr)
                                       if link.family == "ipv4" else None))
                await dnssd.start()
                self.dnssd = dnssd
            else:
                await self.dnssd.set_addresses([addr])
        except Exception as exc:  # DNS-SD is one discovery layer of several
            self.counters["dnssd_errors"] += 1
            log.warning("DNS-SD unavailable", exc=exc)

    async def _stop_dnssd(self) -> None:
        if self._dnssd_task is not None:
            self._dnssd_task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._dnssd_task
        if self.dnssd is not None:
            await self.dnssd.stop()
            self.dnssd = None

    def _on_dnssd_peer(self, node: int, addrs: list[Address]) -> None:
        if self.discovery is not None:
            for addr in addrs:
                self.discovery.add_peer("dnssd", addr)

    def _on_batman(self, candidates: list[BatmanCandidate]) -> None:
        addrs = candidate_addresses(candidates, self.config.link.port)
        if self.discovery is not None:
            self.discovery.set_peers("batman", addrs)
        if self.link is not None:
            self.link.set_one_hop_peers(addrs)

    # -------------------------------------------------- neighbours, position

    def _on_neighbor_event(self, event: NeighborEvent) -> None:
        now = self.clock()
        if event.kind == EventKind.UP:
            self.record("neighbor_up", {"peer": event.node})
        elif event.kind == EventKind.DOWN:
            self.record("neighbor_down", {"peer": event.node})
        self.handle(to_input(event, now))

    def _on_position(self, position: Position | None) -> None:
        self.position = position
        if position is not None:  # a position record always has x/y; "no fix" is the log's
            self.record("position", {"x": position.x, "y": position.y})
        self.handle(PositionChanged(self.clock(), position))
        if self.discovery is not None:
            self.discovery.kick()  # neighbours learn the new position soon

    # ------------------------------------------------ local applications

    def _local_subscribe(self, sub_id: str, subscription: Subscription) -> None:
        self.handle(LocalSubscribe(self.clock(), sub_id, subscription))

    def _local_unsubscribe(self, sub_id: str) -> None:
        self.handle(LocalUnsubscribe(self.clock(), sub_id))

    def _feed_publication(self, event: Event, event_id: MessageId) -> None:
        """The publisher's feed: errors propagate so the event stays in the outbox.

        If a transmission it caused was refused because the link cannot carry
        frames (it died in this instant), ``LinkUnavailable`` keeps the event
        in the outbox for the re-feed once the link is back.
        """
        refused = self.frames.link_refusals
        actions = self.protocol.handle(LocalPublish(self.clock(), event, event_id))
        self._apply(actions)
        if self.frames.link_refusals != refused:
            self.counters["publications_refused_by_link"] += 1
            raise LinkUnavailable(f"event {event_id}: the link refused its transmission")

    def _ctl_publish(self, event: Event) -> str:
        return str(self.publisher.publish(event))

    # ============================================================ status

    def status(self) -> dict[str, Any]:
        """Everything ``meshsubctl status`` shows (plain JSON values)."""
        try:
            outbox: int | None = self.store.outbox_len() if self.store else None
        except Exception:
            outbox = None
        pos = self.position
        return {
            "node": self.node,
            "name": self.config.node.name,
            "version": __version__,
            "pid": os.getpid(),
            "state": self.state,
            "epoch": getattr(self, "epoch", None),
            "uptime_s": round(self.clock() - self.started_at, 3),
            "protocol": {**self.protocol.status(),
                         "params": params_to_dict(self.protocol.params)},
            "position": None if pos is None else {
                "x": round(pos.x, 2), "y": round(pos.y, 2), "z": round(pos.z, 2),
                "error_m": round(pos.error_m, 2)},
            "location": (self.location.status() if self.location is not None
                         else {"source": "none", "fix": False}),
            "energy": {"source": self.config.energy.source,
                       "fraction": None if self.energy is None else self.energy.fraction,
                       "on_mains": None if self.energy is None else self.energy.on_mains},
            "link": self.link.status() if self.link else None,
            "discovery": self.discovery.status() if self.discovery else None,
            "batman": self.poller.status() if self.poller else None,
            "mqtt": self.bridge.status() if self.bridge else None,
            "outbox": outbox,
            "held_publications": self.publisher.held if hasattr(self, "publisher") else 0,
            "held_publications_total": (self.publisher.held_total
                                        if hasattr(self, "publisher") else 0),
            "frames": self.codec.status(),
            "admission": self.admission.status(self.clock()),
            "replay": {"saves": self.replay.saves, "save_errors": self.replay.errors,
                       "refused_transmitters": self.codec.replay.refused},
            "transmissions": dict(self.frames.counters),
            "drops": {"frame": self.frames.frame_drops(), "node": dict(self.frames.drops),
                      "protocol": dict(self.protocol.drops),
                      "kernel": self.link.kernel_drops if self.link else 0},
            "telemetry": ({**self.spool.status(),
                           "live": self.feed.status() if self.feed else None}
                          if self.spool else {"enabled": False}),
            "control": dict(self.control.counters) if self.control else {},
            "metrics": self.metrics.status() if self.metrics else None,
            "timers": len(self.timers),
            "counters": dict(self.counters),
        }

    def render_metrics(self) -> str:
        """The Prometheus exposition of ``status()`` and ``neighbors()`` (one source)."""
        return render_metrics(self.status(), self.neighbors())

    def neighbors(self) -> list[Mapping[str, Any]]:
        return list(self.table.status(self.clock()))

    def subscriptions(self) -> list[Mapping[str, Any]]:
        rows: list[Mapping[str, Any]] = []
        for sub_id, sub in sorted(self.protocol.subscriptions.items()):
            if self.bridge is not None and self.bridge.owns(sub_id):
                source = "mqtt"
            elif self.control is not None and self.control.owns(sub_id):
                source = "control"
            else:
                source = "local"
            rows.append({"sub_id": sub_id, "source": source,
                         "expression": format_subscription(sub)})
        return rows


# ==================================================================== entry


async def _main(config: Config) -> int:
    node = Node(config)
    try:
        await node.start()
    except ConfigError:
        await node.stop()
        raise  # the CLI prints it as one line and exits 2
    except Exception as exc:  # StartupError, or a bug: one line, clean up, exit 1
        text = str(exc) if isinstance(exc, StartupError) else f"{type(exc).__name__}: {exc}"
        log.error("cannot start", error=text)
        await node.stop()
        return EXIT_FAILURE
    # What start-up made lives as long as the daemon: keep it out of the collector's
    # full passes (a full pass over it is milliseconds of a stopped loop, tens on a
    # busy machine: the tail of the publish-to-delivery latency); start-up garbage first.
    gc.collect()
    gc.freeze()
    try:
        await node.wait()
    finally:
        await node.stop()
    return EXIT_OK


def loop_factory() -> Callable[[], asyncio.AbstractEventLoop] | None:
    """uvloop's event loop when it is installed (``pip install meshsub[fast]``), else
    asyncio's own (``None``); ``MESHSUB_EVENT_LOOP=asyncio`` forces asyncio's."""
    if os.environ.get("MESHSUB_EVENT_LOOP", "").strip().lower() == "asyncio":
        return None
    try:
        import uvloop
    except ImportError:
        return None
    factory: Callable[[], asyncio.AbstractEventLoop] = uvloop.new_event_loop
    return factory


def run(config: Config) -> int:
    """Run the daemon until SIGTERM/SIGINT; the exit status (0 clean, 1 failure)."""
    configure_logging(config.log.level)
    factory = loop_factory()
    log.info("event loop", loop="uvloop" if factory is not None else "asyncio")
    try:
        with asyncio.Runner(loop_factory=factory) as runner:
            return runner.run(_main(config))
    except KeyboardInterrupt:
        return EXIT_OK
