"""The first-order radio energy model of Table 4.1 ([YOU04]), and a node's energy meter.

The thesis picks the model from TR against the threshold distance TD (free
space when TR < TD, multipath when TR > TD) and never defines d; we use the
real link length d with the model chosen
by TR, which is what ``tx_energy`` does.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class RadioEnergyModel:
    """Constants of Table 4.1 (J/bit, J/bit/m^2, J/bit/m^4, m, bits)."""

    E_elec: float = 50e-9
    e_fs: float = 10e-12
    e_mp: float = 0.0013e-12
    TR: float = 70.0
    TD: float = 75.0
    M_b: int = 320

    @property
    def multipath(self) -> bool:
        return self.TR > self.TD

    def tx_energy(self, d: float, bits: int | None = None) -> float:
        """Energy (J) to send one message over a link of length ``d`` metres."""
        m = self.M_b if bits is None else bits
        amp = self.e_mp * d ** 4 if self.multipath else self.e_fs * d * d
        return m * (self.E_elec + amp)

    def rx_energy(self, bits: int | None = None) -> float:
        """Energy (J) to receive one message."""
        return (self.M_b if bits is None else bits) * self.E_elec


class EnergyMeter:
    """Remaining energy of one node: a configured fraction, the radio model, or a feed.

    ``source`` is ``"config"`` (fixed ``fraction``), ``"model"`` (``initial_j``
    minus what the radio model charges per message) or ``"external"`` (the
    driver's ``EnergyChanged`` readings, e.g. from ``/sys/class/power_supply``).
    """

    def __init__(self, source: str, fraction: float, initial_j: float,
                 model: RadioEnergyModel) -> None:
        if source not in ("config", "model", "external"):
            raise ValueError(f"unknown energy source {source!r}")
        self.source = source
        self.model = model
        self.initial_j = initial_j
        self.spent_j = 0.0
        self._fraction = fraction

    @property
    def fraction(self) -> float:
        """Remaining energy as a fraction of the initial energy, in [0, 1]."""
        if self.source == "model":
            return max(0.0, 1.0 - self.spent_j / self.initial_j)
        return self._fraction

    def charge_tx(self, d: float) -> None:
        if self.source == "model":
            self.spent_j += self.model.tx_energy(d)

    def charge_rx(self) -> None:
        if self.source == "model":
            self.spent_j += self.model.rx_energy()

    def feed(self, fraction: float) -> None:
        """A driver reading (``external`` source); values are clamped into [0, 1]."""
        self._fraction = min(1.0, max(0.0, fraction))
