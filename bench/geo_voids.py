"""HESPER around voids (issue 21): the fields, and the sweep hook that draws them per seed.

Issue 21's set-up, on fields of our own: 1000 m x 1000 m, unit disk TR = 100 m, no loss,
no per-hop ACKs (the thesis's message counts), four publishers in the west strip, 40
subscribers in the east strip joining one after another (each subscribes to one
publisher's region, i.e. its cell), then three events per publisher: 120 expected
deliveries per run. The fields:

- ``uniform``: 800 random nodes (the reference: no void);
- ``hole``: the same density with a disc of radius 150 m in the middle left empty;
- ``ushape``: a concave deployment, the field less a 500 m x 750 m bay open to the
  north; publishers and subscribers at the tops of the two arms;
- ``river``: a river 150 m wide (wider than TR) from north to south with a single
  crossing, a bridge 60 m wide near the north edge.

Each seed draws its own connected placement, publishers and subscribers
(``random.Random(f"voids:{field}:{seed}")``). The ``voids`` block of
experiments/hesper.sweep.toml runs every field under HESPER-I/II, DF and flooding:
``derive`` below is the sweep's hook that turns a point's field and seed into the
placement and workload, and experiments/hesper.claims.toml judges the runs on
docs/results/hesper.md (section "Around voids"). Seed 1 of each field is shipped as
``firmware-sim/meshsim/scenarios/voids-<field>.toml``:

    .venv/bin/python bench/geo_voids.py --write-scenarios
"""

from __future__ import annotations

import argparse
import json
import math
import random
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SCENARIOS = ROOT / "firmware-sim" / "meshsim" / "scenarios"
SIDE = 1000.0
TR = 100.0
PUBLISHERS = 4
SUBSCRIBERS = 40
EVENTS_PER_PUBLISHER = 3
SUB_INTERVAL = 0.5

Rect = tuple[float, float, float, float]


@dataclass(frozen=True)
class Field:
    """A deployment: where nodes may stand, and where publishers and subscribers are."""

    name: str
    nodes: int
    void: Callable[[float, float], bool]
    west: Rect
    """Publishers are drawn from the nodes in this rectangle (x0, y0, x1, y1)."""
    east: Rect
    """Subscribers are drawn from the nodes in this rectangle."""
    description: str


def _in(rect: Rect, x: float, y: float) -> bool:
    return rect[0] <= x <= rect[2] and rect[1] <= y <= rect[3]


FIELDS = {
    f.name: f for f in (
        Field("uniform", 800, lambda x, y: False, (20, 50, 150, 950), (850, 50, 980, 950),
              "800 random nodes, no void (the reference)"),
        Field("hole", 730, lambda x, y: math.hypot(x - 500, y - 500) < 150,
              (20, 50, 150, 950), (850, 50, 980, 950),
              "a disc of radius 150 m in the middle without nodes"),
        Field("ushape", 500, lambda x, y: 250 < x < 750 and y > 250,
              (20, 600, 200, 980), (800, 600, 980, 980),
              "a concave deployment: the field less a 500 m x 750 m bay open to the north"),
        Field("river", 680, lambda x, y: 425 < x < 575 and not 800 <= y <= 860,
              (20, 50, 150, 950), (850, 50, 980, 950),
              "a river 150 m wide from north to south, one bridge 60 m wide at y = 800..860"),
    )
}
"""Node counts keep the density of the uniform field (800 per km2) on the land left."""


# ------------------------------------------------------------------ scenarios


