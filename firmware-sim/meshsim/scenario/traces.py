"""Readers for the two trace formats a scenario may name: contacts and waypoints.

Contacts use the ONE simulator's connection events (``time CONN a b up|down``,
as written by its ``StandardEventsReader``), so existing DTN traces replay as-is.
Waypoints are ``t node x y`` lines. Both allow blank lines and ``#`` comments.
"""

from __future__ import annotations

from collections.abc import Iterable

from meshsim.scenario.model import Contact, Waypoint
from meshsim.scenario.reader import ScenarioError, check_int, check_number


def parse_contact_line(line: str, path: str) -> Contact:
    """One ONE connection event; ``path`` names it in errors."""
    parts = line.split()
    if len(parts) != 5 or parts[1] != "CONN" or parts[4] not in ("up", "down"):
        raise ScenarioError(path, f"expected 'time CONN a b up|down', got {line.strip()!r}")
    try:
        t = float(parts[0])
        a, b = int(parts[2]), int(parts[3])
    except ValueError:
        raise ScenarioError(path, f"bad number in {line.strip()!r}") from None
    check_number(t, path, lo=0.0)
    if a == b:
        raise ScenarioError(path, f"a node cannot have a contact with itself ({a})")
    return Contact(t, check_int(a, path, lo=0), check_int(b, path, lo=0), parts[4] == "up")


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
