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
* The link is ``up`` only while the interface is administratively up *and*
  has a carrier (``IFF_UP`` and ``IFF_RUNNING``): without a carrier the
  kernel accepts a datagram and silently discards it, so a send then would
  be a lost frame counted as sent. The kernel's rtnetlink events wake the
  link at once when that changes (``rtnetlink.InterfaceEvents``); the poll
  remains as a fallback.
* Sends go straight to the socket, so a refusal (``ENETUNREACH`` after
  ``ip link set down``, a full send buffer) is known at once and the frame
  is never counted as sent; asyncio's datagram transport would report it
  later to ``error_received`` and the caller would believe it went out.
* Reads drain every queued datagram on one readiness event (Python has no
  ``recvmmsg``). The receive buffer is sized for bursts
  (``link.receive_buffer``) and the kernel's drop counter of the socket (the
  ``drops`` column of ``/proc/net/udp``) is reported in ``status()``.
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
import os
import socket
import struct
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeAlias

from meshsub.core.api import NodeId
from meshsub.runtime.logging import format_address
from meshsub.runtime.rtnetlink import InterfaceEvents

log = logging.getLogger(__name__)

Address: TypeAlias = tuple[Any, ...]
"""A socket address: ``(host, port)`` or ``(host, port, flowinfo, scope_id)``."""

SIOCGIFFLAGS = 0x8913
SIOCGIFADDR = 0x8915
SIOCGIFBRDADDR = 0x8919
SO_RCVBUFFORCE = 33
"""Linux's option number (Python's socket module does not name it)."""
IFF_UP = 0x1
IFF_RUNNING = 0x40
IFA_F_DADFAILED = 0x08
IFA_F_TENTATIVE = 0x40
IF_INET6 = Path("/proc/net/if_inet6")
PROC_UDP = {"ipv4": Path("/proc/net/udp"), "ipv6": Path("/proc/net/udp6")}
DEFAULT_RECEIVE_BUFFER = 1 << 20
"""Bytes the kernel may queue for the socket: a burst of about a thousand small
frames (each costs its buffer's true size, about 1 KiB, not its length)."""
DRAIN_MAX = 256
"""Most datagrams read per readiness event, so a flood cannot starve the loop."""
LINK_ERRNOS = frozenset({errno.ENETUNREACH, errno.ENETDOWN, errno.EHOSTUNREACH, errno.ENODEV,
                         errno.ENXIO, errno.EADDRNOTAVAIL})
"""Send errors that mean the interface cannot carry a frame now (a re-check follows)."""


class LinkError(RuntimeError):
    """The link cannot work as configured; the message says what to do."""


class LinkState(enum.StrEnum):
    STOPPED = "stopped"
    WAITING = "waiting"  # interface missing or without a usable address
    DOWN = "down"  # interface present but administratively down or without carrier
    UP = "up"
    ERROR = "error"


@dataclass(frozen=True, slots=True)
class InterfaceInfo:
    name: str
    index: int
    ipv4: str | None = None
    broadcast: str | None = None
    ipv6_link_local: str | None = None
    flags: int = IFF_UP | IFF_RUNNING

    @property
    def admin_up(self) -> bool:
        return bool(self.flags & IFF_UP)

    @property
    def carrier(self) -> bool:
        """Operationally up (``IFF_RUNNING``): the interface can carry frames."""
        return bool(self.flags & IFF_RUNNING)


def _ifreq_addr(sock: socket.socket, request: int, name: str) -> str | None:
    try:
        res = fcntl.ioctl(sock.fileno(), request, struct.pack("256s", name.encode()[:15]))
    except OSError:
        return None
    return socket.inet_ntoa(res[20:24])


def _ifreq_flags(sock: socket.socket, name: str) -> int:
    try:
        res = fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, struct.pack("256s", name.encode()[:15]))
    except OSError:
        return 0
    return int(struct.unpack_from("H", res, 16)[0])


def interface_info(name: str) -> InterfaceInfo | None:
    """Index, flags and addresses of ``name`` now, or ``None`` when it does not exist."""
    try:
        index = socket.if_nametoindex(name)
    except OSError:
        return None
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        flags = _ifreq_flags(sock, name)
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
    return InterfaceInfo(name, index, ipv4, broadcast, ll, flags)


