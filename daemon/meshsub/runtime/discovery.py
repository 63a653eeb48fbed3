"""Neighbour discovery: beacons (with back-off and a byte budget) plus extra peer sources.

Discovery never depends on multicast alone (LESSONS 1): besides the one-hop
broadcast beacon, every round also unicasts the beacon to *probe peers*:
static peers from the config, peers found by DNS-SD, and in ``batman`` mode
the physical neighbours from batman's tables (where broadcast on bat0 would
flood the whole mesh, so there is no broadcast at all).

Beacons are core ``BEACON`` messages (protocol id 0) that the node encodes
with the frame codec; this module designs their body and validates it.

DNS-SD is unauthenticated: anyone on the link can announce ``_meshsub._udp``
services. So a peer found that way is a *candidate* only: limited to the
mesh subnet (``DnsSd(network=...)``), at most ``max_learned_peers`` of them,
and forgotten after ``peer_timeout_beacons`` beacon intervals in which no
authenticated beacon came from its address (counted ``peers_expired``).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import ipaddress
import logging
import math
import random
import socket
import struct
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from meshsub.core.api import NODE_ID_MAX, CoreType, Message, MessageId, NodeId, Position
from meshsub.runtime.link import Address
from meshsub.runtime.logging import format_address
from meshsub.runtime.neighbors import EventKind, NeighborEvent, NeighborTable

if TYPE_CHECKING:  # imported where DNS-SD starts: zeroconf costs 3.6 MiB of idle RSS
    from zeroconf import ServiceStateChange, Zeroconf
    from zeroconf.asyncio import AsyncServiceBrowser, AsyncServiceInfo, AsyncZeroconf

log = logging.getLogger(__name__)

BEACON_VERSION: Final = 1
SERVICE_TYPE: Final = "_meshsub._udp.local."
MAX_NAME_BYTES: Final = 63
MAX_PROTOCOL_LEN: Final = 32
MAX_CAPABILITIES: Final = 16
MAX_COORD: Final = 1e8
"""Local metres; 100 000 km is certainly garbage."""
LEARNED_SOURCES: Final = frozenset({"dnssd"})
"""Probe-peer sources nobody vouches for: capped, and expired without valid beacons."""
DEFAULT_MAX_LEARNED_PEERS: Final = 64
DEFAULT_PEER_TIMEOUT_BEACONS: Final = 3
SIOCGIFNETMASK: Final = 0x891B


class BeaconError(ValueError):
    """A malformed beacon; ``reason`` is a short, countable tag."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Beacon:
    """What a node announces about itself each beacon round.

    ``interval`` is the sender's promise: its next beacon follows within about
    that many seconds (liveness is judged against it). ``position_age`` is
    relative (seconds since the fix when sent), so no clock sync is needed.
    """

    node: NodeId
    seq: int
    interval: float
    name: str = ""
    protocol: str = ""
    capabilities: tuple[str, ...] = ()
    position: Position | None = None
    position_age: float | None = None

    def body(self) -> dict[str, Any]:
        """The msgpack-ready body: short keys, integers where possible."""
        body: dict[str, Any] = {
            "v": BEACON_VERSION,
            "n": self.node,
            "s": self.seq,
            "i": max(1, round(self.interval * 1000)),
            "nm": self.name,
            "pr": self.protocol,
            "c": list(self.capabilities),
            "p": None,
        }
        if self.position is not None:
            p = self.position
            body["p"] = [p.x, p.y, p.z, p.error_m, max(0, round((self.position_age or 0) * 1000))]
        return body

    def message(self, message_id: MessageId) -> Message:
        """A one-hop core message (never forwarded: ttl 1)."""
        return Message(type=CoreType.BEACON, id=message_id, body=self.body(), hop=0, ttl=1)


def _need(body: Mapping[str, Any], key: str, kinds: tuple[type, ...], reason: str) -> Any:
    value = body.get(key)
    if (isinstance(value, bool) and bool not in kinds) or not isinstance(value, kinds):
        raise BeaconError(reason, f"field {key!r} is {type(value).__name__}")
    return value


