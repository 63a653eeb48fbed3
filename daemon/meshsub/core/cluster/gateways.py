"""Gateway arbitration and the merge test (Liu 2011, §3.1, Algorithm 1).

A node in two groups is a gateway candidate. Each leader collects the
candidates between its group and each adjacent one and keeps one *active*
(§3.1: "the one has a lower level number will win the gateway status"). Both
leaders of a pair must pick the same node, or each may tell the other's
choice to stand by and the pair ends up with none: so the rank is symmetric,
fewest levels on both sides first (docs/protocols/tg.md).

The active gateway merges the two groups when ``a + b + c <= L``
(Algorithm 1 line 13): ``a`` its level in the bigger group, ``b`` in the
smaller, ``c`` the smaller group's current highest level; "smaller" is the
group with the smaller curHL (the lower group id on a tie). Re-rooting the
small group at the gateway puts every one of its nodes at most ``b + c``
hops below it, so at level ``<= a + b + c``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from meshsub.core.cluster.ids import GatewayRecord, GroupId


def candidates(gid: GroupId,
               records: Iterable[GatewayRecord]) -> dict[GroupId, list[GatewayRecord]]:
    """Candidates of group ``gid`` per adjacent group, best first."""
    out: dict[GroupId, list[GatewayRecord]] = {}
    for r in records:
        if r.here == gid and r.there != gid:
            out.setdefault(r.there, []).append(r)
    for rs in out.values():
        rs.sort(key=GatewayRecord.rank)
    return out


@dataclass(frozen=True, slots=True)
class MergePlan:
    small: GroupId
    big: GroupId
    a: int
    b: int
    c: int

    @property
    def depth(self) -> int:
        """The deepest level the merge can create."""
        return self.a + self.b + self.c


def merge_plan(g1: GroupId, level1: int, cur_hl1: int, g2: GroupId, level2: int,
               cur_hl2: int) -> MergePlan:
    """The merge a gateway at ``level1`` in ``g1`` and ``level2`` in ``g2`` would make."""
    if (cur_hl1, g1) < (cur_hl2, g2):
        return MergePlan(small=g1, big=g2, a=level2, b=level1, c=cur_hl1)
    return MergePlan(small=g2, big=g1, a=level1, b=level2, c=cur_hl2)
