"""``mesheval collect``: live telemetry from MQTT into a spool directory.

Daemons publish their records on a telemetry topic: each MQTT message is UTF-8
JSON Lines (one record, or a batch of records one per line), every record
carrying ``node``, ``epoch`` and ``rec`` (docs/evaluation.md). The collector

- keeps a persistent session (MQTT v5, clean start off, session expiry) with
  QoS 1, so messages published while it is away wait for it at the broker;
- acknowledges a message only after its records are in a spool file that was
  written to a hidden temp file, fsynced and renamed into place: a crash loses
  nothing (unacknowledged messages are redelivered) and never leaves half files;
- drops records it has already written (same run/node/epoch/rec) and counts
  gaps, so redeliveries after a broker or collector restart duplicate nothing
  (records without ``epoch``/``rec`` cannot be recognised and are kept);
- reconnects with exponential back-off when the broker goes away;
- logs in with ``--username``/``--password-file`` and, with ``--tls-ca``, speaks
  TLS and verifies the broker: the device brokers refuse anonymous clients, and a
  password is never sent to a broker beyond the loopback without TLS.

State (next file number, the sequences seen, counters) is kept in the spool as
the hidden ``.collector-<client>.json``, rewritten atomically after each file.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import os
import re
import signal
import socket
import ssl
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTProtocolVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties

from mesheval.sequencer import Sequencer
from meshsub.core.telemetry import TelemetryError, dump_line, parse_line

log = logging.getLogger("mesheval.collect")


@dataclass
class Counters:
    messages: int = 0
    records: int = 0
    duplicates: int = 0
    malformed: int = 0
    unsequenced: int = 0
    files: int = 0
    reconnects: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class Pending:
    """Lines accepted since the last file, and the messages to acknowledge with it."""

    lines: list[str] = field(default_factory=list)
    mids: list[int] = field(default_factory=list)
    since: float = field(default_factory=time.monotonic)


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def atomic_write(path: Path, text: str) -> None:
    """Hidden temp file in the same directory, fsync, rename, fsync the directory."""
    tmp = path.with_name(f".{path.name}.tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


class Spool:
    """Numbered spool files ``<client>-<n>.jsonl`` plus the collector's state file."""

    def __init__(self, directory: Path, client_id: str) -> None:
        self.dir = directory
        self.prefix = re.sub(r"[^A-Za-z0-9_.-]", "_", client_id)
        self.state_path = directory / f".collector-{self.prefix}.json"
        self._name = re.compile(rf"{re.escape(self.prefix)}-(\d+)\.jsonl\Z")

    def files_from(self, first: int) -> list[tuple[int, Path]]:
        out = []
        for path in self.dir.iterdir():
            match = self._name.match(path.name)
            if match and int(match.group(1)) >= first:
                out.append((int(match.group(1)), path))
        return sorted(out)

    def path(self, number: int) -> Path:
        return self.dir / f"{self.prefix}-{number:08d}.jsonl"


def record_key(record: dict[str, Any]) -> tuple[tuple[str, int, int], int] | None:
    epoch, rec = record.get("epoch"), record.get("rec")
    if not isinstance(epoch, int) or not isinstance(rec, int):
        return None
    return (str(record["run"]), int(record["node"]), epoch), rec


