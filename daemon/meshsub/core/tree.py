"""One node's place in a rooted tree: parent, children, depth, ancestors, soft state.

Several protocols keep trees over radio links and ask the same questions of
them: who is my parent, which children do I have and are they still alive,
how deep am I, would attaching to this node close a loop, and what does my
subtree contain. The tree-group protocol (Liu 2011, §3.1-3.5) and its
single-tree baseline keep one per group (through ``meshsub.core.cluster``);
DIBS keeps one per cluster, encoded in its virtual addresses rather than here.
This module answers those questions for one node, sans-I/O and bounded:

- the *path* is the list of ancestors from the root down to the parent, as
  the parent last told us (its ``len`` is our level; the root's is empty). A
  node ``n`` is a descendant of ``me`` exactly when ``me`` is on ``n``'s path,
  so "never attach to a descendant" (Liu §3.5) is ``would_loop``;
- children are *soft state*: each entry remembers when the child was last
  heard, and ``expire`` returns the ones silent for too long;
- each child reports a *summary* of its subtree (a Bloom filter in the
  tree-group protocol; any value with an OR for another caller) and the
  deepest level in it; ``aggregate`` ORs the summaries upward (Liu §3.2:
  "each node sends the merged bitmap to its parent").

Bounds: at most ``max_children`` children and ``max_path`` ancestors; a
summary larger than ``max_summary_bytes`` (measured by the caller's
``size_of``) is refused. Refusals are return values the caller counts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from meshsub.core.api import NodeId

S = TypeVar("S")


class TreeError(ValueError):
    """An attachment that would close a loop or exceed the depth bound."""


@dataclass(slots=True)
class Child(Generic[S]):
    """What a node keeps about one child."""

    node: NodeId
    last_heard: float
    depth: int
    """Deepest level in the child's subtree, as last reported (its own level until then)."""
    summary: S | None = None
    """The child's subtree summary as last reported; ``None`` until its first report."""
    seq: int = -1
    """Sequence number of the newest report applied (older ones are stale)."""
    size: int = 0
    """Bytes the summary occupies (the caller's ``size_of``), for the state-size measure."""


