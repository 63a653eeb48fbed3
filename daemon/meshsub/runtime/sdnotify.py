"""systemd service behaviour without depending on systemd: notify protocol and signals.

``Type=notify`` units learn readiness, status lines and watchdog pings from
datagrams sent to ``$NOTIFY_SOCKET`` (a filesystem path, or ``@name`` for the
abstract namespace). When the variable is unset every call is a cheap no-op,
so the daemon runs the same from a shell, a test or a container.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
from collections.abc import Callable, Mapping

from meshsub.runtime.logging import get_logger

log = get_logger("meshsub.sdnotify")


class SystemdNotifier:
    """Sends ``READY=1``, ``STATUS=...``, ``WATCHDOG=1`` and ``STOPPING=1``."""

    def __init__(self, env: Mapping[str, str] | None = None) -> None:
        env = os.environ if env is None else env
        self.address = self._address(env.get("NOTIFY_SOCKET", ""))
        self.watchdog_interval = self._watchdog_interval(env)
        self.sent = 0
        self.errors = 0
        self._sock: socket.socket | None = None

    @staticmethod
    def _address(raw: str) -> str | bytes | None:
        if not raw:
            return None
        if raw.startswith("@"):
            return b"\0" + raw[1:].encode()
        if raw.startswith("/"):
            return raw
        return None  # vsock and other forms are not used on our targets

    @staticmethod
    def _watchdog_interval(env: Mapping[str, str]) -> float | None:
        """Half of ``$WATCHDOG_USEC`` in seconds, if the watchdog is meant for us."""
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        if pid and pid != str(os.getpid()):
            return None
        try:
            value = int(usec)
        except ValueError:
            return None
        return value / 2e6 if value > 0 else None

    @property
    def enabled(self) -> bool:
        return self.address is not None

    def notify(self, message: str) -> bool:
        """Send one notify datagram; False (logged, counted) if it could not be sent."""
        if self.address is None:
            return False
        try:
            if self._sock is None:
                self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM | socket.SOCK_CLOEXEC)
            self._sock.sendto(message.encode(), self.address)
        except OSError as exc:
            self.errors += 1
            log.warning("systemd notify failed", exc=exc, message=message.split("=", 1)[0])
            return False
        self.sent += 1
        return True

    def ready(self, status: str | None = None) -> bool:
        return self.notify("READY=1" + (f"\nSTATUS={status}" if status else ""))

    def status(self, text: str) -> bool:
        return self.notify(f"STATUS={text.splitlines()[0] if text else ''}")

    def watchdog(self) -> bool:
        return self.notify("WATCHDOG=1")

    def stopping(self, status: str | None = None) -> bool:
        return self.notify("STOPPING=1" + (f"\nSTATUS={status}" if status else ""))

    def reloading(self) -> bool:
        return self.notify("RELOADING=1")

    async def watchdog_loop(self, healthy: Callable[[], bool] | None = None) -> None:
        """Ping at half the watchdog period while ``healthy()`` holds; run as a task.

        Returns at once when there is no watchdog. An unhealthy node stops
        pinging, so systemd restarts it (that is the point of a watchdog).
        """
        interval = self.watchdog_interval
        if interval is None or not self.enabled:
            return
        while True:
            if healthy is None or healthy():
                self.watchdog()
            else:
                log.warning("unhealthy: withholding the watchdog ping")
            await asyncio.sleep(interval)

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None


class SignalHandlers:
    """SIGTERM/SIGINT -> ``on_stop`` (graceful drain, exit 0); SIGHUP -> ``on_reload``.

    Installed on the running loop with ``loop.add_signal_handler`` so the
    callbacks run in the loop, not in a signal context. A second SIGTERM or
    SIGINT while stopping calls ``on_stop`` again, which the node may use to
    cut the drain short.
    """

    def __init__(
        self,
        on_stop: Callable[[signal.Signals], None],
        on_reload: Callable[[], None] | None = None,
    ) -> None:
        self.on_stop = on_stop
        self.on_reload = on_reload
        self.received: list[signal.Signals] = []
        self._installed: list[signal.Signals] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    def install(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        loop = loop or asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, self._stop, sig)
            self._installed.append(sig)
        if self.on_reload is not None:
            loop.add_signal_handler(signal.SIGHUP, self._reload)
            self._installed.append(signal.SIGHUP)
        self._loop = loop

    def _stop(self, sig: signal.Signals) -> None:
        self.received.append(sig)
        log.info("stopping on signal", signal=sig.name)
        self.on_stop(sig)

    def _reload(self) -> None:
        self.received.append(signal.SIGHUP)
        log.info("reloading on SIGHUP")
        if self.on_reload is not None:
            try:
                self.on_reload()
            except Exception as exc:  # a failed reload keeps the old state running
                log.error("reload failed", exc=exc)

    def remove(self) -> None:
        if self._loop is None:
            return
        for sig in self._installed:
            with contextlib.suppress(ValueError, RuntimeError):
                self._loop.remove_signal_handler(sig)
        self._installed.clear()

    def __enter__(self) -> SignalHandlers:
        self.install()
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

