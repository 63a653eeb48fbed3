"""Radio models: which pairs of nodes hear each other, and with what loss.

A model maps a distance to a loss probability, or ``None`` for no link. Links
are symmetric; loss is drawn independently per receiver and per frame by the
discrete-event engine and by the virtual mesh's nftables medium, which both use
this one module, so they are pure functions of positions with no driver state.
Per-pair overrides from the scenario win over the model.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the scenario package imports this module to validate [radio]
    from meshsim.scenario.model import LinkOverride, Radio

Positions = Mapping[int, tuple[float, float]]
Links = dict[int, dict[int, float]]
"""node -> neighbour -> loss probability (symmetric)."""
DirectedLinks = dict[tuple[int, int], float]
"""(sender, receiver) -> loss probability; what the medium enforces, per direction."""

LOSS_STEP = 0.01
"""Loss resolution of the virtual mesh: one nftables loss class per 1 %."""
LINK_CUTOFF = 1.0 - LOSS_STEP / 2
"""A link whose loss rounds to 1 at that resolution (>= 99.5 %) is no link: out of range."""


class RadioModel(Protocol):
    @property
    def range_m(self) -> float:
        """No link beyond this distance (the grid-hash cell size)."""

    def loss_at(self, distance: float) -> float | None:
        """Loss probability of a link of this length, or None if out of range."""


@dataclass(frozen=True, slots=True)
class UnitDisk:
    """Every pair within ``range_m`` is linked with the same loss probability."""

    range_m: float
    loss: float = 0.0

    def loss_at(self, distance: float) -> float | None:
        return self.loss if distance <= self.range_m else None


@dataclass(frozen=True, slots=True)
class LinearRamp:
    """CORE-style ramp: ``loss`` up to ramp_start*range, rising linearly to 1 at range."""

    range_m: float
    loss: float = 0.0
    ramp_start: float = 0.75

    def loss_at(self, distance: float) -> float | None:
        if distance >= self.range_m:
            return None
        knee = self.ramp_start * self.range_m
        if distance <= knee:
            return self.loss
        frac = (distance - knee) / (self.range_m - knee)
        return self.loss + (1.0 - self.loss) * frac


DSSS_GAIN = 22.0
"""Eb/N0 over SNR for 802.11b at 1 Mb/s: 22 MHz noise bandwidth / 1 Mb/s (ns-3's
``DsssErrorRateModel::GetDsssDbpskSuccessRate`` uses the same factor)."""


@dataclass(frozen=True, slots=True)
class LogDistance:
    """Log-distance path loss -> SNR -> packet error rate of an 802.11b DBPSK frame.

    As wmediumd does (a log-distance path loss gives the signal, the signal over a
    fixed noise floor gives the SNR, the SNR and the frame length give the PER),
    without its shadowing term, so that loss is a pure function of distance:

        rx_dbm = tx_power_dbm - ref_loss_db - 10 * path_loss_exp * log10(d / ref_distance_m)
        snr    = 10 ** ((rx_dbm - noise_floor_dbm) / 10)
        ber    = 0.5 * exp(-snr * 22)           # DBPSK, 1 Mb/s DSSS (processing gain 22)
        per    = 1 - (1 - ber) ** (8 * frame_bytes)
        loss   = 1 - (1 - loss_floor) * (1 - per)

    DBPSK at 1 Mb/s is the modulation of 802.11b's lowest basic rate, the rate at
    which IBSS broadcasts (every beacon of the daemon) go out, so it sets the range
    in which neighbours hear each other. Closer than ``ref_distance_m`` the signal is
    that at ``ref_distance_m``. ``range_m`` is computed: where the loss reaches
    ``LINK_CUTOFF``; beyond it ``loss_at`` says no link. The transition from 1 % to
    99 % loss spans ~2.8 dB of SNR (the "grey zone" of real radios).
    """

    tx_power_dbm: float = 20.0
    ref_loss_db: float = 40.2
    """Free-space loss at 1 m and 2.437 GHz (Wi-Fi channel 6): 20 log10(4 pi / lambda)."""
    ref_distance_m: float = 1.0
    path_loss_exp: float = 3.0
    noise_floor_dbm: float = -91.0
    """wmediumd's NOISE_LEVEL; thermal noise in 22 MHz (-100.6 dBm) plus a ~9 dB noise figure."""
    frame_bytes: int = 1200
    loss: float = 0.0
    """Loss independent of distance (interference), combined with the PER."""
    range_m: float = field(init=False)

    def __post_init__(self) -> None:
        for name in ("tx_power_dbm", "ref_loss_db", "ref_distance_m", "path_loss_exp",
                     "noise_floor_dbm", "loss"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name} must be finite")
        if self.ref_distance_m <= 0 or self.path_loss_exp <= 0:
            raise ValueError("ref_distance_m and path_loss_exp must be > 0")
        if self.frame_bytes < 1:
            raise ValueError(f"frame_bytes must be >= 1 (got {self.frame_bytes})")
        if not 0.0 <= self.loss < LINK_CUTOFF:
            raise ValueError(f"loss must be in [0, {LINK_CUTOFF:g}) (got {self.loss:g})")
        object.__setattr__(self, "range_m", self._range())

    def _range(self) -> float:
        """Distance at which the loss reaches LINK_CUTOFF (the formulas above, inverted)."""
        success = (1.0 - LINK_CUTOFF) / (1.0 - self.loss)      # of the PER part
        ber = -math.expm1(math.log(success) / (8 * self.frame_bytes))
        snr_db = 10 * math.log10(-math.log(2 * ber) / DSSS_GAIN)
        excess_db = self.tx_power_dbm - self.ref_loss_db - self.noise_floor_dbm - snr_db
        if excess_db <= 0:
            raise ValueError(
                f"no link at any distance: the SNR at ref_distance_m is "
                f"{self.snr_db(self.ref_distance_m):.1f} dB, below the {snr_db:.1f} dB "
                f"where frames of {self.frame_bytes} bytes get through")
        return self.ref_distance_m * 10 ** (excess_db / (10 * self.path_loss_exp))

    def snr_db(self, distance: float) -> float:
        d = max(distance, self.ref_distance_m)
        rx = (self.tx_power_dbm - self.ref_loss_db
              - 10 * self.path_loss_exp * math.log10(d / self.ref_distance_m))
        return rx - self.noise_floor_dbm

    def per(self, distance: float) -> float:
        """Packet error rate of one frame at this distance (no floor loss)."""
        ber = 0.5 * math.exp(-(10 ** (self.snr_db(distance) / 10)) * DSSS_GAIN)
        return -math.expm1(8 * self.frame_bytes * math.log1p(-ber))

    def loss_at(self, distance: float) -> float | None:
        if distance > self.range_m:
            return None
        return 1.0 - (1.0 - self.loss) * (1.0 - self.per(distance))


