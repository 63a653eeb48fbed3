"""Readers for the two trace formats a scenario may name: contacts and waypoints.

Contacts use the ONE simulator's connection events (``time CONN a b up|down``,
as written by its ``StandardEventsReader``), so existing DTN traces replay as-is.
Waypoints are ``t node x y`` lines. Both allow blank lines and ``#`` comments.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from meshsim.scenario.model import Contact, Waypoint
from meshsim.scenario.reader import ScenarioError, check_number


def parse_contact_line(line: str, path: str) -> Contact:
    """One ONE connection event; ``path`` names it in errors.

    Read as the ONE's ``StandardEventsReader`` reads it: ``time CONN host1 host2
    up|down [interface]``, up/down in any case, host ids either numbers or a name
    ending in the number (``p12`` is 12). The interface id is accepted and ignored
    (one radio per node). Message events (``C``, ``S``, ``DE``, ...) are refused:
    the workload comes from ``[workload]``.
    """
    parts = line.split()
    if len(parts) >= 2 and parts[1] in ONE_MESSAGE_EVENTS:
        raise ScenarioError(path, f"ONE message event {parts[1]!r} in a contact trace "
                                  f"(only CONN events are replayed): {line.strip()!r}")
    if len(parts) not in (5, 6) or parts[1] != "CONN" \
            or parts[4].lower() not in ("up", "down"):
        raise ScenarioError(path, f"expected 'time CONN a b up|down', got {line.strip()!r}")
    try:
        t = float(parts[0])
    except ValueError:
        raise ScenarioError(path, f"bad number in {line.strip()!r}") from None
    a, b = _host(parts[2], line, path), _host(parts[3], line, path)
    check_number(t, path, lo=0.0)
    if a == b:
        raise ScenarioError(path, f"a node cannot have a contact with itself ({a})")
    return Contact(t, a, b, parts[4].lower() == "up")


ONE_MESSAGE_EVENTS = ("C", "S", "DE", "A", "DR", "R")
_HOST = re.compile(r"(?:[^\d+-]\D*)?(\d+)")
"""ONE's rule (digits, or a name ending in digits), but no sign: -1 is not host 1."""


def _host(text: str, line: str, path: str) -> int:
    m = _HOST.fullmatch(text)
    if m is None:
        raise ScenarioError(path, f"bad host id {text!r} in {line.strip()!r}")
    return int(m.group(1))


def parse_contacts(lines: Iterable[str], path: str) -> list[Contact]:
    out = []
    for lineno, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if text:
            out.append(parse_contact_line(text, f"{path}:{lineno}"))
    return out


def parse_waypoints(lines: Iterable[str], path: str) -> list[Waypoint]:
    out = []
    for lineno, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        where = f"{path}:{lineno}"
        parts = text.split()
        if len(parts) != 4:
            raise ScenarioError(where, f"expected 't node x y', got {text!r}")
        try:
            t, node, x, y = float(parts[0]), int(parts[1]), float(parts[2]), float(parts[3])
        except ValueError:
            raise ScenarioError(where, f"bad number in {text!r}") from None
        out.append(Waypoint(check_number(t, where, lo=0.0), node, check_number(x, where),
                            check_number(y, where)))
    return out
