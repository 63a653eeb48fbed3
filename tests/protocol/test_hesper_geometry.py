"""HESPER's pure parts against worked vectors: sectors, paths, hash points, election, energy."""

from __future__ import annotations

import itertools
import math

import pytest

from meshsub.core.grid import Cell, chebyshev
from meshsub.core.params import ParameterError, parse_params
from meshsub.core.region import make_grid
from meshsub.protocols.hesper.election import Member, claim_rank, elect
from meshsub.protocols.hesper.energy import EnergyMeter, RadioEnergyModel
from meshsub.protocols.hesper.params import HesperParams
from meshsub.protocols.hesper.sectors import (
    Sector,
    classify,
    hesper_i_path,
    is_open_part,
    next_offsets,
)

# ------------------------------------------------------------------ sectors (§4.3.3)


@pytest.mark.parametrize(("dx", "dy", "sector"), [
    (0, 0, Sector.ORIGIN), (0, 3, Sector.X_AXIS), (0, -2, Sector.X_AXIS),
    (4, 0, Sector.Y_AXIS), (-1, 0, Sector.Y_AXIS), (2, 2, Sector.L_DIAGONAL),
    (-3, -3, Sector.L_DIAGONAL), (2, -2, Sector.A_DIAGONAL), (-1, 1, Sector.A_DIAGONAL),
    (6, 2, Sector.I), (5, -1, Sector.II), (1, -4, Sector.III), (-2, -5, Sector.IV),
    (-5, -2, Sector.V), (-3, 1, Sector.VI), (-1, 3, Sector.VII), (2, 3, Sector.VIII),
])
def test_classification_table(dx: int, dy: int, sector: Sector) -> None:
    assert classify(dx, dy) is sector
    assert is_open_part(sector) == (sector.value not in {"PHB", "X", "Y", "L", "A"})


def test_worked_example_paths() -> None:
    """§4.3.6: publisher in (10,10), subscribers in (16,12), (14,11); HESPER-II from (6,2)."""
    phb = (10, 10)

    def cells(sub: tuple[int, int]) -> list[tuple[int, int]]:
        return [(phb[0] + dx, phb[1] + dy)
                for dx, dy in hesper_i_path(sub[0] - phb[0], sub[1] - phb[1])]

    first = cells((16, 12))
    assert first == [(16, 12), (15, 12), (14, 12), (13, 12), (12, 12), (11, 11), (10, 10)]
    second = cells((14, 11))
    assert second == [(14, 11), (13, 11), (12, 11), (11, 11), (10, 10)]
    assert ((11, 11), (10, 10)) in itertools.pairwise(first)
    assert ((11, 11), (10, 10)) in itertools.pairwise(second)
    assert (13, 12) in first  # the third subscriber's cell is on the first path
    assert next_offsets(6, 2, "II") == [(5, 2), (5, 1)]
    assert next_offsets(6, 2, "I") == [(5, 2)]


def test_worked_example_cell_from_positions() -> None:
    grid = make_grid(HesperParams(TR=70.0))
    assert grid.cols == grid.rows == 21
    assert math.isclose(grid.cell_size, 49.497, abs_tol=1e-3)
    assert grid.cell_of(512, 497) == Cell(10, 10)
    assert grid.cell_of(812, 640) == Cell(16, 12)
    assert make_grid(HesperParams(TR=100.0)).cols == 15


@pytest.mark.parametrize("variant", ["I", "II"])
def test_axis_and_diagonal_cells_have_one_next_hop(variant: str) -> None:
    for dx, dy in [(0, 5), (0, -1), (3, 0), (-7, 0), (4, 4), (-2, 2), (3, -3), (-1, -1)]:
        nxt = next_offsets(dx, dy, variant)
        assert len(nxt) == 1
        assert chebyshev(nxt[0], (0, 0)) == chebyshev((dx, dy), (0, 0)) - 1
    assert next_offsets(0, 0, variant) == []


def test_bad_variant_is_an_error() -> None:
    with pytest.raises(ValueError, match="variant"):
        next_offsets(1, 2, "III")


# ---------------------------------------------------------- hash points and election


