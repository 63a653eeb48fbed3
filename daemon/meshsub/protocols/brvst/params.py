"""BRVST's parameters: the paper's names where it has them (alpha, grid size), the rest documented.

The paper (Li and Wang 2014, §V) fixes alpha = 90 %, 1000 m x 1000 m, 16 grids
in 4 zones and an 80 m radio range; it names but does not value the periods
(announcement, refresh, cache lifetime, advertisement period, ZRSV timeout).
Those defaults and the bounds on every table are this implementation's
choices, listed with their reasons in docs/protocols/brvst.md.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from meshsub.core.arv import Comparator
from meshsub.core.cellgrid import require_at_least_one, require_non_negative, require_positive
from meshsub.core.params import OUR_DECISION, ParamDoc, ParameterError
from meshsub.core.reliable import ReliableParams

DEFAULT_ATTRIBUTES = tuple(f"a{i}" for i in range(15))
"""The paper's workload draws 1-3 attributes from a predefined set of 15 (§V)."""

GM_CHECKS = ("exact", "arv")

PAPER = "Li and Wang 2014, §V"
GAP = "our decision (the paper names it, no value)"

PARAM_DOCS: dict[str, ParamDoc] = {
    "area_width_m": ParamDoc("m", PAPER, "Width of the rectangle cut into grids."),
    "area_height_m": ParamDoc("m", PAPER, "Height of the rectangle cut into grids."),
    "origin_x": ParamDoc("m", OUR_DECISION, "x of the rectangle's lower-left corner."),
    "origin_y": ParamDoc("m", OUR_DECISION, "y of the rectangle's lower-left corner."),
    "grid_size_m": ParamDoc("m", PAPER + " (16 grids on 1 km^2)"),
    "K": ParamDoc("grids", PAPER + " (4 zones of 4 grids)"),
    "R": ParamDoc("m", PAPER + " (average transmission range)"),
    "alpha": ParamDoc("", PAPER + " (90 %)"),
    "attributes": ParamDoc("", PAPER + " (1-3 of a predefined set of 15)"),
    "L": ParamDoc("", OUR_DECISION + " (the paper gives no domain)",
                  "Default lower end of an attribute's domain [L, U)."),
    "U": ParamDoc("", OUR_DECISION + " (the paper gives no domain)",
                  "Default upper end (exclusive) of an attribute's domain [L, U)."),
    "q": ParamDoc("", OUR_DECISION),
    "Lmax": ParamDoc("levels", OUR_DECISION),
    "comparator": ParamDoc("", "our decision (docs/protocols/brvst.md, 'Where the paper is "
                               "wrong by computation')"),
    "gm_check": ParamDoc("", "our decision (\"arv\" is the paper's §IV-C)"),
    "T_ann": ParamDoc("s", OUR_DECISION + " (the paper defers election to its ref. [11])"),
    "T_ann_zone": ParamDoc("s", OUR_DECISION),
    "scope_margin_m": ParamDoc("m", OUR_DECISION),
    "flood_jitter": ParamDoc("s", OUR_DECISION),
    "h_margin": ParamDoc("m", OUR_DECISION),
    "T_hold": ParamDoc("s", OUR_DECISION),
    "T_lease": ParamDoc("s", GAP),
    "position_update_m": ParamDoc("m", OUR_DECISION),
    "want_history": ParamDoc("", OUR_DECISION + " (gap G1: §IV-D misses absorbed subscriptions)"),
    "T_batch": ParamDoc("s", OUR_DECISION,
                        "Changes of a GRSV or ZRSV within this time go out as one update."),
    "T_grsv_refresh": ParamDoc("s", OUR_DECISION),
    "T_zrsv_refresh": ParamDoc("s", OUR_DECISION),
    "T_zrsv_min": ParamDoc("s", OUR_DECISION + " (§IV-B2 says 'upon change')",
                           "Least time between two pushes of a changed ZRSV."),
    "T_zrsv_idle": ParamDoc("s", GAP + " (§IV-C 'predefined timeout')"),
    "T_adv": ParamDoc("s", GAP + " (§IV-C)"),
    "T_cache": ParamDoc("s", GAP + " (§IV-D)",
                        "How long a zone manager keeps a publication in its cache."),
    "T_sweep": ParamDoc("s", OUR_DECISION),
    "T_unwanted_holddown": ParamDoc("s", OUR_DECISION,
                                    "At most one ZRSV answer to a zone's unwanted traffic "
                                    "per this period."),
    "T_query_idle": ParamDoc("s", GAP + " (§IV-C, optional queries)",
                             "A zone whose subscriptions found no data this long queries."),
    "k_query": ParamDoc("zone hops", GAP + " (§IV-C)"),
    "cache_remote": ParamDoc("", OUR_DECISION,
                             "Zone managers cache publications from other zones too (§IV-D "
                             "read literally); false: the origin zone's cache only."),
    "replay_to_successor": ParamDoc("", OUR_DECISION + " (§IV-D replays for a changed SOF "
                                        "or ZRSV only)",
                                    "A new grid or zone manager that names its predecessor "
                                    "gets the zone's matching cached publications again "
                                    "(false: what the predecessor got counts as sent)."),
    "N_sub_max": ParamDoc("subscriptions", OUR_DECISION),
    "sub_bytes_max": ParamDoc("bytes", OUR_DECISION,
                              "Bytes of subscriptions one grid manager keeps."),
    "sof_entries_max": ParamDoc("entries", OUR_DECISION,
                                "Entries of a zone manager's SOF (its grids' summaries)."),
    "sof_bytes_max": ParamDoc("bytes", OUR_DECISION, "Bytes of a zone manager's SOF."),
    "zrsv_zones_max": ParamDoc("zones", OUR_DECISION,
                               "Other zones' ZRSVs a zone manager keeps (and its push set)."),
    "zrsv_bytes_max": ParamDoc("bytes", OUR_DECISION, "Bytes of other zones' ZRSVs kept."),
    "N_cache_max": ParamDoc("publications", OUR_DECISION,
                            "Publications in a zone manager's cache."),
    "C_max": ParamDoc("bytes", OUR_DECISION),
    "advert_max": ParamDoc("entries", OUR_DECISION,
                           "Advertisement times a zone manager remembers."),
    "hold_max": ParamDoc("messages", OUR_DECISION,
                         "Messages one node holds for an unknown or vanished manager."),
    "hold_bytes_max": ParamDoc("bytes", OUR_DECISION, "Bytes of held messages."),
    "hints_max": ParamDoc("entries", OUR_DECISION,
                          "Routing hints (managers of other areas heard) one node keeps."),
    "dedupe_size": ParamDoc("ids", OUR_DECISION,
                            "Served and seen message ids kept per table (LRU)."),
    "T_dedupe": ParamDoc("s", OUR_DECISION, "How long a seen flood id is remembered."),
    "xfer_max_bytes": ParamDoc("bytes", OUR_DECISION),
    "max_hops": ParamDoc("hops", OUR_DECISION,
                         "Hops one routed leg may take (GPSR walks round the outer face of "
                         "a sparse field take 150-250; bench/brvst_walks.py)."),
    "reliable_control": ParamDoc("", OUR_DECISION),
    "reliable_data": ParamDoc("", OUR_DECISION),
}


