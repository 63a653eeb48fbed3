"""BRVST's virtual hierarchy: grids of ``grid_size_m`` and zones of K x K grids (§III, §V).

A node computes its grid and zone from its position alone; nothing is built
or repaired. Zones are blocks of grids (``zx = gx // K``); neighbouring zones
are the eight at Chebyshev distance 1, and the zone-hop distance is the
Chebyshev distance, which the advertisement bands use.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from meshsub.core.grid import Bounds, Cell, Grid, Point, chebyshev


class Zone(NamedTuple):
    zx: int
    zy: int


class Level(enum.IntEnum):
    """Which kind of area a manager serves (and a message is addressed to)."""

    GRID = 1
    ZONE = 2


Area = tuple[Level, int, int]
"""A grid ``(GRID, gx, gy)`` or a zone ``(ZONE, zx, zy)``."""


@dataclass(frozen=True, slots=True)
class Layout:
    grid: Grid
    K: int

    @classmethod
    def of(cls, width: float, height: float, grid_size: float, K: int,
           origin: Point = (0.0, 0.0)) -> Layout:
        return cls(Grid.covering(width, height, grid_size, origin), K)

    @property
    def zone_cols(self) -> int:
        return math.ceil(self.grid.cols / self.K)

    @property
    def zone_rows(self) -> int:
        return math.ceil(self.grid.rows / self.K)

    def zone_of(self, cell: Cell | tuple[int, int]) -> Zone:
        return Zone(cell[0] // self.K, cell[1] // self.K)

    def in_layout(self, zone: Zone | tuple[int, int]) -> bool:
        return 0 <= zone[0] < self.zone_cols and 0 <= zone[1] < self.zone_rows

    def zone_cells(self, zone: Zone | tuple[int, int]) -> list[Cell]:
        k = self.K
        return [Cell(gx, gy) for gx in range(zone[0] * k, zone[0] * k + k)
                for gy in range(zone[1] * k, zone[1] * k + k) if self.grid.in_grid((gx, gy))]

    def zone_bounds(self, zone: Zone | tuple[int, int]) -> Bounds:
        """The zone's rectangle, cut to the deployment (edge zones may hold fewer grids)."""
        cells = self.zone_cells(zone)
        if not cells:
            raise ValueError(f"zone {tuple(zone)} is outside the layout")
        first, last = self.grid.bounds(cells[0]), self.grid.bounds(cells[-1])
        return Bounds(first.x_min, first.y_min, last.x_max, last.y_max)

    def zones(self) -> Iterator[Zone]:
        for zx in range(self.zone_cols):
            for zy in range(self.zone_rows):
                yield Zone(zx, zy)

    def neighbours(self, zone: Zone | tuple[int, int]) -> list[Zone]:
        """The zones at Chebyshev distance 1 inside the layout."""
        return [z for z in self.zones() if chebyshev(z, zone) == 1]

    @staticmethod
    def distance(a: Zone | tuple[int, int], b: Zone | tuple[int, int]) -> int:
        """Zone hops (Chebyshev): the advertisement band of ``b`` seen from ``a``."""
        return chebyshev(a, b)

    @property
    def max_distance(self) -> int:
        return max(self.zone_cols, self.zone_rows) - 1

    # ------------------------------------------------------------ areas

    def bounds(self, area: Area) -> Bounds:
        level, ax, ay = area
        if level is Level.GRID:
            return self.grid.bounds((ax, ay))
        return self.zone_bounds((ax, ay))

    def centre(self, area: Area) -> Point:
        return self.bounds(area).centre

    def diagonal(self, area: Area) -> float:
        b = self.bounds(area)
        return math.hypot(b.width, b.height)

    def valid(self, area: Area) -> bool:
        level, ax, ay = area
        if level is Level.GRID:
            return self.grid.in_grid((ax, ay))
        return self.in_layout((ax, ay))

    def area_of(self, level: Level, cell: Cell) -> Area:
        if level is Level.GRID:
            return (Level.GRID, cell[0], cell[1])
        z = self.zone_of(cell)
        return (Level.ZONE, z[0], z[1])