def _connected(pos: Sequence[tuple[float, float]]) -> bool:
    cell = TR
    grid: dict[tuple[int, int], list[int]] = {}
    for i, (x, y) in enumerate(pos):
        grid.setdefault((int(x // cell), int(y // cell)), []).append(i)
    seen = {0}
    todo = deque([0])
    while todo:
        i = todo.popleft()
        x, y = pos[i]
        cx, cy = int(x // cell), int(y // cell)
        for gx in (cx - 1, cx, cx + 1):
            for gy in (cy - 1, cy, cy + 1):
                for j in grid.get((gx, gy), ()):
                    if j not in seen and math.dist(pos[i], pos[j]) <= TR:
                        seen.add(j)
                        todo.append(j)
    return len(seen) == len(pos)


@dataclass(frozen=True)
class Draw:
    """One seed of a field: node positions (node i + 1 at ``positions[i]``), the
    publishers with their cells, the subscribers (indices into ``positions``)."""

    positions: list[tuple[float, float]]
    publishers: list[int]
    cells: list[tuple[int, int]]
    subscribers: list[int]


def draw(field: Field, seed: int) -> Draw:
    """Placement, publishers and subscribers of ``field`` for ``seed``, drawn from
    ``random.Random(f"voids:{field}:{seed}")`` (connected placements only)."""
    rng = random.Random(f"voids:{field.name}:{seed}")
    for _ in range(200):
        pos: list[tuple[float, float]] = []
        while len(pos) < field.nodes:
            x, y = round(rng.uniform(0, SIDE), 1), round(rng.uniform(0, SIDE), 1)
            if not field.void(x, y):
                pos.append((x, y))
        if _connected(pos):
            break
    else:
        raise RuntimeError(f"no connected placement of {field.name} for seed {seed}")
    s = TR / math.sqrt(2)
    west = [i for i, p in enumerate(pos) if _in(field.west, *p)]
    rng.shuffle(west)
    publishers: list[int] = []
    cells: list[tuple[int, int]] = []
    for i in west:
        c = (int(pos[i][0] // s), int(pos[i][1] // s))
        if c not in cells:
            publishers.append(i)
            cells.append(c)
        if len(publishers) == PUBLISHERS:
            break
    east = [i for i, p in enumerate(pos) if _in(field.east, *p)]
    return Draw(pos, publishers, cells, rng.sample(east, SUBSCRIBERS))


T_PUBLISH = 1.0 + SUBSCRIBERS * SUB_INTERVAL + 10.0
"""The first event: every subscription made, ten seconds to settle."""
DURATION = T_PUBLISH + PUBLISHERS * EVENTS_PER_PUBLISHER + 10.0


def subscriptions(d: Draw) -> list[dict[str, Any]]:
    """Subscriber k subscribes to publisher k mod 4's region, 0.5 s after subscriber k-1."""
    out = []
    for k, i in enumerate(d.subscribers):
        gx, gy = d.cells[k % PUBLISHERS]
        out.append({"node": i + 1, "expr": f"temp gx={gx} gy={gy}",
                    "t": 1.0 + k * SUB_INTERVAL})
    return out


def publications(d: Draw) -> list[dict[str, Any]]:
    """Three rounds of one event per publisher, a second apart."""
    out = []
    t = T_PUBLISH
    for round_ in range(EVENTS_PER_PUBLISHER):
        for k, i in enumerate(d.publishers):
            gx, gy = d.cells[k]
            out.append({"t": t, "node": i + 1,
                        "event": f"temp gx={gx} gy={gy} value={round_}"})
            t += 1.0
    return out


def _toml(value: Any) -> str:
    """An inline TOML value (numbers, strings, lists and tables of them)."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return repr(value)


def derive(scenario: Any, point: Any) -> list[str]:
    """experiments/hesper.sweep.toml's hook: a point with a ``field`` (the ``voids``
    block) gets that field's placement and workload for its seed; any other point
    nothing. A pure function of the field and the seed."""
    name = point.values.get("field")
    if name is None:
        return []
    field = FIELDS[str(name)]
    d = draw(field, int(point.seed))
    return [
        f"scenario.name={_toml(f'voids-{field.name}')}",
        f"scenario.duration_s={DURATION!r}",
        "nodes.positions=" + _toml([{"x": x, "y": y} for x, y in d.positions]),
        "workload.subscriptions=" + _toml(subscriptions(d)),
        "workload.publications=" + _toml(publications(d)),
    ]


def scenario_text(field: Field, seed: int) -> str:
    """The scenario file of ``field`` for ``seed`` (``--write-scenarios``)."""
    d = draw(field, seed)
    pos = d.positions
    lines = [
        f"# HESPER around voids (issue 21): {field.description}.",
        f"# Generated by `python bench/geo_voids.py --write-scenarios` (field {field.name},"
        f" seed {seed});",
        "# experiments/hesper.sweep.toml (block voids) runs every field over several seeds",
        "# under HESPER-I/II, DF and flooding, drawing each seed's placement with",
        "# bench/geo_voids.py's derive. Publishers west, subscribers east; 120 expected",
        "# deliveries.",
        "[scenario]",
        f'name = "voids-{field.name}"',
        f"seed = {seed}",
        f"duration_s = {DURATION}",
        "drain_s = 10.0",
        f'description = "HESPER around voids: {field.description}"',
        "",
        "[area]",
        f"width_m = {SIDE}",
        f"height_m = {SIDE}",
        "",
        "[radio]",
        'model = "unit_disk"',
        f"range_m = {TR}",
        "",
        "[protocol]",
        'name = "hesper"',
        "",
        "[protocol.hesper]",
        'variant = "II"',
        f"TR = {TR}",
        f"area_width_m = {SIDE}",
        f"area_height_m = {SIDE}",
        "beacon_s = 0.0              # static, loss-free: membership from the neighbour table",
        "reliable_control = false    # the thesis's message counts: no ACKs",
        "per_hop_rtt_s = 0.005       # 1 ms per simulated hop",
        "sub_refresh_s = 600.0",
        "lease_s = 1800.0",
        "",
        "[protocol.df]",
        f"TR = {TR}",
        f"area_width_m = {SIDE}",
        f"area_height_m = {SIDE}",
        "",
        "[protocol.flooding]",
        "ttl = 64                    # detours round a void are long",
        "",
        "[nodes]",
        'placement = "explicit"',
        "positions = [",
        *(f"  {{x = {x}, y = {y}}}," for x, y in pos),
        "]",
        "",
    ]
    for sub in subscriptions(d):
        lines += ["[[workload.subscriptions]]", f"node = {sub['node']}",
                  f"expr = {_toml(sub['expr'])}", f"t = {sub['t']}", ""]
    for pub in publications(d):
        lines += ["[[workload.publications]]", f"t = {pub['t']}", f"node = {pub['node']}",
                  f"event = {_toml(pub['event'])}", ""]
    return "\n".join(lines)


def write_scenarios() -> None:
    for field in FIELDS.values():
        path = SCENARIOS / f"voids-{field.name}.toml"
        path.write_text(scenario_text(field, 1), encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write-scenarios", action="store_true", required=True,
                        help="write seed 1 of every field into the scenarios folder")
    parser.parse_args()
    write_scenarios()


if __name__ == "__main__":
    main()
