"""The join state of a node: query, collect replies, pre-match, select (Liu 2011, §3.1, §3.3).

One join runs at a time per node: the first (INITIAL), an extra group
(ADDITIONAL) or a repair of one membership (REPAIR). ``rank`` is the
pre-match: the candidate whose bitmap shares most set bits with the joiner's
wins (§3.3 "more number of the same bits"); ties go to the shallower parent
(the thesis wants balanced trees), the better link, the lower id.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass, field

from meshsub.core.api import NodeId
from meshsub.core.cluster.ids import GroupId, Purpose


class Phase(enum.Enum):
    IDLE = "idle"
    QUERY = "query"
    """A query is out; no reply yet."""
    BACKOFF = "backoff"
    """INITIAL: no group answered; the random wait before self-election."""
    FINAL = "final"
    """INITIAL: the last query after the back-off."""
    WAIT = "wait"
    """INITIAL, not capable of leading: wait before querying again."""
    COLLECT = "collect"
    """The collection window after the first reply."""
    SELECT = "select"
    """A JOIN_SELECT is out; waiting for the confirmation."""


@dataclass(slots=True)
class Candidate:
    sender: NodeId
    gid: GroupId
    path: tuple[NodeId, ...]
    """Root first, the candidate last."""
    summary: bytes
    root_seq: int
    cur_hl: int
    score: int = 0

    @property
    def level(self) -> int:
        return len(self.path) - 1


@dataclass(slots=True)
class JoinState:
    purpose: Purpose | None = None
    phase: Phase = Phase.IDLE
    nonce: int = 0
    rounds: int = 0
    repair_gid: GroupId | None = None
    subtree_height: int = 0
    last_root_seq: int = 0
    candidates: list[Candidate] = field(default_factory=list)
    selected: Candidate | None = None
    seek_more: bool = False
    """Pre-match found no overlap: look for more groups right after joining (§3.3)."""

    @property
    def active(self) -> bool:
        return self.phase is not Phase.IDLE

    def reset(self) -> None:
        self.purpose = None
        self.phase = Phase.IDLE
        self.rounds = 0
        self.repair_gid = None
        self.candidates = []
        self.selected = None


def rank(candidates: list[Candidate], score: Callable[[Candidate], int],
         link_quality: Callable[[NodeId], float]) -> list[Candidate]:
    """Candidates best first (pre-match score, then level, link quality, id)."""
    for c in candidates:
        c.score = score(c)
    return sorted(candidates, key=lambda c: (-c.score, c.level, -link_quality(c.sender),
                                             c.sender))
