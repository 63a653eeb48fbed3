"""The tree module: position, the descendant check, soft-state children, OR-aggregation, bounds."""

from __future__ import annotations

import pytest

from meshsub.core.tree import TreeError, TreeNode


def test_root_then_attached_member() -> None:
    t: TreeNode[int] = TreeNode(5)
    assert t.is_root and t.level == 0 and t.parent is None and t.root == 5
    t.attach((1, 2, 3))
    assert (t.level, t.parent, t.root, t.ancestors()) == (3, 3, 1, (1, 2, 3))
    assert t.is_ancestor(2) and not t.is_ancestor(9)
    t.become_root()
    assert t.is_root and t.path == ()


def test_never_below_a_descendant() -> None:
    """Liu §3.5: a node must avoid connecting to its descendants (it is on their path)."""
    t: TreeNode[int] = TreeNode(5)
    assert t.add_child(7, 0.0)
    assert t.would_loop(9, (1, 5, 8))  # 9 hangs below 5: a descendant
    assert t.would_loop(7, (1,))  # our own child, whatever its (stale) path says
    assert t.would_loop(5, ())
    assert not t.would_loop(9, (1, 2))
    for bad in ((1, 5, 8, 9), (7,), (5,), (1, 2, 1, 3)):
        with pytest.raises(TreeError):
            t.attach(bad)
    assert t.path == ()
    with pytest.raises(TreeError):
        t.attach(())


def test_depth_bound() -> None:
    t: TreeNode[int] = TreeNode(99, max_path=3)
    t.attach((1, 2, 3))
    with pytest.raises(TreeError):
        t.attach((1, 2, 3, 4))
    assert t.level == 3


def test_children_are_bounded_soft_state() -> None:
    t: TreeNode[int] = TreeNode(1, max_children=2)
    t.attach((9,))
    assert not t.add_child(9, 0.0)  # an ancestor is never a child
    assert not t.add_child(1, 0.0)
    assert t.add_child(2, 0.0) and t.add_child(3, 1.0)
    assert not t.add_child(4, 1.0)  # full
    assert t.add_child(2, 5.0)  # a known child is refreshed, not refused
    t.heard(3, 2.0)
    dead = t.expire(6.0, dead_after=3.5)
    assert [c.node for c in dead] == [3] and list(t) == [2]
    assert t.remove_child(2) is not None and t.remove_child(2) is None and len(t) == 0


def test_reports_aggregate_upward_by_or() -> None:
    """Liu §3.2: a node's merged bitmap is its own OR its children's; the depth is the deepest."""
    t: TreeNode[int] = TreeNode(1, size_of=lambda s: 2)
    t.attach((0,))
    assert t.add_child(2, 0.0) and t.add_child(3, 0.0)
    assert t.report(2, 1.0, 0b0110, depth=3, seq=1)
    assert t.report(3, 1.0, 0b1000, depth=2, seq=1)
    assert not t.report(3, 1.5, 0b1111, depth=2, seq=1)  # stale sequence number
    assert not t.report(4, 1.5, 0b1111, depth=2, seq=9)  # not a child
    assert t.aggregate(0b0001, lambda a, b: a | b) == 0b1111
    assert t.subtree_depth() == 3
    assert t.summary_bytes() == 4
    assert t.child(2) is not None and t.child(2).summary == 0b0110  # type: ignore[union-attr]


def test_oversized_summary_is_refused() -> None:
    t: TreeNode[bytes] = TreeNode(1, max_summary_bytes=4, size_of=len)
    assert t.add_child(2, 0.0)
    assert not t.report(2, 0.0, b"12345", depth=1, seq=1)
    assert t.report(2, 0.0, b"1234", depth=1, seq=2)
    assert not t.add_child(3, 0.0, summary=b"toolong")
    assert 3 not in t


def test_bad_bounds() -> None:
    with pytest.raises(ValueError):
        TreeNode(1, max_children=0)
