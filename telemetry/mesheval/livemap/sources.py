"""Where the map's records come from: a finished run (replay) or the live MQTT stream."""

from __future__ import annotations

import json
import logging
import threading
from pathlib import Path
from typing import Any

from mesheval.livemap.window import EventWindow

log = logging.getLogger("mesheval.map")


class SourceError(ValueError):
    """A source that cannot be read (one line for the user)."""


def run_info(rundir: Path) -> dict[str, Any]:
    """What the page shows about the run: id, protocol, range and the map's origin.

    The manifest is optional (a collector's spool has none).
    """
    info: dict[str, Any] = {"source": str(rundir)}
    path = rundir / "manifest.json"
    if not path.is_file():
        return info
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SourceError(f"{path}: not a readable manifest ({exc})") from None
    if not isinstance(doc, dict):
        raise SourceError(f"{path}: not a manifest (expected a JSON object)")
    for key in ("run", "protocol", "range_m", "tier", "nodes"):
        if key in doc:
            info[key] = doc[key]
    area = (doc.get("scenario") or {}).get("area") or {}
    if isinstance(area, dict):
        for key in ("origin_lat", "origin_lon", "width_m", "height_m"):
            if isinstance(area.get(key), int | float):
                info[key] = float(area[key])
    return info


def replay_files(rundir: Path) -> list[Path]:
    """The closed JSON Lines files of a RUNDIR or collector spool (never ``*.tmp``)."""
    if not rundir.is_dir():
        raise SourceError(f"{rundir}: no such run directory")
    files = sorted(p for p in rundir.glob("*.jsonl") if not p.name.startswith("."))
    if not files:
        raise SourceError(f"{rundir}: no telemetry files (*.jsonl) in it")
    return files


def load_replay(rundir: Path, window: EventWindow) -> int:
    """Fill ``window`` with the run's map records in time order; returns how many were read.

    Reading is bounded by the window: records are parsed one line at a time and the
    window keeps the newest it has room for (the rest counted as evicted).
    """
    records: list[tuple[int, int, str]] = []
    lines = 0
    for index, path in enumerate(replay_files(rundir)):
        try:
            with path.open(encoding="utf-8", errors="replace") as fh:
                for number, line in enumerate(fh):
                    if line.strip():
                        lines += 1
                        records.append((_ts(line), index * 10**9 + number, line))
                        if len(records) > 4 * window.max_entries:
                            records.sort()  # keep the newest: they survive the window
                            del records[: len(records) - window.max_entries]
        except OSError as exc:
            raise SourceError(f"{path}: {exc.strerror or exc}") from None
    records.sort()
    for _, _, line in records:
        window.add_line(line)
    return lines


def _ts(line: str) -> int:
    """``ts_ns`` of a line for ordering (a bad line sorts first and is counted later)."""
    try:
        value = json.loads(line).get("ts_ns")
    except (ValueError, AttributeError):
        return -1
    return value if isinstance(value, int) else -1


class MqttSource:
    """Subscribes to the daemons' telemetry topic and feeds every record to the window.

    QoS 0 and a clean session: the map shows what is happening now; the collector
    (``mesheval collect``) is the one that must not lose records.
    """

    def __init__(self, host: str, port: int, topic: str, window: EventWindow, *,
                 username: str | None = None, password: str | None = None,
                 tls: tuple[Path | None, Path | None, Path | None] = (None, None, None)) -> None:
        import ssl

        import paho.mqtt.client as mqtt
        from paho.mqtt.enums import CallbackAPIVersion

        self.host, self.port, self.topic, self.window = host, port, topic, window
        self.connected = threading.Event()
        self.messages = 0
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2)
        if username is not None:
            self.client.username_pw_set(username, password)
        ca, cert, key = tls
        if ca is not None:
            self.client.tls_set(ca_certs=str(ca), certfile=str(cert) if cert else None,
                                keyfile=str(key) if key else None, cert_reqs=ssl.CERT_REQUIRED)
        self.client.on_connect = self._on_connect
        self.client.on_disconnect = self._on_disconnect
        self.client.on_message = self._on_message
        self.client.reconnect_delay_set(1, 30)

    def _on_connect(self, client: Any, userdata: Any, flags: Any, reason: Any,
                    properties: Any) -> None:
        if reason.is_failure:
            log.warning("broker refused the connection: %s", reason)
            return
        client.subscribe(self.topic, qos=0)
        self.connected.set()
        log.info("connected to %s:%d, following %s", self.host, self.port, self.topic)

    def _on_disconnect(self, client: Any, userdata: Any, flags: Any, reason: Any,
                       properties: Any) -> None:
        self.connected.clear()
        log.warning("disconnected from the broker (%s); reconnecting", reason)

    def _on_message(self, client: Any, userdata: Any, message: Any) -> None:
        self.messages += 1
        text = message.payload.decode("utf-8", errors="replace")
        for line in text.splitlines():
            if line.strip():
                self.window.add_line(line)

    def start(self) -> None:
        self.client.connect_async(self.host, self.port, keepalive=30)
        self.client.loop_start()

    def stop(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()
