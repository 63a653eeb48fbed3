"""The mobility log: every track point as a ``t node x y`` line.

It is the format of ``[mobility] model = "scripted"`` + ``file = ...``, so any run,
whatever its model, replays in the simulator as scripted mobility with exactly
the same positions: floats are written with ``repr`` (shortest text that reads
back to the same double) and every node's t = 0 point is included.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

from meshsim.mobility.trajectories import Trajectories
from meshsim.scenario.model import Waypoint

LOG_NAME = "mobility.log"


def format_waypoint(w: Waypoint) -> str:
    return f"{w.t!r} {w.node} {w.x!r} {w.y!r}"


def write_log(trajectories: Trajectories, out: TextIO, header: str = "") -> int:
    """Write the log (``#`` header lines, then points by time and node); return the
    number of points."""
    for line in header.splitlines():
        out.write(f"# {line}\n")
    n = 0
    for w in trajectories.waypoints():
        out.write(format_waypoint(w) + "\n")
        n += 1
    return n


def write_mobility_log(trajectories: Trajectories, path: Path, header: str = "") -> int:
    """``write_log`` to ``path`` under a temporary name, renamed when complete."""
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as fh:
        n = write_log(trajectories, fh, header)
    os.replace(tmp, path)
    return n