def decode_beacon(message: Message, sender: NodeId | None = None,
                  received_at: float = 0.0) -> Beacon:
    """Validate a received beacon message; raise ``BeaconError`` with a countable reason."""
    if message.type != CoreType.BEACON:
        raise BeaconError("not_beacon")
    body = message.body
    if not isinstance(body, dict):
        raise BeaconError("bad_body", "not a map")
    version = _need(body, "v", (int,), "bad_version")
    if version < BEACON_VERSION:
        raise BeaconError("bad_version", str(version))
    node = _need(body, "n", (int,), "bad_node")
    if not 0 <= node <= NODE_ID_MAX:
        raise BeaconError("bad_node", str(node))
    if node != message.id.origin or (sender is not None and node != sender):
        raise BeaconError("node_mismatch", f"beacon of {node} from {sender}")
    seq = _need(body, "s", (int,), "bad_seq")
    if not 0 <= seq <= 0xFFFF_FFFF:
        raise BeaconError("bad_seq", str(seq))
    interval_ms = _need(body, "i", (int,), "bad_interval")
    if not 10 <= interval_ms <= 3_600_000:
        raise BeaconError("bad_interval", str(interval_ms))
    name = _need(body, "nm", (str,), "bad_name")
    if len(name.encode()) > MAX_NAME_BYTES:
        raise BeaconError("bad_name", "too long")
    protocol = _need(body, "pr", (str,), "bad_protocol")
    if len(protocol) > MAX_PROTOCOL_LEN:
        raise BeaconError("bad_protocol", "too long")
    caps = _need(body, "c", (list,), "bad_capabilities")
    if len(caps) > MAX_CAPABILITIES or not all(
            isinstance(c, str) and 0 < len(c) <= MAX_PROTOCOL_LEN for c in caps):
        raise BeaconError("bad_capabilities")
    position = age = None
    raw = body.get("p")
    if raw is not None:
        if not (isinstance(raw, list) and len(raw) == 5 and all(
                isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                for v in raw)):
            raise BeaconError("bad_position", "expected [x, y, z, error_m, age_ms]")
        x, y, z, err, age_ms = raw
        if max(abs(x), abs(y), abs(z)) > MAX_COORD or err < 0 or age_ms < 0:
            raise BeaconError("bad_position", "out of range")
        age = age_ms / 1000.0
        position = Position(float(x), float(y), float(z), float(err), received_at - age)
    return Beacon(node, seq, interval_ms / 1000.0, name, protocol, tuple(caps), position, age)


# --------------------------------------------------------------------- scheduler


@dataclass(frozen=True, slots=True)
class BeaconTiming:
    """Beacon cadence: fast after a change, doubling back to the base, under a budget."""

    interval: float = 5.0
    min_interval: float = 1.0
    jitter: float = 0.25
    budget: float = 2000.0
    """Bytes per second all beacons of this node may use (broadcast + unicast)."""

    def __post_init__(self) -> None:
        if not 0 < self.min_interval <= self.interval:
            raise ValueError("need 0 < min_interval <= interval")
        if not 0 <= self.jitter <= 0.5 or self.budget <= 0:
            raise ValueError("need 0 <= jitter <= 0.5 and budget > 0")


class BeaconScheduler:
    """Pure: decides the next beacon delay; the caller supplies the random source."""

    def __init__(self, timing: BeaconTiming, rng: random.Random) -> None:
        self.timing = timing
        self.rng = rng
        self.current = timing.min_interval  # fast start: first contact within seconds
        self.budget_limited = 0

    def changed(self) -> None:
        """The neighbour set changed: beacon fast again so others learn quickly."""
        self.current = self.timing.min_interval

    def next_nominal(self, round_bytes: int) -> float:
        """Advance the back-off; the nominal delay before the next round."""
        nominal = self.current
        self.current = min(self.current * 2, self.timing.interval)
        floor = round_bytes / self.timing.budget
        if floor > nominal:
            self.budget_limited += 1
            nominal = floor
        return nominal

    def advertised(self, nominal: float) -> float:
        """The interval we promise in the beacon: the latest the next one can come."""
        return nominal * (1 + self.timing.jitter)

    def jittered(self, nominal: float) -> float:
        j = self.timing.jitter
        return nominal * (1 + self.rng.uniform(-j, j))


# --------------------------------------------------------------------- discovery

Transmit = Callable[[Message, "Address | None"], int]
"""Encode and send ``message`` to an address (``None``: one-hop broadcast); bytes sent."""


