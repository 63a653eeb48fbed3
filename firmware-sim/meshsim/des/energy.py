"""The simulator's batteries: what every node has left, for its protocol's energy input.

Each node starts with ``initial_j`` joules; every transmission and reception
costs what the first-order radio model (``meshsub.core.energy``) charges, the
same model the evaluation uses afterwards. Nodes on mains power are never
charged and report ``on_mains``. The engine feeds each node an ``EnergyChanged``
with its remaining fraction every ``report_s`` (as the daemon does from its
device's power supply), so a protocol reacts to energy in the same way in
every tier.
"""

from __future__ import annotations

from collections.abc import Iterable

from meshsim.scenario.model import Energy
from meshsub.core.energy import RadioEnergy


class Batteries:
    def __init__(self, settings: Energy, nodes: Iterable[int], range_m: float) -> None:
        self.settings = settings
        self.model = RadioEnergy(settings.range_m if settings.range_m is not None else range_m)
        self.mains = frozenset(settings.mains)
        self.spent_j: dict[int, float] = {node: 0.0 for node in nodes}

    def charge_tx(self, node: int, nbytes: int, distance_m: float | None) -> None:
        if node not in self.mains:
            self.spent_j[node] += self.model.tx_joules(nbytes, distance_m)

    def charge_rx(self, node: int, nbytes: int) -> None:
        if node not in self.mains:
            self.spent_j[node] += self.model.rx_joules(nbytes)

    def reading(self, node: int) -> tuple[float | None, bool]:
        """``(fraction, on_mains)`` as ``EnergyChanged`` carries them."""
        if node in self.mains:
            return None, True
        return max(0.0, 1.0 - self.spent_j[node] / self.settings.initial_j), False
