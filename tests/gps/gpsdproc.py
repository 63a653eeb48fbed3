"""A real gpsd for tests, reading NMEA from a UDP source on loopback.

``gpsd -N -n -b -S TCP udp://127.0.0.1:UDP``: foreground, poll without
waiting for a client, read-only (never writes to the "device"), JSON clients on
a free TCP port. Each gpsd runs in its own session and is stopped by its
process group id by ``Gpsd.stop`` (the fixtures in ``conftest`` call it in
their finaliser, also when the test fails).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

SEARCH_PATH = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"
GPSD = shutil.which("gpsd", path=SEARCH_PATH)
GUARD_S = 30.0
"""Against hangs only; no test asserts how long anything took."""

needs_gpsd = pytest.mark.skipif(GPSD is None, reason="gpsd not installed")


def free_port(kind: socket.SocketKind = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class GpsdWatch:
    """A JSON client of gpsd (``?WATCH``); a thread collects every report into ``reports``.

    Reading continuously matters: gpsd drops a client whose output backs up.
    """

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=GUARD_S)
        self.sock.settimeout(None)
        self.sock.sendall(b'?WATCH={"enable":true,"json":true}\n')
        self.reports: list[dict[str, Any]] = []
        self._file = self.sock.makefile("rb")
        self._thread = threading.Thread(target=self._read, name="gpsd-watch", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            for line in self._file:
                self.reports.append(json.loads(line))

    def wait_for(self, predicate: Callable[[dict[str, Any]], bool]) -> dict[str, Any]:
        """The first report satisfying ``predicate``, waiting for it (hang guard only)."""
        deadline = time.monotonic() + GUARD_S
        seen = 0
        while time.monotonic() < deadline:
            reports = self.reports[seen:]
            for report in reports:
                if predicate(report):
                    return report
            seen += len(reports)
            time.sleep(0.01)
        raise AssertionError("expected gpsd report did not come")

    def tpvs(self) -> dict[str, dict[str, Any]]:
        """TPV reports by their time (those without a time are gpsd's start-up guesses)."""
        return {r["time"]: r for r in list(self.reports) if r.get("class") == "TPV"
                and "time" in r}

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self._thread.join(GUARD_S)


def iso(utc: float) -> str:
    """gpsd's form of a time stamp: ISO 8601, milliseconds, ``Z``."""
    stamp = dt.datetime.fromtimestamp(round(utc, 3), dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z"


@dataclass
class Gpsd:
    proc: subprocess.Popen[bytes]
    tcp_port: int
    udp_port: int
    watches: list[GpsdWatch] = field(default_factory=list)

    def send(self, data: bytes) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(data, ("127.0.0.1", self.udp_port))

    def watch(self) -> GpsdWatch:
        watch = GpsdWatch(self.tcp_port)
        self.watches.append(watch)
        # VERSION, DEVICES, WATCH: once WATCH is answered, reports flow to this client
        watch.wait_for(lambda r: r.get("class") == "WATCH")
        return watch

    def stop(self) -> None:
        for watch in self.watches:
            watch.close()
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def start_gpsd(started: list[Gpsd], stderr: Path) -> Gpsd:
    """Start a gpsd (appended to ``started`` before anything can fail) and wait for it."""
    assert GPSD is not None
    tcp, udp = free_port(), free_port(socket.SOCK_DGRAM)
    with stderr.open("wb") as err_file:  # a file, not a pipe nobody drains
        proc = subprocess.Popen(
            [GPSD, "-N", "-n", "-b", "-S", str(tcp), f"udp://127.0.0.1:{udp}"],
            stdout=subprocess.DEVNULL, stderr=err_file, start_new_session=True)
    gpsd = Gpsd(proc, tcp, udp)
    started.append(gpsd)
    deadline = time.monotonic() + GUARD_S
    while True:
        if proc.poll() is not None:
            err = stderr.read_text(errors="replace")
            raise AssertionError(f"gpsd exited with {proc.returncode}: {err.strip()[-500:]}")
        try:
            socket.create_connection(("127.0.0.1", tcp), timeout=1).close()
            return gpsd
        except OSError:
            if time.monotonic() > deadline:
                raise AssertionError("gpsd did not open its port") from None
            time.sleep(0.05)
