"""The first-order radio energy model, with the constants of Zheng 2008, Table 4.1.

Sending ``k`` bits over ``d`` metres costs ``k (E_elec + e_fs d^2)`` when the
transmission range TR is below the threshold distance TD (free space) and
``k (E_elec + e_mp d^4)`` otherwise (multipath); receiving costs ``k E_elec``
(Heinzelman's model as the thesis uses it, Zheng 2008, §4.6). As the thesis
does, the exponent is chosen by TR, not per link. The simulator drains its
nodes' batteries with it (``meshsim.des.energy``) and the evaluation charges
every transmission of a run with it (``mesheval.energy``), so both agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

E_ELEC: Final = 50e-9
"""J/bit spent by the transmitter or receiver electronics."""
EPS_FS: Final = 10e-12
"""J/bit/m^2 of the amplifier, free space (TR < TD)."""
EPS_MP: Final = 0.0013e-12
"""J/bit/m^4 of the amplifier, multipath (TR >= TD)."""
THRESHOLD_M: Final = 75.0
"""TD: the distance at which multipath takes over."""


@dataclass(frozen=True, slots=True)
class RadioEnergy:
    """The model for one deployment: TR decides free space (d^2) or multipath (d^4)."""

    range_m: float

    @property
    def exponent(self) -> int:
        return 2 if self.range_m < THRESHOLD_M else 4

    @property
    def eps_amp(self) -> float:
        return EPS_FS if self.exponent == 2 else EPS_MP

    def tx_joules(self, nbytes: int, distance_m: float | None = None) -> float:
        """Energy to send ``nbytes`` over ``distance_m`` (TR when unknown: a broadcast)."""
        d = self.range_m if distance_m is None else distance_m
        return nbytes * 8 * (E_ELEC + self.eps_amp * d**self.exponent)

    @staticmethod
    def rx_joules(nbytes: int) -> float:
        return nbytes * 8 * E_ELEC
