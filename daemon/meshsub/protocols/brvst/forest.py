"""The summary forest (Li and Wang 2014, §IV-B1, Algorithms 1 and 2) over ARV filters.

A forest groups filters into trees; every member of a tree has all of its
root's attributes, and the root carries, per root attribute, the OR-merge of
that attribute's ARVs over *every* member. The roots' summaries are the
cell's representative set (GRSV at a grid manager, ZRSV at a zone manager):
any publication that matches a member matches its root's summary, because
the summary covers every member's range and the root asks for fewer
attributes (the comparators are monotone in the subscription's cover).

The paper's Algorithm 1 is malformed as printed (its "make s a new root"
sits inside the loop over roots); the deterministic reading implemented
here, with flat member lists instead of parent/child links, is the one in
docs/protocols/brvst.md:

1. child placement: the first root (ascending tree id) whose attributes ``s``
   contains and whose summary overlaps ``s`` on every root attribute takes ``s``;
2. parent placement: otherwise ``s`` becomes the root of a new tree absorbing
   every root whose attributes contain ``s``'s and that ``s`` overlaps on all of
   ``s``'s attributes;
3. otherwise ``s`` is a new stand-alone root;
then the affected summary is recomputed and the forest reduced (repeatedly
merge the first ordered pair of trees whose roots satisfy the child rule).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator, Mapping
from dataclasses import dataclass, field

from meshsub.core.arv import ARV, merge_all

AttrId = int
Entry = tuple[tuple[AttrId, ARV], ...]
"""A representative entry: (attribute, summary ARV) pairs in ascending attribute order."""


@dataclass(frozen=True, slots=True)
class Filter:
    """A conjunction of attribute ARVs with an identity (a subscription, or a SOF entry)."""

    id: Hashable
    arvs: Mapping[AttrId, ARV]

    @property
    def attrs(self) -> frozenset[AttrId]:
        return frozenset(self.arvs)

    def entry(self) -> Entry:
        return tuple(sorted(self.arvs.items()))


def entry_key(entry: Entry) -> tuple[tuple[int, int, bytes], ...]:
    """Canonical order of entries: by (attribute, level, bitmap bytes), attribute by attribute."""
    return tuple((a, v.level, v.to_bytes()) for a, v in entry)


def entry_bytes(entry: Entry) -> bytes:
    """The binary FILTER form: count (u8), then per ARV attribute (u16), level (u8), bitmap."""
    out = bytearray([len(entry)])
    for attr, v in entry:
        out += attr.to_bytes(2, "big") + bytes([v.level]) + v.to_bytes()
    return bytes(out)


def entry_size(entry: Entry) -> int:
    """Encoded bytes of one filter: a 1-byte count plus each ARV (2 + 1 + bitmap)."""
    return 1 + sum(v.encoded_size for _a, v in entry)


def rsv_size(entries: list[Entry] | tuple[Entry, ...]) -> int:
    """Encoded bytes of a representative set: a 2-byte count plus its entries."""
    return 2 + sum(entry_size(e) for e in entries)


@dataclass(slots=True)
class Tree:
    tree_id: int
    members: list[Filter]
    """Every filter of the tree, the root first, in insertion order."""
    summary: dict[AttrId, ARV] = field(default_factory=dict)

    @property
    def root(self) -> Filter:
        return self.members[0]

    @property
    def common(self) -> frozenset[AttrId]:
        return self.root.attrs

    def recompute(self) -> None:
        self.summary = {a: merge_all([m.arvs[a] for m in self.members])
                        for a in sorted(self.common)}

    def entry(self) -> Entry:
        return tuple(sorted(self.summary.items()))


def _overlap_all(a: Mapping[AttrId, ARV], b: Mapping[AttrId, ARV],
                 attrs: frozenset[AttrId]) -> bool:
    return all(a[x].overlaps(b[x]) for x in attrs)


class Forest:
    """Trees in ascending ``tree_id``; ``index`` maps a filter id to its tree."""

    def __init__(self) -> None:
        self.trees: dict[int, Tree] = {}
        self.index: dict[Hashable, int] = {}
        self._next_id = 0

    def __len__(self) -> int:
        """Number of filters held."""
        return len(self.index)

    def __contains__(self, filter_id: object) -> bool:
        return filter_id in self.index

    def filters(self) -> Iterator[Filter]:
        for tree in self.trees.values():
            yield from tree.members

    def get(self, filter_id: Hashable) -> Filter | None:
        tid = self.index.get(filter_id)
        if tid is None:
            return None
        return next(m for m in self.trees[tid].members if m.id == filter_id)

    # ------------------------------------------------------------ Algorithm 1

    def insert(self, f: Filter) -> None:
        """Algorithm 1 followed by reduction; ``f.id`` must be new and ``f`` non-empty."""
        if f.id in self.index:
            raise KeyError(f"filter {f.id!r} is already in the forest")
        if not f.arvs:
            raise ValueError("a filter needs at least one attribute")
        self._place(f)
        self._reduce()

    def _new_tree(self, members: list[Filter]) -> Tree:
        tree = Tree(self._next_id, members)
        self._next_id += 1
        self.trees[tree.tree_id] = tree
        for m in members:
            self.index[m.id] = tree.tree_id
        return tree

    def _place(self, f: Filter) -> None:
        """Steps 1-5: child placement, else parent placement, else a new root."""
        for tree in self.trees.values():
            common = tree.common
            if common <= f.attrs and _overlap_all(tree.summary, f.arvs, common):
                tree.members.append(f)
                self.index[f.id] = tree.tree_id
                tree.recompute()
                return
        absorbed = [t for t in self.trees.values()
                    if f.attrs <= t.common and _overlap_all(f.arvs, t.summary, f.attrs)]
        members = [f]
        for t in absorbed:
            members.extend(t.members)
            del self.trees[t.tree_id]
        self._new_tree(members).recompute()

    def _reduce(self) -> None:
        """Merge the first ordered pair (Ta, Tb) with attrs(Ra) >= attrs(Rb) overlapping on Rb's."""
        while True:
            pair = self._first_mergeable()
            if pair is None:
                return
            ta, tb = pair
            tb.members.extend(ta.members)
            for m in ta.members:
                self.index[m.id] = tb.tree_id
            del self.trees[ta.tree_id]
            tb.recompute()

    def _first_mergeable(self) -> tuple[Tree, Tree] | None:
        trees = list(self.trees.values())
        for ta in trees:
            for tb in trees:
                if ta is tb:
                    continue
                if tb.common <= ta.common and _overlap_all(ta.summary, tb.summary, tb.common):
                    return ta, tb
        return None

    # ------------------------------------------------------------ Algorithm 2

    def remove(self, filter_id: Hashable) -> Filter:
        """Algorithm 2: a root's tree is dissolved and its other members re-inserted."""
        tid = self.index.pop(filter_id)
        tree = self.trees[tid]
        pos = next(i for i, m in enumerate(tree.members) if m.id == filter_id)
        removed = tree.members.pop(pos)
        if pos == 0:
            del self.trees[tid]
            for m in tree.members:
                del self.index[m.id]
            for m in tree.members:
                self._place(m)
        elif tree.members:
            tree.recompute()
        self._reduce()
        return removed

    def replace(self, f: Filter) -> None:
        """A modification: Algorithm 2 for the old version, then Algorithm 1 for ``f``."""
        if f.id in self.index:
            self.remove(f.id)
        self.insert(f)

    # ------------------------------------------------------------ outputs

    def representative(self) -> list[Entry]:
        """The roots' summaries in canonical order: equal sets have equal lists."""
        return sorted((t.entry() for t in self.trees.values()), key=entry_key)

    def candidates(
        self, matches_entry: Callable[[Mapping[AttrId, ARV]], bool]
    ) -> Iterator[Filter]:
        """Members of every tree whose summary satisfies ``matches_entry(summary)``."""
        for tree in self.trees.values():
            if matches_entry(tree.summary):
                yield from tree.members

    def check(self) -> None:
        """Raise ``AssertionError`` unless the forest invariants hold (tests, debugging).

        Every member has its root's attributes, every summary is the OR of
        the members, each filter is in exactly one tree, and no pair of trees
        is left that the reduction would merge.
        """
        seen: set[Hashable] = set()
        for tid, tree in self.trees.items():
            assert tree.tree_id == tid and tree.members, "empty or misfiled tree"
            for m in tree.members:
                assert tree.common <= m.attrs, "member lacks a root attribute"
                assert m.id not in seen and self.index.get(m.id) == tid, "filter not indexed once"
                seen.add(m.id)
            for a in tree.common:
                want = merge_all([m.arvs[a] for m in tree.members])
                assert tree.summary[a] == want, "summary is not the OR of the members"
            assert set(tree.summary) == set(tree.common), "summary over the wrong attributes"
        assert seen == set(self.index), "index holds filters that no tree has"
        assert self._first_mergeable() is None, "reduction left a mergeable pair"


class Summarised:
    """A manager's forest and the representative set it last sent (§IV-B).

    What a grid manager (its GRSV) and a zone manager (its ZRSV) share: the set goes
    out only when it changed (or when ``force``d, as a refresh), and every change
    takes the next version, so a receiver keeps the newest.
    """

    def __init__(self, epoch: int) -> None:
        self.epoch = epoch
        self.predecessor: int | None = None
        """The manager whose state this one took over (named in its next summary)."""
        self.forest = Forest()
        self.version = 0
        self.last_sent: list[Entry] | None = None

    def representative(self) -> list[Entry]:
        return self.forest.representative()

    def take_update(self, force: bool = False) -> tuple[int, list[Entry]] | None:
        """The summary to send if it changed since the last one sent (or ``force``)."""
        rep = self.representative()
        if rep == self.last_sent and not force:
            return None
        if rep != self.last_sent:
            self.version += 1
        self.last_sent = rep
        return self.version, rep

