"""core/leases.py (versioned soft state) and core/cellgrid.py (a static node's cell)."""

from __future__ import annotations

import pytest

from meshsub.core.api import Position
from meshsub.core.cellgrid import CellGridParams, OwnCell
from meshsub.core.grid import Cell
from meshsub.core.leases import Upsert, VersionedLeases
from meshsub.core.params import ParameterError, parse_params


def test_versions_leases_and_tombstones() -> None:
    t: VersionedLeases[str, str] = VersionedLeases(capacity=2, tombstones=1)
    assert t.upsert("a", "a1", 1, 10.0) is Upsert.NEW
    assert t.upsert("a", "a1", 1, 20.0) is Upsert.RENEWED and t.entry("a").expires == 20.0  # type: ignore[union-attr]
    assert t.upsert("a", "a0", 0, 30.0) is Upsert.STALE
    assert t.upsert("a", "a2", 2, 30.0) is Upsert.UPDATED and t.get("a") == "a2"
    assert t.upsert("b", "b1", 1, 5.0) is Upsert.NEW
    assert t.upsert("c", "c1", 1, 5.0) is Upsert.FULL
    assert t.remove("a", 1, 100.0) is None and "a" in t  # older than held: stays
    assert t.remove("a", 3, 100.0) == "a2" and "a" not in t
    assert t.upsert("a", "late", 2, 50.0) is Upsert.STALE  # the tombstone holds
    assert t.version("a") == 3
    assert [k for k, _e in t.expire(6.0)] == ["b"]
    t.remove("b", 1, 100.0)  # second tombstone: the oldest ("a") is forgotten
    assert t.version("a") is None and t.upsert("a", "again", 1, 60.0) is Upsert.NEW
    assert t.next_expiry() == 60.0
    t.expire(200.0)
    assert len(t) == 0 and t.version("b") is None
    with pytest.raises(ValueError):
        VersionedLeases(0)


def test_own_cell_from_configuration_or_position() -> None:
    fixed = OwnCell(parse_params(CellGridParams, {"cols": 4, "rows": 4, "cell_x": 1,
                                                  "cell_y": 2}))
    assert fixed.cell == Cell(1, 2) and not fixed.update(Position(350.0, 50.0))
    moving = OwnCell(CellGridParams(cols=4, rows=4, cell_size_m=100.0))
    assert moving.cell is None
    assert moving.update(Position(350.0, 50.0)) and moving.cell == Cell(3, 0)
    assert not moving.update(None) and moving.cell == Cell(3, 0)  # the fix dropped out
    assert not moving.update(Position(5000.0, 5000.0)) and moving.cell == Cell(3, 0)
    for bad in ({"cell_x": 1}, {"cols": 0}, {"cell_x": 30, "cell_y": 0}, {"cell_size_m": -1}):
        with pytest.raises(ParameterError):
            parse_params(CellGridParams, bad)
