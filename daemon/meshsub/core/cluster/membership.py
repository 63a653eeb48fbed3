"""What a node keeps per group it belongs to (Liu 2011, §3.1-3.2).

The tree position and the children's reports live in a ``TreeNode``; around
it the group's identity, the anchoring and freshness state that keeps repairs
loop-free, the report bookkeeping, and the gateway and merge state (a leader's
candidate table and locks, a gateway's statuses).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from meshsub.core.api import NodeId
from meshsub.core.cluster.ids import GatewayRecord, GroupId, Status
from meshsub.core.tree import TreeNode

P = TypeVar("P")


@dataclass(frozen=True, slots=True)
class Summary(Generic[P]):
    """A subtree's report as its parent keeps it: the protocol's summary and the gateways."""

    payload: P
    gw_records: tuple[GatewayRecord, ...]
    nbytes: int
    """Bytes it occupies (encoded summary plus records), for the state-size measure."""


@dataclass(eq=False)
class Membership(Generic[P]):
    gid: GroupId
    tree: TreeNode[Summary[P]]
    joined_at: float
    anchored: bool = True
    """True while the chain of parents to a live leader is intact (only then offered to joiners)."""
    root_seq: int = 0
    """The leader's heartbeat counter as last heard down the tree (repair freshness)."""
    cur_hl: int = 0
    """The group's current highest level: computed at the leader, heard elsewhere."""
    linked: frozenset[GroupId] = frozenset()
    """Groups this group reaches through an active gateway (the leader's, copied down)."""
    secondary: bool = False
    """Joined as an extra group (the one a standby gateway gives up)."""
    orphan: bool = False
    """Lost its parent and is looking for a new one (it is then no leader either)."""
    repair_height: int = 0
    last_root_seq: int = 0
    parent_topo: int = -1
    """Newest topology version applied from the current parent."""
    report_seq: int = 0
    last_digest: bytes = b""
    report_due: bool = False
    last_report_at: float = -math.inf
    hello_misses: int = 0
    child_misses: dict[NodeId, int] = field(default_factory=dict)
    """Consecutive heartbeats of a child that did not name this node its parent here."""
    gw_status: dict[GroupId, tuple[Status, int]] = field(default_factory=dict)
    """Adjacent group -> (status, curHL) this group's leader told us as a gateway."""
    told: dict[tuple[NodeId, GroupId], tuple[Status, int, float]] = field(default_factory=dict)
    """Leader: (gateway, adjacent group) -> (status, curHL, when) last sent."""
    lock_small: tuple[NodeId, float] | None = None
    """Leader: a gateway was granted to absorb this group, until the given time."""
    lock_big_until: float = -math.inf
    """Leader: this group is absorbing another until then (it must not be absorbed itself)."""

    @property
    def level(self) -> int:
        return self.tree.level

    @property
    def parent(self) -> NodeId | None:
        return self.tree.parent

    @property
    def is_leader(self) -> bool:
        return self.tree.is_root and not self.orphan
