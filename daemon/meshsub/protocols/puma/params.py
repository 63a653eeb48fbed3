"""Parameters of PUMA and of its paging baseline, named as in Zheng 2008, ch. 5.

``th``, ``dist``, ``I_event``-style names come from Table 5.1; the timers the
thesis does not define (it assumes instantaneous delivery) have the defaults
of docs/protocols/puma.md. A node is a base station (one per cell, static)
or a client (mobile): its node roles (``base_station``/``client``, a
scenario's node group or the daemon's ``node.roles``) say which, and the
``role`` parameter does when they do not (``ROLE_NAMES``).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Final

from meshsub.core.cellgrid import (
    CellGridParams,
    require_at_least_one,
    require_non_negative,
    require_positive,
)
from meshsub.core.lattice import Boundary
from meshsub.core.params import OUR_DECISION, ParamDoc, ParameterError

UNTIMED: Final = OUR_DECISION + " (the thesis assumes instantaneous delivery, §5.4.1)"
SOFT_STATE: Final = OUR_DECISION + " (the thesis's subscriptions and tracks never expire)"
BOUND: Final = OUR_DECISION + " (a bound on a table the thesis leaves unbounded)"
FALLBACK: Final = OUR_DECISION + " (the thesis has no fallback queue: its walk model is exact)"
LOSSLESS: Final = OUR_DECISION + " (the thesis's simulation ignores the lower layers, §5.4.1)"


class Role(enum.StrEnum):
    BASE = "base"
    """A mesh base station: one per cell, static, a broker (Zheng 2008, §5.2)."""
    CLIENT = "client"
    """A mobile user's device: talks only to the base station of its cell."""


ROLE_NAMES: Final[Mapping[str, Role]] = {"base_station": Role.BASE, "base": Role.BASE,
                                         "client": Role.CLIENT}
"""Node roles (``meshsub.core.roles``) that make a node a base station or a client."""

class ThMode(enum.StrEnum):
    FIXED = "fixed"
    """Always ``th``."""
    ADAPTIVE = "adaptive"
    """The thesis's optima by elapsed time (§5.4.2): 0.6 for t <= 3, 0.7 at 4, 0.8 from 5."""


class DistRule(enum.StrEnum):
    AT_LEAST = "at_least"
    """Report once the client is ``dist`` or more cells from its last report."""
    BEYOND = "beyond"
    """Report once it is more than ``dist`` cells away (§5.4.1's "beyond a certain value")."""