class Collector:
    """The MQTT client and the spool writer; ``run`` blocks until ``stop``."""

    def __init__(self, host: str, port: int, topic: str, spool_dir: Path, *,
                 client_id: str, roll_lines: int = 5000, roll_seconds: float = 2.0,
                 max_unacked: int = 16, session_expiry_s: int = 7 * 86400,
                 reconnect_min_s: int = 1, reconnect_max_s: int = 30,
                 username: str | None = None, password: str | None = None,
                 tls_ca: Path | None = None, tls_cert: Path | None = None,
                 tls_key: Path | None = None) -> None:
        self.host, self.port, self.topic = host, port, topic
        self.spool = Spool(spool_dir, client_id)
        self.roll_lines, self.roll_seconds, self.max_unacked = roll_lines, roll_seconds, max_unacked
        self.counters = Counters()
        self.sequencer = Sequencer()
        self.next_file = 0
        self._load_state()
        self._pending = Pending()
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.connected = threading.Event()
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id,
                                  protocol=MQTTProtocolVersion.MQTTv5, manual_ack=True)
        self.client.reconnect_delay_set(reconnect_min_s, reconnect_max_s)
        if username is not None:
            self.client.username_pw_set(username, password)
        if tls_ca is not None:
            self.client.tls_set(ca_certs=str(tls_ca),
                                certfile=str(tls_cert) if tls_cert else None,
                                keyfile=str(tls_key) if tls_key else None,
                                cert_reqs=ssl.CERT_REQUIRED)
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_message = self._on_message
        self._connect_props = Properties(PacketTypes.CONNECT)  # type: ignore[no-untyped-call]
        self._connect_props.SessionExpiryInterval = session_expiry_s

    # ------------------------------------------------------------------ state

    def _load_state(self) -> None:
        """Resume numbering and de-duplication, including files written after the last save."""
        try:
            doc = json.loads(self.spool.state_path.read_text(encoding="utf-8"))
            self.next_file = int(doc["next_file"])
            self.sequencer = Sequencer.from_json(doc["sequences"])
            for name, value in doc.get("counters", {}).items():
                if hasattr(self.counters, name):
                    setattr(self.counters, name, int(value))
        except FileNotFoundError:
            pass
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("state file %s unreadable (%s): rebuilding from the spool",
                        self.spool.state_path, exc)
            self.next_file = 0
            self.sequencer = Sequencer()
        for number, path in self.spool.files_from(self.next_file):
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    key = record_key(parse_line(line))
                except TelemetryError:
                    continue
                if key is not None:
                    self.sequencer.admit(*key)
            self.next_file = number + 1

    def _save_state(self) -> None:
        doc = {"next_file": self.next_file, "sequences": self.sequencer.to_json(),
               "counters": self.counters.as_dict(), "missing": self.sequencer.missing()}
        atomic_write(self.spool.state_path, json.dumps(doc))

    # ---------------------------------------------------------------- MQTT side

    def _on_connect(self, client: mqtt.Client, userdata: Any, flags: Any, reason: Any,
                    properties: Any) -> None:
        if reason.is_failure:
            log.warning("broker refused the connection: %s", reason)
            return
        log.info("connected to %s:%d (session present: %s)", self.host, self.port,
                 flags.session_present)
        client.subscribe(self.topic, qos=1)
        self.connected.set()

    def _on_disconnect(self, client: mqtt.Client, userdata: Any, flags: Any, reason: Any,
                       properties: Any) -> None:
        self.connected.clear()
        with self._lock:
            # write what arrived (QoS 0 records would not come again); the broker
            # redelivers the unacknowledged QoS 1 messages after the reconnect and
            # their records are then dropped by their sequence numbers
            self._roll(ack=False)
        if not self._stop.is_set():
            self.counters.reconnects += 1
            log.warning("disconnected (%s); reconnecting with back-off", reason)

    def _on_message(self, client: mqtt.Client, userdata: Any, message: mqtt.MQTTMessage) -> None:
        with self._lock:
            self.counters.messages += 1
            try:
                text = message.payload.decode("utf-8")
            except UnicodeDecodeError:
                self.counters.malformed += 1
                text = ""
            for line in text.splitlines():
                if not line.strip():
                    continue
                try:
                    record = parse_line(line)
                except TelemetryError as exc:
                    self.counters.malformed += 1
                    log.debug("malformed record dropped: %s", exc)
                    continue
                key = record_key(record)
                if key is None:
                    self.counters.unsequenced += 1
                elif not self.sequencer.admit(*key):
                    self.counters.duplicates += 1
                    continue
                self._pending.lines.append(dump_line(record))
                self.counters.records += 1
            if message.qos > 0:
                self._pending.mids.append(message.mid)
            if (len(self._pending.lines) >= self.roll_lines
                    or len(self._pending.mids) >= self.max_unacked):
                self._roll()

    # ------------------------------------------------------------------ spool

    def _roll(self, ack: bool = True) -> None:
        """Write pending lines to a new spool file, then acknowledge their messages."""
        pending, self._pending = self._pending, Pending()
        if pending.lines:
            atomic_write(self.spool.path(self.next_file), "\n".join(pending.lines) + "\n")
            self.next_file += 1
            self.counters.files += 1
        if pending.lines or pending.mids:
            self._save_state()
        if ack:  # packet ids of a closed connection mean nothing to the next one
            for mid in pending.mids:
                self.client.ack(mid, 1)

    def run(self) -> None:
        self.spool.dir.mkdir(parents=True, exist_ok=True)
        self.client.connect_async(self.host, self.port, keepalive=30, clean_start=False,
                                  properties=self._connect_props)
        self.client.loop_start()
        try:
            while not self._stop.wait(min(0.2, self.roll_seconds)):
                with self._lock:
                    if time.monotonic() - self._pending.since >= self.roll_seconds:
                        self._roll()
        finally:
            with self._lock:
                self._roll()
            self.client.disconnect()
            self.client.loop_stop()
            gaps = self.sequencer.missing()
            log.info("stopped: %s, %d records missing", self.counters.as_dict(), gaps)

    def stop(self) -> None:
        self._stop.set()


