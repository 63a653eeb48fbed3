"""HESPER's region partition and next-cell rules (Zheng 2008, §4.3, Algorithms 4.1 and 4.2).

Everything here is pure integer geometry on the offset ``(dx, dy)`` of the
current cell from the publisher-hosting broker's (PHB) cell, east and north
positive. The thesis's figure is lost; this reconstruction is the only
labelling under which both algorithms give shortest (Chebyshev) paths, which
the thesis claims, so it is used as is: X-axis vertical, Y-axis horizontal,
L-diagonal NE-SW, A-diagonal NW-SE, parts I..VIII numbered clockwise.
"""

from __future__ import annotations

import enum


class Sector(enum.StrEnum):
    """The class of a cell relative to the PHB cell (thesis names)."""

    ORIGIN = "PHB"
    X_AXIS = "X"
    Y_AXIS = "Y"
    L_DIAGONAL = "L"
    A_DIAGONAL = "A"
    I = "I"  # noqa: E741 - the thesis's part numbers
    II = "II"
    III = "III"
    IV = "IV"
    V = "V"
    VI = "VI"
    VII = "VII"
    VIII = "VIII"


_PARTS = {Sector.I, Sector.II, Sector.III, Sector.IV,
          Sector.V, Sector.VI, Sector.VII, Sector.VIII}
_HORIZONTAL_PARTS = {Sector.I, Sector.II, Sector.V, Sector.VI}
"""Parts whose first move is a Y-direction (horizontal) step: |dx| > |dy|."""


def classify(dx: int, dy: int) -> Sector:
    """The partition, condition by condition."""
    if dx == 0 and dy == 0:
        return Sector.ORIGIN
    if dx == 0:
        return Sector.X_AXIS
    if dy == 0:
        return Sector.Y_AXIS
    if dx == dy:
        return Sector.L_DIAGONAL
    if dx == -dy:
        return Sector.A_DIAGONAL
    if 0 < dy < dx:
        return Sector.I
    if 0 < -dy < dx:
        return Sector.II
    if 0 < dx < -dy:
        return Sector.III
    if 0 < -dx < -dy:
        return Sector.IV
    if 0 < -dy < -dx:
        return Sector.V
    if 0 < dy < -dx:
        return Sector.VI
    if 0 < -dx < dy:
        return Sector.VII
    return Sector.VIII  # 0 < dx < dy, the only case left


def is_open_part(sector: Sector) -> bool:
    """True for parts I..VIII (neither an axis nor a diagonal cell)."""
    return sector in _PARTS


def _sg(v: int) -> int:
    return (v > 0) - (v < 0)


def axis_step(dx: int, dy: int) -> tuple[int, int]:
    """B^Y in parts I, II, V, VI (horizontal) and B^X in III, IV, VII, VIII (vertical)."""
    if abs(dx) > abs(dy):
        return dx - _sg(dx), dy
    return dx, dy - _sg(dy)


def diagonal_step(dx: int, dy: int) -> tuple[int, int]:
    """B^L / B^A: one step towards the PHB along the diagonal direction."""
    return dx - _sg(dx), dy - _sg(dy)


def next_offsets(dx: int, dy: int, variant: str) -> list[tuple[int, int]]:
    """Offsets of the next cell(s) from the PHB cell: Algorithm 4.1 ("I") or 4.2 ("II").

    On axes and diagonals both variants have one next cell; in the open parts
    HESPER-I takes the axis step only and HESPER-II both the axis and the
    diagonal step. Every returned step lowers ``max(|dx|, |dy|)`` by exactly 1.
    """
    if variant not in ("I", "II"):
        raise ValueError(f"variant must be 'I' or 'II', got {variant!r}")
    sector = classify(dx, dy)
    if sector is Sector.ORIGIN:
        return []
    if sector is Sector.X_AXIS:
        return [(0, dy - _sg(dy))]
    if sector is Sector.Y_AXIS:
        return [(dx - _sg(dx), 0)]
    if sector in (Sector.L_DIAGONAL, Sector.A_DIAGONAL):
        return [diagonal_step(dx, dy)]
    if variant == "I":
        return [axis_step(dx, dy)]
    return [axis_step(dx, dy), diagonal_step(dx, dy)]


def hesper_i_path(dx: int, dy: int) -> list[tuple[int, int]]:
    """The HESPER-I cell path (offsets) from ``(dx, dy)`` to the PHB, both ends included."""
    path = [(dx, dy)]
    while path[-1] != (0, 0):
        path.append(next_offsets(*path[-1], "I")[0])
    return path


def first_step_is_horizontal(sector: Sector) -> bool:
    """Parts I, II, V and VI move along Y (horizontally) first; the others along X."""
    return sector in _HORIZONTAL_PARTS
