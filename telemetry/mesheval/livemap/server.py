"""``mesheval map``: the HTTP server of the live map and its command line.

The standard library's threading HTTP server: the page and its script come from
``static/`` (no CDN, no registry at run time), the records from ``/api/events``.
It binds to 127.0.0.1 unless told otherwise, answers only GET, and refuses what
it does not know with a status code, never a traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import re
import signal
import sys
import threading
from collections.abc import Sequence
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from importlib import resources
from pathlib import Path
from types import FrameType
from typing import Any
from urllib.parse import parse_qs, urlsplit

from mesheval.livemap.sources import MqttSource, SourceError, load_replay, run_info
from mesheval.livemap.window import EventWindow

log = logging.getLogger("mesheval.map")

STATIC = {"/": ("index.html", "text/html; charset=utf-8"),
          "/map.js": ("map.js", "text/javascript; charset=utf-8"),
          "/map.css": ("map.css", "text/css; charset=utf-8")}
#: records per /api/events answer (the page asks again for the rest)
PAGE_LIMIT = 20_000
_TILE = re.compile(r"/tiles/(\d{1,2})/(\d{1,7})/(\d{1,7})\.(png|jpg|jpeg)\Z")


class MapServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, address: tuple[str, int], window: EventWindow, info: dict[str, Any],
                 tiles_dir: Path | None = None) -> None:
        super().__init__(address, MapHandler)
        self.window, self.info, self.tiles_dir = window, info, tiles_dir
        self.static = {path: (resources.files("mesheval.livemap") / "static" / name)
                       .read_bytes() for path, (name, _) in STATIC.items()}

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        return f"http://{host!s}:{port}/"


class MapHandler(BaseHTTPRequestHandler):
    server: MapServer
    server_version = "mesheval-map"

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s " + format, self.client_address[0], *args)

    def _send(self, status: int, body: bytes, ctype: str) -> None:
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-store")
        self.send_header("X-Content-Type-Options", "nosniff")
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: HTTPStatus, text: str) -> None:
        self._send(status, (text + "\n").encode(), "text/plain; charset=utf-8")

    def do_GET(self) -> None:
        parts = urlsplit(self.path)
        if parts.path in STATIC:
            self._send(HTTPStatus.OK, self.server.static[parts.path], STATIC[parts.path][1])
        elif parts.path == "/favicon.ico":
            self._send(HTTPStatus.NO_CONTENT, b"", "image/x-icon")
        elif parts.path == "/api/info":
            doc = {**self.server.info, "window": self.server.window.stats()}
            self._send(HTTPStatus.OK, json.dumps(doc).encode(), "application/json")
        elif parts.path == "/api/events":
            self._events(parts.query)
        elif (match := _TILE.match(parts.path)) and self.server.tiles_dir is not None:
            self._tile(match)
        else:
            self._error(HTTPStatus.NOT_FOUND, "not found")

    def _events(self, query: str) -> None:
        try:
            values = parse_qs(query, strict_parsing=False).get("after", ["0"])
            after = int(values[0])
            if after < 0:
                raise ValueError
        except ValueError:
            self._error(HTTPStatus.BAD_REQUEST, "after: expected a sequence number >= 0")
            return
        lines, first, last = self.server.window.since(after, PAGE_LIMIT)
        body = (f'{{"first":{first},"last":{last},"events":[' + ",".join(lines) + "]}")
        self._send(HTTPStatus.OK, body.encode("utf-8"), "application/json")

    def _tile(self, match: re.Match[str]) -> None:
        z, x, y, ext = match.groups()
        assert self.server.tiles_dir is not None
        path = self.server.tiles_dir / z / x / f"{y}.{ext}"  # digits only: stays inside
        try:
            body = path.read_bytes()
        except OSError:
            self._error(HTTPStatus.NOT_FOUND, "no such tile")
            return
        self._send(HTTPStatus.OK, body, "image/png" if ext == "png" else "image/jpeg")

    def do_POST(self) -> None:
        self._error(HTTPStatus.METHOD_NOT_ALLOWED, "the map is read-only")

    do_PUT = do_DELETE = do_PATCH = do_POST


# ------------------------------------------------------------------ command line

def _origin(text: str) -> tuple[float, float]:
    try:
        lat, lon = (float(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected LAT,LON, got {text!r}") from None
    if not (-85.0 <= lat <= 85.0 and -180.0 <= lon <= 180.0):
        raise argparse.ArgumentTypeError(f"LAT,LON out of range: {text!r}")
    return lat, lon


def _tiles(text: str) -> str:
    if not all(key in text for key in ("{z}", "{x}", "{y}")):
        raise argparse.ArgumentTypeError(
            f"a tile URL template needs {{z}}, {{x}} and {{y}}: {text!r}")
    if not re.match(r"(https?://|/)", text) or any(c in text for c in "\"'<> \\"):
        raise argparse.ArgumentTypeError(f"not an http(s) URL template: {text!r}")
    return text


def map_parser() -> argparse.ArgumentParser:
    from mesheval.cli import OneLineParser
    from mesheval.collect import _broker, _positive_int

    p = OneLineParser(prog="mesheval map",
                      description="Show a mesh on a map in the browser: replay a run "
                      "directory, or follow the daemons' live telemetry over MQTT.")
    p.add_argument("rundir", nargs="?", type=Path,
                   help="run directory or collector spool to replay (with a time slider)")
    p.add_argument("--broker", type=_broker, metavar="HOST:PORT",
                   help="follow the live telemetry of this broker instead")
    p.add_argument("--topic", default="meshsub/telemetry/#",
                   help="telemetry topic filter (default: %(default)s)")
    p.add_argument("--username", help="broker user with read access to the topic")
    p.add_argument("--password-file", type=Path, metavar="FILE",
                   help="the user's password (first line); beyond the loopback only with TLS")
    p.add_argument("--tls-ca", type=Path, metavar="FILE",
                   help="speak TLS and verify the broker against this CA bundle")
    p.add_argument("--tls-cert", type=Path, metavar="FILE", help="client certificate (TLS)")
    p.add_argument("--tls-key", type=Path, metavar="FILE", help="client key (TLS)")
    p.add_argument("--bind", default="127.0.0.1", metavar="ADDR",
                   help="address to serve on (default: %(default)s, this machine only)")
    p.add_argument("--port", type=int, default=8765,
                   help="port to serve on (0: any free port; default: %(default)s)")
    p.add_argument("--tiles", type=_tiles, metavar="URL",
                   help="tile URL template, e.g. http://tiles.local/{z}/{x}/{y}.png: draws "
                   "a map under the devices (needs an origin)")
    p.add_argument("--tiles-dir", type=Path, metavar="DIR",
                   help="serve tiles from DIR/{z}/{x}/{y}.png (offline)")
    p.add_argument("--origin", type=_origin, metavar="LAT,LON",
                   help="latitude/longitude of the local (0, 0) (default: the manifest's)")
    p.add_argument("--max-entries", type=_positive_int, default=200_000,
                   help="records the window keeps (default: %(default)s)")
    p.add_argument("--max-bytes", type=_positive_int, default=64 * 1024 * 1024,
                   help="bytes the window keeps (default: %(default)s)")
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def build(args: argparse.Namespace) -> tuple[MapServer, MqttSource | None]:
    """The server (and the live source) for parsed options; ValueError/OSError: one line."""
    if (args.rundir is None) == (args.broker is None):
        raise ValueError("give a RUNDIR to replay or --broker HOST:PORT to follow, not both")
    if not 0 <= args.port < 65536:
        raise ValueError(f"--port out of range: {args.port}")
    if args.tiles and args.tiles_dir:
        raise ValueError("--tiles and --tiles-dir: give one")
    if args.tiles_dir is not None and not args.tiles_dir.is_dir():
        raise ValueError(f"--tiles-dir: no such directory: {args.tiles_dir}")
    window = EventWindow(args.max_entries, args.max_bytes)
    source = None
    if args.rundir is not None:
        info = run_info(args.rundir)
        info["mode"] = "replay"
        info["lines"] = load_replay(args.rundir, window)
    else:
        from mesheval.collect import _credentials  # the collector's rules: no password in clear

        host, port = args.broker
        username, password = _credentials(args)
        info = {"mode": "live", "source": f"mqtt://{host}:{port} {args.topic}"}
        source = MqttSource(host, port, args.topic, window, username=username,
                            password=password, tls=(args.tls_ca, args.tls_cert, args.tls_key))
    if args.origin is not None:
        info["origin_lat"], info["origin_lon"] = args.origin
    if args.tiles or args.tiles_dir:
        if "origin_lat" not in info:
            raise ValueError("a tile layer needs --origin LAT,LON (the run has none)")
        info["tiles"] = args.tiles or "/tiles/{z}/{x}/{y}.png"
    server = MapServer((args.bind, args.port), window, info, tiles_dir=args.tiles_dir)
    return server, source


def map_main(argv: Sequence[str]) -> int:
    args = map_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    try:
        server, source = build(args)
    except SourceError as exc:
        print(f"mesheval map: error: {exc}", file=sys.stderr)
        return 2
    except ValueError as exc:
        print(f"mesheval map: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"mesheval map: error: cannot serve on {args.bind}:{args.port}: "
              f"{exc.strerror or exc}", file=sys.stderr)
        return 2
    stats = server.window.stats()
    # the start line first, then the source: the source's thread logs (connected, refused)
    # and a script or a terminal reading `2>&1` must still see the URL as the first line
    print(f"mesheval map: {server.info['mode']} {server.info['source']}: "
          f"{stats['entries']} records in the window; open {server.url}", flush=True)
    if source is not None:
        source.start()

    def _stop(signum: int, frame: FrameType | None) -> None:
        threading.Thread(target=server.shutdown, daemon=True).start()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    try:
        server.serve_forever()
    finally:
        server.server_close()
        if source is not None:
            source.stop()
    return 0
