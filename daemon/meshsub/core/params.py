"""Typed, validated protocol parameters.

Each protocol declares a frozen dataclass subclass of ``ProtocolParams`` whose
field names are the paper's parameter names. ``parse_params`` turns a mapping
from a config or scenario file into it, with one clear error per bad key.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import types
import typing
from collections.abc import Mapping
from typing import Any, TypeVar


class ParamDoc(typing.NamedTuple):
    """What a parameter's documentation row needs beyond its name, type and default.

    ``unit`` is the unit of its value ("s", "m", "hops", "messages", "" for
    none); ``source`` where its default comes from: the paper's table or
    section ("Zheng 2008, Table 4.1"), or "our decision". A params class lists
    its own fields in ``param_docs``; docs/protocols/NAME.md tables are
    generated from them (``meshsub.core.paramdocs``) and a test fails when a
    field has no entry or a page differs from the code.
    """

    unit: str
    source: str
    meaning: str = ""
    """For a field without a docstring of its own."""


OUR_DECISION: typing.Final = "our decision"


@dataclasses.dataclass(frozen=True, slots=True)
class ProtocolParams:
    """Base of every protocol's parameter set (no parameters)."""

    param_docs: typing.ClassVar[Mapping[str, ParamDoc]] = {}
    """Unit and source of each field this class declares (not of inherited ones)."""

    def validate(self) -> None:
        """Raise ``ParameterError`` for impossible values; override per protocol."""


class ParameterError(ValueError):
    """A bad protocol parameter; ``key`` names it."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"protocol parameter {key!r}: {problem}")
        self.key = key
        self.problem = problem


def positive(key: str, value: float) -> None:
    """``ParameterError`` unless ``value`` is a finite number above 0."""
    if not (math.isfinite(value) and value > 0):
        raise ParameterError(key, "must be a positive number")


def non_negative(key: str, value: float) -> None:
    """``ParameterError`` unless ``value`` is a finite number of at least 0."""
    if not (math.isfinite(value) and value >= 0):
        raise ParameterError(key, "must be a non-negative number")


P = TypeVar("P", bound=ProtocolParams)


def _coerce(key: str, value: Any, annotation: Any) -> Any:
    """Check ``value`` against a field annotation; ints are accepted for floats."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        for option in typing.get_args(annotation):
            if option is type(None) and value is None:
                return None
            if option is not type(None):
                try:
                    return _coerce(key, value, option)
                except ParameterError:
                    continue
        raise ParameterError(key, f"expected {annotation}, got {type(value).__name__}")
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise ParameterError(key, f"expected a list, got {type(value).__name__}")
        (item_type, *_rest) = typing.get_args(annotation) or (Any,)
        return tuple(_coerce(key, v, item_type) for v in value)
    if annotation is Any:
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ParameterError(key, f"expected a number, got {type(value).__name__}")
        if not math.isfinite(value):
            raise ParameterError(key, "must be finite")
        return float(value)
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ParameterError(key, f"expected an integer, got {type(value).__name__}")
        return value
    if annotation is bool:
        if not isinstance(value, bool):
            raise ParameterError(key, f"expected true or false, got {type(value).__name__}")
        return value
    if annotation is str:
        if not isinstance(value, str):
            raise ParameterError(key, f"expected a string, got {type(value).__name__}")
        return value
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        try:
            return annotation(value)
        except ValueError:
            choices = [member.value for member in annotation]
            raise ParameterError(key, f"must be one of {choices}") from None
    raise ParameterError(key, f"unsupported parameter type {annotation}")


def parse_params(cls: type[P], values: Mapping[str, Any] | None) -> P:
    """Build ``cls`` from ``values``; unknown keys and wrong types are errors."""
    values = dict(values or {})
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - set(fields))
    if unknown:
        raise ParameterError(unknown[0], f"unknown parameter (known: {', '.join(sorted(fields))})")
    kwargs = {key: _coerce(key, value, hints[key]) for key, value in values.items()}
    params = cls(**kwargs)
    params.validate()
    return params


def params_to_dict(params: ProtocolParams) -> dict[str, Any]:
    """Plain values, for manifests and status output."""
    return {
        f.name: (list(v) if isinstance(v := getattr(params, f.name), tuple) else v)
        for f in dataclasses.fields(params)
    }
