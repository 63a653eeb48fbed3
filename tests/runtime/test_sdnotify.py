"""The systemd notify protocol over real unix datagram sockets, and the signal helpers."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from meshsub.runtime.sdnotify import SignalHandlers, SystemdNotifier


@pytest.fixture
def listener(tmp_path: Path) -> Iterator[tuple[socket.socket, str]]:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    path = str(tmp_path / "notify")
    sock.bind(path)
    sock.settimeout(5)
    yield sock, path
    sock.close()


def test_messages_reach_a_path_socket(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    n = SystemdNotifier({"NOTIFY_SOCKET": path})
    assert n.enabled
    assert n.ready("serving")
    assert sock.recv(4096) == b"READY=1\nSTATUS=serving"
    n.status("2 neighbours\nsecond line dropped")
    assert sock.recv(4096) == b"STATUS=2 neighbours"
    n.watchdog()
    assert sock.recv(4096) == b"WATCHDOG=1"
    n.stopping()
    assert sock.recv(4096) == b"STOPPING=1"
    assert n.sent == 4
    n.close()


def test_abstract_namespace() -> None:
    name = f"msub-notify-{uuid.uuid4().hex[:8]}"
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(b"\0" + name.encode())
    sock.settimeout(5)
    try:
        n = SystemdNotifier({"NOTIFY_SOCKET": "@" + name})
        assert n.ready()
        assert sock.recv(4096) == b"READY=1"
    finally:
        sock.close()


def test_no_socket_is_a_no_op() -> None:
    n = SystemdNotifier({})
    assert not n.enabled
    assert n.ready() is False and n.watchdog() is False
    assert n.watchdog_interval is None
    assert SystemdNotifier({"NOTIFY_SOCKET": "vsock:2:1"}).enabled is False


def test_unreachable_socket_is_counted_not_raised(tmp_path: Path) -> None:
    n = SystemdNotifier({"NOTIFY_SOCKET": str(tmp_path / "missing")})
    assert n.ready() is False
    assert n.errors == 1


def test_watchdog_interval_rules() -> None:
    assert SystemdNotifier({"WATCHDOG_USEC": "30000000"}).watchdog_interval == 15.0
    assert SystemdNotifier({"WATCHDOG_USEC": "0"}).watchdog_interval is None
    assert SystemdNotifier({"WATCHDOG_USEC": "soon"}).watchdog_interval is None
    other = {"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": str(os.getpid() + 1)}
    assert SystemdNotifier(other).watchdog_interval is None
    mine = {"WATCHDOG_USEC": "1000000", "WATCHDOG_PID": str(os.getpid())}
    assert SystemdNotifier(mine).watchdog_interval == 0.5


async def test_watchdog_loop_pings_while_healthy(listener: tuple[socket.socket, str]) -> None:
    sock, path = listener
    sock.setblocking(False)
    healthy = [True]
    n = SystemdNotifier({"NOTIFY_SOCKET": path, "WATCHDOG_USEC": "20000"})
    task = asyncio.create_task(n.watchdog_loop(lambda: healthy[0]))
    loop = asyncio.get_running_loop()
    assert await asyncio.wait_for(loop.sock_recv(sock, 64), 5) == b"WATCHDOG=1"
    assert await asyncio.wait_for(loop.sock_recv(sock, 64), 5) == b"WATCHDOG=1"
    healthy[0] = False
    await asyncio.sleep(0.05)
    sent = n.sent
    await asyncio.sleep(0.1)
    assert n.sent == sent  # an unhealthy node withholds the ping
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_watchdog_loop_returns_without_watchdog() -> None:
    await asyncio.wait_for(SystemdNotifier({}).watchdog_loop(), 5)


async def test_signals_stop_and_reload() -> None:
    stopped: list[signal.Signals] = []
    reloads: list[int] = []
    got_stop = asyncio.Event()

    def on_stop(sig: signal.Signals) -> None:
        stopped.append(sig)
        got_stop.set()

    def on_reload() -> None:
        reloads.append(1)
        if len(reloads) == 1:
            raise ValueError("bad new config")  # logged; the daemon keeps running

    with SignalHandlers(on_stop, on_reload) as handlers:
        os.kill(os.getpid(), signal.SIGHUP)
        os.kill(os.getpid(), signal.SIGHUP)
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(got_stop.wait(), 5)
        os.kill(os.getpid(), signal.SIGINT)
        for _ in range(200):
            if len(stopped) == 2:
                break
            await asyncio.sleep(0.01)
    assert reloads == [1, 1]
    assert stopped == [signal.SIGTERM, signal.SIGINT]
    assert handlers.received == [signal.SIGHUP, signal.SIGHUP, signal.SIGTERM, signal.SIGINT]