class TreeNode(Generic[S]):
    """``me`` in one rooted tree: a root (no parent) or a member below ``path[-1]``."""

    __slots__ = ("_children", "max_children", "max_path", "max_summary_bytes", "me",
                 "path", "size_of")

    def __init__(self, me: NodeId, *, max_children: int = 64, max_path: int = 255,
                 max_summary_bytes: int = 1 << 16,
                 size_of: Callable[[S], int] | None = None) -> None:
        if max_children < 1 or max_path < 1 or max_summary_bytes < 0:
            raise ValueError("tree bounds must be positive")
        self.me = me
        self.max_children = max_children
        self.max_path = max_path
        self.max_summary_bytes = max_summary_bytes
        self.size_of = size_of
        self.path: tuple[NodeId, ...] = ()
        """Ancestors, root first, parent last; empty at the root."""
        self._children: dict[NodeId, Child[S]] = {}

    # ------------------------------------------------------------ position

    @property
    def parent(self) -> NodeId | None:
        return self.path[-1] if self.path else None

    @property
    def level(self) -> int:
        """Hops from the root (the thesis's level number; the root's is 0)."""
        return len(self.path)

    @property
    def is_root(self) -> bool:
        return not self.path

    @property
    def root(self) -> NodeId:
        return self.path[0] if self.path else self.me

    def ancestors(self) -> tuple[NodeId, ...]:
        return self.path

    def is_ancestor(self, node: NodeId) -> bool:
        return node in self.path

    def would_loop(self, parent: NodeId, parent_path: Iterable[NodeId]) -> bool:
        """True if attaching below ``parent`` (whose own path is ``parent_path``) closes a loop.

        ``parent`` is our descendant exactly when we are on its path, and a
        child of ours cannot be our parent either (its path may be stale).
        """
        return parent == self.me or parent in self._children or self.me in tuple(parent_path)

    def become_root(self) -> None:
        self.path = ()

    def attach(self, parent_path: tuple[NodeId, ...]) -> None:
        """Take ``parent_path[-1]`` as parent, ``parent_path`` being root..parent.

        Raises ``TreeError`` if that closes a loop or exceeds ``max_path``;
        the position is then unchanged.
        """
        if not parent_path:
            raise TreeError("a parent path names at least the parent")
        if len(parent_path) > self.max_path:
            raise TreeError(f"level {len(parent_path)} exceeds the bound {self.max_path}")
        if self.would_loop(parent_path[-1], parent_path[:-1]) or len(set(parent_path)) != len(
                parent_path):
            raise TreeError(f"attaching below {parent_path[-1]} would close a loop")
        self.path = tuple(parent_path)

    # ------------------------------------------------------------ children

    def __contains__(self, node: object) -> bool:
        return node in self._children

    def __len__(self) -> int:
        return len(self._children)

    def __iter__(self) -> Iterator[NodeId]:
        return iter(self._children)

    def child(self, node: NodeId) -> Child[S] | None:
        return self._children.get(node)

    def children(self) -> list[Child[S]]:
        return list(self._children.values())

    def add_child(self, node: NodeId, now: float, depth: int | None = None,
                  summary: S | None = None) -> bool:
        """Add (or refresh) ``node`` as a child; False when full or when it would loop."""
        existing = self._children.get(node)
        if existing is not None:
            existing.last_heard = now
            return True
        if node == self.me or node in self.path or len(self._children) >= self.max_children:
            return False
        entry: Child[S] = Child(node, now, self.level + 1 if depth is None else depth)
        self._children[node] = entry
        if summary is not None and not self._store(entry, summary):
            del self._children[node]
            return False
        return True

    def remove_child(self, node: NodeId) -> Child[S] | None:
        return self._children.pop(node, None)

    def heard(self, node: NodeId, now: float) -> None:
        entry = self._children.get(node)
        if entry is not None:
            entry.last_heard = max(entry.last_heard, now)

    def report(self, node: NodeId, now: float, summary: S, depth: int, seq: int) -> bool:
        """Apply a child's report; False if ``node`` is no child, the report is stale or too big."""
        entry = self._children.get(node)
        if entry is None or seq <= entry.seq:
            return False
        if not self._store(entry, summary):
            return False
        entry.seq = seq
        entry.depth = depth
        entry.last_heard = max(entry.last_heard, now)
        return True

    def _store(self, entry: Child[S], summary: S) -> bool:
        size = self.size_of(summary) if self.size_of is not None else 0
        if size > self.max_summary_bytes:
            return False
        entry.summary = summary
        entry.size = size
        return True

    def expire(self, now: float, dead_after: float) -> list[Child[S]]:
        """Remove and return the children not heard for more than ``dead_after`` seconds."""
        dead = [c for c in self._children.values() if now - c.last_heard > dead_after]
        for c in dead:
            del self._children[c.node]
        return dead

    def clear_children(self) -> list[Child[S]]:
        gone = list(self._children.values())
        self._children.clear()
        return gone

    # ------------------------------------------------------------ subtree

    def subtree_depth(self) -> int:
        """The deepest level in this subtree as known here (the thesis's curHL at the root)."""
        return max([self.level, *(c.depth for c in self._children.values())])

    def aggregate(self, local: S, combine: Callable[[S, S], S]) -> S:
        """``local`` combined with every reported child summary (the merged bitmap, Liu §3.2)."""
        out = local
        for c in self._children.values():
            if c.summary is not None:
                out = combine(out, c.summary)
        return out

    def summary_bytes(self) -> int:
        """Bytes of child summaries held (part of the state-size measure)."""
        return sum(c.size for c in self._children.values())
