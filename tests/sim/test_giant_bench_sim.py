"""bench/giant_sim.py: GIANT's group 3 measured in the simulator, on a placement small enough
to know the outcome (Zheng 2008, §6.5.1).

A 4 x 4 region, the PHB at (0, 0), SHBs at (3, 0) (DR 0.5) and (2, 2) (DR 0.9).
GIANT attaches both to the PHB (through (3, 0) the path to (2, 2) would be 6 cells
instead of 4); Prim's rule attaches (2, 2) to (3, 0), the nearer broker on the tree
(3 cells against 4). The runs must build exactly those trees, deliver every event
no sooner than a ferry can walk the path, and count the recruitments from the
protocol's own records.
"""

from __future__ import annotations

import importlib
import math
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from meshsub.core.grid import Cell
from meshsub.protocols.giant.model import giant_tree, tree_cost
from meshsub.protocols.giant.params import Tree

BENCH = Path(__file__).resolve().parents[2] / "bench"
PHB = Cell(0, 0)
DR = {Cell(3, 0): 0.5, Cell(2, 2): 0.9}
PARENTS = {Tree.GIANT: {Cell(3, 0): PHB, Cell(2, 2): PHB},
           Tree.PRIM: {Cell(3, 0): PHB, Cell(2, 2): Cell(3, 0)}}


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    """bench/giant_sim.py, imported as the bench script imports it (bench/ on the path)."""
    sys.path.insert(0, str(BENCH))
    try:
        return importlib.import_module("giant_sim")
    finally:
        sys.path.remove(str(BENCH))


@pytest.fixture(scope="module", params=[Tree.GIANT, Tree.PRIM], ids=["giant", "prim"])
def run(request: pytest.FixtureRequest, bench: ModuleType) -> tuple[Tree, Any]:
    tree: Tree = request.param
    # the second SHB joins 100 units after the first: time for a ferry that carried the
    # first one's on-tree record to reach it (Prim's rule needs it)
    timeline = bench.Timeline(first_sub=20.0, sub_gap=100.0, settle=80.0, horizon=160.0)
    return tree, bench.measure(PHB, DR, 4, 2, tree, seed=3, timeline=timeline)


def test_the_model_trees_are_the_ones_this_placement_is_chosen_for() -> None:
    for tree, parents in PARENTS.items():
        assert dict(giant_tree(PHB, list(DR), tree).parent) == parents


def test_subscriptions_build_the_trees_rule_before_the_first_event(
        run: tuple[Tree, Any]) -> None:
    _tree, m = run
    assert m.complete and m.same_tree


def test_every_event_reaches_every_subscriber_no_sooner_than_the_walk_allows(
        run: tuple[Tree, Any]) -> None:
    tree, m = run
    assert m.delivery == 1.0
    # one cell per unit: the mean path length over the SHBs bounds the mean delay below
    path = {Tree.GIANT: (3 + 4) / 2, Tree.PRIM: (3 + 3 + 3) / 2}[tree]
    assert path <= m.delay < 160


def test_recruitments_come_from_the_records_and_the_model_is_for_the_same_tree(
        run: tuple[Tree, Any]) -> None:
    tree, m = run
    # every edge needs a ferry per event; the PHB of the star sends both on one ferry at best
    assert m.ferries >= 2 and m.distinct >= (1 if tree is Tree.GIANT else 2)
    assert m.ferries >= m.distinct
    model = tree_cost(giant_tree(PHB, list(DR), tree), DR, 2)
    assert (m.model_ferries, m.model_delay) == (model.ferries, model.mean_delay)
    assert (m.built_ferries, m.built_delay) == (model.ferries, model.mean_delay)
    assert m.target == 0.7
    # 8 ferries on 16 cells: a ferry every 2 units on average, fewer at the border cells
    assert 2.0 < m.interval < 6.0 and not math.isnan(m.cpu_s)


def test_the_cache_gives_back_what_was_run(bench: ModuleType, tmp_path: Path) -> None:
    cache = tmp_path / "runs.jsonl"
    first = bench.run_point(4, 2, 2, seed=1, cache=cache)
    assert len(cache.read_text().splitlines()) == 2
    cache.write_text(cache.read_text() + '{"key": "cut')  # an interrupted write
    assert bench.run_point(4, 2, 2, seed=1, cache=cache) == first
