"""The storage model of BRVST and TAMA (docs/protocols/brvst.md, "TAMA")."""

from __future__ import annotations

from fractions import Fraction as F

from hypothesis import given, settings
from hypothesis import strategies as st

from meshsub.core.grid import Cell
from meshsub.protocols.brvst.forest import entry_size, rsv_size
from meshsub.protocols.brvst.params import BrvstParams
from meshsub.protocols.brvst.schema import Schema
from meshsub.protocols.brvst.tama import (
    CELL_BYTES,
    ID_BYTES,
    RECORD_BYTES,
    Placed,
    brvst_storage,
    dyadic_cells,
    tama_cells,
    tama_matches,
    tama_storage,
)
from meshsub.protocols.brvst.zones import Layout, Zone

SCHEMA = Schema.from_params(BrvstParams(attributes=("a", "b")))
LAYOUT = Layout.of(500, 500, 250, 2)


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 8).flatmap(lambda lv: st.tuples(
    st.just(lv), st.integers(0, (1 << lv) - 1), st.integers(0, (1 << lv) - 1))))
def test_dyadic_cover_is_exact_aligned_and_small(case: tuple[int, int, int]) -> None:
    level, a, b = case
    k_lo, k_hi = min(a, b), max(a, b)
    cells = dyadic_cells(k_lo, k_hi, level)
    covered: list[int] = []
    for lvl, idx in cells:
        span = 1 << (level - lvl)
        covered.extend(range(idx * span, (idx + 1) * span))
    assert sorted(covered) == list(range(k_lo, k_hi + 1))  # exact, no overlap
    assert len(cells) <= max(1, 2 * level)


def test_examples() -> None:
    assert dyadic_cells(1, 6, 3) == [(3, 1), (2, 1), (2, 2), (3, 6)]
    assert dyadic_cells(0, 7, 3) == [(0, 0)]
    a = SCHEMA.by_id[0].domain
    assert tama_cells(a, (F(10), F(60)), 2) == [(1, 0), (2, 2)]  # [0, 50) and [50, 75)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 98), st.integers(1, 100), st.integers(0, 99), st.integers(1, 9))
def test_tama_never_misses_a_contained_range(s_lo: int, s_w: int, p_off: int,
                                             levels: int) -> None:
    s_hi = min(100, s_lo + s_w)
    p_lo = s_lo + p_off % max(1, s_hi - s_lo)
    p_hi = min(s_hi, p_lo + 1)
    assert tama_matches(SCHEMA, {0: (F(s_lo), F(s_hi))}, {0: (F(p_lo), F(p_hi))}, levels)
    assert not tama_matches(SCHEMA, {1: (F(0), F(100))}, {0: (F(p_lo), F(p_hi))}, levels)


def test_storage_by_hand() -> None:
    """Two subscriptions in grid (0, 0), one in (1, 1); a 2-level TAMA table."""
    subs = [Placed(1, Cell(0, 0), {0: (F(0), F(50))}),  # cells (1, 0): 1 entry
            Placed(2, Cell(0, 0), {0: (F(0), F(25)), 1: (F(25), F(75))}),  # 1 + 2 entries
            Placed(3, Cell(1, 1), {1: (F(0), F(100))})]  # (0, 0): 1 entry
    t = tama_storage(subs, LAYOUT, SCHEMA, 2)
    table = CELL_BYTES * 7 * 2
    assert t.grid[Cell(0, 0)] == table + 4 * ID_BYTES + 2 * RECORD_BYTES
    assert t.grid[Cell(1, 1)] == table + 1 * ID_BYTES + RECORD_BYTES
    assert t.zone == {Zone(0, 0): table + 5 * ID_BYTES + 3 * RECORD_BYTES}
    bare = tama_storage(subs, LAYOUT, SCHEMA, 2, table_cost=False)
    assert bare.grid[Cell(1, 1)] == ID_BYTES + RECORD_BYTES
    b = brvst_storage(subs, LAYOUT, SCHEMA)
    arvs = [SCHEMA.arvs(p.ranges) for p in subs]
    one = [entry_size(tuple(sorted(a.items()))) + RECORD_BYTES for a in arvs]
    # Grid (0, 0): #2 joins #1's tree ({a} [0, 50) overlaps [0, 25)); its GRSV is one entry.
    assert b.grid[Cell(0, 0)] == one[0] + one[1] + rsv_size([tuple(sorted(arvs[0].items()))])
    assert b.grid[Cell(1, 1)] == one[2] + rsv_size([tuple(sorted(arvs[2].items()))])
    assert set(b.zone) == {Zone(0, 0)} and b.mean == sum(b.brokers()) / 3
