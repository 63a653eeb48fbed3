"""The ``[mobility]`` section: which model moves the nodes, with its parameters.

Each model has its own keys (docs/scenarios.md); a key of another model, a wrong
type or an impossible value is one ``ScenarioError`` naming the key. Checks that
need the rest of the scenario are made here too: waypoints and scripts inside the
area, group radius that fits in it, a track size that fits in memory.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from pathlib import Path

from meshsim.scenario.model import (
    MOBILITY_MODELS,
    Area,
    GaussMarkov,
    GroupMobility,
    LatticeWalk,
    Meta,
    Mobility,
    MobilityParams,
    Nodes,
    RandomWalk,
    RandomWaypoint,
    Waypoint,
)
from meshsim.scenario.reader import (
    ScenarioError,
    Table,
    check_int,
    check_number,
    join,
    type_name,
)
from meshsim.scenario.traces import parse_waypoints

MODEL_KEYS: dict[str, tuple[str, ...]] = {
    "static": (),
    "scripted": ("waypoints", "file"),
    "setdest": ("file", "first_ns2_node"),
    "random_waypoint": ("nodes", "speed_min", "speed_max", "pause_min", "pause_max",
                        "steady_state"),
    "random_walk": ("nodes", "speed_min", "speed_max", "walk_time", "walk_distance"),
    "gauss_markov": ("nodes", "alpha", "mean_speed", "sigma_speed", "mean_direction",
                     "sigma_direction", "time_step", "edge_margin"),
    "group": ("groups", "group_size", "nodes", "radius", "speed_min", "speed_max",
              "pause_min", "pause_max", "member_step"),
    "lattice_walk": ("nodes", "cell_m", "step_s", "motion", "border", "origin_x", "origin_y",
                     "columns", "rows"),
}
LATTICE_MOTIONS = ("glide", "teleport")
LATTICE_BORDERS = ("reflect", "resample")
MAX_TRACK_POINTS = 10_000_000
"""About 240 MB of track in memory; a finer time step is almost certainly a mistake."""

ReadLines = Callable[[Path, str, str], Iterable[str]]


def parse_mobility(t: Table, nodes: Nodes, area: Area, meta: Meta, base_dir: Path,
                   read_lines: ReadLines) -> Mobility:
    model = t.string("model", "static", choices=MOBILITY_MODELS)
    tick = t.number("tick_s", 1.0, lo=0.0, lo_open=True)
    _reject_other_models_keys(t, model)
    ids = set(nodes.ids)
    end = meta.duration_s + meta.drain_s
    waypoints: tuple[Waypoint, ...] = ()
    movers: tuple[int, ...] = ()
    params: MobilityParams | None = None
    if model == "scripted":
        waypoints = _scripted(t, ids, area, base_dir, read_lines)
    elif model == "setdest":
        params = _setdest(t, nodes, area, base_dir, read_lines)
    elif model == "random_waypoint":
        movers = _movers(t, ids)
        params = _random_waypoint(t)
        _check_steady_start(t, nodes, movers, "steady_state" if params.steady_state else "")
    elif model == "random_walk":
        movers = _movers(t, ids)
        params = _random_walk(t)
        if params.walk_distance is not None:
            _check_size(t, "walk_distance",
                        len(movers) * end * params.speed_max / params.walk_distance)
        else:
            _check_size(t, "walk_time", len(movers) * end / (params.walk_time or 1.0))
    elif model == "gauss_markov":
        movers = _movers(t, ids)
        params = _gauss_markov(t, area)
        _check_size(t, "time_step", len(movers) * end / params.time_step)
    elif model == "group":
        params = _group(t, ids, area)
        movers = tuple(sorted(n for g in params.groups for n in g))
        _check_steady_start(t, nodes, movers, "model")
        _check_size(t, "member_step", len(movers) * end / params.member_step)
    elif model == "lattice_walk":
        movers = _movers(t, ids)
        params = _lattice_walk(t, area)
        _check_size(t, "step_s", 2 * len(movers) * end / params.step_s)
    t.done()
    return Mobility(model, tick, waypoints, movers, params)


def _reject_other_models_keys(t: Table, model: str) -> None:
    mine = set(MODEL_KEYS[model]) | {"model", "tick_s"}
    for key in t.data:
        if key not in mine:
            owners = [m for m, keys in MODEL_KEYS.items() if key in keys]
            if owners:
                t.raw(key)
                raise t.err(key, "only for model = " + " or ".join(f'"{m}"' for m in owners))


# ----------------------------------------------------------------------- models


def _scripted(t: Table, ids: set[int], area: Area, base_dir: Path,
              read_lines: ReadLines) -> tuple[Waypoint, ...]:
    waypoints = []
    for i, item in enumerate(t.array("waypoints", [])):
        where = join(join(t.path, "waypoints"), i)
        if not isinstance(item, list) or len(item) != 4:
            raise ScenarioError(where, "expected [t, node, x, y]")
        waypoints.append(Waypoint(check_number(item[0], where, lo=0.0),
                                  check_int(item[1], where),
                                  check_number(item[2], where),
                                  check_number(item[3], where)))
    file = t.opt_string("file")
    if file is not None:
        where = join(t.path, "file")
        waypoints.extend(parse_waypoints(read_lines(base_dir, file, where), f"{where} {file}"))
    if not waypoints:
        raise t.err("waypoints", "scripted mobility needs waypoints or a file")
    for w in waypoints:
        if w.node not in ids:
            raise t.err("waypoints", f"unknown node {w.node}")
        if not (0 <= w.x <= area.width_m and 0 <= w.y <= area.height_m):
            raise t.err("waypoints", f"node {w.node} at t={w.t:g}: ({w.x:g}, {w.y:g}) is "
                                     "outside the area")
    return tuple(sorted(waypoints, key=lambda w: (w.node, w.t)))


def _setdest(t: Table, nodes: Nodes, area: Area, base_dir: Path,
             read_lines: ReadLines) -> MobilityParams:
    from meshsim.mobility.setdest import parse_setdest  # meshsim.mobility imports the model

    file = t.string("file")
    first = t.integer("first_ns2_node", 0, lo=0)
    where = join(t.path, "file")
    return parse_setdest(read_lines(base_dir, file, where), f"{where} {file}",
                         nodes.ids, area, first)


def _random_waypoint(t: Table) -> RandomWaypoint:
    steady = t.boolean("steady_state", True)
    speed_min, speed_max = _speeds(t, positive_min=steady)
    pause_min, pause_max = _pauses(t)
    return RandomWaypoint(speed_min, speed_max, pause_min, pause_max, steady)


def _random_walk(t: Table) -> RandomWalk:
    walk_time = t.opt_number("walk_time", lo=0.0, lo_open=True)
    walk_distance = t.opt_number("walk_distance", lo=0.0, lo_open=True)
    if walk_time is not None and walk_distance is not None:
        raise t.err("walk_distance", "give walk_time or walk_distance, not both")
    speed_min, speed_max = _speeds(t, positive_min=walk_distance is not None,
                                   why="a walk of fixed distance at speed 0 never ends")
    if walk_distance is None and walk_time is None:
        walk_time = 1.0
    return RandomWalk(speed_min, speed_max, walk_time, walk_distance)


def _gauss_markov(t: Table, area: Area) -> GaussMarkov:
    alpha = t.number("alpha", lo=0.0, hi=1.0)
    mean_direction = t.opt_number("mean_direction")
    shorter = min(area.width_m, area.height_m)
    margin = t.number("edge_margin", 0.1 * shorter, lo=0.0)
    if margin >= shorter / 2:
        raise t.err("edge_margin", f"must be less than half the area's shorter side "
                                   f"({shorter / 2:g} m)")
    return GaussMarkov(
        alpha=alpha,
        mean_speed=t.number("mean_speed", lo=0.0),
        sigma_speed=t.number("sigma_speed", lo=0.0),
        sigma_direction=t.number("sigma_direction", lo=0.0),
        mean_direction=mean_direction,
        time_step=t.number("time_step", 1.0, lo=0.0, lo_open=True),
        edge_margin=margin,
    )


def _group(t: Table, ids: set[int], area: Area) -> GroupMobility:
    radius = t.number("radius", lo=0.0, lo_open=True)
    if 2 * radius >= min(area.width_m, area.height_m):
        raise t.err("radius", f"2 * radius must be less than the area's shorter side "
                              f"({min(area.width_m, area.height_m):g} m): the reference "
                              "point moves in the area shrunk by radius on every side")
    speed_min, speed_max = _speeds(t, positive_min=True, why=(
        "reference points move by steady-state random waypoint, which has no steady state "
        "with speeds down to 0 (the mean trip time is infinite)"))
    pause_min, pause_max = _pauses(t)
    return GroupMobility(_groups(t, ids), radius, speed_min, speed_max, pause_min, pause_max,
                         t.number("member_step", 1.0, lo=0.0, lo_open=True))


def _lattice_walk(t: Table, area: Area) -> LatticeWalk:
    cell = t.number("cell_m", lo=0.0, lo_open=True)
    ox = t.number("origin_x", 0.0, lo=0.0, hi=area.width_m)
    oy = t.number("origin_y", 0.0, lo=0.0, hi=area.height_m)
    fit_cols, fit_rows = int((area.width_m - ox) // cell), int((area.height_m - oy) // cell)
    columns = t.integer("columns", fit_cols, lo=1)
    rows = t.integer("rows", fit_rows, lo=1)
    if columns < 1 or rows < 1:  # the defaults when not even one cell fits
        raise t.err("cell_m", f"not one {cell:g} m cell fits in the area from the origin")
    if ox + columns * cell > area.width_m or oy + rows * cell > area.height_m:
        raise t.err("columns", f"a {columns} x {rows} lattice of {cell:g} m cells from "
                               f"({ox:g}, {oy:g}) does not fit in the area")
    if columns == 1 and rows == 1:
        raise t.err("columns", "a lattice of one cell has nowhere to walk")
    return LatticeWalk(
        cell_m=cell, columns=columns, rows=rows,
        step_s=t.number("step_s", 1.0, lo=0.0, lo_open=True),
        motion=t.string("motion", "glide", choices=LATTICE_MOTIONS),
        border=t.string("border", "reflect", choices=LATTICE_BORDERS),
        origin_x=ox, origin_y=oy)


# ---------------------------------------------------------------------- helpers


def _speeds(t: Table, *, positive_min: bool, why: str = "") -> tuple[float, float]:
    speed_min = t.number("speed_min", lo=0.0)
    if positive_min and speed_min <= 0:
        raise t.err("speed_min", "must be > 0: " + (why or (
            "with speeds down to 0 the mean trip time is infinite, so random waypoint has "
            "no steady state (nodes slow down for ever); set steady_state = false for the "
            "classic model")))
    speed_max = t.number("speed_max", lo=0.0, lo_open=True)
    if speed_max < speed_min:
        raise t.err("speed_max", f"must be >= speed_min ({speed_min:g})")
    return speed_min, speed_max


def _pauses(t: Table) -> tuple[float, float]:
    pause_min = t.number("pause_min", 0.0, lo=0.0)
    pause_max = t.number("pause_max", pause_min, lo=0.0)
    if pause_max < pause_min:
        raise t.err("pause_max", f"must be >= pause_min ({pause_min:g})")
    return pause_min, pause_max


def _movers(t: Table, ids: set[int]) -> tuple[int, ...]:
    raw = t.raw("nodes", "all")
    if raw == "all":
        return tuple(sorted(ids))
    return _id_list(raw, join(t.path, "nodes"), ids)


def _id_list(raw: object, path: str, ids: set[int]) -> tuple[int, ...]:
    if not isinstance(raw, list) or not raw:
        raise ScenarioError(path, f"expected \"all\" or a non-empty array of node ids, got "
                                  f"{type_name(raw)}")
    out: list[int] = []
    for i, v in enumerate(raw):
        node = check_int(v, f"{path}[{i}]")
        if node not in ids:
            raise ScenarioError(f"{path}[{i}]", f"unknown node {node}")
        if node in out:
            raise ScenarioError(f"{path}[{i}]", f"node {node} is listed twice")
        out.append(node)
    return tuple(sorted(out))


def _groups(t: Table, ids: set[int]) -> tuple[tuple[int, ...], ...]:
    if t.has("groups"):
        if t.has("group_size") or t.has("nodes"):
            key = "group_size" if t.has("group_size") else "nodes"
            t.raw(key)
            raise t.err(key, "not with groups (the groups list the moving nodes)")
        raw = t.array("groups")
        if not raw:
            raise t.err("groups", "at least one group is needed")
        groups = [_id_list(g, f"{t.path}.groups[{i}]", ids) for i, g in enumerate(raw)]
        seen: set[int] = set()
        for i, g in enumerate(groups):
            twice = seen.intersection(g)
            if twice:
                raise ScenarioError(f"{t.path}.groups[{i}]",
                                    f"node {min(twice)} is in two groups")
            seen.update(g)
        return tuple(groups)
    if not t.has("group_size"):
        raise t.err("groups", "give groups (arrays of node ids) or group_size")
    size = t.integer("group_size", lo=1)
    movers = _movers(t, ids)
    return tuple(movers[i:i + size] for i in range(0, len(movers), size))


def _check_steady_start(t: Table, nodes: Nodes, movers: tuple[int, ...], key: str) -> None:
    """Models that draw start positions would silently discard a placement's promises."""
    if not key:
        return
    what = ("steady-state random waypoint" if key == "steady_state" else "group mobility")
    if nodes.connected and movers:
        raise t.err(key, f"nodes.connected judges the placement, but {what} draws the "
                         "start positions of the nodes it moves")
    pinned = sorted(set(movers).intersection(p[0] for p in nodes.pinned))
    if pinned:
        raise t.err(key, f"node {pinned[0]} is pinned, but {what} draws its start position "
                         "(leave it out of the moving nodes)")


def _check_size(t: Table, key: str, points: float) -> None:
    if math.isfinite(points) and points <= MAX_TRACK_POINTS:
        return
    raise t.err(key, f"about {points:,.0f} track points for this run (limit "
                     f"{MAX_TRACK_POINTS:,}): make the step coarser or the run shorter")
