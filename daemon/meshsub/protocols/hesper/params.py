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
    """HESPER-II reply window; 0 = 2 x hop_estimate x per_hop_rtt_s (plus rto_initial per
    hop with reliable_control), at least 0.3 s."""
    per_hop_rtt_s: float = 0.05
    pending_ttl_s: float = 0.0
    """Lifetime of a PENDING entry; 0 = 3 x reply window."""
    sub_refresh_s: float = 60.0
    lease_s: float = 180.0
    handover_grace_s: float = 10.0
    dedup_size: int = 4096
    dedup_s: float = 120.0
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
        "per_hop_rtt_s": ParamDoc("s", OUR_DECISION,
                      "Round-trip estimate per hop for the HESPER-II reply window."),
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
        if self.dedup_size < 1:
            raise ParameterError("dedup_size", "must be at least 1")
        if self.lease_s < self.sub_refresh_s:
            raise ParameterError("lease_s", "must be at least sub_refresh_s")
