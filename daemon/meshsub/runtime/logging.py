"""Structured one-line logs: ``level=info logger=meshsub.mqtt msg="connected" port=1883``.

One event per line, key=value (logfmt) or JSON, so journald, grep and log
shippers all read it. Fields are passed as keyword arguments to the
``StructLogger`` methods; exceptions are rendered on the same line (the
traceback only at debug level), so an operator never sees a multi-line dump
for an expected failure.

The handler sits on the root logger, so the libraries' own loggers (aiomqtt's
``mqtt``, ``zeroconf``, ``asyncio``, Python warnings) come out in the same
format; they are held at ``warning`` unless the daemon logs at ``debug``, and
a library repeating one message (aiomqtt: "There are 18 pending publish
calls." on every publish of a burst) is rate-limited: the same message at most
once per ``REPEAT_S`` seconds, the next line saying how many were
``suppressed``. Socket addresses are shown as ``host:port`` wherever they
appear, also in a library's message arguments.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping
from typing import Any, Literal, TextIO

_FIELDS_ATTR = "meshsub_fields"
REPEAT_S = 30.0
OWN_LOGGER = "meshsub"
_BARE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:/@+")


def _is_address(value: Any) -> bool:
    return (isinstance(value, tuple) and len(value) in (2, 4) and isinstance(value[0], str)
            and isinstance(value[1], int) and not isinstance(value[1], bool))


def _plain(value: Any) -> Any:
    """An address tuple as ``host:port``; anything else unchanged."""
    return format_address(value) if _is_address(value) else value


def _message(record: logging.LogRecord) -> str:
    """``record.getMessage()`` with address arguments shown as ``host:port``."""
    args = record.args
    if isinstance(args, tuple) and any(_is_address(a) for a in args):
        try:
            return str(record.msg) % tuple(_plain(a) for a in args)
        except (TypeError, ValueError):
            pass
    return record.getMessage()


def _logfmt_value(value: Any) -> str:
    value = _plain(value)
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    if text and all(c in _BARE for c in text):
        return text
    return json.dumps(text, ensure_ascii=False)


def _record_fields(record: logging.LogRecord) -> Mapping[str, Any]:
    fields = getattr(record, _FIELDS_ATTR, None)
    return fields if isinstance(fields, Mapping) else {}


def _error_text(record: logging.LogRecord) -> str | None:
    if record.exc_info and record.exc_info[1] is not None:
        exc = record.exc_info[1]
        return f"{type(exc).__name__}: {exc}"
    return None


class LogfmtFormatter(logging.Formatter):
    """``[ts=...] level=... logger=... msg="..." key=value ...`` on one line."""

    def __init__(self, *, timestamps: bool = False) -> None:
        super().__init__()
        self.timestamps = timestamps

    def format(self, record: logging.LogRecord) -> str:
        parts: list[str] = []
        if self.timestamps:
            stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            parts.append(f"ts={stamp}.{int(record.msecs):03d}Z")
        parts.append(f"level={record.levelname.lower()}")
        parts.append(f"logger={record.name}")
        parts.append(f"msg={_logfmt_value(_message(record))}")
        for key, value in _record_fields(record).items():
            parts.append(f"{key}={_logfmt_value(value)}")
        error = _error_text(record)
        if error is not None:
            parts.append(f"error={_logfmt_value(error)}")
            if record.levelno <= logging.DEBUG and record.exc_info:
                parts.append(f"traceback={_logfmt_value(self.formatException(record.exc_info))}")
        return " ".join(parts).replace("\n", "\\n")


class JsonFormatter(logging.Formatter):
    """One JSON object per line (for log shippers)."""

    def format(self, record: logging.LogRecord) -> str:
        obj: dict[str, Any] = {
            "ts": record.created,
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": _message(record),
        }
        for key, value in _record_fields(record).items():
            obj.setdefault(key, _plain(value))
        error = _error_text(record)
        if error is not None:
            obj["error"] = error
        return json.dumps(obj, default=str, ensure_ascii=False)


class RepeatFilter(logging.Filter):
    """Passes a library's message at most once per ``every`` seconds per (logger, text).

    Our own loggers are never filtered (they log events, not repetitions).
    The line after a suppressed run carries ``suppressed=N``.
    """

    def __init__(self, every: float = REPEAT_S, clock: Any = time.monotonic,
                 max_keys: int = 1024) -> None:
        super().__init__()
        self.every = every
        self._clock = clock
        self.max_keys = max_keys
        self._last: dict[tuple[str, str], tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == OWN_LOGGER or record.name.startswith(OWN_LOGGER + "."):
            return True
        key = (record.name, str(record.msg))
        now = self._clock()
        last = self._last.get(key)
        if last is not None and now - last[0] < self.every:
            self._last[key] = (last[0], last[1] + 1)
            return False
        if last is not None and last[1]:
            fields = dict(_record_fields(record))
            fields["suppressed"] = last[1]
            setattr(record, _FIELDS_ATTR, fields)
        if len(self._last) >= self.max_keys and key not in self._last:
            self._last.clear()  # bounded: forgetting only lets one more line through
        self._last[key] = (now, 0)
        return True


class StructLogger:
    """A thin wrapper of ``logging.Logger`` that takes fields as keywords."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger

    def _log(self, level: int, msg: str, exc: BaseException | None, fields: dict[str, Any]) -> None:
        if self.logger.isEnabledFor(level):
            exc_info = (type(exc), exc, exc.__traceback__) if exc is not None else None
            self.logger.log(level, msg, exc_info=exc_info, extra={_FIELDS_ATTR: fields})

    def debug(self, msg: str, *, exc: BaseException | None = None, **fields: Any) -> None:
        self._log(logging.DEBUG, msg, exc, fields)

    def info(self, msg: str, *, exc: BaseException | None = None, **fields: Any) -> None:
        self._log(logging.INFO, msg, exc, fields)

    def warning(self, msg: str, *, exc: BaseException | None = None, **fields: Any) -> None:
        self._log(logging.WARNING, msg, exc, fields)

    def error(self, msg: str, *, exc: BaseException | None = None, **fields: Any) -> None:
        self._log(logging.ERROR, msg, exc, fields)


