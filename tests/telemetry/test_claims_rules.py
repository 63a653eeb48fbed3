"""Every rule kind fed figures on both sides of it: the verdict flips, and n/a where the
figures cannot test the claim."""

from __future__ import annotations

import pytest

from mesheval.claims import rules
from mesheval.claims.rules import DIFFERS, HOLDS, NA, Expect, Figure


def f(mean: float | None, hw: float | None = None, label: str = "x", lo: float | None = None,
      hi: float | None = None) -> Figure:
    return Figure(label, mean, hw, 5, lo, hi)


def test_order_flips_and_its_tolerance_is_printed() -> None:
    ok = rules.order([[f(3), f(2), f(1)], [f(5), f(5), f(4)]], descending=True,
                     names=["PUSH", "B-SUB", "PULL"])
    assert ok.status == HOLDS and "PUSH >= B-SUB >= PULL" in ok.rule
    bad = rules.order([[f(3), f(2), f(1)], [f(5), f(5.5), f(4)]], descending=True)
    assert bad.status == DIFFERS and "in order at 1 of 2" in bad.ours
    # 5.5 vs 5 is 10 % the wrong way: allowed with a tolerance of 10 %, and the rule says so
    tol = rules.order([[f(5), f(5.5), f(4)]], descending=True, tolerance=0.1)
    assert tol.status == HOLDS and "up to 10 % the wrong way" in tol.rule
    asc = rules.order([[f(1), f(2)]], descending=False)
    assert asc.status == HOLDS
    assert rules.order([[f(2), f(1)]], descending=False).status == DIFFERS


def test_order_is_na_without_figures_or_when_all_zero() -> None:
    assert rules.order([[f(1), f(None)]], descending=True).status == NA
    assert rules.order([[f(0), f(0)]], descending=True).status == NA
    assert rules.order([], descending=True).status == NA


def test_trend_falls_rises_flat() -> None:
    assert rules.trend([f(10), f(8), f(5)], direction="falls").status == HOLDS
    assert rules.trend([f(10), f(11), f(5)], direction="falls").status == DIFFERS
    # the same bump within a 10 % tolerance, printed in the rule
    v = rules.trend([f(10), f(11), f(5)], direction="falls", tolerance=0.1)
    assert v.status == HOLDS and "10 %" in v.rule
    # a fall that is too small for min_change
    assert rules.trend([f(0.184), f(0.179)], direction="falls", min_change=0.05
                       ).status == DIFFERS
    assert rules.trend([f(0.184), f(0.150)], direction="falls", min_change=0.05
                       ).status == HOLDS
    assert rules.trend([f(1), f(2), f(3)], direction="rises").status == HOLDS
    assert rules.trend([f(3), f(2)], direction="rises").status == DIFFERS
    assert rules.trend([f(10), f(10.4)], direction="flat", tolerance=0.05).status == HOLDS
    assert rules.trend([f(10), f(11)], direction="flat", tolerance=0.05).status == DIFFERS


def test_trend_na_when_every_value_is_zero() -> None:
    """An FPR of 0 everywhere cannot show a fall: n/a, never 'holds'."""
    v = rules.trend([f(0.0), f(0.0), f(0.0)], direction="falls")
    assert v.status == NA and "every value is 0" in v.ours
    assert rules.trend([f(1.0)], direction="falls").status == NA


@pytest.mark.parametrize(("num", "expect", "status"), [
    (70.0, Expect(at_most=0.8), HOLDS),
    (90.0, Expect(at_most=0.8), DIFFERS),
    (70.0, Expect(near=0.7, tolerance=0.05), HOLDS),
    (60.0, Expect(near=0.7, tolerance=0.05), DIFFERS),
    (70.0, Expect(at_least=0.5, at_most=0.8), HOLDS),
    (40.0, Expect(at_least=0.5, at_most=0.8), DIFFERS),
])
def test_ratio_each_point(num: float, expect: Expect, status: str) -> None:
    assert rules.ratio([(f(num), f(100.0))], expect).status == status


def test_ratio_stat_and_saving() -> None:
    pairs = [(f(80.0), f(100.0)), (f(60.0), f(100.0))]
    # savings 20 % and 40 %: the largest saving within 0.1 of 0.3 fails, of 0.4 holds
    assert rules.ratio(pairs, Expect(near=0.4, tolerance=0.1), stat="max",
                       saving=True).status == HOLDS
    assert rules.ratio(pairs, Expect(near=0.3, tolerance=0.05), stat="max",
                       saving=True).status == DIFFERS
    assert rules.ratio(pairs, Expect(at_most=0.7), stat="min").status == HOLDS
    assert rules.ratio(pairs, Expect(at_most=0.7), stat="each").status == DIFFERS
    assert rules.ratio([(f(1.0), f(0.0))], Expect(at_most=1)).status == NA


def test_bound_on_means_and_on_the_worst_run() -> None:
    figs = [f(1.7, lo=1.5, hi=2.4), f(1.6, lo=1.4, hi=1.75)]
    assert rules.bound(figs, Expect(at_most=1.78)).status == HOLDS
    worst = rules.bound(figs, Expect(at_most=1.78), use="max_run")
    assert worst.status == DIFFERS and "largest run" in worst.rule
    assert rules.bound(figs, Expect(at_most=1.78, tolerance=0.7), use="max_run"
                       ).status == HOLDS
    assert rules.bound([f(1.7, lo=None, hi=None)], Expect(at_most=2), use="max_run"
                       ).status == NA
    assert rules.bound([], Expect(at_most=2)).status == NA


def test_agree_uses_the_interval() -> None:
    assert rules.agree(f(1.562, 0.001), 1.56, 0.01).status == HOLDS
    assert rules.agree(f(1.60, 0.001), 1.56, 0.01).status == DIFFERS
    # a wide interval reaches the paper's figure
    assert rules.agree(f(1.60, 0.05), 1.56, 0.0).status == HOLDS
    assert rules.agree(f(None), 1.56, 0.01).status == NA
