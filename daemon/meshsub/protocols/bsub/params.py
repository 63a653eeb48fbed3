"""B-SUB parameters, named as in the paper (Zhao & Wu, ICDCS 2010, §VII-A).

Times are seconds of the driver's clock; ``DF`` is in counter units per
second (the paper's 0.138/min is 0.0023/s). When ``DF`` is unset it comes from
Eq. 5 with ``N`` keys collected within ``T`` (``T`` defaults to ``TTL``, as in
the paper's simulation) plus the slack ``delta``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from meshsub.core.buffer import DropPolicy
from meshsub.core.params import OUR_DECISION, ParamDoc, ParameterError
from meshsub.core.reliable import ReliableParams
from meshsub.core.tcbf import C_MAX, MAX_M, decay_factor


class RoleMode(enum.StrEnum):
    """``auto``: broker allocation decides; the pinned modes ignore DESIGNATE."""

    AUTO = "auto"
    PINNED_BROKER = "pinned_broker"
    PINNED_USER = "pinned_user"


@dataclass(frozen=True, slots=True)
class BSubParams(ReliableParams):
    m: int = 256
    """Bits of every TCBF."""
    k: int = 4
    """Hash functions."""
    I: int = 50  # noqa: E741 - the paper's name for the initial counter value
    """Counter value of an inserted key."""
    DF: float | None = None
    """Decaying factor (counter units per second); None: Eq. 5 from ``N``, ``T``, ``delta``."""
    N: int = 123
    """Eq. 5: keys a broker collects within ``T``. The paper counts the distinct nodes met in
    ``T`` on its traces (§VII-B); 123 is no such count (a 79-node trace has at most 78) but
    back-solved to give its 0.138/min at T = 10 h: set N (or DF) from your contacts."""
    T: float | None = None
    """Interest lifetime target of Eq. 5 (s); None: equal to ``TTL``."""
    delta: float = 0.0
    """Eq. 5 slack (units per second) for the M-merge effects the formula omits."""
    C: int = 3
    """Copy limit: a producer hands a message to at most C distinct brokers."""
    low: int = 3
    """A user designates the node it meets a broker while it knows fewer brokers."""
    up: int = 5
    """A user demotes a below-average broker while it knows more brokers than this."""
    T_w: float = 5 * 3600.0
    """Sliding window of the contact history (degree, brokers met)."""
    TTL: float = 10 * 3600.0
    """Message lifetime from publication (the paper's maximum tolerable delay)."""
    T_hold: float = 1800.0
    """A node ignores DESIGNATE for this long after its last role change."""
    role_mode: RoleMode = RoleMode.AUTO
    buffer_size: int = 5000
    """Messages carried (own and relay together), backed by the core SCF buffer."""
    drop_policy: DropPolicy = DropPolicy.DROP_EXPIRING
    window: int = 8
    """DATA messages in flight (unacknowledged) per contact."""
    max_told: int = 64
    """Most node ids a message remembers as already holding it (no re-sends to them)."""

    param_docs: ClassVar[Mapping[str, ParamDoc]] = {
        "m": ParamDoc("bits", "Zhao & Wu 2010, §VII-A (256-bit vectors)"),
        "k": ParamDoc("hash functions", "Zhao & Wu 2010, §VII-A (4 hash functions)"),
        "I": ParamDoc("counter units",
                      "Zhao & Wu 2010, §IV-A, §VI-A (I = 50: our reading of its Eq. 5 example)"),
        "DF": ParamDoc("counter units/s", "Zhao & Wu 2010, §VI-A Eq. 5; §VII-B (0.138/min)"),
        "N": ParamDoc("keys", "Zhao & Wu 2010, §VI-A Eq. 5 (123 is our calibration to 0.138/min)"),
        "T": ParamDoc("s", "Zhao & Wu 2010, §VI-A (T = TTL as in §VII-B)"),
        "delta": ParamDoc("counter units/s", "Zhao & Wu 2010, §VI-A Eq. 5"),
        "C": ParamDoc("copies", "Zhao & Wu 2010, §V-D; §VII-A (C = 3)"),
        "low": ParamDoc("brokers", "Zhao & Wu 2010, §V-B; §VII-A (3)"),
        "up": ParamDoc("brokers", "Zhao & Wu 2010, §V-B; §VII-A (5)"),
        "T_w": ParamDoc("s", "Zhao & Wu 2010, §V-B; §VII-A (5 hours)"),
        "TTL": ParamDoc("s", "Zhao & Wu 2010, §V-D; §VII-B (10 hours)"),
        "T_hold": ParamDoc("s", OUR_DECISION),
        "role_mode": ParamDoc("", OUR_DECISION,
                      "auto: broker allocation decides; the pinned modes ignore DESIGNATE."),
        "buffer_size": ParamDoc("messages", OUR_DECISION),
        "drop_policy": ParamDoc("", OUR_DECISION,
                      "Which message goes when the buffer is full."),
        "window": ParamDoc("messages", OUR_DECISION),
        "max_told": ParamDoc("node ids", OUR_DECISION),
    }

    def validate(self) -> None:
        ReliableParams.validate(self)
        if not 8 <= self.m <= MAX_M:
            raise ParameterError("m", f"must be in 8..{MAX_M}")
        if not 1 <= self.k <= 32:
            raise ParameterError("k", "must be in 1..32")
        if not 1 <= self.I <= C_MAX:
            raise ParameterError("I", f"must be in 1..{C_MAX}")
        if self.DF is not None and not (math.isfinite(self.DF) and self.DF >= 0):
            raise ParameterError("DF", "must be a number >= 0 (0 disables decay)")
        if self.N < 0:
            raise ParameterError("N", "must be >= 0")
        if self.T is not None and not (math.isfinite(self.T) and self.T > 0):
            raise ParameterError("T", "must be a positive number of seconds")
        if not (math.isfinite(self.delta) and self.delta >= 0):
            raise ParameterError("delta", "must be a number >= 0")
        if self.C < 1:
            raise ParameterError("C", "must be at least 1")
        if self.low < 0:
            raise ParameterError("low", "must be >= 0")
        if self.up < self.low:
            raise ParameterError("up", "must be >= low")
        for name in ("T_w", "TTL"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ParameterError(name, "must be a positive number of seconds")
        if not (math.isfinite(self.T_hold) and self.T_hold >= 0):
            raise ParameterError("T_hold", "must be a number of seconds >= 0")
        if self.buffer_size < 1:
            raise ParameterError("buffer_size", "must be at least 1")
        if self.window < 1:
            raise ParameterError("window", "must be at least 1")
        if self.max_told < 0:
            raise ParameterError("max_told", "must be >= 0")

    def decay_per_s(self) -> float:
        """The DF in use: ``DF`` if set, else Eq. 5 (corrected Eq. 4) plus ``delta``."""
        if self.DF is not None:
            return self.DF
        lifetime = self.T if self.T is not None else self.TTL
        return decay_factor(self.N, initial=self.I, lifetime=lifetime, m=self.m, k=self.k,
                            delta=self.delta)
