"""The ONE simulator's connection-event format: ``time CONN a b up|down``.

Writing lives here; reading is ``meshsim.scenario.traces`` (the scenario
loader's reader), re-exported so one module serves both directions.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TextIO

from meshsim.scenario.model import Contact
from meshsim.scenario.traces import parse_contacts


def format_contact(c: Contact) -> str:
    """One line; times keep millisecond precision (the ONE reads any float)."""
    t = f"{c.t:.3f}".rstrip("0").rstrip(".")
    return f"{t} CONN {c.a} {c.b} {'up' if c.up else 'down'}"


def write_one(contacts: Iterable[Contact], out: TextIO, header: str = "") -> int:
    """Write ``contacts`` (already time-ordered) to ``out``; return the line count."""
    for line in header.splitlines():
        out.write(f"# {line}\n")
    n = 0
    for c in contacts:
        out.write(format_contact(c) + "\n")
        n += 1
    return n


def read_one(path: str | Path) -> list[Contact]:
    """Read a ONE connection trace (``ScenarioError`` with file:line on bad input)."""
    p = Path(path)
    with p.open(encoding="utf-8") as fh:
        return parse_contacts(fh, str(p))