@dataclass(frozen=True, slots=True)
class BrvstParams(ReliableParams):
    param_docs: ClassVar[Mapping[str, ParamDoc]] = PARAM_DOCS

    # ---- the virtual hierarchy (§III, §V): every node must agree on these
    area_width_m: float = 1000.0
    area_height_m: float = 1000.0
    origin_x: float = 0.0
    origin_y: float = 0.0
    grid_size_m: float = 250.0
    """Side of a grid cell; 250 m gives the paper's 16 grids on 1 km^2."""
    K: int = 2
    """Zone side in grids: a zone is K x K grids (the paper's 4 zones of 4 grids)."""
    R: float = 80.0
    """Radio range (m): GPSR's unit-disk shortcut and the default flood margin."""

    # ---- content (§IV-A)
    alpha: float = 0.9
    """Accuracy threshold; read as the decimal written (0.9 is exactly 9/10)."""
    attributes: tuple[str, ...] = DEFAULT_ATTRIBUTES
    """The attribute schema: "name", "name:L:U", "name:L:U:q" or "name:L:U:q:Lmax"
    (decimals); an event carries attribute ``name`` as ``name_lo`` and ``name_hi``."""
    L: float = 0.0
    U: float = 100.0
    q: float = 1.0
    """Default domain [L, U) and point width q of attributes that do not give their own."""
    Lmax: int = 0
    """Default ARV level cap; 0 = min(12, ceil(log2((U - L) / q)) + 2)."""
    comparator: str = Comparator.SAFE.value
    """How publication ARVs are tested against summaries: "safe", "exact" or "paper"."""
    gm_check: str = "exact"
    """The grid manager's member-level check: "exact" (the subscription itself, no false
    positives) or "arv" (the paper's ARV test, whose false positives the subscriber drops)."""

    # ---- manager election (docs/protocols/brvst.md: the paper defers it to its ref. [11])
    T_ann: float = 2.0
    """Grid managers' announcement period; a manager unheard for 3 periods is gone."""
    T_ann_zone: float = 6.0
    """Zone managers' announcement period (a zone flood reaches four grids' nodes, and only
    grid managers talk to the zone manager, which they also hear from its messages)."""
    scope_margin_m: float = -1.0
    """Announcements are re-broadcast by nodes inside the grid or zone grown by this margin;
    -1 = R / 4 (nodes just outside bridge gaps inside a sparse cell)."""
    flood_jitter: float = 0.01
    """Upper bound (s) of the random delay before a node re-broadcasts an announcement."""
    h_margin: float = 5.0
    """Hysteresis (m): a node keeps its grid until it is this far outside it."""
    T_hold: float = 0.0
    """How long a message waits for an unknown or vanished manager; 0 = 4 announcement
    periods of the addressed level (a re-election fits)."""

    # ---- subscriptions and leases
    T_lease: float = 60.0
    """Subscription lease at the grid manager; subscribers refresh every T_lease / 3."""
    position_update_m: float = 40.0
    """A subscriber that moved this far since its last report tells its grid manager."""
    want_history: bool = True
    """New subscriptions ask the zone's cache for earlier matching publications."""

    # ---- propagation and caching (§IV-B2, IV-C, IV-D)
    T_batch: float = 0.2
    T_grsv_refresh: float = 10.0
    """Soft-state refresh of a GRSV; a grid manager unheard for 3 periods leaves the SOF."""
    T_zrsv_refresh: float = 10.0
    """Period of a zone's ZRSV push; a neighbour's unheard for 3 periods is forgotten."""
    T_zrsv_min: float = 2.0
    """Least time between two pushes of a changed ZRSV: at the paper's load a zone's
    summary changes about once a second, and every push goes to each neighbour and
    publication zone. A subscription the older ZRSV missed loses nothing: the newer
    one is matched against the publisher zone's cache when it arrives (§IV-D)."""
    T_zrsv_idle: float = 300.0
    """A non-neighbour zone's summary with no data match for this long is dropped."""
    T_adv: float = 60.0
    """Advertisement period of one (publisher, P-ARVs) for zones at distance 1; d x T_adv
    for zones d zone-hops away."""
    T_cache: float = 600.0
    T_sweep: float = 5.0
    """Period of the lease, cache and table sweeps."""
    T_unwanted_holddown: float = 5.0
    T_query_idle: float = 120.0
    k_query: int = 0
    """Zone hops a subscription query reaches; 0 = no queries."""
    cache_remote: bool = False
    replay_to_successor: bool = True
    """The cache treats a manager's successor as a new target and replays to it. Not the
    paper's rule (§IV-D: a changed SOF or ZRSV), and the largest growing share of the
    traffic on brvst-400; but the replays also repair DELIVERs lost on the way (with
    false a 420 s brvst-400 run delivered 94.0 % of the pairs instead of 97.7 %:
    docs/benchmarks.md)."""

    # ---- bounds (entries and bytes) of every table
    N_sub_max: int = 1024
    """Subscriptions one grid manager keeps."""
    sub_bytes_max: int = 1 << 20
    sof_entries_max: int = 4096
    sof_bytes_max: int = 1 << 20
    zrsv_zones_max: int = 256
    zrsv_bytes_max: int = 1 << 20
    N_cache_max: int = 4096
    C_max: int = 16 << 20
    """Publication cache bytes at a zone manager."""
    advert_max: int = 4096
    hold_max: int = 64
    hold_bytes_max: int = 1 << 18
    hints_max: int = 256
    dedupe_size: int = 4096
    T_dedupe: float = 120.0
    xfer_max_bytes: int = 32768
    """Bytes of state one hand-over carries (the rest is rebuilt by refreshes)."""

    # ---- transport
    max_hops: int = 255
    reliable_control: bool = True
    """Per-hop ACKs for subscriptions, summaries and state transfers."""
    reliable_data: bool = True
    """Per-hop ACKs for publications on their way between managers and to subscribers."""

    def validate(self) -> None:
        ReliableParams.validate(self)
        for key in ("area_width_m", "area_height_m", "grid_size_m", "R", "T_ann", "T_ann_zone",
                    "T_lease",
                    "position_update_m", "T_grsv_refresh", "T_zrsv_refresh", "T_zrsv_idle",
                    "T_adv", "T_cache", "T_sweep", "T_dedupe", "T_query_idle"):
            require_positive(key, getattr(self, key))
        for key in ("h_margin", "T_hold", "T_batch", "T_zrsv_min", "T_unwanted_holddown",
                    "flood_jitter"):
            require_non_negative(key, getattr(self, key))
        if not (math.isfinite(self.origin_x) and math.isfinite(self.origin_y)):
            raise ParameterError("origin_x", "origin must be finite")
        if not 1 <= self.K <= 64:
            raise ParameterError("K", "must be in 1..64")
        if self.h_margin >= self.grid_size_m / 2:
            raise ParameterError("h_margin", "must be below half the grid size")
        if not (math.isfinite(self.scope_margin_m)
                and (self.scope_margin_m >= 0 or self.scope_margin_m == -1)):
            raise ParameterError("scope_margin_m", "must be >= 0, or -1 for R / 4")
        if not (math.isfinite(self.alpha) and 0 < self.alpha <= 1):
            raise ParameterError("alpha", "must be in (0, 1]")
        if self.comparator not in {c.value for c in Comparator}:
            raise ParameterError("comparator", f"must be one of {[c.value for c in Comparator]}")
        if self.gm_check not in GM_CHECKS:
            raise ParameterError("gm_check", f"must be one of {list(GM_CHECKS)}")
        if not 0 <= self.Lmax <= 12:
            raise ParameterError("Lmax", "must be in 0..12 (0 = automatic)")
        if not 0 <= self.k_query <= 64:
            raise ParameterError("k_query", "must be in 0..64")
        require_at_least_one(self, "N_sub_max", "sub_bytes_max", "sof_entries_max",
                             "sof_bytes_max", "zrsv_zones_max", "zrsv_bytes_max", "N_cache_max",
                             "C_max", "advert_max", "hold_max", "hold_bytes_max", "hints_max",
                             "dedupe_size", "xfer_max_bytes")
        if not 1 <= self.max_hops <= 255:
            raise ParameterError("max_hops", "must be in 1..255")
        # The schema parses here too, so a bad attribute is a configuration error at start.
        from meshsub.protocols.brvst.schema import Schema, SchemaError

        try:
            Schema.from_params(self)
        except SchemaError as exc:
            raise ParameterError("attributes", str(exc)) from None

    @property
    def scope_margin(self) -> float:
        return self.R / 4 if self.scope_margin_m < 0 else self.scope_margin_m

    def ann_period(self, level: int) -> float:
        """The announcement period of a level: 1 = grid (T_ann), 2 = zone (T_ann_zone)."""
        return self.T_ann if level == 1 else self.T_ann_zone

    def hold_for(self, level: int) -> float:
        return self.T_hold if self.T_hold > 0 else 4 * self.ann_period(level)