@dataclass(frozen=True, slots=True)
class BackboneParams(CellGridParams):
    """What PUMA and paging share: roles, the cell grid (Table 5.1: 25 x 25), the backbone."""

    role: Role = Role.CLIENT
    beacon_s: float = 10.0
    """Base-station beacon period (one-hop, cell and role); 0 = only when a neighbour appears."""
    sub_lease_s: float = 300.0
    sub_refresh_s: float = 100.0
    """Soft state of subscriptions in the backbone tree (refreshed by the previous broker)."""
    client_refresh_s: float = 3600.0
    """A client re-confirms its subscriptions to its previous broker this often (one message
    each); 0 = never, as in the thesis's 12-unit runs."""
    track_ttl_s: float = 0.0
    """A previous broker forgets a client not heard from for this long; 0 = three client
    refresh periods (never when ``client_refresh_s`` is 0)."""
    max_subscriptions: int = 4096
    """Subscriptions a base station holds for the backbone (all clients, all brokers)."""
    max_clients: int = 1024
    """Clients a previous broker tracks."""
    max_client_subs: int = 64
    """Subscriptions one client may hold at its previous broker."""
    max_waiting: int = 64
    """Publications and (un)subscriptions a client holds while no base station is in reach."""
    dedup_size: int = 4096
    reliable_control: bool = True
    """Per-hop ACKs for subscriptions, replies, reports and re-association messages."""
    reliable_events: bool = False
    """Per-hop ACKs for events too; false keeps the thesis's message counts."""

    param_docs: ClassVar[Mapping[str, ParamDoc]] = {
        "role": ParamDoc("", "Zheng 2008, §5.2 (every base station a broker, every mobile "
                             "user a client)",
                         "Base station (static, one per cell, a broker) or client (mobile), "
                         "when the node's roles (`base_station`, `client`) do not say."),
        "beacon_s": ParamDoc("s", OUR_DECISION + " (§5.2 does not say how stations learn "
                                  "their neighbours)"),
        "sub_lease_s": ParamDoc("s", SOFT_STATE,
                                "A subscription spread over the backbone tree expires unless "
                                "refreshed within this."),
        "sub_refresh_s": ParamDoc("s", SOFT_STATE),
        "client_refresh_s": ParamDoc("s", SOFT_STATE),
        "track_ttl_s": ParamDoc("s", SOFT_STATE),
        "max_subscriptions": ParamDoc("subscriptions", BOUND),
        "max_clients": ParamDoc("clients", BOUND),
        "max_client_subs": ParamDoc("subscriptions", BOUND),
        "max_waiting": ParamDoc("messages", BOUND),
        "dedup_size": ParamDoc("event ids", BOUND,
                               "Event ids a node remembers to pass each event on once (and a "
                               "client to answer each round's copy once)."),
        "reliable_control": ParamDoc("", LOSSLESS),
        "reliable_events": ParamDoc("", LOSSLESS),
    }

    def validate(self) -> None:
        CellGridParams.validate(self)
        for key in ("beacon_s", "client_refresh_s", "track_ttl_s"):
            require_non_negative(key, getattr(self, key))
        require_positive("sub_lease_s", self.sub_lease_s)
        require_positive("sub_refresh_s", self.sub_refresh_s)
        if self.sub_lease_s < self.sub_refresh_s:
            raise ParameterError("sub_lease_s", "must be at least sub_refresh_s")
        require_at_least_one(self, "max_subscriptions", "max_clients", "max_client_subs",
                             "max_waiting", "dedup_size")

    def client_track_ttl(self) -> float:
        """Seconds a silent client keeps its track (inf: never forgotten)."""
        if self.track_ttl_s > 0:
            return self.track_ttl_s
        return 3 * self.client_refresh_s if self.client_refresh_s > 0 else math.inf