def make_model(radio: Radio) -> RadioModel:
    if radio.model == "unit_disk":
        return UnitDisk(radio.range_m, radio.loss)
    if radio.model == "linear_ramp":
        return LinearRamp(radio.range_m, radio.loss, radio.ramp_start)
    if radio.model == "log_distance":
        return LogDistance(
            tx_power_dbm=radio.tx_power_dbm, ref_loss_db=radio.ref_loss_db,
            ref_distance_m=radio.ref_distance_m, path_loss_exp=radio.path_loss_exp,
            noise_floor_dbm=radio.noise_floor_dbm,
            frame_bytes=radio.frame_bytes or radio.payload_size, loss=radio.loss)
    raise ValueError(f"unknown radio model {radio.model!r}")


def pairs_within(positions: Positions, range_m: float) -> Iterable[tuple[int, int, float]]:
    """Every pair (a < b) closer than ``range_m``, with its distance (grid hashing)."""
    cell = range_m if range_m > 0 else 1.0
    grid: dict[tuple[int, int], list[int]] = defaultdict(list)
    for node, (x, y) in positions.items():
        grid[(math.floor(x / cell), math.floor(y / cell))].append(node)
    for (cx, cy), members in grid.items():
        for dx in (-1, 0, 1):
            for dy in (-1, 0, 1):
                others = grid.get((cx + dx, cy + dy))
                if not others:
                    continue
                for a in members:
                    ax, ay = positions[a]
                    for b in others:
                        if a >= b:
                            continue
                        bx, by = positions[b]
                        d = math.hypot(ax - bx, ay - by)
                        if d <= range_m:
                            yield a, b, d


def compute_links(positions: Positions, model: RadioModel,
                  overrides: Iterable[LinkOverride] = ()) -> Links:
    """The link graph for these positions, overrides applied."""
    links: Links = {node: {} for node in positions}
    for a, b, d in pairs_within(positions, model.range_m):
        loss = model.loss_at(d)
        if loss is not None and loss < 1.0:
            links[a][b] = links[b][a] = loss
    apply_overrides(links, overrides)
    return links


def apply_overrides(links: Links, overrides: Iterable[LinkOverride]) -> None:
    for o in overrides:
        if o.connected is False:
            links[o.a].pop(o.b, None)
            links[o.b].pop(o.a, None)
            continue
        present = o.b in links[o.a]
        if o.connected or present:
            loss = o.loss if o.loss is not None else links[o.a].get(o.b, 0.0)
            links[o.a][o.b] = links[o.b][o.a] = loss


def is_connected(links: Links) -> bool:
    if not links:
        return True
    start = next(iter(links))
    seen = {start}
    stack = [start]
    while stack:
        for nb in links[stack.pop()]:
            if nb not in seen:
                seen.add(nb)
                stack.append(nb)
    return len(seen) == len(links)


def directed(links: Links) -> DirectedLinks:
    """The per-direction form of a link graph, as the medium enforces it."""
    return {(a, b): loss for a, nbs in links.items() for b, loss in nbs.items()}


def pair_delays(overrides: Iterable[LinkOverride]) -> dict[tuple[int, int], float]:
    """Per-pair hop delays set by overrides (both directions; later overrides win)."""
    delays: dict[tuple[int, int], float] = {}
    for o in overrides:
        if o.delay_s is not None:
            delays[(o.a, o.b)] = delays[(o.b, o.a)] = o.delay_s
    return delays
