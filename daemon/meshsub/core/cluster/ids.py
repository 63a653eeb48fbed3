"""Identities and small records of the group-tree machine (Liu 2011, §3.1)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

from meshsub.core import bodies as b
from meshsub.core.api import NodeId


@dataclass(frozen=True, slots=True, order=True)
class GroupId:
    """A group's identity: its founding leader, that leader's boot epoch, a counter.

    The thesis has a "group ID" (§3.1) and no format. A leader founds a new
    id whenever it leads a new group (self-election, promotion after a failed
    repair), so a re-formed group never reuses an old id, across reboots too
    (the epoch). The leader never changes for an id: a merge moves the
    absorbed nodes into the other group's id.
    """

    leader: NodeId
    epoch: int
    n: int

    def __str__(self) -> str:
        return f"{self.leader:x}-{self.epoch:x}-{self.n:x}"

    def wire(self) -> list[int]:
        return [self.leader, self.epoch, self.n]

    @classmethod
    def decode(cls, value: Any, what: str = "gid") -> GroupId:
        leader, epoch, n = b.fields(value, 3, what)
        return cls(b.node(leader, what), b.integer(epoch, what, 0, (1 << 64) - 1),
                   b.integer(n, what, 0, (1 << 64) - 1))


class Purpose(enum.IntEnum):
    """Why a node queries its neighbours."""

    INITIAL = 0
    """It belongs to no group (§3.1 "tries to find a group to join in")."""
    ADDITIONAL = 1
    """It belongs to one and joins another (§3.1 "keep querying to join other groups")."""
    REPAIR = 2
    """It lost its parent (§3.5 "find another neighbor as its new parent")."""


class Status(enum.IntEnum):
    """What a leader tells a gateway candidate (§3.1 "will win the gateway status")."""

    ACTIVE = 0
    STANDBY = 1


class DetachKind(enum.IntEnum):
    UNANCHOR = 0
    """The sender lost its way to the leader: stop offering this group to joiners."""
    DISSOLVE = 1
    """The sender leaves the group: find a new parent yourself (§3.5)."""


class MergeRole(enum.IntEnum):
    SMALL = 0
    """The group to be absorbed (re-rooted at the gateway)."""
    BIG = 1
    """The group that absorbs it (its nodes keep their levels)."""


@dataclass(frozen=True, slots=True, order=True)
class GatewayRecord:
    """A node in two groups, as it reports itself upward in one of them (§3.1).

    The thesis piggybacks "a gateway flag, its group ID and its level number"
    on the bitmap; the record carries both sides so that both leaders rank
    candidates alike, and ``active`` once the leader has chosen it, so that
    every ancestor knows which branch leads to an active gateway.
    """

    gw: NodeId
    here: GroupId
    level_here: int
    there: GroupId
    level_there: int
    active: bool

    def rank(self) -> tuple[int, int, NodeId]:
        """Lower is better: fewest levels on both sides, then the shallower worst side, then id."""
        return (self.level_here + self.level_there, max(self.level_here, self.level_there),
                self.gw)

    def wire(self) -> list[Any]:
        return [self.gw, self.here.wire(), self.level_here, self.there.wire(),
                self.level_there, self.active]

    @classmethod
    def decode(cls, value: Any, max_level: int) -> GatewayRecord:
        gw, here, lh, there, lt, active = b.fields(value, 6, "gateway record")
        if not isinstance(active, bool):
            raise b.BodyError("gateway record active: expected true or false")
        return cls(b.node(gw, "gateway"), GroupId.decode(here, "gid_here"),
                   b.integer(lh, "level_here", 0, max_level), GroupId.decode(there, "gid_there"),
                   b.integer(lt, "level_there", 0, max_level), active)
