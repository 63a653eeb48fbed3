"""Attribute values: the four types, their validation, and type-aware keys.

Python's own equality is the wrong one for content: ``True == 1 == 1.0`` and all
three hash alike, yet here a bool is not a number and an int is not the same
wire value as a float. Everything that compares, hashes or sorts values goes
through the helpers below so that the whole content model agrees.
"""

from __future__ import annotations

import math
import re
from typing import Any, Literal, TypeAlias

Value: TypeAlias = int | float | str | bool
"""An attribute value. ``bool`` is not a number here; floats are finite."""

Kind: TypeAlias = Literal["b", "n", "s"]
"""Comparison class of a value: bool, number (int or float) or string."""

BOOL: Kind = "b"
NUMBER: Kind = "n"
STRING: Kind = "s"

MAX_TOPIC_BYTES = 256
MAX_NAME_CHARS = 64
MAX_ATTRS = 64
MAX_STRING_CHARS = 1024
MAX_PREDICATES = 64
MAX_MEMBERS = 256
INT_MIN = -(2**63)
INT_MAX = 2**63 - 1
"""Integers are signed 64-bit so that every value packs as a msgpack int."""

_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class ContentError(ValueError):
    """A bad event, subscription, topic or value, in any form (object, wire, text)."""


def check_string(text: object, what: str, limit: int = MAX_STRING_CHARS) -> str:
    """Return ``text`` as a plain ``str`` if it is a valid UTF-8 string within ``limit``."""
    if not isinstance(text, str):
        raise ContentError(f"{what} must be a string, not {type(text).__name__}")
    plain = str.__str__(text)
    if len(plain) > limit:
        raise ContentError(f"{what} is longer than {limit} characters")
    try:
        plain.encode("utf-8")
    except UnicodeEncodeError:
        raise ContentError(f"{what} is not valid Unicode (lone surrogate)") from None
    return plain


def check_name(name: object) -> str:
    """An attribute name: identifier-like ASCII, at most 64 characters."""
    if not isinstance(name, str):
        raise ContentError(f"attribute name must be a string, not {type(name).__name__}")
    plain = str.__str__(name)
    if len(plain) > MAX_NAME_CHARS:
        raise ContentError(f"attribute name {plain[:20]!r}... is longer than {MAX_NAME_CHARS}")
    if not _NAME_RE.match(plain):
        raise ContentError(
            f"bad attribute name {plain!r}: use letters, digits and '_', not starting with a digit"
        )
    return plain


def check_value(value: object, what: str = "value") -> Value:
    """Validate one attribute value and return it as a plain, canonical Python value.

    Subclasses (``IntEnum``, ``str`` subclasses) become their base type through
    the base-class slots, which a subclass cannot override; ``-0.0`` becomes
    ``0.0`` so that equal values always pack to equal bytes.
    """
    if isinstance(value, bool):
        return value is True
    if isinstance(value, int):
        number = int.__int__(value)
        if not INT_MIN <= number <= INT_MAX:
            raise ContentError(f"{what} {number} does not fit in a signed 64-bit integer")
        return number
    if isinstance(value, float):
        real = float.__float__(value)
        if not math.isfinite(real):
            raise ContentError(f"{what} must be a finite number, not {real!r}")
        return real + 0.0
    if isinstance(value, str):
        return check_string(value, what)
    raise ContentError(
        f"{what} must be an integer, float, string or boolean, not {type(value).__name__}"
    )


def kind(value: Value) -> Kind:
    """The comparison class of a validated value."""
    if value is True or value is False:
        return BOOL
    if isinstance(value, str):
        return STRING
    return NUMBER


def lookup_key(value: Value) -> tuple[str, Value]:
    """Hash key under which equal values meet: ``1`` and ``1.0`` do, ``True`` and ``1`` do not."""
    return (kind(value), value)


def typed(value: Value) -> tuple[str, Value]:
    """Exact identity including the Python type: ``1`` and ``1.0`` differ.

    Used for equality, hashing and canonical order of events and subscriptions,
    so that objects that compare equal also pack to equal bytes.
    """
    if value is True or value is False:
        return ("b", value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, int):
        return ("i", value)
    return ("f", value)


def value_sort_key(value: Value) -> tuple[int, Any, int]:
    """Deterministic total order across types: bools, then numbers (numerically), then strings."""
    if value is True or value is False:
        return (0, int(value), 0)
    if isinstance(value, str):
        return (2, value, 0)
    return (1, value, 0 if isinstance(value, int) else 1)


def same_kind_equal(a: Value, b: Value) -> bool:
    """Equality as the content model defines it: only within one comparison class."""
    return kind(a) == kind(b) and a == b
