"""Read ``gps.jsonl``: per node and epoch, the truth and what its receiver reported.

The feeder writes it; tests and the evaluation read it back to compare a
daemon's view with the truth at the time of the fix it used (gpsd's TPV
time, or ``meshsubctl status`` time minus the fix's ``age_s``). Every line
is checked, so a truncated or foreign file is one clear error, not a
KeyError later.
"""

from __future__ import annotations

import bisect
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FIX_FIELDS = ("rx", "ry", "lat", "lon", "hdop", "sats", "sigma_m", "err_m")


class GpsLogError(ValueError):
    """A ``gps.jsonl`` that cannot be read; the message names the file and line."""


@dataclass(frozen=True, slots=True)
class GpsRecord:
    """One line of ``gps.jsonl`` (docs/scenarios.md); the fix fields are ``None`` without a fix."""

    ts_ns: int
    t: float
    node: int
    x: float
    y: float
    fix: bool
    rx: float | None = None
    ry: float | None = None
    lat: float | None = None
    lon: float | None = None
    hdop: float | None = None
    sats: int | None = None
    sigma_m: float | None = None
    err_m: float | None = None


def _number(data: dict[str, Any], key: str, where: str) -> float:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise GpsLogError(f"{where}: {key} is not a finite number: {value!r}")
    return float(value)


def parse_record(line: str, where: str = "gps.jsonl") -> GpsRecord:
    """One JSON line -> ``GpsRecord``; ``GpsLogError`` naming ``where`` otherwise."""
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise GpsLogError(f"{where}: not JSON ({exc.msg})") from None
    if not isinstance(data, dict):
        raise GpsLogError(f"{where}: expected an object, got {type(data).__name__}")
    for key in ("ts_ns", "node"):
        if isinstance(data.get(key), bool) or not isinstance(data.get(key), int):
            raise GpsLogError(f"{where}: {key} is not an integer: {data.get(key)!r}")
    if not isinstance(data.get("fix"), bool):
        raise GpsLogError(f"{where}: fix is not true or false: {data.get('fix')!r}")
    fix = data["fix"]
    extra: dict[str, float | int | None] = {}
    for key in FIX_FIELDS:
        if fix:
            value = _number(data, key, where)
            extra[key] = int(value) if key == "sats" else value
        else:
            extra[key] = None
    return GpsRecord(data["ts_ns"], _number(data, "t", where), data["node"],
                     _number(data, "x", where), _number(data, "y", where), fix,
                     **extra)  # type: ignore[arg-type]


class GpsLog:
    """The records of a run by node, in time order, with lookup by time."""

    def __init__(self, records: Iterable[GpsRecord]) -> None:
        by_node: dict[int, list[GpsRecord]] = {}
        for record in records:
            by_node.setdefault(record.node, []).append(record)
        for recs in by_node.values():
            recs.sort(key=lambda r: r.ts_ns)
        self._by_node = by_node
        self._times = {node: [r.ts_ns for r in recs] for node, recs in by_node.items()}

    @classmethod
    def load(cls, path: str | Path) -> GpsLog:
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise GpsLogError(f"cannot read {str(path)!r}: {exc.strerror}") from None
        except UnicodeDecodeError:
            raise GpsLogError(f"{str(path)!r} is not UTF-8 text") from None
        return cls(parse_record(line, f"{path.name} line {i}")
                   for i, line in enumerate(text.splitlines(), 1) if line.strip())

    @property
    def nodes(self) -> tuple[int, ...]:
        return tuple(sorted(self._by_node))

    def records(self, node: int) -> list[GpsRecord]:
        return list(self._by_node.get(node, ()))

    def at(self, node: int, ts_ns: int) -> GpsRecord | None:
        """The node's latest epoch at or before ``ts_ns`` (``None`` before its first)."""
        times = self._times.get(node)
        if not times:
            return None
        i = bisect.bisect_right(times, ts_ns)
        return self._by_node[node][i - 1] if i else None
