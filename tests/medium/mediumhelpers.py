"""Helpers for the medium's root tests: sockets inside node netns, raw frames, statistics.

Test traffic is raw Ethernet frames of the local experimental EtherType 0x88B5
through AF_PACKET sockets on ``mesh0``: one frame is one Bernoulli trial of the
medium, with no ARP in the way (ARP under loss adds loss of its own) and no
background traffic counted (IPv6 noise has another EtherType). Sockets are
opened in a node's netns by a short-lived thread that ``setns``es first; a socket
stays in the netns it was created in, so the test process itself never moves.
"""

from __future__ import annotations

import ctypes
import math
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable

ETH_P_TEST = 0x88B5
MAGIC = b"MSUBMT"
BROADCAST = b"\xff" * 6
CLONE_NEWNET = 0x40000000
_libc = ctypes.CDLL(None, use_errno=True)


def socket_in(netns: str, family: int, kind: int, proto: int = 0) -> socket.socket:
    """A socket created inside ``netns`` (the calling thread stays where it is)."""
    result: list[socket.socket | BaseException] = []

    def make() -> None:
        try:
            fd = os.open(f"/run/netns/{netns}", os.O_RDONLY)
            try:
                if _libc.setns(fd, CLONE_NEWNET) != 0:
                    err = ctypes.get_errno()
                    raise OSError(err, f"setns {netns}: {os.strerror(err)}")
            finally:
                os.close(fd)
            result.append(socket.socket(family, kind, proto))
        except BaseException as exc:  # handed to the caller's thread
            result.append(exc)

    thread = threading.Thread(target=make)
    thread.start()
    thread.join()
    got = result[0]
    if isinstance(got, BaseException):
        raise got
    return got


def mac_bytes(mac: str) -> bytes:
    return bytes.fromhex(mac.replace(":", ""))


def frame_socket(netns: str) -> socket.socket:
    """A raw socket on ``mesh0`` of ``netns`` for test frames, with a big receive buffer."""
    sock = socket_in(netns, socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_TEST))
    sock.bind(("mesh0", ETH_P_TEST))
    sock.setsockopt(socket.SOL_SOCKET, 33, 16 << 20)  # SO_RCVBUFFORCE (root)
    sock.settimeout(0.05)
    return sock


def make_frame(dst: bytes, src: bytes, tag: int, seq: int, size: int = 60) -> bytes:
    """A test frame of ``size`` bytes (60: the Ethernet minimum without FCS)."""
    payload = MAGIC + struct.pack("!BI", tag, seq)
    return dst + src + struct.pack("!H", ETH_P_TEST) + payload.ljust(size - 14, b"\0")


class Receiver:
    """Collects (source MAC, tag, seq) of test frames arriving at one node, in a thread."""

    def __init__(self, netns: str) -> None:
        self.sock = frame_socket(netns)
        self.got: list[tuple[bytes, int, int]] = []
        self.last_rx = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                data = self.sock.recv(2048)
            except TimeoutError:
                continue
            if data[14:14 + len(MAGIC)] != MAGIC:
                continue
            tag, seq = struct.unpack("!BI", data[14 + len(MAGIC):14 + len(MAGIC) + 5])
            self.got.append((data[6:12], tag, seq))
            self.last_rx = time.monotonic()

    def seqs(self, src: bytes, tag: int) -> set[int]:
        return {s for m, t, s in list(self.got) if m == src and t == tag}

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self.sock.close()


def settle(receivers: Iterable[Receiver], quiet_s: float = 0.3, limit_s: float = 10.0) -> None:
    """Wait until no receiver has seen a frame for ``quiet_s`` (frames still in flight)."""
    deadline = time.monotonic() + limit_s
    receivers = list(receivers)
    while time.monotonic() < deadline:
        newest = max((r.last_rx for r in receivers), default=0.0)
        if time.monotonic() - newest >= quiet_s:
            return
        time.sleep(quiet_s / 3)


def send_frames(sock: socket.socket, dst: bytes, src: bytes, tag: int, seqs: Iterable[int],
                burst: int = 50, pause_s: float = 0.002) -> int:
    """Send one frame per seq, paced (a burst, then a pause) so no queue on the way
    overflows: every loss the tests count must be the medium's."""
    sent = 0
    for seq in seqs:
        sock.send(make_frame(dst, src, tag, seq))
        sent += 1
        if sent % burst == 0:
            time.sleep(pause_s)
    return sent


class Blaster:
    """Sends paced test frames from one node until stopped (traffic during updates)."""

    def __init__(self, sock: socket.socket, dst: bytes, src: bytes, tag: int) -> None:
        self.sent = 0
        self._args = (sock, dst, src, tag)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        sock, dst, src, tag = self._args
        while not self._stop.is_set():
            self.sent += send_frames(sock, dst, src, tag, range(self.sent, self.sent + 50))

    def __enter__(self) -> Blaster:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def binomial_bounds(n: int, p: float, alpha: float) -> tuple[int, int]:
    """(lo, hi) with P(X < lo) + P(X > hi) <= alpha for X ~ Binomial(n, p) (exact tails)."""
    log_pmf = [math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
               + k * math.log(p) + (n - k) * math.log1p(-p) for k in range(n + 1)]
    pmf = [math.exp(v) for v in log_pmf]

    def cut(order: Iterable[int]) -> int:
        mass = 0.0
        for k in order:
            mass += pmf[k]
            if mass > alpha / 2:
                return k
        raise AssertionError("unreachable: the pmf sums to 1")

    return cut(range(n + 1)), cut(range(n, -1, -1))


def wait_for(check: Callable[[], bool], limit_s: float = 10.0) -> bool:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()
