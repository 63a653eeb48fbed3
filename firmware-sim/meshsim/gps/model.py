"""The receiver error model: how far, and when not at all, a simulated GPS is right.

Horizontal error, per axis (east and north independently), is the sum of

* a first-order Gauss-Markov process with correlation time ``correlation_s``
  (tau): ``c[k] = a c[k-1] + sqrt(1 - a^2) s_c w``, ``a = exp(-dt / tau)``,
  started in its stationary distribution. Real receivers wander like this:
  atmospheric and orbit errors change over minutes, so consecutive fixes are
  close to each other but not to the truth;
* white noise ``s_w w`` (multipath, tracking jitter), fresh every fix;

with ``s_c^2 = (1 - white_fraction) noise_m^2`` and ``s_w^2 = white_fraction
noise_m^2``, so each axis is N(0, noise_m^2) at any instant. ``correlation_s =
0`` makes all of it white.

HDOP and the error agree through the daemon's own relation (``UERE_M`` of
``meshsub.core.tracking``): the daemon estimates the horizontal
error as ``HDOP x UERE`` and reads it as the DRMS (root of the mean squared
horizontal error), which is ``sqrt(2) x sigma`` for a per-axis sigma. So by
default ``HDOP = sqrt(2) noise_m / UERE`` (noise 3 m: HDOP 0.85), and with a
per-fix spread the fix's HDOP ``h`` is drawn log-normally around it and that
fix's error is scaled by ``h / HDOP``: every fix's error is N(0, s^2) per axis
with ``s = h UERE / sqrt(2)``, i.e. exactly what the daemon's ``error_m``
claims. 95 % of fixes lie within ``2.45 s`` of the truth (Rayleigh). An
explicit ``hdop`` decouples the two (to exercise gating, e.g. HDOP above
``location.max_hdop``).

Fix loss: in each second with a fix the receiver loses it with probability
``fix_loss_per_s`` (per epoch ``1 - (1 - p)^dt``); an outage lasts an
exponential time with mean ``outage_mean_s``; explicit windows
``[start_s, end_s)`` add outages at known times. During an outage the error
processes keep running (the sky does not wait).

Deterministic per (seed, node): separate streams for noise, HDOP and fix
loss, so turning on fix loss does not change the noise a node sees.
Pure code, no I/O. Altitude, speed and course are reported without error.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from meshsim.gps.settings import MAX_HDOP, GpsSettings

VDOP_RATIO = 1.5
"""VDOP / HDOP of an open-sky GPS constellation (vertical geometry is worse)."""


def dops(hdop: float) -> tuple[float, float, float]:
    """(PDOP, HDOP, VDOP) for GSA, from HDOP and the typical vertical ratio."""
    vdop = hdop * VDOP_RATIO
    return math.hypot(hdop, vdop), hdop, vdop


@dataclass(frozen=True, slots=True)
class Reading:
    """One epoch of one receiver: the error to add to the truth, or no fix."""

    fix: bool
    east_m: float
    north_m: float
    hdop: float
    sigma_m: float
    """Per-axis standard deviation this fix's error was drawn with."""


class ReceiverModel:
    """One node's receiver; call ``step(t)`` once per epoch with increasing ``t``."""

    def __init__(self, settings: GpsSettings, seed: int, node: int) -> None:
        self.settings = settings
        self.node = node
        self._noise = random.Random(f"{seed}:gps:noise:{node}")
        self._hdop = random.Random(f"{seed}:gps:hdop:{node}")
        self._loss = random.Random(f"{seed}:gps:loss:{node}")
        white = settings.white_fraction if settings.correlation_s > 0 else 1.0
        self._sigma_c = settings.noise_m * math.sqrt(1.0 - white)
        self._sigma_w = settings.noise_m * math.sqrt(white)
        self._h0 = settings.nominal_hdop
        self._windows = tuple((o.start_s, o.end_s) for o in settings.outages if o.covers(node))
        self._last_t: float | None = None
        self._east_c = 0.0
        self._north_c = 0.0
        self._outage_until = -math.inf

    def step(self, t: float) -> Reading:
        """Advance the error processes to ``t`` (scenario seconds) and read the receiver."""
        if not math.isfinite(t):
            raise ValueError(f"time {t!r} is not finite")
        s = self.settings
        noise = self._noise
        if self._last_t is None:  # start in the stationary distribution
            self._east_c = noise.gauss(0.0, self._sigma_c)
            self._north_c = noise.gauss(0.0, self._sigma_c)
            dt = s.period_s
        else:
            dt = t - self._last_t
            if dt <= 0:
                raise ValueError(f"time went from {self._last_t:g} to {t:g}: must increase")
            a = math.exp(-dt / s.correlation_s) if s.correlation_s > 0 else 0.0
            innovation = self._sigma_c * math.sqrt(1.0 - a * a)
            self._east_c = a * self._east_c + noise.gauss(0.0, innovation)
            self._north_c = a * self._north_c + noise.gauss(0.0, innovation)
        self._last_t = t
        east = self._east_c + noise.gauss(0.0, self._sigma_w)
        north = self._north_c + noise.gauss(0.0, self._sigma_w)

        hdop = self._h0
        if s.hdop_spread > 0:
            hdop = min(MAX_HDOP, self._h0 * math.exp(self._hdop.gauss(0.0, s.hdop_spread)))
        scale = hdop / self._h0 if self._h0 > 0 else 1.0

        # two draws every epoch, used or not: the stream stays aligned across states
        u, length = self._loss.random(), self._loss.expovariate(1.0 / s.outage_mean_s)
        if t >= self._outage_until and u < 1.0 - (1.0 - s.fix_loss_per_s) ** dt:
            self._outage_until = t + length
        if t < self._outage_until or any(lo <= t < hi for lo, hi in self._windows):
            return Reading(False, 0.0, 0.0, MAX_HDOP, 0.0)
        return Reading(True, east * scale, north * scale, hdop, s.noise_m * scale)
