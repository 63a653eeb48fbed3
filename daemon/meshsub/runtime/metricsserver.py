"""A minimal HTTP/1.1 endpoint serving ``GET /metrics`` inside the daemon's event loop.

Prometheus needs nothing more than one ``GET`` answered with the exposition
text, so the daemon carries no web framework for it. The endpoint is bounded
because it shares the loop with the mesh: at most ``MAX_CLIENTS``
connections at once (more are closed at once), a request's line and headers
at most ``MAX_REQUEST`` bytes (the stream's buffer never grows past that),
``REQUEST_TIMEOUT_S`` to send them and ``WRITE_TIMEOUT_S`` to take the answer,
one request per connection, no body read. Whatever it refuses is counted by
reason (``status()``; the ``meshsub_metrics_refused_total`` metric). The text is
rendered at most once per ``RENDER_EVERY_S`` (about a millisecond of the loop
each time on the development machine, more on a Pi; scrapes within that time get
the same text), so a
local client scraping in a loop cannot take the loop's time away from the mesh.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections import Counter
from collections.abc import Callable
from typing import Any, Final

from meshsub.runtime.logging import get_logger
from meshsub.runtime.streamserver import shut_down

log = get_logger("meshsub.metrics")

MAX_CLIENTS: Final = 8
MAX_REQUEST: Final = 8192
REQUEST_TIMEOUT_S: Final = 5.0
WRITE_TIMEOUT_S: Final = 5.0
RENDER_EVERY_S: Final = 1.0
PATH: Final = "/metrics"

_REASONS: Final = {
    400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed",
    408: "Request Timeout", 431: "Request Header Fields Too Large",
    500: "Internal Server Error", 503: "Service Unavailable",
}


class MetricsServer:
    """Serves ``render()`` (with ``content_type``) on ``host:port``; ``start``/``stop``."""

    def __init__(self, host: str, port: int, render: Callable[[], str], *,
                 content_type: str, max_clients: int = MAX_CLIENTS,
                 request_timeout_s: float = REQUEST_TIMEOUT_S,
                 write_timeout_s: float = WRITE_TIMEOUT_S,
                 render_every_s: float = RENDER_EVERY_S) -> None:
        self.host = host
        self.port = port
        self.render = render
        self.content_type = content_type
        self.max_clients = max_clients
        self.request_timeout_s = request_timeout_s
        self.write_timeout_s = write_timeout_s
        self.render_every_s = render_every_s
        self._text = ""
        self._rendered_at = -math.inf
        self.counters: Counter[str] = Counter()
        self._server: asyncio.Server | None = None
        self._clients: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    @property
    def address(self) -> str:
        """Where it listens (the bound port, if 0 was asked)."""
        port = self.port
        if self._server is not None and self._server.sockets:
            port = self._server.sockets[0].getsockname()[1]
        return f"[{self.host}]:{port}" if ":" in self.host else f"{self.host}:{port}"

    async def start(self) -> None:
        """Listen; ``OSError`` (address in use, not on this host) goes to the caller."""
        self._server = await asyncio.start_server(
            self._connected, self.host, self.port, limit=MAX_REQUEST, reuse_address=True)
        log.info("metrics endpoint listening", address=self.address)

    async def stop(self) -> None:
        if self._server is None:
            return
        await shut_down(self._server, self._writers, self._clients, abort=True)
        self._server = None

    def status(self) -> dict[str, Any]:
        return {"listen": self.address, "clients": len(self._writers), **dict(self.counters)}

    # ------------------------------------------------------------------ serving

    async def _connected(self, reader: asyncio.StreamReader,
                         writer: asyncio.StreamWriter) -> None:
        if len(self._writers) >= self.max_clients:
            self.counters["refused:too_many_clients"] += 1
            writer.transport.abort()
            return
        task = asyncio.current_task()
        if task is not None:
            self._clients.add(task)
        self._writers.add(writer)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            self.counters["refused:disconnected"] += 1
        finally:
            if task is not None:
                self._clients.discard(task)
            self._writers.discard(writer)
            writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            async with asyncio.timeout(self.request_timeout_s):
                head = await reader.readuntil(b"\r\n\r\n")
        except TimeoutError:
            self.counters["refused:timeout"] += 1
            await self._answer(writer, 408, "request not received in time\n")
            return
        except asyncio.LimitOverrunError:
            self.counters["refused:too_large"] += 1
            await self._answer(writer, 431, f"request longer than {MAX_REQUEST} bytes\n")
            return
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                self.counters["refused:incomplete"] += 1
            return
        method, target = _request_line(head)
        if method is None or target is None:
            self.counters["refused:bad_request"] += 1
            await self._answer(writer, 400, "not an HTTP/1.x request\n")
            return
        if method not in ("GET", "HEAD"):
            self.counters["refused:method"] += 1
            await self._answer(writer, 405, "only GET\n", extra="Allow: GET, HEAD\r\n")
            return
        if target.split("?", 1)[0] != PATH:
            self.counters["refused:not_found"] += 1
            await self._answer(writer, 404, f"metrics are at {PATH}\n")
            return
        try:
            body = self._current()
        except Exception as exc:  # a status provider failed: answer, log, keep serving
            self.counters["refused:internal_error"] += 1
            log.error("metrics rendering failed", exc=exc)
            await self._answer(writer, 500, "internal error\n")
            return
        self.counters["scrapes"] += 1
        await self._answer(writer, 200, body, content_type=self.content_type,
                           head_only=method == "HEAD")

    def _current(self) -> str:
        """The rendered text, at most ``render_every_s`` old (a failure is not kept)."""
        now = time.monotonic()
        if now - self._rendered_at >= self.render_every_s:
            self._text = self.render()
            self._rendered_at = now
        return self._text

    async def _answer(self, writer: asyncio.StreamWriter, code: int, body: str, *,
                      content_type: str = "text/plain; charset=utf-8", extra: str = "",
                      head_only: bool = False) -> None:
        data = body.encode()
        head = (f"HTTP/1.1 {code} {_REASONS.get(code, 'OK')}\r\n"
                f"Content-Type: {content_type}\r\nContent-Length: {len(data)}\r\n"
                f"Cache-Control: no-store\r\nConnection: close\r\n{extra}\r\n").encode()
        writer.write(head if head_only else head + data)
        try:
            async with asyncio.timeout(self.write_timeout_s):
                await writer.drain()
        except TimeoutError:
            self.counters["refused:slow_reader"] += 1
            writer.transport.abort()
            return
        with contextlib.suppress(OSError):
            if writer.can_write_eof():
                writer.write_eof()


def _request_line(head: bytes) -> tuple[str | None, str | None]:
    """``(method, target)`` of an HTTP/1.x request head, ``(None, None)`` if it is not one."""
    line = head.split(b"\r\n", 1)[0]
    parts = line.split(b" ")
    if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
        return None, None
    try:
        return parts[0].decode("ascii"), parts[1].decode("ascii")
    except UnicodeDecodeError:
        return None, None
