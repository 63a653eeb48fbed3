"""The content model: events, subscriptions, matching, covering and wire forms.

An *event* is a topic plus typed attributes; a *subscription* is a topic
filter (MQTT ``+``/``#`` wildcards) plus a conjunction of attribute predicates
(semantics in ``meshsub.core.predicates``). Both validate on construction and
are immutable and hashable; equality is type-aware (``x=1`` and ``x=1.0`` are
different events), so equal objects always have equal canonical wire bytes.
The text syntax lives in ``meshsub.core.syntax``.
"""

from __future__ import annotations

import math
from collections.abc import ItemsView, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgpack

from meshsub.core.covering import implies, satisfiable
from meshsub.core.predicates import Op, Predicate
from meshsub.core.topics import filter_covers, topic_matches, validate_filter, validate_topic
from meshsub.core.values import (
    MAX_ATTRS,
    MAX_PREDICATES,
    ContentError,
    Value,
    check_name,
    check_value,
    typed,
)

__all__ = ["Attrs", "ContentError", "Event", "Op", "Predicate", "Subscription", "Value",
           "decode_timed_event"]


class Attrs(Mapping[str, Value]):
    """An immutable, hashable attribute mapping, ordered by name, with type-aware equality."""

    __slots__ = ("_dict", "_typed_cache")

    def __init__(self, attrs: Mapping[str, Value] | Iterable[tuple[str, Value]] = ()) -> None:
        pairs = attrs.items() if isinstance(attrs, Mapping) else attrs
        checked: dict[str, Value] = {}
        for name, value in pairs:
            name = check_name(name)
            if name in checked:
                raise ContentError(f"attribute {name!r} given twice")
            checked[name] = check_value(value, f"attribute {name!r}")
            if len(checked) > MAX_ATTRS:
                raise ContentError(f"more than {MAX_ATTRS} attributes")
        self._dict = {name: checked[name] for name in sorted(checked)}
        self._typed_cache: tuple[tuple[str, tuple[str, Value]], ...] | None = None

    @property
    def _typed(self) -> tuple[tuple[str, tuple[str, Value]], ...]:
        """The type-exact identity, made when first compared or hashed (a relay that
        only matches an event never needs it)."""
        if self._typed_cache is None:
            self._typed_cache = tuple((name, typed(v)) for name, v in self._dict.items())
        return self._typed_cache

    def __getitem__(self, name: str) -> Value:
        return self._dict[name]

    def get(self, name: str, default: Any = None) -> Any:  # faster than Mapping.get
        return self._dict.get(name, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._dict)

    def __len__(self) -> int:
        return len(self._dict)

    def __contains__(self, name: object) -> bool:
        return name in self._dict

    def items(self) -> ItemsView[str, Value]:
        return self._dict.items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Attrs):
            return self._typed == other._typed
        if isinstance(other, Mapping):
            try:
                return self._typed == Attrs(other)._typed
            except ContentError:
                return False
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._typed)

    def __repr__(self) -> str:
        return f"Attrs({self._dict!r})"


@dataclass(frozen=True, slots=True, repr=False)
class Event:
    """A publication: ``topic`` (no wildcards) and typed attributes.

    Limits: topic <= 256 bytes of UTF-8, <= 64 attributes, names identifier-like
    and <= 64 characters, strings <= 1024 characters, floats finite, integers
    signed 64-bit. Any violation raises ``ContentError``.
    """

    topic: str
    attrs: Mapping[str, Value] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "topic", validate_topic(self.topic))
        if not isinstance(self.attrs, Attrs):
            if not isinstance(self.attrs, Mapping):
                raise ContentError(
                    f"event attributes must be a mapping, not {type(self.attrs).__name__}"
                )
            object.__setattr__(self, "attrs", Attrs(self.attrs))

    def to_wire(self) -> list[Any]:
        """``[topic, name1, value1, name2, value2, ...]`` with names sorted."""
        out: list[Any] = [self.topic]
        for name, value in self.attrs.items():
            out.append(name)
            out.append(value)
        return out

    @classmethod
    def from_wire(cls, obj: Any) -> Event:
        """Inverse of ``to_wire`` (any attribute order is accepted); only ``ContentError``."""
        if not isinstance(obj, list | tuple) or not obj or len(obj) % 2 != 1:
            raise ContentError("event must be a list [topic, name, value, ...]")
        if len(obj) > 1 + 2 * MAX_ATTRS:
            raise ContentError(f"more than {MAX_ATTRS} attributes")
        pairs = [(obj[i], obj[i + 1]) for i in range(1, len(obj), 2)]
        for name, _ in pairs:
            if not isinstance(name, str):
                raise ContentError("attribute name must be a string")
        return cls(obj[0], Attrs(pairs))  # __post_init__ validates the topic

    @property
    def key(self) -> bytes:
        """Canonical packed bytes: equal events have equal keys."""
        return bytes(msgpack.packb(self.to_wire(), use_bin_type=True))

    def __repr__(self) -> str:
        from meshsub.core.syntax import format_event  # syntax imports this module

        return f"Event({format_event(self)!r})"


