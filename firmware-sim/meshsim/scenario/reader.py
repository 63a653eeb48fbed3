"""Typed reading of a TOML table with errors that name the key path.

Every scenario key is read through a ``Table`` so that a wrong type, a value
out of range or an unknown key becomes one ``ScenarioError`` whose message
starts with the full path (``workload.subscriptions[3].expr: ...``): that is
what a user needs to fix the file, and what the CLI prints as one line.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any


class ScenarioError(ValueError):
    """A bad scenario: ``path`` names the key (may be empty for file-level errors)."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}" if path else problem)
        self.path = path
        self.problem = problem


def type_name(value: Any) -> str:
    """TOML-ish name of a Python value's type, for error messages."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, Mapping):
        return "table"
    return type(value).__name__


def join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    return f"{path}.{key}" if path else key


_MISSING: Any = object()


class Table:
    """A TOML table being read; ``done()`` rejects the keys nobody asked for."""

    def __init__(self, data: Any, path: str) -> None:
        if not isinstance(data, Mapping):
            raise ScenarioError(path, f"expected a table, got {type_name(data)}")
        self.data: Mapping[str, Any] = data
        self.path = path
        self._seen: set[str] = set()

    def has(self, key: str) -> bool:
        return key in self.data

    def raw(self, key: str, default: Any = _MISSING) -> Any:
        self._seen.add(key)
        if key not in self.data:
            if default is _MISSING:
                raise ScenarioError(join(self.path, key), "required key is missing")
            return default
        return self.data[key]

    def err(self, key: str | int, problem: str) -> ScenarioError:
        return ScenarioError(join(self.path, key), problem)

    def number(
        self,
        key: str,
        default: Any = _MISSING,
        *,
        lo: float | None = None,
        hi: float | None = None,
        lo_open: bool = False,
    ) -> float:
        value = self.raw(key, default)
        return check_number(value, join(self.path, key), lo=lo, hi=hi, lo_open=lo_open)

    def opt_number(self, key: str, *, lo: float | None = None, lo_open: bool = False
                   ) -> float | None:
        value = self.raw(key, None)
        if value is None:
            return None
        return check_number(value, join(self.path, key), lo=lo, lo_open=lo_open)

    def integer(self, key: str, default: Any = _MISSING, *, lo: int | None = None,
                hi: int | None = None) -> int:
        value = self.raw(key, default)
        return check_int(value, join(self.path, key), lo=lo, hi=hi)

    def opt_integer(self, key: str, *, lo: int | None = None) -> int | None:
        value = self.raw(key, None)
        return None if value is None else check_int(value, join(self.path, key), lo=lo)

    def string(self, key: str, default: Any = _MISSING, *, choices: tuple[str, ...] = ()
               ) -> str:
        value = self.raw(key, default)
        if not isinstance(value, str):
            raise self.err(key, f"expected a string, got {type_name(value)}")
        if choices and value not in choices:
            raise self.err(key, f"must be one of {', '.join(choices)} (got {value!r})")
        return value

    def opt_string(self, key: str) -> str | None:
        value = self.raw(key, None)
        if value is not None and not isinstance(value, str):
            raise self.err(key, f"expected a string, got {type_name(value)}")
        return value

    def boolean(self, key: str, default: Any = _MISSING) -> bool:
        value = self.raw(key, default)
        if not isinstance(value, bool):
            raise self.err(key, f"expected true or false, got {type_name(value)}")
        return value

    def array(self, key: str, default: Any = _MISSING) -> list[Any]:
        value = self.raw(key, default)
        if not isinstance(value, list):
            raise self.err(key, f"expected an array, got {type_name(value)}")
        return value

    def table(self, key: str, *, required: bool = False) -> Table:
        value = self.raw(key, _MISSING if required else {})
        return Table(value, join(self.path, key))

    def tables(self, key: str) -> list[Table]:
        """An array of tables (``[[key]]``), each wrapped with its indexed path."""
        items = self.array(key, [])
        return [Table(item, join(join(self.path, key), i)) for i, item in enumerate(items)]

    def done(self) -> None:
        unknown = sorted(set(self.data) - self._seen)
        if unknown:
            known = ", ".join(sorted(self._seen)) or "none"
            raise self.err(unknown[0], f"unknown key (known here: {known})")


def check_number(value: Any, path: str, *, lo: float | None = None, hi: float | None = None,
                 lo_open: bool = False) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ScenarioError(path, f"expected a number, got {type_name(value)}")
    number = float(value)
    if not math.isfinite(number):
        raise ScenarioError(path, "must be finite")
    if lo is not None and (number < lo or (lo_open and number == lo)):
        raise ScenarioError(path, f"must be {'>' if lo_open else '>='} {lo:g} (got {number:g})")
    if hi is not None and number > hi:
        raise ScenarioError(path, f"must be <= {hi:g} (got {number:g})")
    return number


def check_int(value: Any, path: str, *, lo: int | None = None, hi: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ScenarioError(path, f"expected an integer, got {type_name(value)}")
    if lo is not None and value < lo:
        raise ScenarioError(path, f"must be >= {lo} (got {value})")
    if hi is not None and value > hi:
        raise ScenarioError(path, f"must be <= {hi} (got {value})")
    return value
