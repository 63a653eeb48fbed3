"""Square grid cells over local metres: the geometry HESPER, PUMA, GIANT and BRVST share.

Coordinates are local metres about the deployment origin (x east, y north),
as in ``meshsub.core.api.Position``. A cell's index is the floor
formula of Zheng 2008 (§4.2, §5.2, §6.2):
``gx = floor((x - x0) / s)``, ``gy = floor((y - y0) / s)``,
with ``(x0, y0)`` the lower-left corner, ``gx`` growing east and ``gy`` north.
Cells own their west and south borders; a point exactly on the far (east or
north) edge of the deployment belongs to the last cell, so every point of the
closed rectangle has a cell.

``CellTracker`` adds hysteresis at cell borders: GPS jitter of
a node standing on a border must not flip its cell, because every flip forces
broker re-elections.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple, TypeAlias

Point: TypeAlias = tuple[float, float]
"""A point in local metres, (x east, y north)."""


class GridError(ValueError):
    """A bad grid parameter, or a point or cell outside the grid."""


class Cell(NamedTuple):
    """A cell index: column ``gx`` (east) and row ``gy`` (north); (0, 0) is lower-left."""

    gx: int
    gy: int


class Bounds(NamedTuple):
    """An axis-aligned rectangle ``[x_min, x_max] x [y_min, y_max]`` in metres."""

    x_min: float
    y_min: float
    x_max: float
    y_max: float

    @property
    def width(self) -> float:
        return self.x_max - self.x_min

    @property
    def height(self) -> float:
        return self.y_max - self.y_min

    @property
    def centre(self) -> Point:
        return ((self.x_min + self.x_max) / 2.0, (self.y_min + self.y_max) / 2.0)

    def contains(self, x: float, y: float, margin: float = 0.0) -> bool:
        """True if (x, y) lies in the rectangle grown by ``margin`` metres on every side."""
        return (
            self.x_min - margin <= x <= self.x_max + margin
            and self.y_min - margin <= y <= self.y_max + margin
        )

    def distance_outside(self, x: float, y: float) -> float:
        """Euclidean distance from (x, y) to the rectangle; 0 inside or on the border."""
        dx = max(self.x_min - x, 0.0, x - self.x_max)
        dy = max(self.y_min - y, 0.0, y - self.y_max)
        return math.hypot(dx, dy)

    def validate(self) -> None:
        """Raise ``GridError`` unless the bounds are finite and non-empty."""
        if not all(math.isfinite(v) for v in self):
            raise GridError(f"bounds must be finite: {tuple(self)}")
        if self.x_max <= self.x_min or self.y_max <= self.y_min:
            raise GridError(f"bounds must have positive width and height: {tuple(self)}")


def chebyshev(a: Cell | tuple[int, int], b: Cell | tuple[int, int]) -> int:
    """Cell hops with diagonal moves allowed: ``max(|dx|, |dy|)``."""
    return max(abs(a[0] - b[0]), abs(a[1] - b[1]))


def manhattan(a: Cell | tuple[int, int], b: Cell | tuple[int, int]) -> int:
    """Cell hops along the axes only (PUMA's 4-neighbour backbone): ``|dx| + |dy|``."""
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


def _check_finite(name: str, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise GridError(f"{name} must be a finite number, got {value!r}")


_AXIS_STEPS = ((1, 0), (0, 1), (-1, 0), (0, -1))
_DIAGONAL_STEPS = ((1, 1), (-1, 1), (-1, -1), (1, -1))


@dataclass(frozen=True, slots=True)
class Grid:
    """A ``cols`` x ``rows`` grid of square cells of side ``cell_size`` metres."""

    origin_x: float
    origin_y: float
    cell_size: float
    cols: int
    rows: int

    def __post_init__(self) -> None:
        _check_finite("origin_x", self.origin_x)
        _check_finite("origin_y", self.origin_y)
        _check_finite("cell_size", self.cell_size)
        if self.cell_size <= 0:
            raise GridError(f"cell_size must be positive, got {self.cell_size!r}")
        for name in ("cols", "rows"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise GridError(f"{name} must be a positive integer, got {value!r}")

    # ------------------------------------------------------------ construction

    @classmethod
    def covering(
        cls, width: float, height: float, cell_size: float, origin: Point = (0.0, 0.0)
    ) -> Grid:
        """The grid that covers a ``width`` x ``height`` area: ``ceil(W/s) x ceil(H/s)`` cells."""
        _check_finite("width", width)
        _check_finite("height", height)
        _check_finite("cell_size", cell_size)
        if width <= 0 or height <= 0 or cell_size <= 0:
            raise GridError("width, height and cell_size must be positive")
        cols = max(1, math.ceil(width / cell_size - 1e-9))
        rows = max(1, math.ceil(height / cell_size - 1e-9))
        return cls(origin[0], origin[1], cell_size, cols, rows)

    @classmethod
    def for_radio_range(
        cls, radio_range: float, width: float, height: float, origin: Point = (0.0, 0.0)
    ) -> Grid:
        """HESPER's grid: side ``TR / sqrt(2)`` so any two nodes of a cell are one hop apart."""
        _check_finite("radio_range", radio_range)
        if radio_range <= 0:
            raise GridError("radio_range must be positive")
        return cls.covering(width, height, radio_range / math.sqrt(2.0), origin)

    # ---------------------------------------------------------------- geometry

    @property
    def area(self) -> Bounds:
        """The rectangle the grid covers."""
        return Bounds(
            self.origin_x,
            self.origin_y,
            self.origin_x + self.cols * self.cell_size,
            self.origin_y + self.rows * self.cell_size,
        )

    def raw_cell(self, x: float, y: float) -> Cell:
        """The floor formula, unclamped (may name a cell outside the grid)."""
        return Cell(
            math.floor((x - self.origin_x) / self.cell_size),
            math.floor((y - self.origin_y) / self.cell_size),
        )

    def cell_of(self, x: float, y: float) -> Cell:
        """The cell containing (x, y); the far east/north edges belong to the last cells.

        Raises ``GridError`` for a point outside the covered rectangle.
        """
        _check_finite("x", x)
        _check_finite("y", y)
        if not self.area.contains(x, y):
            raise GridError(f"point ({x}, {y}) is outside the grid area {tuple(self.area)}")
        gx, gy = self.raw_cell(x, y)
        return Cell(min(gx, self.cols - 1), min(gy, self.rows - 1))

    def locate(self, x: float, y: float) -> Cell | None:
        """Like ``cell_of`` but ``None`` for a point outside the grid (or not finite)."""
        try:
            return self.cell_of(x, y)
        except GridError:
            return None

    def in_grid(self, cell: Cell | tuple[int, int]) -> bool:
        return 0 <= cell[0] < self.cols and 0 <= cell[1] < self.rows

    def _check_cell(self, cell: Cell | tuple[int, int]) -> Cell:
        if not self.in_grid(cell):
            raise GridError(f"cell {tuple(cell)} is outside the {self.cols}x{self.rows} grid")
        return Cell(int(cell[0]), int(cell[1]))

    def bounds(self, cell: Cell | tuple[int, int]) -> Bounds:
        """The rectangle of ``cell``."""
        gx, gy = self._check_cell(cell)
        x0 = self.origin_x + gx * self.cell_size
        y0 = self.origin_y + gy * self.cell_size
        return Bounds(x0, y0, x0 + self.cell_size, y0 + self.cell_size)

    def centre(self, cell: Cell | tuple[int, int]) -> Point:
        """The centre point of ``cell``."""
        return self.bounds(cell).centre

    def clipped(self, cell: Cell | tuple[int, int], within: Bounds) -> Bounds:
        """The part of ``cell`` inside ``within`` (the deployment area): the last column and
        row of a grid that overhangs the area are only partly real."""
        b = self.bounds(cell)
        part = Bounds(max(b.x_min, within.x_min), max(b.y_min, within.y_min),
                      min(b.x_max, within.x_max), min(b.y_max, within.y_max))
        return part if part.x_max > part.x_min and part.y_max > part.y_min else b

    def neighbours(self, cell: Cell | tuple[int, int], diagonal: bool = True) -> list[Cell]:
        """Adjacent cells inside the grid: 8-neighbourhood, or 4 with ``diagonal=False``.

        Order is fixed (east, north, west, south, then NE, NW, SW, SE) so callers
        iterating it stay deterministic.
        """
        gx, gy = self._check_cell(cell)
        steps = _AXIS_STEPS + _DIAGONAL_STEPS if diagonal else _AXIS_STEPS
        out = []
        for sx, sy in steps:
            nxt = Cell(gx + sx, gy + sy)
            if self.in_grid(nxt):
                out.append(nxt)
        return out

    def cells(self) -> Iterator[Cell]:
        """Every cell, column by column."""
        for gx in range(self.cols):
            for gy in range(self.rows):
                yield Cell(gx, gy)

    def __len__(self) -> int:
        return self.cols * self.rows

    def index(self, cell: Cell | tuple[int, int]) -> int:
        """Scalar cell id ``gx * rows + gy`` (PUMA's ``x*l + y`` on an l x l grid)."""
        gx, gy = self._check_cell(cell)
        return gx * self.rows + gy

    def cell_at(self, index: int) -> Cell:
        """Inverse of ``index``."""
        if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(self):
            raise GridError(f"cell index {index!r} is outside 0..{len(self) - 1}")
        return Cell(index // self.rows, index % self.rows)


def probe_points(rect: Bounds, reach: float) -> list[Point]:
    """Points that prove ``rect`` (a cell, or its part inside the area) empty to geographic
    routing with radio range ``reach``.

    The rectangle is cut into ``k x k`` equal parts, ``k = ceil(longer side * sqrt(2) /
    reach)`` (1 for HESPER's cells of side ``reach / sqrt(2)``), so every point of it is
    within ``reach / 2`` of its part's centre; the centres are returned row by row. Why
    that proves emptiness: if the rectangle holds a node ``n``, it lies in some part
    with centre ``q`` and ``|n - q| <= reach / 2``. GPSR towards ``q`` ends at the
    reachable node ``x`` closest to ``q``, so ``|x - q| <= |n - q|`` and
    ``|x - n| <= reach``: ``n`` is ``x``'s neighbour (unit disk). A node that finds no
    neighbour in the rectangle at any of these points therefore knows it has no
    reachable node. ``k`` is capped at 15 (225 points); beyond that the test is no
    longer exact.
    """
    _check_finite("reach", reach)
    if reach <= 0:
        raise GridError(f"reach must be positive, got {reach!r}")
    rect.validate()
    k = min(15, max(1, math.ceil(max(rect.width, rect.height) * math.sqrt(2.0) / reach - 1e-9)))
    sx, sy = rect.width / k, rect.height / k
    return [(rect.x_min + (i + 0.5) * sx, rect.y_min + (j + 0.5) * sy)
            for j in range(k) for i in range(k)]


class CellTracker:
    """A node's current cell, with hysteresis of ``margin`` metres at cell borders.

    A node keeps its previous cell while it stays within ``margin`` metres of
    that cell's rectangle; once it is farther out it takes the cell its position
    falls in. Far jumps therefore switch at once, while jitter around a border
    never flips the cell. Outside the grid (beyond the margin) the cell is
    ``None``.
    """

    def __init__(self, grid: Grid, margin: float) -> None:
        _check_finite("margin", margin)
        if margin < 0:
            raise GridError(f"margin must be non-negative, got {margin!r}")
        if margin >= grid.cell_size / 2:
            raise GridError(
                f"margin {margin} must be below half the cell size ({grid.cell_size / 2})"
            )
        self.grid = grid
        self.margin = float(margin)
        self.cell: Cell | None = None
        self.changes = 0
        """How many times the cell changed (including the first fix)."""

    def update(self, x: float, y: float) -> Cell | None:
        """Feed a position; return the (possibly unchanged) current cell."""
        _check_finite("x", x)
        _check_finite("y", y)
        current = self.cell
        if current is not None and self.grid.bounds(current).distance_outside(x, y) <= self.margin:
            return current
        new = self.grid.locate(x, y)
        if new is None and self.grid.area.distance_outside(x, y) <= self.margin:
            # Just outside the deployment area: snap to the nearest edge cell.
            area = self.grid.area
            new = self.grid.cell_of(
                min(max(x, area.x_min), area.x_max), min(max(y, area.y_min), area.y_max)
            )
        if new != current:
            self.cell = new
            self.changes += 1
        return new

    def reset(self) -> None:
        """Forget the cell (e.g. after the fix was lost)."""
        self.cell = None
