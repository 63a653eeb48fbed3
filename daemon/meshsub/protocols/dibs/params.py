"""DIBS's parameters: the paper's ``k`` and heartbeat period, and the bounds it leaves open.

Pham and Tran (2012) name ``k`` (key bits, 64 in §4) and ``m`` (references,
1/5/10 in §4); ``m`` is not a node parameter here but the number of nodes
with the ``reference`` role. The heartbeat period is set at the references
and spread with their heartbeats (§3.1); every other value is ours
(docs/protocols/dibs.md lists each with its reason).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from meshsub.core.params import OUR_DECISION, ParamDoc, ParameterError, positive
from meshsub.core.reliable import ReliableParams

PAPER = "Pham and Tran 2012"


@dataclass(frozen=True, slots=True)
class DIBSParams(ReliableParams):
    k: int = 64
    """Bits of a key (network-wide; a multiple of 4 up to 256: keys travel as k/4 hex digits)."""
    hb_period: float = 1.0
    """Heartbeat period T (a reference's value reaches its whole cluster)."""
    dead_periods: float = 3.5
    """A neighbour silent for this many periods has failed (§3.3.2's failure detection)."""
    MAX_HOPS: int = 64
    """A distance at or above this counts as infinite (ends count-to-infinity)."""
    ref_stale_periods: float = 5.0
    """A reference whose sequence number has not grown for this many periods is gone."""
    switch_hold_periods: float = 3.0
    """A strictly nearer reference must stay nearer this long before a cluster switch."""
    slot_hold_periods: float = 10.5
    """A freed slot is not handed out again for this many periods."""
    lease_s: float = 120.0
    """Lease of a stored query; subscribers refresh every third of it."""
    ttl: int = 64
    """Hops a routed message may travel."""
    paper_mode: bool = False
    """True: the paper's two-condition storage rule (§3.2) instead of the exact interval test."""
    key_attr: str = "key"
    """The event attribute carrying a key (k/4 lowercase hex digits)."""
    max_va_bits: int = 1024
    """Longest VA accepted or taken (a node whose VA is longer than k owns no keys)."""
    max_neighbors: int = 256
    """Heartbeat states kept (more neighbours are a counted drop)."""
    max_neighbor_bytes: int = 1 << 18
    """Bytes of heartbeat states kept, by the state-size measure (more are a counted drop)."""
    max_successors: int = 64
    """Tree children per node (more attach requests are refused)."""
    max_references: int = 32
    """References tracked in the distance vector (more are a counted drop)."""
    max_queries: int = 20000
    """Stored queries per node (more are a counted drop)."""
    max_query_bytes: int = 4 << 20
    """Bytes of stored queries per node (more are a counted drop)."""

    param_docs: ClassVar[Mapping[str, ParamDoc]] = {
        "k": ParamDoc("bits", f"{PAPER}, §2 (symbol), §4 (64)"),
        "hb_period": ParamDoc("s", f"{PAPER}, §3.1 (periodic heartbeat; no value); "
                              "value our decision"),
        "dead_periods": ParamDoc("periods", OUR_DECISION),
        "MAX_HOPS": ParamDoc("hops", OUR_DECISION),
        "ref_stale_periods": ParamDoc("periods", OUR_DECISION),
        "switch_hold_periods": ParamDoc("periods", OUR_DECISION),
        "slot_hold_periods": ParamDoc("periods", OUR_DECISION),
        "lease_s": ParamDoc("s", OUR_DECISION),
        "ttl": ParamDoc("hops", OUR_DECISION),
        "paper_mode": ParamDoc("", f"{PAPER}, §3.2 (storage rule)"),
        "key_attr": ParamDoc("", OUR_DECISION),
        "max_va_bits": ParamDoc("bits", OUR_DECISION),
        "max_neighbors": ParamDoc("entries", OUR_DECISION),
        "max_neighbor_bytes": ParamDoc("bytes", OUR_DECISION),
        "max_successors": ParamDoc("entries", OUR_DECISION),
        "max_references": ParamDoc("entries", OUR_DECISION),
        "max_queries": ParamDoc("entries", OUR_DECISION),
        "max_query_bytes": ParamDoc("bytes", OUR_DECISION),
    }

    def validate(self) -> None:
        ReliableParams.validate(self)
        if not (4 <= self.k <= 256 and self.k % 4 == 0):
            raise ParameterError("k", "must be a multiple of 4 in 4..256")
        for name in ("hb_period", "dead_periods", "ref_stale_periods", "switch_hold_periods",
                     "slot_hold_periods", "lease_s"):
            positive(name, getattr(self, name))
        if self.dead_periods < 1.5:
            raise ParameterError("dead_periods", "must be at least 1.5 (one lost heartbeat)")
        if not 2 <= self.MAX_HOPS <= 255:
            raise ParameterError("MAX_HOPS", "must be in 2..255")
        if not 1 <= self.ttl <= 255:
            raise ParameterError("ttl", "must be in 1..255")
        if not self.key_attr.isidentifier():
            raise ParameterError("key_attr", "must be an attribute name")
        if not 8 <= self.max_va_bits <= 4096:
            raise ParameterError("max_va_bits", "must be in 8..4096")
        for name in ("max_neighbors", "max_neighbor_bytes", "max_successors", "max_references",
                     "max_queries", "max_query_bytes"):
            if getattr(self, name) < 1:
                raise ParameterError(name, "must be at least 1")
