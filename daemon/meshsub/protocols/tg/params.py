"""TG's parameters: the group-tree machine's plus the index and the event scopes.

``m`` and ``k`` are the thesis's Bloom filter symbols (§3.2); it states no
values (its Fig. 1 uses 12 and 2), the defaults are docs/protocols/tg.md's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from meshsub.core.cluster.params import ClusterParams
from meshsub.core.params import OUR_DECISION, ParamDoc, ParameterError


@dataclass(frozen=True, slots=True)
class TGParams(ClusterParams):
    m: int = 2048
    """Bits of every bitmap (network-wide; a power of two keeps the k positions distinct)."""
    k: int = 7
    """Hash functions (positions per key)."""
    GLOBAL_GROUP_TTL: int = 32
    """Groups a global event may cross at most (a safety net: global means network-wide)."""
    LOCAL_GROUP_HOPS: int = 0
    """Groups a local event may cross beyond the publisher's (0: its own groups only)."""
    seen_capacity: int = 65536
    """Publications remembered per group for duplicate suppression."""

    param_docs: ClassVar[Mapping[str, ParamDoc]] = {
        "m": ParamDoc("bits", "Liu 2011, §3.2 (symbol; no value given); value our decision"),
        "k": ParamDoc("hashes", "Liu 2011, §3.2 (symbol; no value given); value our decision"),
        "GLOBAL_GROUP_TTL": ParamDoc("groups", OUR_DECISION),
        "LOCAL_GROUP_HOPS": ParamDoc("groups", "Liu 2011, §3.4 (\"a few adjacent groups\"); "
                                     "0 our decision"),
        "seen_capacity": ParamDoc("events", OUR_DECISION),
    }

    def validate(self) -> None:
        ClusterParams.validate(self)
        if not 8 <= self.m <= 65536:
            raise ParameterError("m", "must be in 8..65536")
        if not 1 <= self.k <= 16:
            raise ParameterError("k", "must be in 1..16")
        if not 1 <= self.GLOBAL_GROUP_TTL <= 255:
            raise ParameterError("GLOBAL_GROUP_TTL", "must be in 1..255")
        if not 0 <= self.LOCAL_GROUP_HOPS <= self.GLOBAL_GROUP_TTL:
            raise ParameterError("LOCAL_GROUP_HOPS", "must be in 0..GLOBAL_GROUP_TTL")
        if self.seen_capacity < 1:
            raise ParameterError("seen_capacity", "must be at least 1")