class Discovery:
    """Sends beacons, receives them into the neighbour table, reports neighbour events.

    Wiring: the node decodes frames and calls ``on_beacon`` for core beacons;
    ``transmit`` encodes with the frame codec and sends on the link;
    ``on_event`` receives up/changed/down; ``learn(node, address)`` lets the
    link map node ids to addresses.
    """

    def __init__(
        self,
        *,
        node: NodeId,
        name: str,
        protocol: str,
        table: NeighborTable,
        timing: BeaconTiming,
        transmit: Transmit,
        new_message_id: Callable[[], MessageId],
        on_event: Callable[[NeighborEvent], None],
        clock: Callable[[], float],
        position: Callable[[], Position | None] = lambda: None,
        learn: Callable[[NodeId, Address], object] = lambda node, addr: None,
        capabilities: Iterable[str] = (),
        broadcast: bool = True,
        rng: random.Random | None = None,
        expire_interval: float = 0.5,
        max_learned_peers: int = DEFAULT_MAX_LEARNED_PEERS,
        peer_timeout_beacons: int = DEFAULT_PEER_TIMEOUT_BEACONS,
    ) -> None:
        self.node = node
        self.name = name
        self.protocol = protocol
        self.capabilities = tuple(capabilities)
        self.table = table
        self.scheduler = BeaconScheduler(timing, rng or random.Random(node))
        self.broadcast = broadcast
        """False in batman mode: beacons go only as unicast to probe peers."""
        self._transmit = transmit
        self._new_id = new_message_id
        self._on_event = on_event
        self._clock = clock
        self._position = position
        self._learn = learn
        self._expire_interval = expire_interval
        self.seq = 0
        self.peers: dict[str, set[Address]] = {}
        """Probe peers by source (``static``, ``dnssd``, ``batman``)."""
        self.max_learned_peers = max_learned_peers
        self.peer_timeout_beacons = peer_timeout_beacons
        self._vouched: dict[tuple[str, Address], float] = {}
        """Learned probe peers -> when they were added or last sent a valid beacon."""
        self.counters: Counter[str] = Counter()
        self.drops: Counter[str] = Counter()
        self._tasks: list[asyncio.Task[None]] = []
        self._kick = asyncio.Event()
        self._last_kick = -math.inf

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._tasks = [asyncio.create_task(self._beacon_loop(), name="beacons"),
                       asyncio.create_task(self._expire_loop(), name="neighbor-expiry")]

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks = []

    async def __aenter__(self) -> Discovery:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------ peers

    def set_peers(self, source: str, addrs: Iterable[Address]) -> None:
        """Replace the probe peers of one source (static peers on SIGHUP, batman polls)."""
        new = set(addrs)
        if new - self.peers.get(source, set()):
            self.kick()
        self.peers[source] = new

    def add_peer(self, source: str, addr: Address) -> None:
        """A probe peer; one of a ``LEARNED_SOURCES`` source is capped and expires."""
        peers = self.peers.setdefault(source, set())
        if addr in peers:
            return
        if source in LEARNED_SOURCES:
            if len(peers) >= self.max_learned_peers:
                self.drops[f"{source}_peers_full"] += 1
                return
            self._vouched[(source, addr)] = self._clock()
        peers.add(addr)
        self.kick()

    def expire_peers(self, now: float) -> int:
        """Forget learned peers no valid beacon came from for ``peer_timeout_beacons``
        base intervals; return how many."""
        horizon = now - self.peer_timeout_beacons * self.scheduler.timing.interval
        gone = [key for key, at in self._vouched.items() if at < horizon]
        for source, addr in gone:
            del self._vouched[(source, addr)]
            self.peers.get(source, set()).discard(addr)
            self.counters["peers_expired"] += 1
        return len(gone)

    def _vouch(self, addr: Address, now: float) -> None:
        """A valid beacon came from ``addr``: learned peers at that address stay."""
        host, port = _bare(addr[0]), addr[1]
        for key in self._vouched:
            if key[1][1] == port and _bare(key[1][0]) == host:
                self._vouched[key] = now

    def probe_targets(self) -> list[Address]:
        """Unicast targets this round: every probe peer, and in broadcast-less (batman)
        mode also every live neighbour, so that they keep hearing us."""
        targets: set[Address] = set()
        for addrs in self.peers.values():
            targets |= addrs
        if not self.broadcast:
            targets |= {n.address for n in self.table}
        return sorted(targets, key=str)

    # ------------------------------------------------------------ beacons

    def kick(self) -> None:
        """Beacon soon (rate-limited to once per ``min_interval``)."""
        now = self._clock()
        if now - self._last_kick >= self.scheduler.timing.min_interval:
            self._last_kick = now
            self.scheduler.changed()
            self._kick.set()

    def make_beacon(self, interval: float) -> Beacon:
        self.seq = (self.seq + 1) & 0xFFFF_FFFF
        pos = self._position()
        age = None if pos is None else max(0.0, self._clock() - pos.fixed_at)
        return Beacon(self.node, self.seq, interval, self.name, self.protocol,
                      self.capabilities, pos, age)

    def send_round(self, nominal: float) -> int:
        """One beacon round; returns the bytes sent."""
        beacon = self.make_beacon(self.scheduler.advertised(nominal))
        message = beacon.message(self._new_id())
        sent = 0
        if self.broadcast:
            sent += self._transmit(message, None)
        for addr in self.probe_targets():
            sent += self._transmit(message, addr)
        self.counters["rounds"] += 1
        self.counters["bytes"] += sent
        return sent

    async def _beacon_loop(self) -> None:
        last_bytes = 0
        while True:
            nominal = self.scheduler.next_nominal(last_bytes)
            try:
                last_bytes = self.send_round(nominal)
            except Exception:  # never let one bad send stop discovery
                self.drops["send_failed"] += 1
                log.exception("beacon round failed")
                last_bytes = 0
            self._kick.clear()
            # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancellation
            # that races with the event being set, and stop() would then wait forever
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.scheduler.jittered(nominal)):
                    await self._kick.wait()

    async def _expire_loop(self) -> None:
        while True:
            await asyncio.sleep(self._expire_interval)
            now = self._clock()
            self._dispatch(self.table.expire(now))
            self.expire_peers(now)

    # ------------------------------------------------------------ receiving

    def on_beacon(self, message: Message, sender: NodeId, addr: Address,
                  now: float | None = None, epoch: int | None = None) -> Beacon | None:
        """A decoded, authenticated BEACON frame from ``sender`` at ``addr``, sent in the
        transmitter's boot ``epoch``. A stale, duplicate or table-full beacon changes
        nothing (counted); only a fresh one teaches ``sender``'s address."""
        now = self._clock() if now is None else now
        if sender == self.node:
            self.drops["own"] += 1
            return None
        try:
            beacon = decode_beacon(message, sender, now)
        except BeaconError as exc:
            self.drops[exc.reason] += 1
            log.debug("beacon dropped from=%s reason=%s", addr, exc)
            return None
        self.counters["received"] += 1
        why = self.table.check(beacon.node, beacon.seq, epoch)
        if why is not None and why != "duplicate":
            self.drops[f"beacon_{why}"] += 1
        if why is None:
            self._learn(beacon.node, addr)
            self._vouch(addr, now)
        events = self.table.heard(
            beacon.node, beacon.seq, beacon.interval, now, address=addr, epoch=epoch,
            name=beacon.name, position=beacon.position, protocol=beacon.protocol,
            capabilities=beacon.capabilities)
        self._dispatch(events)
        return beacon

    def _dispatch(self, events: list[NeighborEvent]) -> None:
        for event in events:
            self.counters[f"neighbor_{event.kind.value}"] += 1
            if event.kind in (EventKind.UP, EventKind.DOWN):
                log.info("neighbor %s node=%d address=%s", event.kind.value, event.node,
                         event.address)
                self.kick()
            try:
                self._on_event(event)
            except Exception:
                self.drops["event_handler_error"] += 1
                log.exception("neighbor event handler failed")

    def status(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "interval_s": self.scheduler.current,
            "broadcast": self.broadcast,
            "probe_peers": {k: sorted(map(format_address, v)) for k, v in self.peers.items()},
            "neighbors_refused": self.table.refused,
            "stale_beacons": self.table.stale,
            "budget_limited_rounds": self.scheduler.budget_limited,
            "counters": dict(self.counters),
            "drops": dict(self.drops),
            "neighbors": len(self.table),
        }


