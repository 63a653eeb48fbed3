"""First-order radio energy model with the constants of HESPER's Table 4.1.

Zheng 2008, §4.6 (spec 004 §4.6): sending ``k`` bits over ``d`` metres costs
``k*(E_elec + e_fs*d^2)`` when the transmission range TR is below the threshold
distance TD (free space) and ``k*(E_elec + e_mp*d^4)`` otherwise (multipath);
receiving costs ``k*E_elec``. As the thesis does, the model (exponent) is chosen
by TR, not per link; ``d`` is the real link length when both positions are known,
else TR (spec 004 §4.6 DECISION).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from pyspark.sql import Column
from pyspark.sql import functions as F

E_ELEC: Final = 50e-9  # J/bit
EPS_FS: Final = 10e-12  # J/bit/m^2
EPS_MP: Final = 0.0013e-12  # J/bit/m^4
THRESHOLD_M: Final = 75.0  # TD


@dataclass(frozen=True)
class RadioModel:
    """The model for one run: TR decides free space (d^2) or multipath (d^4)."""

    range_m: float

    @property
    def exponent(self) -> int:
        return 2 if self.range_m < THRESHOLD_M else 4

    @property
    def eps_amp(self) -> float:
        return EPS_FS if self.exponent == 2 else EPS_MP

    def tx_joules(self, nbytes: int, distance_m: float | None = None) -> float:
        d = self.range_m if distance_m is None else distance_m
        return nbytes * 8 * (E_ELEC + self.eps_amp * d**self.exponent)

    @staticmethod
    def rx_joules(nbytes: int) -> float:
        return nbytes * 8 * E_ELEC


def tx_energy_column(nbytes: Column, distance: Column, range_m: Column) -> Column:
    """Spark form of ``RadioModel.tx_joules`` with a per-row range (run-dependent TR)."""
    d = F.coalesce(distance, range_m)
    free_space = nbytes * 8 * (F.lit(E_ELEC) + F.lit(EPS_FS) * F.pow(d, 2))
    multipath = nbytes * 8 * (F.lit(E_ELEC) + F.lit(EPS_MP) * F.pow(d, 4))
    return F.when(range_m < THRESHOLD_M, free_space).otherwise(multipath)


def rx_energy_column(nbytes: Column) -> Column:
    return nbytes * 8 * F.lit(E_ELEC)
