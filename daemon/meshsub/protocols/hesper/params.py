"""HESPER's parameters: Table 4.1 names where the thesis has them, spec §4.5.8 timers else."""

from __future__ import annotations

import math
from dataclasses import dataclass

from meshsub.core.params import ParameterError
from meshsub.core.reliable import ReliableParams

ENERGY_SOURCES = ("config", "model", "external")


def _positive(key: str, value: float) -> None:
    if not (math.isfinite(value) and value > 0):
        raise ParameterError(key, "must be a positive number")


def _non_negative(key: str, value: float) -> None:
    if not (math.isfinite(value) and value >= 0):
        raise ParameterError(key, "must be a non-negative number")


@dataclass(frozen=True, slots=True)
class GridParams(ReliableParams):
    """The deployment grid every node must agree on (shared with the DF baseline)."""

    TR: float = 70.0
    """Transmission range (m); the cell side is TR/sqrt(2) unless ``cell_side_m`` is set."""
    cell_side_m: float = 0.0
    """Cell side (m); 0 = TR/sqrt(2) (thesis). Set it on Wi-Fi meshes (spec §4.10)."""
    area_width_m: float = 1000.0
    area_height_m: float = 1000.0
    origin_x: float = 0.0
    origin_y: float = 0.0
    max_hops: int = 255
    """Radio-hop budget of one message end to end (the frame TTL): a subscription from its
    client to the broker that answers it, a reply back, an event from its publisher to a
    subscriber, across every broker on the way; past it the message is dropped as
    ``ttl_expired``. At most 255, the wire's one-byte hop field."""

    def validate(self) -> None:
        ReliableParams.validate(self)
        _positive("TR", self.TR)
        _non_negative("cell_side_m", self.cell_side_m)
        _positive("area_width_m", self.area_width_m)
        _positive("area_height_m", self.area_height_m)
        if not (math.isfinite(self.origin_x) and math.isfinite(self.origin_y)):
            raise ParameterError("origin_x", "origin must be finite")
        if not 1 <= self.max_hops <= 255:
            raise ParameterError("max_hops", "must be in 1..255")

    @property
    def cell_side(self) -> float:
        return self.cell_side_m if self.cell_side_m > 0 else self.TR / math.sqrt(2.0)


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
    "external" (the driver calls ``Hesper.feed_energy``)."""
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
    reliable_control: bool = True
    """Per-hop ACKs for SUBSCRIBE, REPLY, CONFIRM, UNSUBSCRIBE, STATE_TRANSFER and
    BROKER_UPDATE; false reproduces the thesis's loss-free message counts."""
    reliable_events: bool = False
    """Per-hop ACKs for EVENTs too (spec §4.10's reliability class for events): on a lossy
    medium every lost hop otherwise loses the event for the whole subtree below it."""

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
