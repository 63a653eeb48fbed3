"""A fleet's collector broker for tests: mosquitto with TLS, a user per device and a map user.

What docs/operations.md ("A fleet on one map") asks an operator to run: one broker the
devices' brokers bridge their telemetry to (role mosquitto, ``mosquitto_collector_*``),
listening with TLS on an address the devices reach, refusing anonymous clients; each
device writes the telemetry topic as its own user, the map reads it as ``map``. The CA
and the server certificate (for the listener's IP address) are made here with openssl.
"""

from __future__ import annotations

import secrets
import shutil
import socket
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mosquitto import Mosquitto

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
        self.broker: Mosquitto | None = None

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

    def start(self) -> None:
        d = self.dir
        make_pki(d, self.ip)
        passwd = d / "passwd"
        passwd.write_text("".join(f"{name}:{self.password}\n" for name in self.devices)
                          + f"map:{self.map_password_file.read_text().strip()}\n")
        passwd.chmod(0o600)
        _run("mosquitto_passwd", "-U", str(passwd))
        # the map only reads the telemetry topic, each device only writes it
        (d / "acl").write_text(f"user map\ntopic read {TOPIC}/#\n" + "".join(
            f"\nuser {name}\ntopic write {TOPIC}/#\n" for name in self.devices))
        # tests/runtime/mosquitto.py's broker (its loopback listener now needs a login too)
        # with the TLS listener the devices' bridges reach
        self.broker = Mosquitto(d, persistent=False, extra=(
            f"allow_anonymous false\npassword_file {passwd}\n"
            f"acl_file {d / 'acl'}\nlistener {self.port} {self.ip}\ncafile {self.ca}\n"
            f"certfile {d / 'server.crt'}\nkeyfile {d / 'server.key'}\n"
            "tls_version tlsv1.2\n"))
        self.broker.start()

    def stop(self) -> None:
        if self.broker is not None:
            self.broker.stop()
            self.broker = None

    def __enter__(self) -> Collector:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
