"""``[[nodes.groups]]``: nodes placed, moved and given a role together.

A scenario with groups describes, say, 25 static base stations on a lattice plus
three clients walking it, or brokers in their cells plus ferries: each group
has its count (ids follow on from the previous group unless ``first_id`` says
otherwise), placement, mobility (a ``mobility`` table with the keys of
``[mobility]``) and role. Everything is checked here, with the group's key path
in every error.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from pathlib import Path

from meshsim.scenario.mobility_section import ReadLines, parse_mobility
from meshsim.scenario.model import (
    PLACEMENTS,
    Area,
    Meta,
    Mobility,
    NodeGroup,
    Nodes,
)
from meshsim.scenario.reader import ScenarioError, Table, check_number, type_name
from meshsub.core.roles import RoleError, check_role

GROUP_NAME_HELP = "a group name is a role-like name ([a-z][a-z0-9_]{0,31})"
NODE_ID_MAX = 0xFFFF_FFFF


def parse_groups(t: Table, area: Area, meta: Meta, base_dir: Path, read_lines: ReadLines,
                 pinned: tuple[tuple[int, float, float], ...], connected: bool,
                 max_tries: int) -> Nodes:
    """``[nodes]`` with ``groups``: every group, then the whole ``Nodes``."""
    tables = t.tables("groups")
    if not tables:
        raise t.err("groups", "at least one group is needed")
    groups: list[NodeGroup] = []
    names: set[str] = set()
    taken: set[int] = set()
    next_id = 1
    for gt in tables:
        group = _group(gt, area, next_id, taken)
        if group.name in names:
            raise gt.err("name", f"group {group.name!r} is defined twice")
        names.add(group.name)
        taken.update(group.ids)
        next_id = max(group.ids) + 1
        groups.append(group)
    ids = tuple(sorted(taken))
    for pid, _, _ in pinned:
        if pid not in taken:
            raise t.err("pinned", f"node {pid} is not one of the scenario's nodes")
    if connected and not any(g.placement == "random" for g in groups):
        raise t.err("connected", "only with a group of placement = \"random\"")
    placed = Nodes(count=len(ids), placement="groups", ids=ids, connected=connected,
                   max_tries=max_tries, pinned=pinned, groups=tuple(groups))
    # each group's mobility, now that every node id is known
    moved = []
    for group, gt in zip(groups, tables, strict=True):
        view = Nodes(count=len(group.ids), placement=group.placement, ids=group.ids,
                     connected=connected and group.placement == "random",
                     pinned=tuple(p for p in pinned if p[0] in group.ids))
        mt = gt.table("mobility")
        mobility = parse_mobility(mt, view, area, meta, base_dir, read_lines) \
            if mt.data else Mobility()
        gt.done()
        moved.append(dataclasses.replace(group, mobility=mobility))
    return Nodes(count=placed.count, placement=placed.placement, ids=ids,
                 connected=connected, max_tries=max_tries, pinned=pinned,
                 groups=tuple(moved))


def _group(t: Table, area: Area, next_id: int, taken: set[int]) -> NodeGroup:
    name = t.string("name")
    try:
        check_role(name)
    except RoleError:
        raise t.err("name", f"{name!r}: {GROUP_NAME_HELP}") from None
    placement = t.string("placement", choices=PLACEMENTS)
    ids, positions = members(t, placement, area, next_id, id_required=True)
    clash = sorted(set(ids) & taken) or sorted(i for i in set(ids) if ids.count(i) > 1)
    if clash:
        raise t.err("count" if placement != "explicit" else "positions",
                    f"node id {clash[0]} is already another node's (give first_id)")
    role = t.opt_string("role")
    if role is not None:
        try:
            check_role(role)
        except RoleError as exc:
            raise t.err("role", str(exc)) from None
    spacing = t.opt_number("spacing_m", lo=0.0, lo_open=True)
    columns = t.opt_integer("columns", lo=1)
    origin = _pair(t, "origin", (0.0, 0.0), area) if placement == "lattice" else (0.0, 0.0)
    box = _box(t, area) if placement == "random" else None
    for key, only in (("spacing_m", ("grid", "line", "lattice")), ("columns", ("grid", "lattice")),
                      ("origin", ("lattice",)), ("box", ("random",))):
        if t.has(key) and placement not in only:
            t.raw(key)
            raise t.err(key, "only for placement = " + " or ".join(f'"{p}"' for p in only))
    if placement == "lattice" and spacing is None:
        raise t.err("spacing_m", "a lattice needs its spacing (the cell size)")
    group = NodeGroup(name=name, ids=tuple(ids), placement=placement, role=role,
                      spacing_m=spacing, columns=columns, origin=origin, box=box,
                      positions=tuple(positions), mains=t.boolean("mains", False))
    _check_fits(t, group, area)
    return group


def members(t: Table, placement: str, area: Area, first_default: int, *,
            id_required: bool) -> tuple[list[int], list[tuple[int, float, float]]]:
    """The node ids a placement table gives (``count``/``first_id``, or ``positions``
    for ``explicit``), with the explicit positions; duplicates are the caller's to judge."""
    positions: list[tuple[int, float, float]] = []
    if placement == "explicit":
        for pt in t.tables("positions"):
            pid = (pt.integer("id", lo=0, hi=NODE_ID_MAX) if id_required
                   else pt.integer("id", len(positions) + 1, lo=0, hi=NODE_ID_MAX))
            positions.append((pid, pt.number("x", lo=0.0, hi=area.width_m),
                              pt.number("y", lo=0.0, hi=area.height_m)))
            pt.done()
        if not positions:
            raise t.err("positions", "explicit placement needs at least one position")
        count = t.integer("count", len(positions), lo=1)
        if count != len(positions):
            raise t.err("count", f"is {count} but {len(positions)} positions are listed")
        return [p[0] for p in positions], positions
    if t.has("positions"):
        t.raw("positions")
        raise t.err("positions", f"only for placement = \"explicit\" (not {placement!r})")
    count = t.integer("count", lo=1, hi=100_000)
    first = t.integer("first_id", first_default, lo=0, hi=NODE_ID_MAX - count + 1)
    return list(range(first, first + count)), positions


