"""Protocols by name, through the ``meshsub.protocols`` entry-point group.

Built-in protocols register the same way (in ``pyproject.toml``), so a
protocol in another distribution is a peer, not a special case.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from meshsub.core.protocol import Protocol

GROUP = "meshsub.protocols"


class UnknownProtocolError(LookupError):
    def __init__(self, name: str, known: list[str]) -> None:
        super().__init__(f"unknown protocol {name!r} (known: {', '.join(known) or 'none'})")
        self.name = name


def available() -> list[str]:
    """Names of every installed protocol, sorted."""
    return sorted({ep.name for ep in entry_points(group=GROUP)})


def get_protocol(name: str) -> type[Protocol]:
    """The protocol class registered as ``name``."""
    for ep in entry_points(group=GROUP, name=name):
        cls = ep.load()
        if not (isinstance(cls, type) and issubclass(cls, Protocol)):
            raise TypeError(f"entry point {name!r} ({ep.value}) is not a Protocol subclass")
        return cls
    raise UnknownProtocolError(name, available())
