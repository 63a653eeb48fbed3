"""Static nodes on a grid of cells: the parameters and the node's own cell.

PUMA's base stations and GIANT's brokers each own one cell of a square grid
(Zheng 2008, §5.2, §6.2) and are named by it. A node's cell is configured
(``cell_x``/``cell_y``) or follows from its position; mobile nodes (clients,
ferries) take no cell from the configuration. ``CellGridParams`` is the
parameter block both protocols share; ``OwnCell`` turns positions into the
node's cell.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar, TypeVar

from meshsub.core.api import Position
from meshsub.core.grid import Cell, CellTracker, Grid
from meshsub.core.params import OUR_DECISION, ParamDoc, ParameterError
from meshsub.core.reliable import ReliableParams

R = TypeVar("R")


def require_positive(key: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise ParameterError(key, "must be a positive number")


def require_non_negative(key: str, value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise ParameterError(key, "must be a non-negative number")


def require_at_least_one(params: object, *keys: str) -> None:
    for key in keys:
        if getattr(params, key) < 1:
            raise ParameterError(key, "must be at least 1")


@dataclass(frozen=True, slots=True)
class CellGridParams(ReliableParams):
    """The grid every node must agree on, and a static node's cell in it."""

    cols: int = 25
    rows: int = 25
    cell_size_m: float = 100.0
    origin_x: float = 0.0
    origin_y: float = 0.0
    cell_x: int = -1
    cell_y: int = -1
    """A static node's cell; -1 = the cell of its position."""

    param_docs: ClassVar[Mapping[str, ParamDoc]] = {
        "cols": ParamDoc("cells", "Zheng 2008, Table 5.1 (25 x 25 grids); §6.5.1 (10 x 10, "
                                  "20 x 20)",
                         "Columns of the grid of square cells every node must agree on."),
        "rows": ParamDoc("cells", "Zheng 2008, Table 5.1 (25 x 25 grids); §6.5.1 (10 x 10, "
                                  "20 x 20)",
                         "Rows of the grid."),
        "cell_size_m": ParamDoc("m", "Zheng 2008, §5.2, §6.2 (identical cells, GIANT's sized "
                                     "by a static node's radio range; no length given); "
                                     "100 m is our decision",
                                "Side of one cell."),
        "origin_x": ParamDoc("m", OUR_DECISION + " (the thesis counts cells from (0, 0) at "
                                  "the lower left, §5.3, §6.2; it has no metres)",
                             "x of cell (0, 0)'s lower-left corner in local metres."),
        "origin_y": ParamDoc("m", OUR_DECISION + " (as origin_x)",
                             "y of cell (0, 0)'s lower-left corner in local metres."),
        "cell_x": ParamDoc("cell", "Zheng 2008, §5.2, §6.2 (one static node per cell, named "
                                   "by it); -1 is our decision",
                           "A static node's column; -1 = the cell of its position."),
        "cell_y": ParamDoc("cell", "Zheng 2008, §5.2, §6.2 (one static node per cell, named "
                                   "by it); -1 is our decision"),
    }

    def validate(self) -> None:
        ReliableParams.validate(self)
        if not 1 <= self.cols <= 4096 or not 1 <= self.rows <= 4096:
            raise ParameterError("cols", "cols and rows must be in 1..4096")
        require_positive("cell_size_m", self.cell_size_m)
        if not (math.isfinite(self.origin_x) and math.isfinite(self.origin_y)):
            raise ParameterError("origin_x", "origin must be finite")
        if (self.cell_x < 0) != (self.cell_y < 0):
            raise ParameterError("cell_x", "set both cell_x and cell_y, or neither")
        if self.cell_x >= self.cols or self.cell_y >= self.rows:
            raise ParameterError("cell_x", "the cell must lie inside the grid")

    @property
    def configured_cell(self) -> Cell | None:
        return Cell(self.cell_x, self.cell_y) if self.cell_x >= 0 else None

    def grid(self) -> Grid:
        return Grid(self.origin_x, self.origin_y, self.cell_size_m, self.cols, self.rows)


class OwnCell:
    """A node's cell: the configured one, else the one its position falls in.

    A static node keeps its cell when its fix drops out (it has not moved);
    a position outside the grid leaves the cell unchanged as well.
    """

    def __init__(self, params: CellGridParams) -> None:
        self.grid = params.grid()
        self.fixed = params.configured_cell is not None
        self.cell: Cell | None = params.configured_cell
        self._tracker = CellTracker(self.grid, 0.0)

    def update(self, position: Position | None) -> bool:
        """Feed a position; True if the cell changed."""
        if self.fixed or position is None:
            return False
        cell = self._tracker.update(position.x, position.y)
        if cell is None or cell == self.cell:
            return False
        self.cell = cell
        return True


def role_from_capabilities(capabilities: Sequence[str], names: Mapping[str, R],
                           default: R) -> R:
    """The node's protocol role: from its roles (``capabilities``) if one names it.

    A scenario's node group (``role``), or the daemon's ``node.roles``, hands a
    node its roles as capabilities; a protocol with roles of its own (PUMA's
    base stations and clients, GIANT's brokers and ferries) maps them through
    ``names`` and falls back to its ``role`` parameter when none matches. Two
    roles that name different protocol roles are a configuration error.
    """
    found = {names[c] for c in capabilities if c in names}
    if len(found) > 1:
        raise ParameterError("role", f"node roles {list(capabilities)} name "
                                     f"{len(found)} different protocol roles")
    return found.pop() if found else default