def test_broker_choice_from_hash_vector() -> None:
    """"temperature" sits at (0.699534, 0.539625) of every cell: the nearest node wins."""
    grid = make_grid(HesperParams(TR=70.0))
    b = grid.bounds((10, 10))
    s = grid.cell_size
    point = (b.x_min + 0.699534 * s, b.y_min + 0.539625 * s)
    members = {
        1: Member((b.x_min + 0.1 * s, b.y_min + 0.1 * s)),
        2: Member((b.x_min + 0.7 * s, b.y_min + 0.5 * s)),  # nearest to "temperature"
        3: Member((b.x_min + 0.6 * s, b.y_min + 0.25 * s)),  # nearest to "light"
    }
    assert elect(members, point, 0.3) == 2
    light = (b.x_min + 0.600205 * s, b.y_min + 0.250992 * s)
    assert elect(members, light, 0.3) == 3
    # The same view gives the same answer in any order (§4.8 item 1).
    assert elect(dict(reversed(list(members.items()))), point, 0.3) == 2


def test_election_skips_ineligible_and_falls_back_to_most_energy() -> None:
    point = (0.0, 0.0)
    members = {1: Member((1.0, 0.0), energy=0.2), 2: Member((2.0, 0.0), retiring=True),
               3: Member((5.0, 0.0), energy=0.9)}
    assert elect(members, point, 0.3) == 3
    low = {1: Member((1.0, 0.0), energy=0.2), 2: Member((2.0, 0.0), energy=0.25)}
    assert elect(low, point, 0.3) == 2
    assert elect({}, point, 0.3) is None
    tie = {7: Member((1.0, 0.0)), 4: Member((-1.0, 0.0))}
    assert elect(tie, point, 0.3) == 4


def test_claim_rank_orders_conflicting_claims() -> None:
    p = (0.0, 0.0)
    near, far = Member((1.0, 0.0)), Member((3.0, 0.0))
    assert claim_rank(near, 9, p, 0.3) < claim_rank(far, 1, p, 0.3)
    assert claim_rank(Member((1.0, 0.0), retiring=True), 1, p, 0.3) > claim_rank(far, 2, p, 0.3)


# ----------------------------------------------------------------- energy (§4.6, §4.8-10)


def test_first_order_radio_model_vectors() -> None:
    fs = RadioEnergyModel(TR=70.0)
    mp = RadioEnergyModel(TR=100.0)
    assert math.isclose(fs.tx_energy(70.0), 31.68e-6, rel_tol=1e-9)
    assert math.isclose(mp.tx_energy(100.0), 57.6e-6, rel_tol=1e-9)
    assert math.isclose(fs.rx_energy(), 16e-6, rel_tol=1e-9)
    assert not fs.multipath and mp.multipath


def test_energy_meter_sources() -> None:
    model = RadioEnergyModel(TR=70.0)
    meter = EnergyMeter("model", 1.0, 1e-3, model)
    for _ in range(10):
        meter.charge_tx(70.0)
        meter.charge_rx()
    assert math.isclose(meter.fraction, 1 - 10 * (31.68e-6 + 16e-6) / 1e-3)
    fixed = EnergyMeter("config", 0.5, 1.0, model)
    fixed.charge_tx(70.0)
    assert fixed.fraction == 0.5
    ext = EnergyMeter("external", 1.0, 1.0, model)
    ext.feed(1.7)
    assert ext.fraction == 1.0
    ext.feed(0.2)
    assert ext.fraction == 0.2
    with pytest.raises(ValueError):
        EnergyMeter("battery", 1.0, 1.0, model)


# ------------------------------------------------------------------------ parameters


@pytest.mark.parametrize(("values", "key"), [
    ({"variant": "III"}, "variant"), ({"TR": -1.0}, "TR"), ({"E_rot": 1.5}, "E_rot"),
    ({"energy_source": "sun"}, "energy_source"), ({"hash_i": 2, "hash_j": 2}, "hash_j"),
    ({"lease_s": 10.0, "sub_refresh_s": 60.0}, "lease_s"), ({"beacon": 2.0}, "beacon"),
])
def test_bad_parameters_name_the_key(values: dict[str, object], key: str) -> None:
    with pytest.raises(ParameterError) as info:
        parse_params(HesperParams, values)
    assert info.value.key == key


def test_cell_side_defaults_to_tr_over_root_two() -> None:
    assert math.isclose(HesperParams(TR=100.0).cell_side, 100 / math.sqrt(2))
    assert HesperParams(cell_side_m=30.0).cell_side == 30.0
