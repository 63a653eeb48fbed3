"""Parameters of the group-tree machine (Liu 2011, Table 2 and §3.1-3.5).

The depth bounds are the thesis's (Table 2: "preferred levels of each group
tree 1-9 (4)", "maximum levels of each group tree 9"; Algorithm 1's
``maxLevel`` is the preferred one, TG3/TG6 in Fig. 4 set it to 3 and 6). The
thesis gives no timer values ("periodically", "a random period"): the timers
are this implementation's, named as in docs/protocols/tg.md.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from meshsub.core.cluster.messages import MAX_CHILDREN, MAX_GROUPS, MAX_PATH
from meshsub.core.params import OUR_DECISION, ParamDoc, ParameterError
from meshsub.core.reliable import ReliableParams


class OrphanPolicy(enum.StrEnum):
    """What an orphan that found no new parent does (§3.5)."""

    PROMOTE = "promote"
    """Lead its fragment under a new group id (cheap under churn)."""
    DISSOLVE = "dissolve"
    """The thesis: tell its children to find new parents themselves, then rejoin."""


def _positive(key: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise ParameterError(key, "must be a positive number of seconds")


def _non_negative(key: str, value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise ParameterError(key, "must be a number of seconds >= 0")


@dataclass(frozen=True, slots=True)
class ClusterParams(ReliableParams):
    preferred_levels: int = 4
    """L: deepest level a join or a merge may create (Algorithm 1's maxLevel)."""
    maximum_levels: int = 9
    """L_HARD: deepest level at all; a repair may re-attach a subtree down to it."""
    max_groups: int = 2
    """Groups a node belongs to at most (a gateway belongs to two)."""
    max_children: int = 16
    """A parent with this many children stops answering join queries (repairs excepted)."""
    leader_capable: bool = True
    """May lead a group (the thesis: enough power, bandwidth and signal strength)."""
    orphan_policy: OrphanPolicy = OrphanPolicy.PROMOTE
    reliable_publish: bool = True
    """Publications hop by hop with the core's per-hop ACK and retransmission (Wi-Fi
    broadcast-rate frames have no MAC retries); false: best effort, as the thesis has it."""
    T_START_JITTER: float = 1.0
    """Random wait before the first query."""
    T_QUERY: float = 0.5
    """Wait for replies before querying again."""
    N_QUERY: int = 3
    """Unanswered query rounds before the leader back-off."""
    W_MIN: float = 0.2
    W_MAX: float = 0.6
    """The pre-match collection window (the thesis's random wait), from the first reply."""
    T_REPLY_JITTER: float = 0.05
    T_LEADER_BACKOFF: float = 2.0
    """Upper bound of the random wait before self-election."""
    T_RETRY: float = 5.0
    """A node that may not lead queries again after this long."""
    T_CONFIRM: float = 0.5
    """Wait for the chosen parent's confirmation (per try, two tries)."""
    T_HELLO: float = 1.0
    """Heartbeat period (jittered by 10 %)."""
    T_DEAD: float = 3.0
    """A parent or child silent for this long is lost."""
    T_DISCOVER: float = 2.0
    """Upper bound of the random wait before querying a foreign group heard nearby."""
    T_FILTER_MIN: float = 0.2
    """Reports to one parent are coalesced to one per this interval."""
    T_FILTER_REFRESH: float = 10.0
    """Period of the soft-state refresh report."""
    T_MERGE_LOCK: float = 5.0
    repair_rounds: int = 2
    """Query rounds an orphan tries before its orphan policy applies."""

    param_docs: ClassVar[Mapping[str, ParamDoc]] = {
        "preferred_levels": ParamDoc("levels", "Liu 2011, Table 2 (preferred levels 1-9, 4)"),
        "maximum_levels": ParamDoc("levels", "Liu 2011, Table 2 (maximum levels 9)"),
        "max_groups": ParamDoc("groups", "Liu 2011, §3.1 (a gateway is in two groups)"),
        "max_children": ParamDoc("children", OUR_DECISION),
        "leader_capable": ParamDoc("", "Liu 2011, §3.1"),
        "orphan_policy": ParamDoc("", "Liu 2011, §3.5 (`dissolve`); `promote` our decision",
                                  "What an orphan that found no new parent does: lead its "
                                  "fragment under a new group id, or dissolve it (the thesis)."),
        "reliable_publish": ParamDoc("", OUR_DECISION),
        "T_START_JITTER": ParamDoc("s", OUR_DECISION),
        "T_QUERY": ParamDoc("s", OUR_DECISION),
        "N_QUERY": ParamDoc("rounds", OUR_DECISION),
        "W_MIN": ParamDoc("s", "Liu 2011, §3.3 (a random wait); value our decision",
                          "Lower bound of the pre-match collection window."),
        "W_MAX": ParamDoc("s", "Liu 2011, §3.3 (a random wait); value our decision"),
        "T_REPLY_JITTER": ParamDoc("s", OUR_DECISION,
                                   "Upper bound of the random wait before a join reply."),
        "T_LEADER_BACKOFF": ParamDoc("s", "Liu 2011, §3.1 (a random period); value our decision"),
        "T_RETRY": ParamDoc("s", OUR_DECISION),
        "T_CONFIRM": ParamDoc("s", OUR_DECISION),
        "T_HELLO": ParamDoc("s", "Liu 2011, §3.5 (periodic heartbeat); value our decision"),
        "T_DEAD": ParamDoc("s", OUR_DECISION),
        "T_DISCOVER": ParamDoc("s", OUR_DECISION),
        "T_FILTER_MIN": ParamDoc("s", OUR_DECISION),
        "T_FILTER_REFRESH": ParamDoc("s", OUR_DECISION),
        "T_MERGE_LOCK": ParamDoc("s", OUR_DECISION,
                                 "How long a leader holds a merge lock without the gateway "
                                 "completing the merge."),
        "repair_rounds": ParamDoc("rounds", OUR_DECISION),
    }

    def validate(self) -> None:
        ReliableParams.validate(self)
        if not 1 <= self.preferred_levels <= MAX_PATH:
            raise ParameterError("preferred_levels", f"must be in 1..{MAX_PATH}")
        if not self.preferred_levels <= self.maximum_levels <= MAX_PATH:
            raise ParameterError("maximum_levels", f"must be in preferred_levels..{MAX_PATH}")
        if not 1 <= self.max_groups <= MAX_GROUPS:
            raise ParameterError("max_groups", f"must be in 1..{MAX_GROUPS}")
        if not 1 <= self.max_children <= MAX_CHILDREN // 2:
            raise ParameterError("max_children", f"must be in 1..{MAX_CHILDREN // 2}")
        for key in ("T_QUERY", "T_CONFIRM", "T_HELLO", "T_DEAD", "T_FILTER_REFRESH",
                    "T_MERGE_LOCK", "T_RETRY", "W_MAX"):
            _positive(key, getattr(self, key))
        for key in ("T_START_JITTER", "W_MIN", "T_REPLY_JITTER", "T_LEADER_BACKOFF",
                    "T_DISCOVER", "T_FILTER_MIN"):
            _non_negative(key, getattr(self, key))
        if self.W_MIN > self.W_MAX:
            raise ParameterError("W_MIN", "must not exceed W_MAX")
        if self.T_DEAD <= self.T_HELLO:
            raise ParameterError("T_DEAD", "must exceed T_HELLO (a heartbeat must fit in it)")
        if not 1 <= self.N_QUERY <= 20:
            raise ParameterError("N_QUERY", "must be in 1..20")
        if not 1 <= self.repair_rounds <= 20:
            raise ParameterError("repair_rounds", "must be in 1..20")

    @property
    def hard_children(self) -> int:
        """Children a node holds at most: merges may exceed ``max_children`` up to this."""
        return 2 * self.max_children
