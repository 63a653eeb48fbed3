"""Wake-ups from the kernel when an interface or an address changes (rtnetlink).

The link needs to know within milliseconds that its interface went down,
lost its carrier or its address: a frame sent meanwhile is silently lost by
the kernel (no carrier) or refused (no route), and the daemon must hold local
publications instead. A NETLINK_ROUTE socket subscribed to the link and
address multicast groups tells us *that* something changed; what changed is
then read with the same ioctls the link uses to poll, so no netlink message is
parsed here (pyroute2 would parse them, at about 10 MB of resident memory
for a job this small).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Callable

from meshsub.runtime.logging import get_logger

log = get_logger("meshsub.link")

RTMGRP_LINK = 0x1
RTMGRP_IPV4_IFADDR = 0x10
RTMGRP_IPV6_IFADDR = 0x100
GROUPS = RTMGRP_LINK | RTMGRP_IPV4_IFADDR | RTMGRP_IPV6_IFADDR
READ_BYTES = 65536


class InterfaceEvents:
    """Calls ``on_change()`` (in the loop) whenever the kernel reports a link or
    address change in this network namespace; a burst of messages is one call."""

    def __init__(self, on_change: Callable[[], None]) -> None:
        self._on_change = on_change
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.messages = 0
        self.overruns = 0

    @property
    def active(self) -> bool:
        return self._sock is not None

    def start(self) -> bool:
        """Subscribe; False (and the caller keeps polling) where netlink is unavailable."""
        if self._sock is not None:
            return True
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        except OSError as exc:
            log.warning("interface events unavailable: polling only", exc=exc)
            return False
        try:
            sock.bind((0, GROUPS))
            sock.setblocking(False)
            self._loop = asyncio.get_running_loop()
            self._loop.add_reader(sock.fileno(), self._readable)
        except OSError as exc:
            sock.close()
            log.warning("interface events unavailable: polling only", exc=exc)
            return False
        self._sock = sock
        return True

    def stop(self) -> None:
        if self._sock is None:
            return
        if self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_reader(self._sock.fileno())
        self._sock.close()
        self._sock = None

    def _readable(self) -> None:
        assert self._sock is not None
        got = False
        while True:
            try:
                data = self._sock.recv(READ_BYTES)
            except BlockingIOError:
                break
            except OSError:  # ENOBUFS: messages were lost; a re-read covers them
                self.overruns += 1
                got = True
                break
            if not data:
                break
            self.messages += 1
            got = True
        if got:
            self._on_change()