@dataclass(frozen=True, slots=True)
class PumaParams(BackboneParams):
    th: float = 0.6
    """Probability mass of the hot set (§5.3.1); the thesis's optimum for I_event = 2, 3."""
    th_mode: ThMode = ThMode.FIXED
    unit_s: float = 60.0
    """Seconds per time unit: one cell crossing of the client's walk (1 in the thesis)."""
    t_max: int = 12
    """Longest prediction horizon (units); a client silent for longer gets the fallback."""
    walk_boundary: Boundary = Boundary.RENORMALISE
    """The walk's rule at the region's edge (the thesis ignores edges); match the mobility."""
    ack_timeout_s: float = 0.0
    """Wait for the client's reply per phase; 0 = 2 x tree depth x ``per_hop_s`` +
    ``client_rtt_s``, at least ``ack_timeout_min_s``."""
    per_hop_s: float = 0.05
    client_rtt_s: float = 0.2
    ack_timeout_min_s: float = 0.5
    queue_size: int = 64
    """Events the previous broker keeps per client after both phases failed."""
    queue_ttl_s: float = 3600.0
    rejoin_gap_s: float = 0.0
    """A client that was out of every base station's reach for this long says HELLO when it
    associates again, so that queued events follow it; 0 = one time unit."""
    max_pending: int = 1024
    """Deliveries a previous broker has in flight (waiting for a reply)."""

    param_docs: ClassVar[Mapping[str, ParamDoc]] = {
        "th": ParamDoc("probability", "Zheng 2008, §5.3.1 (Problem 5.2); Table 5.1 (40-100 %); "
                                      "§5.4.2 (optimum 60 % for I_event = 2, 3)"),
        "th_mode": ParamDoc("", "Zheng 2008, §5.4.2 (optimal th per I_event: 60 / 70 / 80 %); "
                                "applying them by elapsed units is our decision",
                            "`fixed`: always `th`; `adaptive`: the thesis's optima by elapsed "
                            "units t (0.6 for t <= 3, 0.7 at 4, 0.8 from 5)."),
        "unit_s": ParamDoc("s", "Zheng 2008, §5.2 (one unit time = one cell crossing); "
                                "seconds per unit our decision"),
        "t_max": ParamDoc("units", "Zheng 2008, Table 5.1 (12-unit runs); the fallback beyond "
                                   "is our decision"),
        "walk_boundary": ParamDoc("", "Zheng 2008, §5.3.1 (eq. 5.3 ignores the edge effect); "
                                      "the edge rules are our decision"),
        "ack_timeout_s": ParamDoc("s", "Zheng 2008, §5.3.1 (the cold round once the hot one "
                                       "failed; no timeout given); value our decision"),
        "per_hop_s": ParamDoc("s", UNTIMED,
                              "One backbone hop's delay in the default acknowledgement timeout."),
        "client_rtt_s": ParamDoc("s", UNTIMED,
                                 "Station-to-client round trip in the default acknowledgement "
                                 "timeout."),
        "ack_timeout_min_s": ParamDoc("s", UNTIMED,
                                      "Floor of the default acknowledgement timeout."),
        "queue_size": ParamDoc("events", FALLBACK),
        "queue_ttl_s": ParamDoc("s", FALLBACK,
                                "A queued event not delivered within this is dropped (counted)."),
        "rejoin_gap_s": ParamDoc("s", FALLBACK),
        "max_pending": ParamDoc("deliveries", BOUND),
    }

    def validate(self) -> None:
        BackboneParams.validate(self)
        if not (math.isfinite(self.th) and 0.0 < self.th <= 1.0):
            raise ParameterError("th", "must be in (0, 1]")
        require_positive("unit_s", self.unit_s)
        if not 0 <= self.t_max <= 64:
            raise ParameterError("t_max", "must be in 0..64")
        for key in ("ack_timeout_s", "per_hop_s", "client_rtt_s", "rejoin_gap_s"):
            require_non_negative(key, getattr(self, key))
        require_positive("ack_timeout_min_s", self.ack_timeout_min_s)
        require_positive("queue_ttl_s", self.queue_ttl_s)
        require_at_least_one(self, "queue_size", "max_pending")

    def threshold(self, t: int) -> float:
        if self.th_mode is ThMode.ADAPTIVE:
            return 0.6 if t <= 3 else 0.7 if t == 4 else 0.8
        return self.th

    def rejoin_gap(self) -> float:
        return self.rejoin_gap_s if self.rejoin_gap_s > 0 else self.unit_s


@dataclass(frozen=True, slots=True)
class PagingParams(BackboneParams):
    dist: int = 2
    """Report distance (cells); the thesis's paging does best at 2 (§5.4.2)."""
    dist_rule: DistRule = DistRule.AT_LEAST

    param_docs: ClassVar[Mapping[str, ParamDoc]] = {
        "dist": ParamDoc("cells", "Zheng 2008, §5.4.1; Table 5.1 (2-8); §5.4.2 (best at 2)"),
        "dist_rule": ParamDoc("", "Zheng 2008, §5.4.1 (\"beyond a certain value\"); the "
                                  "`at_least` default is our decision",
                              "`at_least`: report at `dist` or more cells from the last report "
                              "(paging area radius `dist - 1`); `beyond`: at more than `dist` "
                              "(radius `dist`)."),
    }

    def validate(self) -> None:
        BackboneParams.validate(self)
        if not 1 <= self.dist <= 64:
            raise ParameterError("dist", "must be in 1..64")

    def area_radius(self) -> int:
        """Cells around the last report that may hold the client (the paging area)."""
        return self.dist - 1 if self.dist_rule is DistRule.AT_LEAST else self.dist

    def must_report(self, moved: int) -> bool:
        return moved >= self.dist if self.dist_rule is DistRule.AT_LEAST else moved > self.dist