def _pair(t: Table, key: str, default: tuple[float, float], area: Area) -> tuple[float, float]:
    raw = t.raw(key, list(default))
    path = f"{t.path}.{key}"
    if not isinstance(raw, list) or len(raw) != 2:
        raise ScenarioError(path, f"expected [x, y], got {type_name(raw)}")
    return (check_number(raw[0], path, lo=0.0, hi=area.width_m),
            check_number(raw[1], path, lo=0.0, hi=area.height_m))


def _box(t: Table, area: Area) -> tuple[float, float, float, float] | None:
    raw = t.raw("box", None)
    if raw is None:
        return None
    path = f"{t.path}.box"
    if not isinstance(raw, list) or len(raw) != 4:
        raise ScenarioError(path, "expected [x_min, y_min, x_max, y_max]")
    x0, y0, x1, y1 = (check_number(v, path, lo=0.0) for v in raw)
    if not (x0 < x1 <= area.width_m and y0 < y1 <= area.height_m):
        raise ScenarioError(path, "must be a non-empty rectangle inside the area")
    return x0, y0, x1, y1


def lattice_shape(group: NodeGroup) -> tuple[int, int]:
    """(columns, rows) a lattice or grid group fills."""
    n = len(group.ids)
    cols = group.columns if group.columns is not None else math.ceil(math.sqrt(n))
    return cols, math.ceil(n / cols)


def _check_fits(t: Table, group: NodeGroup, area: Area) -> None:
    if group.placement == "lattice":
        assert group.spacing_m is not None
        cols, rows = lattice_shape(group)
        ox, oy = group.origin
        if ox + cols * group.spacing_m > area.width_m or oy + rows * group.spacing_m \
                > area.height_m:
            raise t.err("spacing_m", f"a {cols} x {rows} lattice of {group.spacing_m:g} m "
                                     f"cells from ({ox:g}, {oy:g}) does not fit in the area")


def group_nodes(groups: Iterable[NodeGroup], name: str) -> tuple[int, ...] | None:
    """The ids of group ``name``, or None if the scenario has no such group."""
    for group in groups:
        if group.name == name:
            return group.ids
    return None
