"""HESPER's parameters: Table 4.1's names (Zheng 2008, §4.4.1) where the thesis has them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from meshsub.core.params import OUR_DECISION, ParamDoc, ParameterError
from meshsub.core.params import non_negative as _non_negative
from meshsub.core.params import positive as _positive
from meshsub.core.region import GridParams

ENERGY_SOURCES = ("config", "model", "external")


@dataclass(frozen=True, slots=True)
class HesperParams(GridParams):
    variant: str = "II"
    """"I" (Algorithm 4.1, one next hop) or "II" (Algorithm 4.2, two-way branching)."""
    hash_i: int = 1
    hash_j: int = 2
    """The thesis's H^i / H^j iteration counts for the broker hash point (i != j)."""
    beacon_s: float = 2.0
    """Intra-cell beacon period; 0 = no beacons (membership from the driver's neighbour
    table alone, every member taken as eligible: static simulations)."""
    member_timeout_s: float = 6.0
    """A member not heard (beacon or neighbour table) for this long leaves the view."""
    energy_check_s: float = 30.0
    E_rot: float = 0.3
    """Rotation threshold, as a fraction of the initial energy."""
    energy_source: str = "config"
    """"config" (fixed ``energy_fraction``), "model" (first-order radio model) or
    "external" (the driver's ``EnergyChanged`` readings: the power-supply class on a
    device, the energy model in the simulator)."""
    energy_fraction: float = 1.0
    E_initial: float = 2.0
    """Initial energy (J), for ``energy_source = "model"``."""
    E_elec: float = 50e-9
    e_fs: float = 10e-12
    e_mp: float = 0.0013e-12
    TD: float = 75.0
    M_b: int = 320
    reply_wait_s: float = 0.0
    """HESPER-II reply window; 0 = 2 x hop_estimate x per_hop_rtt_s with two radio hops per
    cell hop, at least 0.3 s, kept open after each reply for as long again as that reply's
    own round trip (radio hops x per_hop_rtt_s / 2)."""
    per_hop_rtt_s: float = 0.05
    """Time to allow per radio hop in the timers (reply window, PENDING lifetime)."""
    pending_ttl_s: float = 0.0
    """Lifetime of a PENDING entry; 0 = as long as its reply (HESPER-II: its confirmation)
    can still come within the hop budget (max_hops hops each way at per_hop_rtt_s, plus
    retransmissions with reliable_control), at least 3 x the first reply window, at most
    lease_s."""
    sub_refresh_s: float = 60.0
    lease_s: float = 180.0
    handover_grace_s: float = 10.0
    dedup_size: int = 4096
    dedup_s: float = 120.0
    max_routing_entries: int = 16384
    """Bound on a broker's routing table over all its topics: topics, entries, downstream
    pointers, subscriptions awaiting a CONFIRM, REPLYs collected. Past it a new one is
    dropped as ``routing_full`` (the client's refresh tries again)."""
    max_routing_bytes: int = 4 * 1024 * 1024
    """Bound on the bytes the same table keeps (topics, filters, sub_ids, route records,
    msgpack-encoded); past it as ``max_routing_entries``."""
    max_beacons: int = 1024
    """Bound on the neighbours whose last beacon is kept (the cell view); a beacon from
    a new neighbour past it, when none has been silent for ``member_timeout_s``, is
    dropped as ``beacons_full``."""
    max_hints: int = 4096
    """Bound on the brokers remembered from BROKER_UPDATEs (by cell and topic); past it the
    oldest is forgotten (``hint_evicted``: messages to its cell find the broker by the hash
    point again)."""
    max_hint_bytes: int = 1024 * 1024
    """Bound on the bytes the remembered brokers keep (topic names and a fixed part);
    past it as ``max_hints``."""
    reliable_control: bool = True
    """Per-hop ACKs for SUBSCRIBE, REPLY, CONFIRM, UNSUBSCRIBE, STATE_TRANSFER and
    BROKER_UPDATE; false reproduces the thesis's loss-free message counts."""
    reliable_events: bool = False
    """Per-hop ACKs for EVENTs too (a lossy Wi-Fi mesh needs them): on a lossy
    medium every lost hop otherwise loses the event for the whole subtree below it."""

    param_docs: ClassVar[Mapping[str, ParamDoc]] = {
        "variant": ParamDoc("", "Zheng 2008, §4.3, Algorithms 4.1 (I) and 4.2 (II)"),
        "hash_i": ParamDoc("iterations", "Zheng 2008, §4.2 (H^i)",
                      "Iterations of the hash for the broker point's x (the thesis's H^i)."),
        "hash_j": ParamDoc("iterations", "Zheng 2008, §4.2 (H^j)"),
        "beacon_s": ParamDoc("s", OUR_DECISION),
        "member_timeout_s": ParamDoc("s", OUR_DECISION),
        "energy_check_s": ParamDoc("s", OUR_DECISION,
                      "Period of the energy check that may hand the broker role over."),
        "E_rot": ParamDoc("fraction of initial energy", OUR_DECISION),
        "energy_source": ParamDoc("", OUR_DECISION),
        "energy_fraction": ParamDoc("fraction", OUR_DECISION,
                      "Remaining energy fraction reported with energy_source = config."),
        "E_initial": ParamDoc("J", OUR_DECISION),
        "E_elec": ParamDoc("J/bit", "Zheng 2008, Table 4.1 (50 nJ/bit)",
                      "Radio electronics energy per bit (first-order radio model)."),
        "e_fs": ParamDoc("J/bit/m^2", "Zheng 2008, Table 4.1 (10 pJ/bit/m^2)",
                      "Free-space amplifier energy (distance below TD)."),
        "e_mp": ParamDoc("J/bit/m^4", "Zheng 2008, Table 4.1 (0.0013 pJ/bit/m^4)",
                      "Multi-path amplifier energy (distance above TD)."),
        "TD": ParamDoc("m", "Zheng 2008, Table 4.1 (75 m)",
                      "Threshold distance between the free-space and multi-path models."),
        "M_b": ParamDoc("bits", "Zheng 2008, Table 4.1 (320 bits)",
                      "Message size in the energy model."),
        "reply_wait_s": ParamDoc("s", OUR_DECISION),
        "per_hop_rtt_s": ParamDoc("s", OUR_DECISION),
        "pending_ttl_s": ParamDoc("s", OUR_DECISION),
        "sub_refresh_s": ParamDoc("s", OUR_DECISION,
                      "Period at which subscriptions are refreshed towards their broker."),
        "lease_s": ParamDoc("s", OUR_DECISION,
                      "A subscription not refreshed for this long expires at the broker."),
        "handover_grace_s": ParamDoc("s", OUR_DECISION,
                      "Time the old broker keeps serving after a handover."),
        "dedup_size": ParamDoc("messages", OUR_DECISION,
                      "Message ids remembered to suppress duplicates."),
        "dedup_s": ParamDoc("s", OUR_DECISION,
                      "How long a message id is remembered."),
        "max_routing_entries": ParamDoc("entries", OUR_DECISION),
        "max_routing_bytes": ParamDoc("bytes", OUR_DECISION),
        "max_beacons": ParamDoc("neighbours", OUR_DECISION),
        "max_hints": ParamDoc("entries", OUR_DECISION),
        "max_hint_bytes": ParamDoc("bytes", OUR_DECISION),
        "reliable_control": ParamDoc("", OUR_DECISION),
        "reliable_events": ParamDoc("", OUR_DECISION),
    }

    def validate(self) -> None:
        GridParams.validate(self)
        if self.variant not in ("I", "II"):
            raise ParameterError("variant", "must be \"I\" or \"II\"")
        if self.hash_i < 1 or self.hash_j < 1 or self.hash_i == self.hash_j:
            raise ParameterError("hash_j", "hash_i and hash_j must be different positive integers")
        for key in ("beacon_s", "reply_wait_s", "pending_ttl_s", "E_elec", "e_fs", "e_mp",
                    "handover_grace_s"):
            _non_negative(key, getattr(self, key))
        for key in ("member_timeout_s", "energy_check_s", "per_hop_rtt_s", "sub_refresh_s",
                    "lease_s", "E_initial", "TD", "dedup_s"):
            _positive(key, getattr(self, key))
        if not 0.0 <= self.E_rot <= 1.0:
            raise ParameterError("E_rot", "must be a fraction in [0, 1]")
        if not 0.0 <= self.energy_fraction <= 1.0:
            raise ParameterError("energy_fraction", "must be a fraction in [0, 1]")
        if self.energy_source not in ENERGY_SOURCES:
            raise ParameterError("energy_source", f"must be one of {list(ENERGY_SOURCES)}")
        if self.M_b < 1:
            raise ParameterError("M_b", "must be a positive number of bits")
        for key in ("max_routing_entries", "max_routing_bytes", "max_beacons", "max_hints",
                    "max_hint_bytes"):
            if getattr(self, key) < 1:
                raise ParameterError(key, "must be at least 1")
        if self.dedup_size < 1:
            raise ParameterError("dedup_size", "must be at least 1")
        if self.lease_s < self.sub_refresh_s:
            raise ParameterError("lease_s", "must be at least sub_refresh_s")
