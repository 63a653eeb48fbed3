"""The operator's control socket: newline-delimited JSON over a unix socket.

``<runtime_dir>/meshsubd.sock`` (mode 0660, so members of the daemon's group use
``meshsubctl`` without root; the systemd unit puts it in ``/run/meshsub``, away
from the state directory and the key, which that group cannot read). Every
``pub`` is logged with the caller's uid and pid (``SO_PEERCRED``) and counted
per uid. One JSON object per line each way:

- request ``{"cmd": "status"}`` -> ``{"ok": true, "result": {...}}``;
  ``neighbors`` and ``subscriptions`` likewise;
- ``{"cmd": "pub", "event": "<text syntax>"}`` -> ``{"ok": true, "result": {"event_id": ...}}``;
- ``{"cmd": "sub", "expr": "<text syntax>"}`` -> ``{"ok": true, "result": {"sub_id": ...}}``,
  then one ``{"deliver": {...}}`` line per delivery until the client hangs up,
  which unsubscribes (the subscription is not persisted);
- any failure -> ``{"ok": false, "error": "<one line>"}`` and the connection
  stays usable (except after ``sub``, which owns the connection).

The server knows nothing of the node: the node plugs its state in through
``ControlHandlers`` (plain callables), and calls ``deliver`` for the ``Deliver``
actions of ``ctl-`` subscriptions.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import json
import os
import secrets
import socket
import struct
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from meshsub.core.content import Event, Subscription
from meshsub.core.disjunction import members
from meshsub.core.syntax import format_alternatives, parse_alternatives, parse_event
from meshsub.core.values import ContentError
from meshsub.runtime import boundedjson
from meshsub.runtime.logging import get_logger
from meshsub.runtime.streamserver import shut_down

log = get_logger("meshsub.control")

SOCKET_NAME = "meshsubd.sock"
MAX_LINE = 64 * 1024
STREAM_QUEUE = 1000
MAX_STREAMS = 64
"""``meshsubctl sub`` clients at once (each holds a subscription and a queue)."""
MAX_DEPTH = 4
"""Requests are flat objects: deeper JSON is refused before parsing."""
COMMANDS = ("status", "neighbors", "subscriptions", "pub", "sub")


@dataclass(frozen=True, slots=True)
class Peer:
    """Who is on the other end of a connection (``SO_PEERCRED``; -1 if unknown)."""

    pid: int = -1
    uid: int = -1
    gid: int = -1


def peer_of(writer: asyncio.StreamWriter) -> Peer:
    sock = writer.get_extra_info("socket")
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    except (OSError, AttributeError):
        return Peer()
    pid, uid, gid = struct.unpack("3i", raw)
    return Peer(pid, uid, gid)


class ControlError(Exception):
    """A request the server refuses; the text goes back to the client as ``error``."""


class _BadJson(Exception):
    """A request line that is not (boundedly nested) JSON."""


@dataclass(slots=True)
class ControlHandlers:
    """What the node provides (typically ``LocalPublisher.publish`` for ``publish``)."""

    status: Callable[[], Mapping[str, Any]]
    neighbors: Callable[[], list[Mapping[str, Any]]]
    subscriptions: Callable[[], list[Mapping[str, Any]]]
    publish: Callable[[Event], object | Awaitable[object]]
    """Returns the assigned event id (``MessageId`` or its text), or an awaitable of it."""
    subscribe: Callable[[str, Subscription], object]
    unsubscribe: Callable[[str], object]


class _Stream:
    """One ``sub`` client: a bounded queue of delivery lines, drops counted."""

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue(STREAM_QUEUE)
        self.dropped = 0


class ControlServer:
    """Serves the control protocol on a unix socket; ``start``/``stop`` or ``async with``."""

    def __init__(self, path: Path, handlers: ControlHandlers, *, mode: int = 0o660) -> None:
        self.path = Path(path)
        self.handlers = handlers
        self.mode = mode
        self.counters: Counter[str] = Counter()
        self._streams: dict[str, _Stream] = {}
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()
        self._ids = itertools.count(1)
        self._tag = secrets.token_hex(2)

    # ------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        if self.path.exists() or self.path.is_symlink():
            await self._refuse_if_live()
            self.path.unlink()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        old = os.umask(0o117)  # the socket is born 0660, never briefly wider
        try:
            self._server = await asyncio.start_unix_server(
                self._client_connected, path=str(self.path), limit=MAX_LINE
            )
        finally:
            os.umask(old)
        os.chmod(self.path, self.mode)
        log.info("control socket listening", path=str(self.path))

    async def _refuse_if_live(self) -> None:
        """A socket file another running daemon answers on must not be stolen."""
        try:
            _reader, writer = await asyncio.open_unix_connection(str(self.path))
        except OSError:
            return  # stale file from a dead daemon
        writer.close()
        raise ControlError(f"another meshsubd is listening on {self.path}")

    async def stop(self) -> None:
        if self._server is not None:
            await shut_down(self._server, self._writers, self._clients, abort=False)
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()

    async def __aenter__(self) -> ControlServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    # ------------------------------------------------------------ deliveries

    def owns(self, sub_id: str) -> bool:
        return sub_id in self._streams

    def deliver(self, sub_id: str, payload: Mapping[str, Any]) -> bool:
        """Queue a delivery for a streaming client; False if ``sub_id`` is not ours."""
        stream = self._streams.get(sub_id)
        if stream is None:
            return False
        try:
            stream.queue.put_nowait(dict(payload))
        except asyncio.QueueFull:
            stream.dropped += 1
            self.counters["dropped:stream_full"] += 1
        return True

    def stream_subscriptions(self) -> dict[str, str]:
        """sub_id -> expression of the live ``meshsubctl sub`` clients."""
        return {sub_id: s.expression for sub_id, s in self._streams.items()}

    # ------------------------------------------------------------ protocol

    async def _client_connected(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._clients.add(task)
        self._writers.add(writer)
        try:
            await self._serve(reader, writer, peer_of(writer))
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            if task is not None:
                self._clients.discard(task)
            self._writers.discard(writer)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                     peer: Peer) -> None:
        while True:
            try:
                line = await reader.readline()
            except (asyncio.LimitOverrunError, ValueError):
                self.counters["rejected:too_long"] += 1
                await _send(writer, {"ok": False, "error": f"request longer than {MAX_LINE} bytes"})
                return
            if not line:
                return
            if not line.strip():
                continue
            self.counters["requests"] += 1
            try:
                try:
                    request = boundedjson.loads(line, max_depth=MAX_DEPTH)
                except (ValueError, UnicodeDecodeError) as exc:
                    raise _BadJson(str(exc).splitlines()[0][:200]) from None
                if not isinstance(request, dict):
                    raise ControlError("request must be a JSON object")
                cmd = request.get("cmd")
                if cmd == "sub":
                    await self._stream(request, reader, writer)
                    return
                result = await self._dispatch(cmd, request, peer)
            except _BadJson as exc:
                self.counters["rejected:bad_json"] += 1
                await _send(writer, {"ok": False, "error": f"request is not JSON: {exc}"})
                continue
            except (ControlError, ContentError) as exc:
                self.counters["rejected:bad_request"] += 1
                await _send(writer, {"ok": False, "error": str(exc)})
                continue
            except Exception as exc:  # a provider failed: answer, log, keep serving
                self.counters["errors"] += 1
                log.error("control request failed", exc=exc)
                await _send(writer, {"ok": False, "error": f"internal error: {exc}"})
                continue
            await _send(writer, {"ok": True, "result": result})

    async def _dispatch(self, cmd: Any, request: Mapping[str, Any], peer: Peer) -> Any:
        h = self.handlers
        if cmd == "status":
            return dict(h.status())
        if cmd == "neighbors":
            return list(h.neighbors())
        if cmd == "subscriptions":
            return list(h.subscriptions())
        if cmd == "pub":
            text = request.get("event")
            if not isinstance(text, str):
                raise ControlError("pub needs 'event': the event in text syntax")
            event = parse_event(text)
            result = h.publish(event)
            event_id = await result if inspect.isawaitable(result) else result
            self.counters[f"published_by_uid:{peer.uid}"] += 1
            log.info("control publish", uid=peer.uid, pid=peer.pid, event_id=str(event_id),
                     topic=event.topic)
            return {"event_id": str(event_id)}
        raise ControlError(f"unknown command {cmd!r} (known: {', '.join(COMMANDS)})")

    async def _stream(
        self, request: Mapping[str, Any], reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
    ) -> None:
        text = request.get("expr")
        if not isinstance(text, str):
            raise ControlError("sub needs 'expr': a subscription in text syntax")
        alternatives = parse_alternatives(text)  # a disjunction: one core subscription each
        if len(self._streams) >= MAX_STREAMS:
            self.counters["rejected:too_many"] += 1
            raise ControlError(f"at most {MAX_STREAMS} 'sub' streams at once")
        sub_id = f"ctl-{self._tag}-{next(self._ids)}"
        stream = _Stream(format_alternatives(alternatives))
        self._streams[sub_id] = stream
        parts = members(sub_id, alternatives)
        try:
            for member, sub in parts:
                self.handlers.subscribe(member, sub)
            self.counters["streams"] += 1
            await _send(writer, {"ok": True, "result": {"sub_id": sub_id}})
            # anything the client sends now is ignored (bounded reads); EOF ends the stream
            hangup = asyncio.ensure_future(reader.read(MAX_LINE))
            try:
                while True:
                    get = asyncio.ensure_future(stream.queue.get())
                    done, _ = await asyncio.wait({get, hangup}, return_when=asyncio.FIRST_COMPLETED)
                    if hangup in done:
                        if not hangup.result():
                            get.cancel()
                            return
                        hangup = asyncio.ensure_future(reader.read(MAX_LINE))
                    if get not in done:
                        get.cancel()
                        continue
                    line: dict[str, Any] = {"deliver": get.result()}
                    if stream.dropped:
                        line["dropped"], stream.dropped = stream.dropped, 0
                    await _send(writer, line)
            finally:
                hangup.cancel()
        finally:
            del self._streams[sub_id]
            for member, _ in parts:
                try:
                    self.handlers.unsubscribe(member)
                except Exception as exc:
                    log.error("unsubscribe of a control stream failed", sub_id=member, exc=exc)


async def _send(writer: asyncio.StreamWriter, obj: Mapping[str, Any]) -> None:
    writer.write(json.dumps(obj, default=str, ensure_ascii=False).encode() + b"\n")
    await writer.drain()
