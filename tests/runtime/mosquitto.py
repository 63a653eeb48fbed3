"""A private mosquitto on a free loopback port, for tests that need a real broker.

Started and stopped by the test (SIGTERM, so a persistent broker saves its
database); it never touches the host's broker or port 1883.
"""

from __future__ import annotations

import getpass
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"


def have_mosquitto() -> bool:
    return Path(MOSQUITTO).exists()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Mosquitto:
    """One broker; ``stop()`` then ``start()`` again keeps its port (and, if persistent,
    its retained messages and sessions)."""

    def __init__(self, workdir: Path, *, persistent: bool = True, max_queued: int = 1000,
                 autosave_s: int = 0, sys_interval: int = 10, extra: str = "") -> None:
        self.port = free_port()
        self.conf = workdir / "mosquitto.conf"
        db = workdir / "mosquitto-db"
        db.mkdir(exist_ok=True)
        self.conf.write_text(
            f"listener {self.port} 127.0.0.1\nallow_anonymous true\n"
            f"persistence {str(persistent).lower()}\npersistence_location {db}/\n"
            f"autosave_interval {autosave_s}\nmax_queued_messages {max_queued}\n"
            f"sys_interval {sys_interval}\n{extra}"
            # as root mosquitto drops to its own user, which cannot write our temp dir
            f"user {getpass.getuser()}\n", encoding="utf-8")
        self.log_path = workdir / "mosquitto.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout_s: float = 10.0) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen([MOSQUITTO, "-c", str(self.conf)], stdout=log,
                                         stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.025)
        self.stop()
        raise RuntimeError(f"mosquitto did not start (log: {self.log_path})")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # saves the persistence database
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None