# --------------------------------------------------------------------- DNS-SD


class DnsSd:
    """Registers this node as ``_meshsub._udp`` and browses for the others.

    Only the mesh interface's addresses are advertised (never 0.0.0.0, LESSONS
    2). Each peer found is reported as ``on_peer(node, [address, ...])``;
    discovery then probes it with unicast beacons.
    """

    def __init__(
        self,
        *,
        node: NodeId,
        name: str,
        port: int,
        protocol: str,
        addresses: Iterable[str],
        on_peer: Callable[[NodeId, list[Address]], None],
        interfaces: list[str] | None = None,
        resolve_timeout_ms: int = 3000,
        network: ipaddress.IPv4Network | ipaddress.IPv6Network | None = None,
    ) -> None:
        """``network``: the mesh subnet; peers announcing addresses outside it (or, for
        IPv6, outside the link-local range) are ignored (counted ``outside_subnet``)."""
        self.node = node
        self.network = network
        self.port = port
        self.protocol = protocol
        self.addresses = [str(a) for a in addresses]
        self.instance = f"{name}-{node:08x}.{SERVICE_TYPE}"
        self._on_peer = on_peer
        self._interfaces = interfaces
        self._timeout = resolve_timeout_ms
        self.azc: AsyncZeroconf | None = None
        self._browser: AsyncServiceBrowser | None = None
        self._info: AsyncServiceInfo | None = None
        self._pending: set[asyncio.Task[None]] = set()
        self.found: dict[NodeId, list[Address]] = {}
        self.drops: Counter[str] = Counter()

    def _service_info(self) -> AsyncServiceInfo:
        from zeroconf.asyncio import AsyncServiceInfo

        return AsyncServiceInfo(
            SERVICE_TYPE,
            self.instance,
            port=self.port,
            properties={"node": str(self.node), "port": str(self.port),
                        "protocol": self.protocol},
            parsed_addresses=self.addresses,
            server=f"meshsub-{self.node:08x}.local.",
        )

    async def start(self) -> None:
        from zeroconf.asyncio import AsyncServiceBrowser, AsyncZeroconf

        if self._interfaces:
            self.azc = AsyncZeroconf(interfaces=self._interfaces)
        else:
            self.azc = AsyncZeroconf()
        self._info = self._service_info()
        await self.azc.async_register_service(self._info, allow_name_change=True)
        self._browser = AsyncServiceBrowser(self.azc.zeroconf, [SERVICE_TYPE],
                                            handlers=[self._on_change])

    async def stop(self) -> None:
        for task in list(self._pending):
            task.cancel()
        if self._browser is not None:
            await self._browser.async_cancel()
            self._browser = None
        if self.azc is not None:
            if self._info is not None:
                with contextlib.suppress(Exception):
                    await self.azc.async_unregister_service(self._info)
            await self.azc.async_close()
            self.azc = None

    async def set_addresses(self, addresses: Iterable[str]) -> None:
        """Re-advertise after the mesh interface's address changed."""
        self.addresses = [str(a) for a in addresses]
        if self.azc is not None and self._info is not None:
            self._info = self._service_info()
            await self.azc.async_update_service(self._info)

    def _on_change(self, zeroconf: Zeroconf, service_type: str, name: str,
                   state_change: ServiceStateChange) -> None:
        from zeroconf import ServiceStateChange

        if state_change not in (ServiceStateChange.Added, ServiceStateChange.Updated):
            return
        if name == self.instance:
            return
        task = asyncio.get_running_loop().create_task(self._resolve(service_type, name))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _resolve(self, service_type: str, name: str) -> None:
        if self.azc is None:
            return
        from zeroconf.asyncio import AsyncServiceInfo

        info = AsyncServiceInfo(service_type, name)
        if not await info.async_request(self.azc.zeroconf, self._timeout):
            self.drops["unresolved"] += 1
            return
        try:
            node, port = parse_txt(info.properties)
        except ValueError:
            self.drops["bad_txt"] += 1
            log.debug("dns-sd peer with bad TXT name=%s", name)
            return
        if node == self.node:
            return
        addrs: list[Address] = []
        for text in info.parsed_scoped_addresses():
            with contextlib.suppress(ValueError):
                ip = ipaddress.ip_address(text.partition("%")[0])
                if ip.is_unspecified or ip.is_multicast:
                    continue
                if not self.reachable(ip):
                    self.drops["outside_subnet"] += 1
                    continue
                addrs.append((text, port))
        if not addrs:
            self.drops["no_address"] += 1
            return
        self.found[node] = addrs
        self._on_peer(node, addrs)


    def reachable(self, ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
        """On the mesh link: in ``network`` (IPv4), link-local (IPv6)."""
        if ip.version == 6:
            return ip.is_link_local
        return self.network is None or (self.network.version == 4 and ip in self.network)


def _bare(host: str) -> str:
    return str(host).partition("%")[0]


def interface_network(name: str, address: str) -> ipaddress.IPv4Network | None:
    """The IPv4 subnet of ``address`` on interface ``name`` (its netmask), or None."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            res = fcntl.ioctl(sock.fileno(), SIOCGIFNETMASK,
                              struct.pack("256s", name.encode()[:15]))
        except OSError:
            return None
    mask = socket.inet_ntoa(res[20:24])
    try:
        return ipaddress.IPv4Network(f"{address}/{mask}", strict=False)
    except ValueError:
        return None


def parse_txt(props: Mapping[bytes, bytes | None]) -> tuple[NodeId, int]:
    """(node, port) from a peer's TXT record; ``ValueError`` when malformed."""
    raw_node, raw_port = props.get(b"node"), props.get(b"port")
    if raw_node is None or raw_port is None:
        raise ValueError("missing node or port")
    node, port = int(raw_node.decode("ascii")), int(raw_port.decode("ascii"))
    if not (0 <= node <= NODE_ID_MAX and 1 <= port <= 65535):
        raise ValueError("node or port out of range")
    return node, port

