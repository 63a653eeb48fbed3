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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the scenario package imports this module to validate [radio]
    from meshsim.scenario.model import LinkOverride, Radio

Positions = Mapping[int, tuple[float, float]]
Links = dict[int, dict[int, float]]
"""node -> neighbour -> loss probability (symmetric)."""


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


def make_model(radio: Radio) -> RadioModel:
    if radio.model == "unit_disk":
        return UnitDisk(radio.range_m, radio.loss)
    if radio.model == "linear_ramp":
        return LinearRamp(radio.range_m, radio.loss, radio.ramp_start)
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