@dataclass(frozen=True, slots=True, repr=False)
class Subscription:
    """A topic filter plus a conjunction of predicates (none: the topic alone decides).

    ``predicates`` may be given in any order and with repeats; it is stored
    deduplicated and sorted canonically, so equal subscriptions compare equal
    and have equal ``key`` bytes.
    """

    topic: str
    predicates: tuple[Predicate, ...] = ()
    _by_attr: dict[str, tuple[Predicate, ...]] = field(
        init=False, repr=False, compare=False, hash=False
    )
    _key: bytes | None = field(init=False, repr=False, compare=False, hash=False)
    """``key`` once computed: subscription trees and covering read it over and over."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "topic", validate_filter(self.topic))
        preds = self.predicates
        if isinstance(preds, Predicate) or not isinstance(preds, Iterable):
            raise ContentError("subscription predicates must be a collection of Predicate")
        unique: dict[Predicate, None] = {}
        for p in preds:
            if not isinstance(p, Predicate):
                raise ContentError(f"not a Predicate: {p!r}")
            unique[p] = None
            if len(unique) > MAX_PREDICATES:
                raise ContentError(f"more than {MAX_PREDICATES} predicates")
        ordered = tuple(sorted(unique, key=lambda p: p.sort_key))
        object.__setattr__(self, "predicates", ordered)
        by_attr: dict[str, list[Predicate]] = {}
        for p in ordered:
            by_attr.setdefault(p.attr, []).append(p)
        object.__setattr__(self, "_by_attr", {a: tuple(ps) for a, ps in by_attr.items()})
        object.__setattr__(self, "_key", None)

    def matches(self, event: Event) -> bool:
        """True if the filter matches the event's topic and every predicate holds."""
        if not topic_matches(self.topic, event.topic):
            return False
        get = event.attrs.get
        return all(p.holds(get(p.attr)) for p in self.predicates)

    def satisfiable(self) -> bool:
        """False only if provably no event can match (e.g. ``x<1 x>2``)."""
        return all(satisfiable(ps) for ps in self._by_attr.values())

    def covers(self, other: Subscription) -> bool:
        """True only if every event matching ``other`` matches ``self`` (sound).

        Holds when ``other`` is unsatisfiable, or when this filter covers the
        other's and, for each of our predicates, the other's predicates on the
        same attribute imply it (``meshsub.core.covering``).
        """
        if not other.satisfiable():
            return True
        if not filter_covers(self.topic, other.topic):
            return False
        others = other._by_attr
        return all(implies(others.get(p.attr, ()), p) for p in self.predicates)

    def to_wire(self) -> list[Any]:
        """``[filter, predicate1, predicate2, ...]`` in canonical order."""
        return [self.topic, *(p.to_wire() for p in self.predicates)]

    @classmethod
    def from_wire(cls, obj: Any) -> Subscription:
        """Inverse of ``to_wire``; raises ``ContentError`` (only) on anything malformed."""
        if not isinstance(obj, list | tuple) or not obj:
            raise ContentError("subscription must be a list [filter, predicate, ...]")
        if len(obj) > 1 + MAX_PREDICATES:
            raise ContentError(f"more than {MAX_PREDICATES} predicates")
        return cls(validate_filter(obj[0]), tuple(Predicate.from_wire(p) for p in obj[1:]))

    @property
    def key(self) -> bytes:
        """Canonical packed bytes: equal subscriptions have equal keys (computed once:
        the subscription is immutable)."""
        key = self._key
        if key is None:
            key = bytes(msgpack.packb(self.to_wire(), use_bin_type=True))
            object.__setattr__(self, "_key", key)
        return key

    def __repr__(self) -> str:
        from meshsub.core.syntax import format_subscription  # syntax imports this module

        return f"Subscription({format_subscription(self)!r})"


def decode_timed_event(body: Any, what: str, times: tuple[str, ...]) -> tuple[Any, ...]:
    """``(event, *times)`` of a body ``[event, *times]`` whose times are finite numbers
    (flooding's DATA, the carried events of epidemic and PULL); ``ValueError`` naming
    ``what`` and the times if it is malformed."""
    if not isinstance(body, list | tuple) or len(body) != 1 + len(times):
        raise ValueError(f"{what} body is [event, {', '.join(times)}]")
    wire, *values = body
    for value in values:
        if isinstance(value, bool) or not isinstance(value, int | float) \
                or not math.isfinite(value):
            raise ValueError(f"{' and '.join(times)} must be "
                             + ("a finite number" if len(times) == 1 else "finite numbers"))
    try:
        event = Event.from_wire(wire)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"bad event: {exc}") from None
    return (event, *map(float, values))
