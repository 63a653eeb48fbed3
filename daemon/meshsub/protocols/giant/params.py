"""GIANT's parameters (Zheng 2008, ch. 6), with the thesis's names where it has them.

The chapter has no parameter table: ``Prob`` (per-hop target), the target
delivery ratio, the time unit and the tree are the thesis's; timers, leases
and bounds are this implementation's (docs/protocols/giant.md). A node is a
broker (static, at most one per cell) or a ferry: its node roles (``broker``/
``ferry``, a scenario's node group or the daemon's ``node.roles``) say which,
and the ``role`` parameter does when they do not (``ROLE_NAMES``).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Final

from meshsub.core.buffer import DropPolicy
from meshsub.core.cellgrid import CellGridParams, require_at_least_one, require_positive
from meshsub.core.content import ContentError
from meshsub.core.lattice import Boundary
from meshsub.core.params import OUR_DECISION, ParamDoc, ParameterError
from meshsub.core.topics import validate_topic


class Role(enum.StrEnum):
    BROKER = "broker"
    """A static node serving a sub-network; brokers never hear one another (§6.2)."""
    FERRY = "ferry"
    """A mobile carrier on a random walk; never talks to clients or other ferries."""


ROLE_NAMES: Final[Mapping[str, Role]] = {"broker": Role.BROKER, "ferry": Role.FERRY}
"""Node roles (``meshsub.core.roles``) that make a node a broker or a ferry."""

class Tree(enum.StrEnum):
    GIANT = "giant"
    """Broker_SendSub (Function 6.1): shortest total path, 2-3 hops among equals."""
    PRIM = "prim"
    """The baseline: attach to the nearest broker already on the tree (Prim's rule)."""


SOFT_STATE: Final = OUR_DECISION + " (the thesis's advertisements and subscriptions never expire)"
BOUND: Final = OUR_DECISION + " (a bound on a table the thesis leaves unbounded)"
DS_6_2: Final = "Zheng 2008, §6.3, Data Structure 6.2 ({}, no value); value our decision"


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
    max_peers: int = 256
    """Peers of the other role whose latest HELLO is kept (the least recently heard makes
    room for a new one: a sender with the fleet key can claim any number of node ids)."""

    param_docs: ClassVar[Mapping[str, ParamDoc]] = {
        "role": ParamDoc("", "Zheng 2008, §6.2 (static brokers, mobile message ferries)",
                         "Broker (static, at most one per cell, serves local clients) or "
                         "ferry (a mobile carrier), when the node's roles (`broker`, `ferry`) "
                         "do not say."),
        "tree": ParamDoc("", "Zheng 2008, §6.4.2, Function 6.1 (`giant`); §6.5.1 (Prim's "
                             "MST, the baseline)",
                         "How a broker chooses its upstream: GIANT's Broker_SendSub or "
                         "Prim's rule."),
        "DR": ParamDoc("probability", "Zheng 2008, §6.5.1 (target delivery ratios 0.5-0.9)"),
        "Prob_ctrl": ParamDoc("probability", OUR_DECISION + " (the thesis hands a subscription "
                                             "to one ferry, §6.4.2)"),
        "unit_s": ParamDoc("s", "Zheng 2008, §6.2 (one unit time = one cell crossing); "
                                "seconds per unit our decision"),
        "hit_boundary": ParamDoc("", "Zheng 2008, Theorem 6.1, App. 6.A (the edge-free "
                                     "lattice); the bounded edge rules are our decision"),
        "T_max": ParamDoc("units", OUR_DECISION + " (above the thesis's longest window, 400 "
                                   "units in Fig. 6.11, §6.5.2)"),
        "adverts": ParamDoc("topics", "Zheng 2008, §6.4.1 step 1 (a publisher submits its "
                                      "advertisement); configuring them is our decision"),
        "adv_ttl_s": ParamDoc("s", SOFT_STATE,
                              "Lifetime of an advertisement: a broker stops handing it on "
                              "after this, and forgets the routing entry once nothing else "
                              "holds it; the PHB renews it every `adv_refresh_s`."),
        "adv_refresh_s": ParamDoc("s", SOFT_STATE,
                                  "Period at which a PHB renews its advertisements and hands "
                                  "them to ferries again."),
        "adv_handouts": ParamDoc("ferries", OUR_DECISION + " (the thesis hands an "
                                            "advertisement to \"the ferry nearby\", §6.4.1)"),
        "sub_lease_s": ParamDoc("s", SOFT_STATE,
                                "A subscription held for a routing entry expires unless "
                                "refreshed within this."),
        "sub_refresh_s": ParamDoc("s", SOFT_STATE,
                                  "Period at which a broker refreshes its subscriptions "
                                  "upstream."),
        "event_ttl_s": ParamDoc("s", OUR_DECISION + " (the thesis gives forwarded events "
                                     "no lifetime, §6.3)"),
        "sweep_s": ParamDoc("s", OUR_DECISION + " (soft state and bounds are ours)",
                            "Period of the sweep that expires leases, recruitment records and "
                            "carried items."),
        "buffer_size": ParamDoc("items", OUR_DECISION + " (the thesis notes the ferries' "
                                         "limited storage, §6.1, without a size)"),
        "drop_policy": ParamDoc("", OUR_DECISION + " (the thesis gives no rule for a full ferry)",
                                "Which carried item a full ferry drops."),
        "max_routes": ParamDoc("entries", DS_6_2.format("routing_table[MaxNo_entry]")),
        "max_candidates": ParamDoc("brokers", DS_6_2.format("last_hop_list[MaxNo_broker]"),
                                   "Candidate upstream brokers one routing entry keeps."),
        "max_downstream": ParamDoc("subscriptions",
                                   DS_6_2.format("next_hop_list[MaxNo_broker]")),
        "max_outgoing": ParamDoc("items", DS_6_2.format("forwarded_event_list[MaxNo_Event]")),
        "max_senders": ParamDoc("records", BOUND),
        "window": ParamDoc("bundles", OUR_DECISION + " (per-hop ACKs are ours; the thesis "
                                      "has no flow control)"),
        "max_copies": ParamDoc("ferries", DS_6_2.format("forwarded_time[MaxNo_MN]")),
        "max_peers": ParamDoc("peers", BOUND),
    }

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
                             "max_senders", "window", "max_copies", "max_peers")
        if len(self.adverts) > 64:
            raise ParameterError("adverts", "at most 64 topics")
        for topic in self.adverts:
            try:
                validate_topic(topic)
            except ContentError as exc:
                raise ParameterError("adverts", str(exc)) from None
