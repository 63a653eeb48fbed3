"""The first-order radio energy model in Spark, with the constants of Zheng 2008, Table 4.1.

``meshsub.core.energy`` is the model (the simulator drains batteries with the
same one); here are its Spark column forms. As the thesis does, the exponent is
chosen by TR, not per link; ``d`` is the real link length when both positions are
known, else TR (docs/evaluation.md, "energy").
"""

from __future__ import annotations

from pyspark.sql import Column
from pyspark.sql import functions as F

from meshsub.core.energy import E_ELEC, EPS_FS, EPS_MP, THRESHOLD_M
from meshsub.core.energy import RadioEnergy as RadioModel

__all__ = ["RadioModel", "rx_energy_column", "tx_energy_column"]


def tx_energy_column(nbytes: Column, distance: Column, range_m: Column) -> Column:
    """Spark form of ``RadioModel.tx_joules`` with a per-row range (run-dependent TR)."""
    d = F.coalesce(distance, range_m)
    free_space = nbytes * 8 * (F.lit(E_ELEC) + F.lit(EPS_FS) * F.pow(d, 2))
    multipath = nbytes * 8 * (F.lit(E_ELEC) + F.lit(EPS_MP) * F.pow(d, 4))
    return F.when(range_m < THRESHOLD_M, free_space).otherwise(multipath)


def rx_energy_column(nbytes: Column) -> Column:
    return nbytes * 8 * F.lit(E_ELEC)