def format_address(addr: tuple[Any, ...]) -> str:
    """``host:port`` (``[v6]:port``): how every log line and status shows an address."""
    host, port = addr[0], addr[1]
    return f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"


def get_logger(name: str) -> StructLogger:
    return StructLogger(logging.getLogger(name))


LogFormat = Literal["logfmt", "json"]


def configure_logging(
    level: str | int = "info",
    *,
    fmt: LogFormat = "logfmt",
    timestamps: bool = False,
    stream: TextIO | None = None,
) -> logging.Handler:
    """Install one handler on the root logger (every logger, libraries' too); returns it.

    Our ``meshsub`` loggers log at ``level``; the libraries' at ``warning``
    unless ``level`` is ``debug``. Timestamps are off by default because
    journald stamps every line.
    """
    if isinstance(level, str):
        numeric = logging.getLevelName(level.upper())
        if not isinstance(numeric, int):
            raise ValueError(f"unknown log level {level!r}")
        level = numeric
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    formatter = JsonFormatter() if fmt == "json" else LogfmtFormatter(timestamps=timestamps)
    handler.setFormatter(formatter)
    handler.addFilter(RepeatFilter())
    root = logging.getLogger()
    own = logging.getLogger(OWN_LOGGER)
    for logger in (root, own):
        for old in list(logger.handlers):
            if getattr(old, "_meshsub", False):
                logger.removeHandler(old)
    handler._meshsub = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    set_level(level)
    own.propagate = True
    logging.captureWarnings(True)
    return handler


def set_level(level: int) -> None:
    """Our loggers at ``level``; the libraries' at ``warning``, or ``debug`` with ours."""
    logging.getLogger(OWN_LOGGER).setLevel(level)
    logging.getLogger().setLevel(logging.DEBUG if level <= logging.DEBUG else logging.WARNING)