def _broker(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    try:
        number = int(port)
    except ValueError:
        raise argparse.ArgumentTypeError(f"bad port in {text!r}") from None
    if not 0 < number < 65536:
        raise argparse.ArgumentTypeError(f"port out of range in {text!r}")
    return host.strip("[]"), number


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def collect_parser() -> argparse.ArgumentParser:
    from mesheval.cli import OneLineParser

    p = OneLineParser(prog="mesheval collect",
                      description="Write live MQTT telemetry into a spool directory.")
    p.add_argument("--broker", type=_broker, required=True, metavar="HOST:PORT")
    p.add_argument("--topic", required=True,
                   help="telemetry topic filter, e.g. meshsub/telemetry/#")
    p.add_argument("--spool", type=Path, required=True, metavar="DIR")
    p.add_argument("--client-id", default=f"mesheval-collect-{socket.gethostname()}",
                   help="MQTT client id; the persistent session is keyed by it")
    p.add_argument("--roll-lines", type=_positive_int, default=5000)
    p.add_argument("--roll-seconds", type=_positive_float, default=2.0)
    p.add_argument("--max-unacked", type=_positive_int, default=16,
                   help="roll a file when this many messages await acknowledgement "
                   "(keep below the broker's in-flight limit, mosquitto: 20)")
    p.add_argument("--session-expiry", type=_positive_int, default=7 * 86400, metavar="S")
    p.add_argument("--reconnect-max", type=_positive_int, default=30, metavar="S")
    p.add_argument("--username", help="log in as this broker user (role mosquitto: an entry "
                   "of mosquitto_apps with read access to the telemetry topic)")
    p.add_argument("--password-file", type=Path, metavar="FILE",
                   help="the user's password (first line)")
    p.add_argument("--tls-ca", type=Path, metavar="FILE",
                   help="speak TLS and verify the broker against this CA bundle")
    p.add_argument("--tls-cert", type=Path, metavar="FILE", help="client certificate (TLS)")
    p.add_argument("--tls-key", type=Path, metavar="FILE", help="client key (TLS)")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _credentials(args: argparse.Namespace) -> tuple[str | None, str | None]:
    """(username, password) from the options; ValueError (one line) when they do not fit."""
    password = None
    if args.password_file is not None:
        if args.username is None:
            raise ValueError("--password-file needs --username")
        try:
            password = args.password_file.read_text(encoding="utf-8").splitlines()[0].strip()
        except (OSError, UnicodeDecodeError, IndexError) as exc:
            raise ValueError(f"{args.password_file}: cannot read a password ({exc})") from None
        host, _ = args.broker
        if args.tls_ca is None and not _loopback(host):
            raise ValueError(f"a password for {host} needs --tls-ca: it would cross the "
                             "network in clear")
    if (args.tls_cert is None) != (args.tls_key is None) or \
            (args.tls_cert is not None and args.tls_ca is None):
        raise ValueError("--tls-cert and --tls-key go together, with --tls-ca")
    for name in ("tls_ca", "tls_cert", "tls_key"):
        path = getattr(args, name)
        if path is not None and not path.is_file():
            raise ValueError(f"--{name.replace('_', '-')}: no such file: {path}")
    return args.username, password


def collect_main(argv: Sequence[str]) -> int:
    args = collect_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        args.spool.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        print(f"mesheval collect: error: {args.spool}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    try:
        username, password = _credentials(args)
    except ValueError as exc:
        print(f"mesheval collect: error: {exc}", file=sys.stderr)
        return 2
    host, port = args.broker
    collector = Collector(host, port, args.topic, args.spool, client_id=args.client_id,
                          roll_lines=args.roll_lines, roll_seconds=args.roll_seconds,
                          max_unacked=args.max_unacked, session_expiry_s=args.session_expiry,
                          reconnect_min_s=1, reconnect_max_s=args.reconnect_max,
                          username=username, password=password, tls_ca=args.tls_ca,
                          tls_cert=args.tls_cert, tls_key=args.tls_key)

    def stop(signum: int, frame: FrameType | None) -> None:
        collector.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    collector.run()
    print(json.dumps({**collector.counters.as_dict(), "missing": collector.sequencer.missing()}))
    return 0
