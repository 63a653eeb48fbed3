"""The summary forest against Li and Wang 2014 §IV-B1 (Algorithms 1 and 2) and its examples."""

from __future__ import annotations

from fractions import Fraction as F

import pytest

from meshsub.core.arv import ARV, Domain, build
from meshsub.protocols.brvst.forest import Filter, Forest, entry_bytes, rsv_size

D = Domain(F(0), F(100), F(100, 1024), 10)  # continuous attributes, Lmax 10
ALPHA = F(9, 10)
A, B, C, E, FF, G, H = 0, 1, 2, 4, 5, 6, 7


def flt(fid: object, ranges: dict[int, tuple[float, float]]) -> Filter:
    return Filter(fid, {a: build(D, F(lo), F(hi), ALPHA) for a, (lo, hi) in ranges.items()})


EXAMPLE = [
    {A: (0, 50)}, {B: (10, 50)}, {A: (0, 25), B: (15, 45)},
    {A: (25, 100), B: (30, 40), C: (13, 27)}, {B: (25, 50), FF: (5, 10)},
    {E: (0, 30), FF: (25, 35)}, {B: (5, 45), E: (5, 10), G: (0, 100)},
    {E: (0, 10), FF: (30, 45), H: (5, 15)},
]


def example_forest() -> Forest:
    forest = Forest()
    for i, ranges in enumerate(EXAMPLE, start=1):
        forest.insert(flt(i, ranges))
        forest.check()
    return forest


def test_the_papers_eight_subscriptions_give_three_trees() -> None:
    """§IV-B1's example (Fig. 4's drawing is not in the text): #3, #4 join A's tree, #5, #7
    B's, #8 joins {E, F}'s; the GRSV is 32 bytes."""
    forest = example_forest()
    trees = [[m.id for m in t.members] for t in forest.trees.values()]
    assert trees == [[1, 3, 4], [2, 5, 7], [6, 8]]
    rep = forest.representative()
    assert [[(a, v.level, v.segments()) for a, v in e] for e in rep] == [
        [(A, 0, [0])],
        [(B, 5, list(range(1, 16)))],  # cover [3.125, 50)
        [(E, 4, [0, 1, 2, 3, 4]), (FF, 6, list(range(16, 29)))],  # F cover [25, 45.3125)
    ]
    assert str(rep[2][0][1]) == "1111100000000000"
    assert rsv_size(rep) == 32 == 2 + sum(len(entry_bytes(e)) for e in rep)


def test_aggregation_principle() -> None:
    """A[0,50) then A[25,75) B C: one tree rooted at the A-only filter covering [0, 75);
    A[0,20) then A[60,80) B: two trees (their ARVs do not overlap)."""
    f = Forest()
    f.insert(flt("a", {A: (0, 50)}))
    f.insert(flt("abc", {A: (25, 75), B: (0, 10), C: (0, 10)}))
    (tree,) = f.trees.values()
    assert tree.root.id == "a" and [m.id for m in tree.members] == ["a", "abc"]
    cover = tree.summary[A].cover(D)
    assert cover[0][0] == 0 and cover[-1][1] >= 75
    g = Forest()
    g.insert(flt("x", {A: (0, 20)}))
    g.insert(flt("xy", {A: (60, 80), B: (0, 10)}))
    assert len(g.trees) == 2


def test_parent_placement_absorbs_every_fitting_root() -> None:
    """A filter whose attributes every root contains, overlapping them all, becomes their parent."""
    f = Forest()
    f.insert(flt(1, {A: (0, 20), B: (0, 10)}))
    f.insert(flt(2, {A: (10, 30), C: (0, 10)}))
    assert len(f.trees) == 2
    f.insert(flt(3, {A: (0, 40)}))
    (tree,) = f.trees.values()
    assert [m.id for m in tree.members] == [3, 1, 2]
    f.check()


def test_removing_a_root_reinserts_its_members() -> None:
    forest = example_forest()
    forest.remove(2)  # B's root: #5 (B F) and #7 (B E G) are placed again
    forest.check()
    assert {m.id for m in forest.filters()} == {1, 3, 4, 5, 6, 7, 8}
    assert all(len(t.members) for t in forest.trees.values())
    forest.remove(5)
    forest.remove(7)
    forest.check()
    assert all(B not in t.common for t in forest.trees.values())


def test_removing_a_member_recomputes_the_summary() -> None:
    f = Forest()
    f.insert(flt("a", {A: (0, 10)}))
    f.insert(flt("ab", {A: (5, 90), B: (0, 10)}))
    wide = next(iter(f.trees.values())).summary[A]
    f.remove("ab")
    narrow = next(iter(f.trees.values())).summary[A]
    assert narrow != wide and narrow == build(D, F(0), F(10), ALPHA)
    f.check()


def test_grsv_is_stable_for_a_subscription_inside_a_summary() -> None:
    """Property 19: a filter that joins a tree without widening its summary changes no entry."""
    forest = example_forest()
    before = forest.representative()
    forest.insert(flt(9, {A: (10, 20), C: (50, 60)}))
    assert forest.representative() == before
    forest.remove(9)
    assert forest.representative() == before


def test_replace_and_errors() -> None:
    f = Forest()
    f.insert(flt(1, {A: (0, 10)}))
    f.replace(flt(1, {B: (0, 10)}))
    assert [e[0][0] for e in f.representative()] == [B]
    with pytest.raises(KeyError):
        f.insert(flt(1, {C: (0, 1)}))
    with pytest.raises(ValueError):
        f.insert(Filter(2, {}))
    with pytest.raises(KeyError):
        f.remove(99)
    assert f.get(1) is not None and f.get(99) is None and 1 in f and len(f) == 1


def test_candidates_reach_members_through_matching_roots() -> None:
    forest = example_forest()
    pub = {A: ARV.parse("1"), B: build(D, F(20), F(30), ALPHA)}

    def through(summary: object) -> bool:
        assert isinstance(summary, dict)
        return all(a in pub and pub[a].overlaps(v) for a, v in summary.items())

    assert {m.id for m in forest.candidates(through)} == {1, 3, 4, 2, 5, 7}
