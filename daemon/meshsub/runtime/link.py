"""The mesh link: one UDP socket pinned to the mesh interface.

* ``SO_BINDTODEVICE`` keeps meshsub off every other interface (a beacon
  leaking onto a VPN or ``lo`` is a classic mesh-daemon bug). Kernels before
  5.7 require root or CAP_NET_RAW for it; ``start()`` probes that up front
  and fails with a clear message instead of at the first bind.
* One-hop broadcast: IPv4 subnet broadcast (``SO_BROADCAST``) or an IPv6
  link-local multicast group joined on the interface. In ``batman`` mode
  bat0 broadcast floods the whole mesh, so a "broadcast" becomes unicast
  copies to the physical neighbours (``set_one_hop_peers``).
* Interfaces appear late on a Pi at boot: while the interface is missing or
  has no address the link waits, polling, and binds when it appears (and
  rebinds when its address changes), without a restart.
* Frames above the configured payload size are refused (we segment
  ourselves; IP fragmentation is never relied on). Every refusal is counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import errno
import fcntl
import ipaddress
import logging
import socket
import struct
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from meshsub.core.api import NodeId

log = logging.getLogger(__name__)

Address: TypeAlias = tuple[Any, ...]
"""A socket address: ``(host, port)`` or ``(host, port, flowinfo, scope_id)``."""

SIOCGIFADDR = 0x8915
SIOCGIFBRDADDR = 0x8919
IFA_F_DADFAILED = 0x08
IFA_F_TENTATIVE = 0x40
IF_INET6 = Path("/proc/net/if_inet6")


class LinkError(RuntimeError):
    """The link cannot work as configured; the message says what to do."""


class LinkState(enum.StrEnum):
    STOPPED = "stopped"
    WAITING = "waiting"  # interface missing or without a usable address
    UP = "up"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class InterfaceInfo:
    name: str
    index: int
    ipv4: str | None = None
    broadcast: str | None = None
    ipv6_link_local: str | None = None


def _ifreq_addr(sock: socket.socket, request: int, name: str) -> str | None:
    try:
        res = fcntl.ioctl(sock.fileno(), request, struct.pack("256s", name.encode()[:15]))
    except OSError:
        return None
    return socket.inet_ntoa(res[20:24])


def interface_info(name: str) -> InterfaceInfo | None:
    """Index and addresses of ``name`` now, or ``None`` when it does not exist."""
    try:
        index = socket.if_nametoindex(name)
    except OSError:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        ipv4 = _ifreq_addr(sock, SIOCGIFADDR, name)
        broadcast = _ifreq_addr(sock, SIOCGIFBRDADDR, name) if ipv4 else None
    if broadcast in ("0.0.0.0", None) and ipv4:
        broadcast = None
    ll = None
    with contextlib.suppress(OSError):
        for line in IF_INET6.read_text().splitlines():
            parts = line.split()
            if len(parts) < 6 or parts[5] != name or int(parts[3], 16) != 0x20:
                continue
            if int(parts[4], 16) & (IFA_F_TENTATIVE | IFA_F_DADFAILED):
                continue
            ll = str(ipaddress.IPv6Address(bytes.fromhex(parts[0])))
            break
    return InterfaceInfo(name, index, ipv4, broadcast, ll)


def check_bind_permission() -> None:
    """Raise ``LinkError`` unless this process may use SO_BINDTODEVICE.

    Probed on ``lo``, which always exists, so the answer does not wait for the
    mesh interface to appear.
    """
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, b"lo")
        except PermissionError:
            raise LinkError(
                "binding to the mesh interface (SO_BINDTODEVICE) needs root or CAP_NET_RAW: "
                "run meshsubd as root or set AmbientCapabilities=CAP_NET_RAW in its unit"
            ) from None


class _Protocol(asyncio.DatagramProtocol):
    def __init__(self, link: Link) -> None:
        self.link = link

    def datagram_received(self, data: bytes, addr: Address) -> None:
        self.link._received(data, addr)

    def error_received(self, exc: Exception) -> None:
        self.link.drops["send_error"] += 1
        self.link.last_error = str(exc)
        log.debug("link socket error: %s", exc)


class Link:
    """An asyncio UDP link; received datagrams go to ``on_datagram(data, addr)``."""

    def __init__(
        self,
        *,
        interface: str,
        port: int,
        on_datagram: Callable[[bytes, Address], None],
        max_datagram: int = 1200,
        max_receive: int | None = None,
        family: str = "ipv4",
        mode: str = "adhoc",
        multicast_group: str = "ff02::4d53",
        bind_host: str | None = None,
        broadcast_peers: Sequence[Address] = (),
        poll_interval: float = 2.0,
        on_state: Callable[[LinkState], None] | None = None,
        lookup: Callable[[str], InterfaceInfo | None] = interface_info,
    ) -> None:
        """``interface=""`` is for tests only: no device binding, ``bind_host``
        instead, and "broadcast" sent as unicast copies to ``broadcast_peers``.
        ``max_datagram`` bounds what we send (the configured payload size);
        ``max_receive`` what we accept (default the same; the codec's
        ``max_frame`` when peers may be configured differently)."""
        if family not in ("ipv4", "ipv6"):
            raise ValueError(f"unknown address family {family!r}")
        if mode not in ("adhoc", "batman"):
            raise ValueError(f"unknown link mode {mode!r}")
        self.interface = interface
        self.port = port
        self.family = family
        self.mode = mode
        self.multicast_group = multicast_group
        self.max_datagram = max_datagram
        self.max_receive = max_receive if max_receive is not None else max_datagram
        self.bind_host = bind_host
        self.broadcast_peers = list(broadcast_peers)
        self.poll_interval = poll_interval
        self._on_datagram = on_datagram
        self._on_state = on_state
        self._lookup = lookup
        self.state = LinkState.STOPPED
        self.info: InterfaceInfo | None = None
        self.local: Address | None = None
        self.last_error: str | None = None
        self.counters: Counter[str] = Counter()
        self.drops: Counter[str] = Counter()
        self.addresses: dict[NodeId, Address] = {}
        self.one_hop_peers: list[Address] = []
        self._transport: asyncio.DatagramTransport | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._up = asyncio.Event()

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Begin; binds now if the interface is ready, otherwise as soon as it is."""
        if self._watcher is not None:
            return
        if self.interface:
            check_bind_permission()
        else:
            await self._bind(None)
        self._watcher = asyncio.create_task(self._watch(), name=f"link-{self.interface}")

    async def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
            self._watcher = None
        self._close()
        self._set_state(LinkState.STOPPED)

    async def __aenter__(self) -> Link:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def wait_up(self) -> None:
        """Return once the socket is bound (e.g. to gate systemd readiness)."""
        await self._up.wait()

    @property
    def sock(self) -> Any:
        """The bound socket (asyncio's wrapper; for socket options such as a filter)."""
        return None if self._transport is None else self._transport.get_extra_info("socket")

    def _set_state(self, state: LinkState) -> None:
        if state == self.state:
            return
        log.info("link state interface=%s state=%s", self.interface or "-", state.value)
        self.state = state
        if state == LinkState.UP:
            self._up.set()
        else:
            self._up.clear()
        if self._on_state is not None:
            self._on_state(state)

    def _key(self, info: InterfaceInfo | None) -> tuple[object, ...] | None:
        """What the bound socket depends on: a change means close and rebind."""
        if info is None:
            return None
        if self.family == "ipv4":
            return (info.index, info.ipv4, info.broadcast)
        return (info.index, info.ipv6_link_local)

    def _usable(self, info: InterfaceInfo | None) -> bool:
        if info is None:
            return False
        if self.family == "ipv6":
            return info.ipv6_link_local is not None
        # batman mode never broadcasts, so a /32 address without broadcast will do
        return bool(info.ipv4 and (info.broadcast or self.mode == "batman"))

    async def _watch(self) -> None:
        if not self.interface:
            return
        while True:
            try:
                info = self._lookup(self.interface)
            except Exception:  # the watcher must outlive a failed probe
                log.exception("link interface lookup failed interface=%s", self.interface)
                info = None
            if self.state == LinkState.UP and self._key(info) != self._key(self.info):
                log.warning("link interface changed interface=%s now=%s", self.interface, info)
                self._close()
            if self.state != LinkState.UP:
                if self._usable(info):
                    try:
                        await self._bind(info)
                    except OSError as exc:
                        if self.last_error != f"bind: {exc}":  # log once per distinct error
                            log.warning("link bind failed interface=%s error=%s",
                                        self.interface, exc)
                        self.last_error = f"bind: {exc}"
                        self.counters["bind_failures"] += 1
                        self._set_state(LinkState.WAITING)
                else:
                    self.last_error = ("interface missing" if info is None
                                       else "interface has no usable address")
                    self._set_state(LinkState.WAITING)
            await asyncio.sleep(self.poll_interval)

    def _make_socket(self, info: InterfaceInfo | None) -> socket.socket:
        v6 = self.family == "ipv6"
        sock = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if info is not None:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, info.name.encode())
            if v6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
                if info is not None:
                    group = socket.inet_pton(socket.AF_INET6, self.multicast_group)
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_JOIN_GROUP,
                                    group + struct.pack("@I", info.index))
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_IF, info.index)
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_HOPS, 1)
                    sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_MULTICAST_LOOP, 0)
                sock.bind((self.bind_host or "::", self.port, 0, info.index if info else 0))
            else:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_BROADCAST, 1)
                sock.bind((self.bind_host or "0.0.0.0", self.port))
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
        return sock

    async def _bind(self, info: InterfaceInfo | None) -> None:
        sock = self._make_socket(info)
        loop = asyncio.get_running_loop()
        transport, _ = await loop.create_datagram_endpoint(lambda: _Protocol(self), sock=sock)
        self._transport = transport
        self.info = info
        if info is not None:
            host = info.ipv4 if self.family == "ipv4" else info.ipv6_link_local
            self.local = (host, self.port)
        else:
            self.local = sock.getsockname()[:2]
        self.counters["binds"] += 1
        self.last_error = None
        self._set_state(LinkState.UP)

    def _close(self) -> None:
        if self._transport is not None:
            self._transport.close()
            self._transport = None
        self.info = None
        if self.state == LinkState.UP:
            self._set_state(LinkState.WAITING)

    # ------------------------------------------------------------ receiving

    def _received(self, data: bytes, addr: Address) -> None:
        if self.local is not None and addr[1] == self.local[1] and \
                _same_host(addr[0], self.local[0]):
            self.drops["own"] += 1  # our own broadcast, looped back by the kernel
            return
        if len(data) > self.max_receive:
            self.drops["oversize_rx"] += 1
            return
        self.counters["rx"] += 1
        self.counters["rx_bytes"] += len(data)
        try:
            self._on_datagram(data, addr)
        except Exception:  # a handler bug must not kill the socket
            self.drops["handler_error"] += 1
            log.exception("link receive handler failed")

    # -------------------------------------------------------------- sending

    def _send(self, data: bytes, addr: Address) -> bool:
        if self._transport is None or self.state != LinkState.UP:
            self.drops["link_down"] += 1
            return False
        if len(data) > self.max_datagram:
            self.drops["oversize_tx"] += 1
            return False
        try:
            self._transport.sendto(data, addr)
        except OSError as exc:
            self.drops["send_error"] += 1
            self.last_error = str(exc)
            if exc.errno in (errno.ENODEV, errno.ENXIO, errno.ENETDOWN):
                self._close()
            return False
        self.counters["tx"] += 1
        self.counters["tx_bytes"] += len(data)
        return True

    def send_to(self, addr: Address, data: bytes) -> bool:
        """Unicast ``data`` to ``addr``; False (counted) when it could not be sent."""
        if len(addr) == 2:
            try:
                addr = self.peer_address(addr[0], addr[1])
            except ValueError:
                self.drops["bad_address"] += 1
                return False
        return self._send(data, addr)

    def send_to_node(self, node: NodeId, data: bytes) -> bool:
        addr = self.addresses.get(node)
        if addr is None:
            self.drops["no_address"] += 1
            return False
        return self._send(data, addr)

    def broadcast_targets(self) -> list[Address]:
        """Where a one-hop broadcast goes in the current mode."""
        if self.mode == "batman" or not self.interface:
            return list(self.one_hop_peers if self.mode == "batman" else self.broadcast_peers)
        if self.family == "ipv6":
            index = self.info.index if self.info else 0
            return [(self.multicast_group, self.port, 0, index)]
        return [(self.info.broadcast, self.port)] if self.info and self.info.broadcast else []

    def send_broadcast(self, data: bytes) -> int:
        """One-hop broadcast; returns the number of datagrams sent."""
        targets = self.broadcast_targets()
        if not targets:
            self.drops["no_broadcast_target"] += 1
            return 0
        self.counters["broadcasts"] += 1
        return sum(self._send(data, addr) for addr in targets)

    def set_one_hop_peers(self, addrs: Iterable[Address]) -> None:
        """batman mode: the physical neighbours a "broadcast" is unicast to."""
        peers = set()
        for addr in addrs:
            try:
                peers.add(self.peer_address(addr[0], addr[1]))
            except ValueError:
                self.drops["bad_address"] += 1
        self.one_hop_peers = sorted(peers, key=str)

    # ------------------------------------------------------------- addresses

    def peer_address(self, host: str, port: int) -> Address:
        """A sendable address for ``host``: IPv6 link-local gets the interface scope."""
        if self.family == "ipv6":
            bare, _, scope = host.partition("%")
            index = 0
            if scope:
                index = int(scope) if scope.isdigit() else _if_index(scope)
            elif ipaddress.IPv6Address(bare).is_link_local and self.info is not None:
                index = self.info.index
            return (bare, port, 0, index)
        return (host, port)

    def learn(self, node: NodeId, addr: Address) -> bool:
        """Remember that ``node`` transmits from ``addr``; True if that is news."""
        if self.addresses.get(node) == addr:
            return False
        self.addresses[node] = addr
        return True

    def forget(self, node: NodeId) -> None:
        self.addresses.pop(node, None)

    def address_of(self, node: NodeId) -> Address | None:
        return self.addresses.get(node)

    def status(self) -> dict[str, Any]:
        return {
            "interface": self.interface or None,
            "state": self.state.value,
            "mode": self.mode,
            "family": self.family,
            "local": _fmt(self.local) if self.local else None,
            "broadcast": [_fmt(a) for a in self.broadcast_targets()],
            "max_datagram": self.max_datagram,
            "last_error": self.last_error,
            "counters": dict(self.counters),
            "drops": dict(self.drops),
            "known_addresses": len(self.addresses),
        }


def _if_index(name: str) -> int:
    try:
        return socket.if_nametoindex(name)
    except OSError:
        return 0


def _same_host(a: str, b: str) -> bool:
    return a.partition("%")[0] == str(b).partition("%")[0]


def _fmt(addr: Address) -> str:
    host, port = addr[0], addr[1]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"
