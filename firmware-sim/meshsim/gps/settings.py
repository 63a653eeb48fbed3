"""The ``[gps]`` knobs of a simulated receiver, validated (docs/scenarios.md).

``nominal_hdop`` ties HDOP to the noise through the daemon's own UERE, so
the error a node's daemon claims (``HDOP x UERE``) is the error it gets; see
``meshsim.gps.model`` for what each knob does to the fixes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from meshsub.core.tracking import UERE_M

MAX_RATE_HZ = 10.0
MAX_NOISE_M = 1000.0
MAX_HDOP = 99.99


class GpsSettingsError(ValueError):
    """A bad receiver setting: ``key`` names it (as in the ``[gps]`` section)."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key}: {problem}")
        self.key = key
        self.problem = problem


@dataclass(frozen=True, slots=True)
class Outage:
    """No fix on ``nodes`` (``None``: every node) for ``start_s <= t < end_s``."""

    start_s: float
    end_s: float
    nodes: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if not (math.isfinite(self.start_s) and math.isfinite(self.end_s)
                and 0.0 <= self.start_s < self.end_s):
            raise GpsSettingsError("outages", f"need 0 <= start_s < end_s, got "
                                              f"[{self.start_s:g}, {self.end_s:g})")

    def covers(self, node: int) -> bool:
        return self.nodes is None or node in self.nodes


@dataclass(frozen=True, slots=True)
class GpsSettings:
    """The ``[gps]`` scenario section (docs/scenarios.md)."""

    enabled: bool = False
    rate_hz: float = 1.0
    noise_m: float = 3.0
    """Per-axis standard deviation of the horizontal error, metres."""
    correlation_s: float = 60.0
    white_fraction: float = 0.2
    hdop: float | None = None
    """``None``: derived from ``noise_m`` (see ``nominal_hdop``)."""
    hdop_spread: float = 0.0
    """Standard deviation of ln(HDOP) from fix to fix; 0: constant."""
    satellites: int = 8
    satellites_in_view: int = 11
    fix_loss_per_s: float = 0.0
    outage_mean_s: float = 10.0
    outages: tuple[Outage, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.enabled, bool):
            raise GpsSettingsError("enabled", f"expected true or false, got {self.enabled!r}")
        for name in ("satellites", "satellites_in_view"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise GpsSettingsError(name, f"expected an integer, got {value!r}")
        _check("rate_hz", self.rate_hz, 0.0, MAX_RATE_HZ, lo_open=True)
        _check("noise_m", self.noise_m, 0.0, MAX_NOISE_M)
        _check("correlation_s", self.correlation_s, 0.0, None)
        _check("white_fraction", self.white_fraction, 0.0, 1.0)
        if self.hdop is not None:
            _check("hdop", self.hdop, 0.0, MAX_HDOP, lo_open=True)
        elif self.nominal_hdop > MAX_HDOP:
            raise GpsSettingsError("noise_m", f"{self.noise_m:g} m gives HDOP "
                                              f"{self.nominal_hdop:.1f}, above {MAX_HDOP}; "
                                              "set hdop")
        _check("hdop_spread", self.hdop_spread, 0.0, 1.0)
        if not 1 <= self.satellites <= 12:
            raise GpsSettingsError("satellites", f"must be within 1..12, got {self.satellites}")
        if not self.satellites <= self.satellites_in_view <= 32:
            raise GpsSettingsError("satellites_in_view", f"must be within satellites "
                                   f"({self.satellites})..32, got {self.satellites_in_view}")
        _check("fix_loss_per_s", self.fix_loss_per_s, 0.0, 1.0)
        _check("outage_mean_s", self.outage_mean_s, 0.0, None, lo_open=True)

    @property
    def nominal_hdop(self) -> float:
        """The configured HDOP, or ``sqrt(2) noise_m / UERE_M`` (DRMS = HDOP x UERE)."""
        if self.hdop is not None:
            return self.hdop
        return math.sqrt(2.0) * self.noise_m / UERE_M

    @property
    def period_s(self) -> float:
        return 1.0 / self.rate_hz


def _check(name: str, value: float, lo: float, hi: float | None, *, lo_open: bool = False
           ) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise GpsSettingsError(name, f"expected a finite number, got {value!r}")
    if value < lo or (lo_open and value == lo):
        raise GpsSettingsError(name, f"must be {'>' if lo_open else '>='} {lo:g}, got {value:g}")
    if hi is not None and value > hi:
        raise GpsSettingsError(name, f"must be <= {hi:g}, got {value:g}")
