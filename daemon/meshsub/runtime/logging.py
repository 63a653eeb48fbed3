"""Structured one-line logs: ``level=info logger=meshsub.mqtt msg="connected" port=1883``.

One event per line, key=value (logfmt) or JSON, so journald, grep and log
shippers all read it. Fields are passed as keyword arguments to the
``StructLogger`` methods; exceptions are rendered on the same line (the
traceback only at debug level), so an operator never sees a multi-line dump
for an expected failure.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Mapping
from typing import Any, Literal, TextIO

_FIELDS_ATTR = "meshsub_fields"
_BARE = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.:/@+")


def _logfmt_value(value: Any) -> str:
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
        parts.append(f"msg={_logfmt_value(record.getMessage())}")
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
            "msg": record.getMessage(),
        }
        for key, value in _record_fields(record).items():
            obj.setdefault(key, value)
        error = _error_text(record)
        if error is not None:
            obj["error"] = error
        return json.dumps(obj, default=str, ensure_ascii=False)


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
    """Install one handler on the ``meshsub`` logger; returns it.

    Timestamps are off by default because journald stamps every line.
    """
    if isinstance(level, str):
        numeric = logging.getLevelName(level.upper())
        if not isinstance(numeric, int):
            raise ValueError(f"unknown log level {level!r}")
        level = numeric
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    formatter = JsonFormatter() if fmt == "json" else LogfmtFormatter(timestamps=timestamps)
    handler.setFormatter(formatter)
    root = logging.getLogger("meshsub")
    for old in list(root.handlers):
        if getattr(old, "_meshsub", False):
            root.removeHandler(old)
    handler._meshsub = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
    root.propagate = False
    return handler
