"""Protocols by name, through the ``meshsub.protocols`` entry-point group.

Built-in protocols register the same way (in ``pyproject.toml``), so a
protocol in another distribution is a peer, not a special case. Each class
declares its own ``protocol_id`` (the frame header byte a receiver filters
on); the registry checks the whole group every time it loads, plug-ins
included, so two protocols that claim one id, or one name, stop every
driver with an error naming both instead of silently mixing their frames.
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points

from meshsub.core.api import LINK_PROTOCOL_ID
from meshsub.core.protocol import Protocol

GROUP = "meshsub.protocols"
PROTOCOL_ID_MAX = 0xFF
"""The frame header carries the protocol id in one byte."""


class UnknownProtocolError(LookupError):
    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(f"unknown protocol {name!r} (known: {', '.join(known) or 'none'})")
        self.name = name


class RegistryError(RuntimeError):
    """The installed protocols contradict each other, or one cannot be loaded (one line)."""


def _describe(ep: EntryPoint) -> str:
    dist = ep.dist.name if ep.dist is not None else "?"
    return f"{ep.name!r} ({ep.value}, from {dist})"


def _load(ep: EntryPoint) -> type[Protocol]:
    try:
        cls = ep.load()
    except Exception as exc:
        raise RegistryError(f"cannot load protocol {_describe(ep)}: "
                            f"{type(exc).__name__}: {exc}") from None
    if not (isinstance(cls, type) and issubclass(cls, Protocol)):
        raise RegistryError(f"entry point {_describe(ep)} is not a Protocol subclass")
    if cls.name != ep.name:
        raise RegistryError(f"entry point {_describe(ep)} loads a class named {cls.name!r}: "
                            "the two names must agree")
    pid = cls.protocol_id
    if isinstance(pid, bool) or not isinstance(pid, int) \
            or not LINK_PROTOCOL_ID < pid <= PROTOCOL_ID_MAX:
        raise RegistryError(f"protocol {_describe(ep)} declares protocol_id {pid!r}: it must be "
                            f"an integer in 1..{PROTOCOL_ID_MAX} (0 is the link layer's)")
    return cls


def load_registry() -> dict[str, type[Protocol]]:
    """Every installed protocol by name, after checking names and ids are unique."""
    by_name: dict[str, tuple[EntryPoint, type[Protocol]]] = {}
    by_id: dict[int, EntryPoint] = {}
    for ep in sorted(entry_points(group=GROUP), key=lambda e: (e.name, e.value)):
        if ep.name in by_name:
            raise RegistryError(f"protocol name {ep.name!r} is registered twice: "
                                f"{_describe(by_name[ep.name][0])} and {_describe(ep)}")
        cls = _load(ep)
        other = by_id.get(cls.protocol_id)
        if other is not None:
            raise RegistryError(f"protocol id {cls.protocol_id} is claimed by both "
                                f"{_describe(other)} and {_describe(ep)}")
        by_name[ep.name] = (ep, cls)
        by_id[cls.protocol_id] = ep
    return {name: cls for name, (_, cls) in by_name.items()}


def load_protocol(name: str) -> type[Protocol]:
    """The protocol registered as ``name``, loading no other (``load_registry`` checks
    the whole group); the same errors for that one entry point."""
    found = [ep for ep in entry_points(group=GROUP) if ep.name == name]
    if not found:
        raise UnknownProtocolError(name, available())
    if len(found) > 1:
        first, second = sorted(found, key=lambda e: e.value)[:2]
        raise RegistryError(f"protocol name {name!r} is registered twice: "
                            f"{_describe(first)} and {_describe(second)}")
    return _load(found[0])


def available() -> list[str]:
    """Names of every installed protocol, sorted (without loading them)."""
    return sorted({ep.name for ep in entry_points(group=GROUP)})


def get_protocol(name: str) -> type[Protocol]:
    """The protocol class registered as ``name``; ``RegistryError`` if the registry is
    inconsistent, ``UnknownProtocolError`` if no protocol has that name."""
    registry = load_registry()
    try:
        return registry[name]
    except KeyError:
        raise UnknownProtocolError(name, sorted(registry)) from None
