"""GIANT's decision rules and the evaluation model (Zheng 2008, §6.4-6.5): worked numbers."""

from __future__ import annotations

import random

import pytest

from meshsub.core.grid import Cell
from meshsub.core.lattice import hit_probability
from meshsub.protocols.giant.model import (
    GROUP2_HOPS,
    giant_tree,
    hop_offsets,
    path_cost,
    placement,
    tree_cost,
)
from meshsub.protocols.giant.params import Tree
from meshsub.protocols.giant.recruit import (
    achieved,
    per_hop_prob,
    recruit_ferry,
    recruit_trace,
)
from meshsub.protocols.giant.upstream import Candidate, choose_upstream


@pytest.mark.parametrize("prob,interval,ferries,stop", [(0.5, 2, 7, 14), (0.9, 2, 16, 32),
                                                        (0.5, 8, 4, 32), (0.9, 8, 10, 80)])
def test_recruit_ferry_traces(prob: float, interval: int, ferries: int, stop: int) -> None:
    """Sender (0, 0), next hop (2, 2), a ferry every ``interval`` units (CHECK values)."""
    trace = recruit_trace(2, 2, prob, interval, hit_probability)
    assert (trace.ferries, trace.stop) == (ferries, stop)
    assert trace.delay == stop + 4


def test_recruit_trace_intermediate_values() -> None:
    # at t = 2 one ferry handed over 2 units ago: P_hit(2, 2, 6) = 0.046875
    assert achieved(2, 2, [2], hit_probability) == pytest.approx(0.046875)
    assert achieved(2, 2, [4, 2], hit_probability) == pytest.approx(0.111, abs=5e-4)
    assert achieved(2, 2, [14, 12, 10, 8, 6, 4, 2], hit_probability) > 0.5 >= \
        achieved(2, 2, [12, 10, 8, 6, 4, 2], hit_probability)


def test_recruit_ferry_rules() -> None:
    assert recruit_ferry(5, 5, [], 0.99, hit_probability)  # no copy yet: always recruit
    assert not recruit_ferry(0, 1, [40], 0.5, hit_probability)  # already more than Prob
    # the thesis's strict ">": exactly Prob achieved still recruits
    assert recruit_ferry(1, 0, [0], 0.25, hit_probability)


def test_single_hop_to_twelve_twelve() -> None:
    """The 1-hop path of group 2 under the model: 152 ferries, 328 units (the thesis: 31, 130)."""
    cost = path_cost(hop_offsets(1), 0.9, 2)
    assert (cost.ferries, cost.delay) == (152, 328)


def test_group_2_three_hops_recruit_fewest_at_interval_two() -> None:
    ferries = {h: path_cost(hop_offsets(h), 0.9, 2).ferries for h in GROUP2_HOPS}
    assert ferries == {1: 152, 2: 134, 3: 129, 4: 132, 6: 138, 8: 152}
    assert min(ferries, key=ferries.__getitem__) == 3


def test_group_2_one_hop_is_best_at_interval_eight_in_the_model() -> None:
    """Contrary to the thesis's claim (and like its own numbers for 3 hops, ERRATUM G8)."""
    ferries = {h: path_cost(hop_offsets(h), 0.9, 8).ferries for h in GROUP2_HOPS}
    assert ferries[1] == 69 and ferries[2] == 70 and min(ferries.values()) == 69


def test_hop_offsets_add_up() -> None:
    for hops in GROUP2_HOPS:
        offsets = hop_offsets(hops)
        assert len(offsets) == hops
        assert (sum(i for i, _ in offsets), sum(j for _, j in offsets)) == (12, 12)
        assert len({i + j for i, j in offsets}) == 1  # equally long hops
    with pytest.raises(ValueError):
        hop_offsets(5)


def test_per_hop_prob() -> None:
    assert per_hop_prob(0.9, 1) == 0.9
    assert per_hop_prob(0.81, 2) == pytest.approx(0.9)


def test_worked_example_chooses_b33() -> None:
    """PHB (0, 0), SHB X at (6, 6): four candidates tie at 12; 2-3 hops, smallest longest hop."""
    candidates = [Candidate(Cell(0, 0), 0, 0, 0, True), Candidate(Cell(3, 3), 6, 1, 6),
                  Candidate(Cell(2, 2), 4, 1, 4), Candidate(Cell(4, 1), 5, 1, 5),
                  Candidate(Cell(7, 0), 7, 1, 7)]
    choice = choose_upstream(candidates, Cell(6, 6))
    assert choice is not None
    assert (choice.upstream, choice.distance, choice.hops, choice.max_seg) == \
        (Cell(3, 3), 12, 2, 6)


def test_a_shorter_path_beats_the_hop_preference() -> None:
    candidates = [Candidate(Cell(0, 0), 0, 0), Candidate(Cell(9, 0), 9, 1)]
    choice = choose_upstream(candidates, Cell(3, 3))
    assert choice is not None and choice.upstream == Cell(0, 0)


def test_without_two_or_three_hop_ties_nearest_two_and_a_half() -> None:
    candidates = [Candidate(Cell(0, 0), 0, 0), Candidate(Cell(2, 0), 2, 4, 1)]
    choice = choose_upstream(candidates, Cell(4, 0))  # 1 hop or 5 hops, both 4 long
    assert choice is not None and choice.upstream == Cell(0, 0)


def test_prim_attaches_to_the_nearest_broker_on_the_tree() -> None:
    candidates = [Candidate(Cell(0, 0), 0, 0, 0, True), Candidate(Cell(5, 5), 10, 1, 10, True),
                  Candidate(Cell(6, 5), 11, 1, 11, False)]
    choice = choose_upstream(candidates, Cell(6, 6), Tree.PRIM)
    assert choice is not None and choice.upstream == Cell(5, 5)
    assert choose_upstream([Candidate(Cell(1, 1), 2, 1)], Cell(2, 2), Tree.PRIM) is None


def test_group_3_trees() -> None:
    phb = Cell(0, 0)
    shbs = [Cell(2, 0), Cell(4, 0), Cell(6, 0), Cell(8, 0)]
    prim = giant_tree(phb, shbs, Tree.PRIM)
    giant = giant_tree(phb, shbs)
    assert max(prim.depth(s) for s in shbs) == 4  # a chain: each joins its nearest
    assert max(giant.depth(s) for s in shbs) <= 3  # GIANT keeps paths short
    dr = dict.fromkeys(shbs, 0.9)
    g, p = tree_cost(giant, dr, 2), tree_cost(prim, dr, 2)
    assert g.distinct_ferries <= g.ferries and p.distinct_ferries <= p.ferries
    assert g.mean_depth < p.mean_depth


def test_placement_is_seeded_and_distinct() -> None:
    a = placement(10, 8, random.Random(3))
    b = placement(10, 8, random.Random(3))
    assert a == b and a[0] not in a[1] and len(a[1]) == 8
