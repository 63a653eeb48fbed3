"""GIANT's parameters (Zheng 2008, ch. 6), with the thesis's names where it has them.

The chapter has no parameter table: ``Prob`` (per-hop target), the target
delivery ratio, the time unit and the tree are the thesis's; timers, leases
and bounds are this implementation's (docs/protocols/giant.md). The role is
a parameter for now: a broker (static, at most one per cell) or a ferry.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from meshsub.core.buffer import DropPolicy
from meshsub.core.cellgrid import CellGridParams, require_at_least_one, require_positive
from meshsub.core.content import ContentError
from meshsub.core.lattice import Boundary
from meshsub.core.params import ParameterError
from meshsub.core.topics import validate_topic


class Role(enum.StrEnum):
    BROKER = "broker"
    """A static node serving a sub-network; brokers never hear one another (§6.2)."""
    FERRY = "ferry"
    """A mobile carrier on a random walk; never talks to clients or other ferries."""


class Tree(enum.StrEnum):
    GIANT = "giant"
    """Broker_SendSub (Function 6.1): shortest total path, 2-3 hops among equals."""
    PRIM = "prim"
    """The baseline: attach to the nearest broker already on the tree (Prim's rule)."""


def _fraction(key: str, value: float) -> None:
    if not (math.isfinite(value) and 0.0 < value < 1.0):
        raise ParameterError(key, "must be in (0, 1)")


@dataclass(frozen=True, slots=True)
class GiantParams(CellGridParams):
    """The grid (cells sized by a static node's radio range, §6.2), then GIANT's own."""

    role: Role = Role.BROKER
    tree: Tree = Tree.GIANT
    DR: float = 0.9
    """Target end-to-end delivery ratio of local subscriptions (the thesis's 0.5-0.9)."""
    Prob_ctrl: float = 0.9
    """Per-hop target for subscriptions and unsubscriptions (the thesis gives them one ferry)."""
    unit_s: float = 60.0
    """Seconds per time unit: one cell crossing of a ferry (1 in the thesis)."""
    hit_boundary: Boundary = Boundary.INFINITE
    """The walk RecruitFerry assumes: the thesis's edge-free lattice, or the bounded region
    with this edge rule (absorbing dynamic programme)."""
    T_max: int = 2000
    """Longest window (units) of the hit-probability tables; longer windows use T_max."""
    adverts: tuple[str, ...] = ()
    """Topics this broker's publishers advertise at start (a first publication on another
    topic advertises it too)."""
    adv_ttl_s: float = 86400.0
    adv_refresh_s: float = 3600.0
    adv_handouts: int = 8
    """Ferries a broker hands each advertisement to per refresh period."""
    sub_lease_s: float = 21600.0
    sub_refresh_s: float = 7200.0
    event_ttl_s: float = 3600.0
    """How long a broker keeps recruiting for an event, and a ferry carries it."""
    sweep_s: float = 60.0
    buffer_size: int = 1000
    """Bundles and advertisements a ferry carries."""
    drop_policy: DropPolicy = DropPolicy.DROP_OLDEST
    max_routes: int = 256
    """Routing entries, one per (topic, publisher's broker)."""
    max_candidates: int = 64
    max_downstream: int = 256
    """Subscriptions one routing entry holds."""
    max_outgoing: int = 4096
    """Events and subscriptions a broker is recruiting ferries for."""
    max_senders: int = 32
    """Visited-broker records one advertisement carries."""
    window: int = 8
    """Bundles in flight (unacknowledged) per contact."""
    max_copies: int = 1024
    """Ferries recruited for one item and next hop at most (a Prob near 1 over a long hop
    would otherwise recruit without end)."""

    def validate(self) -> None:
        CellGridParams.validate(self)
        _fraction("DR", self.DR)
        _fraction("Prob_ctrl", self.Prob_ctrl)
        for key in ("unit_s", "adv_ttl_s", "adv_refresh_s", "sub_lease_s", "sub_refresh_s",
                    "event_ttl_s", "sweep_s"):
            require_positive(key, getattr(self, key))
        if self.sub_lease_s < self.sub_refresh_s:
            raise ParameterError("sub_lease_s", "must be at least sub_refresh_s")
        if not 1 <= self.T_max <= 20000:
            raise ParameterError("T_max", "must be in 1..20000")
        require_at_least_one(self, "adv_handouts", "buffer_size", "max_routes",
                             "max_candidates", "max_downstream", "max_outgoing",
                             "max_senders", "window", "max_copies")
        if len(self.adverts) > 64:
            raise ParameterError("adverts", "at most 64 topics")
        for topic in self.adverts:
            try:
                validate_topic(topic)
            except ContentError as exc:
                raise ParameterError("adverts", str(exc)) from None