def socket_drops(sock: socket.socket, family: str) -> tuple[int, int] | None:
    """(datagrams the kernel dropped for ``sock``, bytes queued now), or ``None``.

    Read from the socket's line in ``/proc/net/udp`` (``udp6``), found by the
    socket's inode: the ``drops`` column counts datagrams refused because the
    receive buffer was full (or a filter refused them), the per-socket share
    of the namespace-wide ``RcvbufErrors``.
    """
    try:
        inode = os.fstat(sock.fileno()).st_ino
        text = PROC_UDP[family].read_text()
    except (OSError, ValueError):
        return None
    wanted = str(inode)
    for line in text.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 13 and parts[9] == wanted:
            queues = parts[4].partition(":")
            return int(parts[-1]), int(queues[2], 16)
    return None


def set_receive_buffer(sock: socket.socket, size: int) -> int:
    """Ask for ``size`` bytes of receive buffer; return what the kernel granted.

    ``SO_RCVBUFFORCE`` (root or CAP_NET_ADMIN) passes ``net.core.rmem_max``;
    without the privilege ``SO_RCVBUF`` is capped by it. The kernel doubles
    the value for its bookkeeping and reports the doubled figure.
    """
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, size)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)
    return int(sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))


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
        receive_buffer: int = DEFAULT_RECEIVE_BUFFER,
        on_state: Callable[[LinkState], None] | None = None,
        lookup: Callable[[str], InterfaceInfo | None] = interface_info,
        events: bool = True,
        paused: bool = False,
        drain: Callable[[], contextlib.AbstractContextManager[None]] | None = None,
    ) -> None:
        """``interface=""`` is for tests only: no device binding, ``bind_host``
        instead, and "broadcast" sent as unicast copies to ``broadcast_peers``.
        ``max_datagram`` bounds what we send (the configured payload size);
        ``max_receive`` what we accept (default the same; the codec's
        ``max_frame`` when peers may be configured differently).
        ``events=False`` relies on polling alone (tests with a fake ``lookup``).
        ``paused``: bind (and send) as usual but read nothing until ``resume()``;
        what arrives meanwhile waits in the socket's receive buffer.
        ``drain``: a context around each drain of the socket (the node commits what
        the datagrams of one wake-up wrote to its store at once, ``Store.batch``)."""
        if family not in ("ipv4", "ipv6"):
            raise ValueError(f"unknown address family {family!r}")
        if mode not in ("adhoc", "batman"):
            raise ValueError(f"unknown link mode {mode!r}")
        if receive_buffer < 0:
            raise ValueError("receive_buffer must not be negative")
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
        self.receive_buffer = receive_buffer
        """Requested receive buffer (bytes); 0 keeps the kernel's default."""
        self.receive_buffer_granted: int | None = None
        self._on_datagram = on_datagram
        self._drain = drain if drain is not None else contextlib.nullcontext
        self._on_state = on_state
        self._lookup = lookup
        self.state = LinkState.STOPPED
        self.info: InterfaceInfo | None = None
        self.local: Address | None = None
        self.last_error: str | None = None
        self.counters: Counter[str] = Counter()
        self.drops: Counter[str] = Counter()
        self.addresses: dict[NodeId, Address] = {}
        self._last_learned: Address | None = None
        self.one_hop_peers: list[Address] = []
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._wake = asyncio.Event()
        self._events = InterfaceEvents(self._changed) if events and interface else None
        self._up = asyncio.Event()
        self._probe: socket.socket | None = None
        self._kernel_drops_base = 0
        self.kernel_drops = 0
        """Datagrams the kernel dropped for our sockets (receive buffer full), all binds."""
        self._paused = paused

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        """Begin; binds now if the interface is ready, otherwise as soon as it is."""
        if self._watcher is not None:
            return
        self._loop = asyncio.get_running_loop()
        if self.interface:
            check_bind_permission()
            if self._events is not None:
                self._events.start()
        else:
            self._bind(None)
        self._watcher = asyncio.create_task(self._watch(), name=f"link-{self.interface}")

    def resume(self) -> None:
        """Begin reading (a link made ``paused``): the datagrams that arrived since the
        bind are read at the loop's next turn, in order, then every later one."""
        if not self._paused:
            return
        self._paused = False
        if self._sock is not None:
            (self._loop or asyncio.get_running_loop()).add_reader(self._sock.fileno(),
                                                                 self._readable)

    async def stop(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watcher
            self._watcher = None
        if self._events is not None:
            self._events.stop()
        if self._probe is not None:
            self._probe.close()
            self._probe = None
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
    def sock(self) -> socket.socket | None:
        """The bound socket (for socket options such as the admission's filter)."""
        return self._sock

    def _set_state(self, state: LinkState) -> None:
        if state == self.state:
            return
        log.info("link state interface=%s state=%s reason=%s", self.interface or "-",
                 state.value, self.last_error if state != LinkState.UP else "-")
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
        if info is None or not (info.admin_up and info.carrier):
            return False
        if self.family == "ipv6":
            return info.ipv6_link_local is not None
        # batman mode never broadcasts, so a /32 address without broadcast will do
        return bool(info.ipv4 and (info.broadcast or self.mode == "batman"))

    @staticmethod
    def _why_unusable(info: InterfaceInfo | None) -> tuple[LinkState, str]:
        if info is None:
            return LinkState.WAITING, "interface missing"
        if not info.admin_up:
            return LinkState.DOWN, "interface is down"
        if not info.carrier:
            return LinkState.DOWN, "interface has no carrier"
        return LinkState.WAITING, "interface has no usable address"

    def _changed(self) -> None:
        """The kernel reported a change: re-check now instead of at the next poll."""
        self.counters["interface_events"] += 1
        self._wake.set()

    def can_send(self) -> bool:
        """True when a frame would go out now: the link is up and, checked afresh
        (one ioctl), the interface still has its carrier. Used before a local
        publication is handed over, so that none is fed to a dead link in the
        moment between a carrier loss and its netlink event."""
        if self.state != LinkState.UP or self._sock is None:
            return False
        if not self.interface:
            return True
        if self._probe is None:
            self._probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        flags = _ifreq_flags(self._probe, self.interface)
        if flags & (IFF_UP | IFF_RUNNING) == IFF_UP | IFF_RUNNING:
            return True
        self._wake.set()
        return False

    def refresh(self) -> None:
        """Look at the interface now and bind, rebind or close to match it."""
        if not self.interface:
            return
        try:
            info = self._lookup(self.interface)
        except Exception:  # the watcher must outlive a failed probe
            log.exception("link interface lookup failed interface=%s", self.interface)
            info = None
        if self.state == LinkState.UP and (
                self._key(info) != self._key(self.info) or not self._usable(info)):
            state, why = self._why_unusable(info) if not self._usable(info) else (
                LinkState.WAITING, "interface changed")
            log.warning("link interface changed interface=%s state=%s reason=%s",
                        self.interface, state.value, why)
            self.last_error = why
            self._close(state)
        if self.state != LinkState.UP:
            if self._usable(info):
                try:
                    self._bind(info)
                except OSError as exc:
                    if self.last_error != f"bind: {exc}":  # log once per distinct error
                        log.warning("link bind failed interface=%s error=%s",
                                    self.interface, exc)
                    self.last_error = f"bind: {exc}"
                    self.counters["bind_failures"] += 1
                    self._set_state(LinkState.WAITING)
            else:
                state, self.last_error = self._why_unusable(info)
                self._set_state(state)

    async def _watch(self) -> None:
        if not self.interface:
            return
        while True:
            self._wake.clear()
            self.refresh()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.poll_interval)

    def _make_socket(self, info: InterfaceInfo | None) -> socket.socket:
        v6 = self.family == "ipv6"
        sock = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_DGRAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if self.receive_buffer:
                self.receive_buffer_granted = set_receive_buffer(sock, self.receive_buffer)
                if self.receive_buffer_granted < self.receive_buffer \
                        and not self.counters["receive_buffer_capped"]:
                    self.counters["receive_buffer_capped"] += 1
                    log.warning("link receive buffer capped requested=%d granted=%d "
                                "hint=%s", self.receive_buffer, self.receive_buffer_granted,
                                "raise net.core.rmem_max or grant CAP_NET_ADMIN")
            else:
                self.receive_buffer_granted = int(
                    sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF))
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

    def _bind(self, info: InterfaceInfo | None) -> None:
        sock = self._make_socket(info)
        loop = self._loop or asyncio.get_running_loop()
        try:
            if not self._paused:
                loop.add_reader(sock.fileno(), self._readable)
        except BaseException:
            sock.close()
            raise
        self._sock = sock
        self.info = info
        if info is not None:
            host = info.ipv4 if self.family == "ipv4" else info.ipv6_link_local
            self.local = (host, self.port)
        else:
            self.local = sock.getsockname()[:2]
        self.counters["binds"] += 1
        self.last_error = None
        self._set_state(LinkState.UP)

    def _close(self, state: LinkState = LinkState.WAITING) -> None:
        if self._sock is not None:
            self.poll_kernel_drops()
            self._kernel_drops_base = self.kernel_drops  # a new socket counts from zero
            loop = self._loop
            if loop is not None and not loop.is_closed():
                with contextlib.suppress(Exception):
                    loop.remove_reader(self._sock.fileno())
            self._sock.close()
            self._sock = None
        self.info = None
        if self.state == LinkState.UP:
            self._set_state(state)

    # ------------------------------------------------------------ receiving

    def _readable(self) -> None:
        """Drain the socket: every queued datagram, up to ``DRAIN_MAX`` per wake-up."""
        sock = self._sock
        if sock is None:
            return
        with self._drain():
            self._drain_socket(sock)

    def _drain_socket(self, sock: socket.socket) -> None:
        size = self.max_receive + 1  # one byte more shows an oversized datagram
        received = self._received
        for _ in range(DRAIN_MAX):
            try:
                data, addr = sock.recvfrom(size)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:  # e.g. ICMP errors queued on the socket
                self.counters["rx_errors"] += 1
                self.last_error = str(exc)
                return
            received(data, addr)
            if self._sock is not sock:  # a handler closed the link
                return
        self.counters["rx_drain_limit"] += 1

    def _received(self, data: bytes, addr: Address) -> None:
        local = self.local
        if local is not None and addr[1] == local[1] and _same_host(addr[0], local[0]):
            self.drops["own"] += 1  # our own broadcast, looped back by the kernel
            return
        if len(data) > self.max_receive:
            self.drops["oversize_rx"] += 1
            return
        counters = self.counters
        counters["rx"] += 1
        counters["rx_bytes"] += len(data)
        try:
            self._on_datagram(data, addr)
        except Exception:  # a handler bug must not kill the socket
            self.drops["handler_error"] += 1
            log.exception("link receive handler failed")

    def poll_kernel_drops(self) -> int:
        """Refresh ``kernel_drops`` from the kernel's counter for our socket; return it."""
        if self._sock is not None:
            found = socket_drops(self._sock, self.family)
            if found is not None:
                self.kernel_drops = self._kernel_drops_base + found[0]
                self.counters["rx_queue_bytes"] = found[1]
        return self.kernel_drops

    # -------------------------------------------------------------- sending

    def _send(self, data: bytes, addr: Address) -> bool:
        """Send one datagram now; True only if the kernel took it (else a counted drop)."""
        sock = self._sock
        if sock is None or self.state != LinkState.UP:
            self.drops["link_down"] += 1
            return False
        if len(data) > self.max_datagram:
            self.drops["oversize_tx"] += 1
            return False
        try:
            sock.sendto(data, addr)
        except BlockingIOError:
            self.drops["send_buffer_full"] += 1
            self.last_error = "send buffer full"
            return False
        except OSError as exc:
            self.last_error = str(exc)
            if exc.errno in LINK_ERRNOS:
                self.refresh()  # most likely the interface went down: find out now
            self.drops["link_down" if self.state != LinkState.UP else "send_error"] += 1
            return False
        counters = self.counters
        counters["tx"] += 1
        counters["tx_bytes"] += len(data)
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
        # Many ids from one address (an insider's made-up ids, up to the replay table's
        # 4096) share one tuple instead of each keeping its own (~120 bytes).
        if addr == self._last_learned:
            addr = self._last_learned
        self._last_learned = addr
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
            "local": format_address(self.local) if self.local else None,
            "broadcast": [format_address(a) for a in self.broadcast_targets()],
            "max_datagram": self.max_datagram,
            "receive_buffer": {"requested": self.receive_buffer or None,
                               "granted": self.receive_buffer_granted},
            "kernel_drops": self.poll_kernel_drops(),
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
