"""A fleet's collector broker for tests: mosquitto with TLS, a user per device and a map user.

What docs/operations.md ("A fleet on one map") asks an operator to run: one broker the
devices' brokers bridge their telemetry to (role mosquitto, ``mosquitto_collector_*``),
listening with TLS on an address the devices reach, refusing anonymous clients; each
device writes the telemetry topic as its own user, the map reads it as ``map``. The CA
and the server certificate (for the listener's IP address) are made here with openssl.
"""

from __future__ import annotations

import getpass
import secrets
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

MOSQUITTO = shutil.which("mosquitto") or "/usr/sbin/mosquitto"
TOPIC = "meshsub/telemetry"


def have_collector_tools() -> bool:
    return all(shutil.which(tool) for tool in ("mosquitto", "mosquitto_passwd", "openssl"))


def _run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, timeout=60)


def make_pki(d: Path, ip: str) -> None:
    """``ca.crt`` and a server certificate for ``ip`` signed by it, in ``d``."""
    _run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=msub-collector-ca", "-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt"))
    _run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={ip}",
         "-keyout", str(d / "server.key"), "-out", str(d / "server.csr"))
    (d / "san.ext").write_text(f"subjectAltName=IP:{ip}\n")
    _run("openssl", "x509", "-req", "-in", str(d / "server.csr"), "-CA", str(d / "ca.crt"),
         "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "2",
         "-extfile", str(d / "san.ext"), "-out", str(d / "server.crt"))


def free_port(ip: str) -> int:
    with socket.socket() as s:
        s.bind((ip, 0))
        return int(s.getsockname()[1])


class Collector:
    """``with Collector(dir, ip, devices) as c:`` a TLS broker on ``ip``; see the module doc."""

    def __init__(self, workdir: Path, ip: str, devices: Iterable[str]) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.dir, self.ip, self.port = workdir, ip, free_port(ip)
        self.devices = list(devices)
        self.password = secrets.token_urlsafe(18)  # the devices' (one for all, a test)
        self.map_password_file = workdir / "map.password"
        self.map_password_file.write_text(secrets.token_urlsafe(18) + "\n")
        self.map_password_file.chmod(0o600)
        self.log_path = workdir / "mosquitto.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{self.ip}:{self.port}"

    @property
    def ca(self) -> Path:
        return self.dir / "ca.crt"

    def inventory_vars(self) -> dict[str, Any]:
        """The devices' configuration: ship telemetry live, bridge it to this broker."""
        return {"meshsub_telemetry_mqtt_topic": TOPIC,
                "mosquitto_collector_address": self.address,
                "mosquitto_collector_ca": str(self.ca),
                "mosquitto_collector_password": self.password}

    def start(self, timeout_s: float = 10.0) -> None:
        d = self.dir
        make_pki(d, self.ip)
        passwd = d / "passwd"
        passwd.write_text("".join(f"{name}:{self.password}\n" for name in self.devices)
                          + f"map:{self.map_password_file.read_text().strip()}\n")
        passwd.chmod(0o600)
        _run("mosquitto_passwd", "-U", str(passwd))
        # devices write the telemetry topic (each as itself), the map only reads it
        (d / "acl").write_text(f"user map\ntopic read {TOPIC}/#\n" + "".join(
            f"\nuser {name}\ntopic write {TOPIC}/#\n" for name in self.devices))
        conf = d / "mosquitto.conf"
        conf.write_text(
            f"per_listener_settings false\nallow_anonymous false\npassword_file {passwd}\n"
            f"acl_file {d / 'acl'}\nlistener {self.port} {self.ip}\ncafile {self.ca}\n"
            f"certfile {d / 'server.crt'}\nkeyfile {d / 'server.key'}\ntls_version tlsv1.2\n"
            f"persistence false\nlog_type error\nlog_type warning\nlog_type notice\n"
            # as root mosquitto drops to its own user, which cannot read our temp dir
            f"user {getpass.getuser()}\n", encoding="utf-8")
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen([MOSQUITTO, "-c", str(conf)], stdout=log,
                                         stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                socket.create_connection((self.ip, self.port), timeout=0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"the collector broker did not start: {self.log()}")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-2000:] if self.log_path.exists() \
            else ""

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self.proc = None

    def __enter__(self) -> Collector:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
