"""ns-2 movement scripts (``setdest``, BonnMotion, CORE): reader and replay.

The lines understood are those the generators write::

    $node_(3) set X_ 150.0          # start position (Z_ is read and ignored)
    $node_(3) set Y_ 93.98
    $ns_ at 2.5 "$node_(3) setdest 100.0 200.0 5.0"    # head for (x, y) at 5 m/s
    $god_ set-dist 0 1 2            # routing oracle hints: ignored
    $ns_ at 30.0 "$god_ set-dist 1 2 1"

As in ns-2, a ``setdest`` makes the node head from wherever it is at that moment
towards (x, y) in a straight line at the given speed and stop there; a later
``setdest`` replaces the current one mid-way; speed 0 stops the node where it is.

Node numbers: ns-2 node ``first_ns2_node + i`` is the scenario's i-th node in id
order (with ``first_ns2_node = 0`` and ``nodes.first_id = 0`` the numbers are the
ids). Any other line, a number that does not parse, a node without its
counterpart in the scenario or a position outside the area is a one-line
``ScenarioError`` naming file and line.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

from meshsim.mobility.trajectories import Track
from meshsim.scenario.model import Area, Setdest, SetdestMove
from meshsim.scenario.reader import ScenarioError

_NUM = r"(\S+)"
_SET = re.compile(r"\$node_\((\d+)\)\s+set\s+([XYZ])_\s+" + _NUM)
_SETDEST = re.compile(r'\$ns_\s+at\s+' + _NUM
                      + r'\s+"\s*\$node_\((\d+)\)\s+setdest\s+' + _NUM + r"\s+" + _NUM
                      + r"\s+" + _NUM + r'\s*"')
_GOD = re.compile(r'\$god_\s.*|\$ns_\s+at\s+\S+\s+"\s*\$god_\s[^"]*"')
EXPECTED = "expected '$node_(i) set X_|Y_|Z_ v' or '$ns_ at t \"$node_(i) setdest x y speed\"'"


def parse_setdest(lines: Iterable[str], where: str, ids: Sequence[int], area: Area,
                  first_ns2_node: int = 0) -> Setdest:
    """Read a script; ``where`` names it in errors, ``ids`` are the scenario's node ids."""
    order = sorted(ids)
    xs: dict[int, tuple[float, str]] = {}
    ys: dict[int, tuple[float, str]] = {}
    moves: list[SetdestMove] = []
    for lineno, line in enumerate(lines, 1):
        text = line.split("#", 1)[0].strip()
        at = f"{where}:{lineno}"
        if not text or _GOD.fullmatch(text):
            continue
        if m := _SET.fullmatch(text):
            node = _node(m.group(1), order, first_ns2_node, at)
            value = _number(m.group(3), at)
            if m.group(2) == "X":
                xs[node] = (_within(value, area.width_m, "X_", at), at)
            elif m.group(2) == "Y":
                ys[node] = (_within(value, area.height_m, "Y_", at), at)
            continue
        if m := _SETDEST.fullmatch(text):
            t = _number(m.group(1), at)
            if t < 0:
                raise ScenarioError(at, f"negative time {t:g}")
            node = _node(m.group(2), order, first_ns2_node, at)
            x = _within(_number(m.group(3), at), area.width_m, "x", at)
            y = _within(_number(m.group(4), at), area.height_m, "y", at)
            speed = _number(m.group(5), at)
            if speed < 0:
                raise ScenarioError(at, f"negative speed {speed:g}")
            moves.append(SetdestMove(t, node, x, y, speed))
            continue
        raise ScenarioError(at, f"{EXPECTED}, got {text!r}")
    for node in sorted(set(xs) ^ set(ys)):
        have, missing = ("X_", "Y_") if node in xs else ("Y_", "X_")
        line_at = (xs.get(node) or ys[node])[1]
        raise ScenarioError(line_at, f"node {node} gets {have} but never {missing}")
    start = tuple((node, xs[node][0], ys[node][0]) for node in sorted(xs))
    moves.sort(key=lambda mv: mv.t)  # stable: same-time moves keep file order
    return Setdest(where, first_ns2_node, start, tuple(moves))


def setdest_tracks(script: Setdest, placed: Mapping[int, tuple[float, float]]
                   ) -> dict[int, Track]:
    """The tracks of every node the script mentions (others stay where placed)."""
    start = {node: (x, y) for node, x, y in script.start}
    by_node: dict[int, list[SetdestMove]] = {}
    for mv in script.moves:
        by_node.setdefault(mv.node, []).append(mv)
    return {node: _replay(start.get(node, placed[node]), by_node.get(node, []))
            for node in sorted(set(start) | set(by_node))}


def _replay(start: tuple[float, float], moves: list[SetdestMove]) -> Track:
    track = Track(*start)
    heading: tuple[float, float, float] | None = None  # arrival time, x, y
    for mv in moves:
        x, y = track.end
        if heading is not None:
            arrive, hx, hy = heading
            if arrive <= mv.t:
                track.add(arrive, hx, hy)
                x, y = hx, hy
            else:
                x, y = _along(track, heading, mv.t)
        track.add(mv.t, x, y)
        distance = math.hypot(mv.x - x, mv.y - y)
        heading = None if mv.speed == 0 or distance == 0 else (
            mv.t + distance / mv.speed, mv.x, mv.y)
    if heading is not None:
        track.add(*heading)
    return track


def _along(track: Track, heading: tuple[float, float, float], t: float) -> tuple[float, float]:
    """Where a node heading from the track's last point is at ``t`` (before arriving)."""
    t0 = track.last_t
    x0, y0 = track.end
    arrive, hx, hy = heading
    frac = (t - t0) / (arrive - t0)
    return x0 + (hx - x0) * frac, y0 + (hy - y0) * frac


def _node(text: str, order: Sequence[int], first: int, at: str) -> int:
    index = int(text) - first
    if not 0 <= index < len(order):
        raise ScenarioError(at, f"$node_({text}) has no scenario node (ns-2 nodes "
                                f"{first}..{first + len(order) - 1} map to the "
                                f"{len(order)} node ids in order)")
    return order[index]


def _number(text: str, at: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ScenarioError(at, f"bad number {text!r}") from None
    if not math.isfinite(value):
        raise ScenarioError(at, f"bad number {text!r}")
    return value


def _within(value: float, limit: float, name: str, at: str) -> float:
    if not 0 <= value <= limit:
        raise ScenarioError(at, f"{name} = {value:g} is outside the area (0..{limit:g})")
    return value
