"""bench/dibs_experiments.py's bookkeeping: repair cost from a tree, the resumable run cache.

The paper-scale runs take minutes each; what turns their trees and runs into the
page's figures is checked here on hand-made inputs.
"""

from __future__ import annotations

import math
from pathlib import Path
from types import ModuleType

import pytest

BENCH = "dibs_experiments"
"""The script under test (the ``bench`` fixture, tests/unit/conftest.py)."""


# reference 1 with children 2 and 3; 4 and 5 below 2; 6 below 5; 7 is detached
TREE = {1: ("", 1, None), 2: ("1", 1, 1), 3: ("01", 1, 1), 4: ("11", 1, 2),
        5: ("101", 1, 2), 6: ("1011", 1, 5), 7: (None, None, None)}


def test_descendants_of_failed_nodes_count_each_survivor_once(bench: ModuleType) -> None:
    assert bench.descendants(TREE, [2]) == 3  # 4, 5, 6
    assert bench.descendants(TREE, [5]) == 1
    assert bench.descendants(TREE, [2, 5]) == 2  # 6 below both, 5 itself failed: 4 and 6
    assert bench.descendants(TREE, [7, 3]) == 0


def test_mean_descendants_is_the_expected_cost_of_one_failure(bench: ModuleType) -> None:
    # non-references 2..7 have 3, 0, 0, 1, 0, 0 descendants
    assert bench.mean_descendants(TREE, {1}) == pytest.approx(4 / 6)
    assert math.isnan(bench.mean_descendants({1: ("", 1, None)}, {1}))


def test_changed_counts_only_survivors_whose_place_moved(bench: ModuleType) -> None:
    after = {**TREE, 4: ("011", 1, 3), 6: ("0111", 1, 4), 2: (None, None, None)}
    assert bench.changed(TREE, after, down={2}) == 2


def test_the_cache_gives_back_each_run_of_its_preset(bench: ModuleType,
                                                    tmp_path: Path) -> None:
    cache = tmp_path / "runs.jsonl"
    preset = bench.PRESETS["quick"]
    run = bench.Run("dibs-m5", 2, replicas=[1, 2], stretch=[1.5], mean_descendants=4.25,
                    load="1.0, 1.0, 1.0")
    bench.write_cache(cache, preset, run)
    bench.write_cache(cache, bench.PRESETS["full"], bench.Run("dibs-m5", 2))
    assert bench.read_cache(cache, preset) == {("dibs-m5", 2): run}
    assert bench.read_cache(tmp_path / "absent.jsonl", preset) == {}


def test_from_cache_needs_a_cache(bench: ModuleType) -> None:
    with pytest.raises(SystemExit) as exc:
        bench.main(["--from-cache"])
    assert exc.value.code == 2
