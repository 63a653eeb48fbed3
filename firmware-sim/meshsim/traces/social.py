"""A contact-trace generator with social structure, for DTN experiments.

Real human contact traces (Haggle/Infocom'06, MIT Reality) cannot be
downloaded here, so we synthesise traces with the three properties the B-SUB
paper relies on and that the DTN literature measured in those traces:

- **communities**: nodes belong to groups; pairs inside a group meet far more
  often (and more of them meet at all) than pairs across groups;
- **heterogeneous pair rates**: each node has a lognormal *sociability*; a
  pair's rate is the product of both, times a community boost, times a
  lognormal pair factor, so a few nodes are hubs (brokers emerge from them)
  and most pairs meet rarely or never;
- **heavy-tailed inter-contact times**: each pair is a renewal process whose
  gaps are Pareto-distributed (shape ``ict_shape`` < 2: infinite variance, as
  Chaintreau et al. observed), in *active time* that a day/night profile
  maps onto the clock, so nights are quiet as in a conference or a campus.

Contact durations are lognormal. The pair-rate scale is calibrated so that
the trace has ``contacts`` contacts (within 2%). Everything is drawn from
``random.Random(seed)``: the same model and seed give the same trace.
"""

from __future__ import annotations

import bisect
import math
import random
from dataclasses import dataclass, replace

from meshsim.scenario.model import Contact

DAY = 86400.0


class TraceModelError(ValueError):
    """A social model with impossible values; the message names the field."""


@dataclass(frozen=True, slots=True)
class SocialModel:
    nodes: int
    duration_s: float
    contacts: int
    """Target number of contacts (up events) in the whole trace."""
    communities: int = 4
    p_meet_in: float = 0.9
    """Probability that two members of one community ever meet."""
    p_meet_out: float = 0.35
    """Probability that two nodes of different communities ever meet."""
    community_boost: float = 6.0
    """Rate multiplier for pairs inside one community."""
    sociability_sigma: float = 0.8
    """Lognormal sigma of a node's sociability (degree heterogeneity)."""
    pair_sigma: float = 1.0
    """Lognormal sigma of a pair's own factor (pair-rate heterogeneity)."""
    ict_shape: float = 1.4
    """Pareto shape of inter-contact times, in (1, 3]; below 2 the variance is infinite."""
    duration_median_s: float = 150.0
    duration_sigma: float = 1.0
    duration_max_s: float = 4 * 3600.0
    day_start_h: float = 8.0
    day_end_h: float = 20.0
    night_activity: float = 0.1
    """Contact activity at night relative to the day (1 = no day/night cycle)."""

    def validate(self) -> None:
        checks = [
            ("nodes", self.nodes >= 2), ("duration_s", self.duration_s > 0),
            ("contacts", self.contacts >= 1),
            ("communities", 1 <= self.communities <= self.nodes),
            ("p_meet_in", 0 < self.p_meet_in <= 1), ("p_meet_out", 0 <= self.p_meet_out <= 1),
            ("community_boost", self.community_boost > 0),
            ("sociability_sigma", self.sociability_sigma >= 0),
            ("pair_sigma", self.pair_sigma >= 0), ("ict_shape", 1 < self.ict_shape <= 3),
            ("duration_median_s", self.duration_median_s > 0),
            ("duration_sigma", self.duration_sigma >= 0),
            ("duration_max_s", self.duration_max_s >= self.duration_median_s),
            ("day_start_h", 0 <= self.day_start_h < self.day_end_h <= 24),
            ("night_activity", 0 < self.night_activity <= 1),
        ]
        for name, ok in checks:
            if not ok:
                raise TraceModelError(f"trace model: {name} = {getattr(self, name)!r} "
                                      "is out of range")


PRESETS: dict[str, SocialModel] = {
    # Haggle Infocom'06 (Zhao and Wu 2010, §VII-A): 79 nodes, 3 days, 67,360 contacts; a
    # conference: dense, most pairs meet, quiet nights.
    "haggle": SocialModel(nodes=79, duration_s=3 * DAY, contacts=67_360, communities=4,
                          p_meet_in=0.95, p_meet_out=0.6, community_boost=4.0,
                          sociability_sigma=0.7, pair_sigma=1.0, ict_shape=1.4,
                          duration_median_s=150.0, night_activity=0.1),
    # MIT Reality, 3 busiest days of 246 (54,667 contacts in all): 97 nodes in
    # labs and departments; far sparser, strongly clustered. The 3-day count is
    # our estimate (3x the trace's daily mean of 222): the paper does not give it.
    "mit": SocialModel(nodes=97, duration_s=3 * DAY, contacts=2_000, communities=8,
                       p_meet_in=0.6, p_meet_out=0.03, community_boost=10.0,
                       sociability_sigma=1.0, pair_sigma=1.0, ict_shape=1.3,
                       duration_median_s=600.0, night_activity=0.2),
}


def preset(name: str, **overrides: float | int) -> SocialModel:
    """A preset model with some fields replaced (``days`` sets ``duration_s``)."""
    if name not in PRESETS:
        raise TraceModelError(f"unknown trace preset {name!r} (known: {', '.join(PRESETS)})")
    model = PRESETS[name]
    values = dict(overrides)
    if "days" in values:
        days = float(values.pop("days"))
        values["duration_s"] = days * DAY
        if "contacts" not in values:  # keep the preset's contact rate per day
            values["contacts"] = max(1, round(model.contacts * days * DAY / model.duration_s))
    try:
        model = replace(model, **values)  # type: ignore[arg-type]
    except TypeError as exc:
        raise TraceModelError(f"trace model: {exc}") from None
    model.validate()
    return model


# ------------------------------------------------------------------ time base


class _ActiveClock:
    """Maps active time (uniform contact intensity) to clock time, hour by hour."""

    def __init__(self, model: SocialModel) -> None:
        hours = math.ceil(model.duration_s / 3600.0)
        self.weights = []
        for h in range(hours):
            hod = h % 24
            day = model.day_start_h <= hod < model.day_end_h
            self.weights.append(1.0 if day else model.night_activity)
        self.cum = [0.0]
        for w in self.weights:
            self.cum.append(self.cum[-1] + w * 3600.0)
        self.total = self.cum[-1]

    def to_clock(self, active: float) -> float:
        h = min(bisect.bisect_right(self.cum, active) - 1, len(self.weights) - 1)
        return h * 3600.0 + (active - self.cum[h]) / self.weights[h]

    def to_active(self, clock: float) -> float:
        h = min(int(clock // 3600.0), len(self.weights) - 1)
        return self.cum[h] + (clock - h * 3600.0) * self.weights[h]


# ------------------------------------------------------------------ generation


@dataclass(frozen=True, slots=True)
class _Pair:
    a: int
    b: int
    weight: float


def communities_of(model: SocialModel, seed: int) -> list[int]:
    """Community of each node 0..n-1 (unequal sizes, every community non-empty)."""
    rng = random.Random(f"{seed}:communities")
    sizes = [rng.lognormvariate(0.0, 0.4) for _ in range(model.communities)]
    out = list(range(model.communities))  # one member each, the rest by size
    total = sum(sizes)
    out += rng.choices(range(model.communities), [s / total for s in sizes],
                       k=model.nodes - model.communities)
    rng.shuffle(out)
    return out


def _pairs(model: SocialModel, seed: int, community: list[int]) -> list[_Pair]:
    rng = random.Random(f"{seed}:pairs")
    social = [rng.lognormvariate(0.0, model.sociability_sigma) for _ in range(model.nodes)]
    pairs = []
    for a in range(model.nodes):
        for b in range(a + 1, model.nodes):
            same = community[a] == community[b]
            if rng.random() >= (model.p_meet_in if same else model.p_meet_out):
                continue
            w = social[a] * social[b] * rng.lognormvariate(0.0, model.pair_sigma)
            pairs.append(_Pair(a, b, w * (model.community_boost if same else 1.0)))
    return pairs


def _generate(model: SocialModel, pairs: list[_Pair], scale: float, seed: int,
              clock: _ActiveClock) -> list[tuple[float, float, int, int]]:
    """(start, end, a, b) for every contact, given the pair-rate ``scale``."""
    rng = random.Random(f"{seed}:contacts")
    alpha = model.ict_shape
    mu = math.log(model.duration_median_s)
    out = []
    for pair in pairs:
        mean_gap = 1.0 / (scale * pair.weight)  # in active seconds
        xm = mean_gap * (alpha - 1.0) / alpha
        active = rng.random() * mean_gap  # stationary-ish first contact
        while active < clock.total:
            start = clock.to_clock(active)
            if start >= model.duration_s:
                break
            length = min(model.duration_max_s, rng.lognormvariate(mu, model.duration_sigma))
            end = min(start + max(1.0, length), model.duration_s)
            out.append((start, end, pair.a, pair.b))
            gap = xm * rng.random() ** (-1.0 / alpha)
            active = clock.to_active(end) + gap
    return out


def generate(model: SocialModel, seed: int = 1, first_id: int = 0) -> list[Contact]:
    """The trace as ONE connection events, sorted by time (downs before ups at a tie).

    Node ids are ``first_id .. first_id + nodes - 1`` (the ONE counts from 0).
    """
    model.validate()
    community = communities_of(model, seed)
    pairs = _pairs(model, seed, community)
    if not pairs:
        raise TraceModelError("trace model: no pair ever meets (raise p_meet_in/p_meet_out)")
    clock = _ActiveClock(model)
    total_w = sum(p.weight for p in pairs)
    scale = model.contacts / (clock.total * total_w)
    raw = _generate(model, pairs, scale, seed, clock)
    for _ in range(12):  # calibrate the rate scale to the target count
        if abs(len(raw) - model.contacts) <= 0.02 * model.contacts:
            break
        scale *= (model.contacts / max(1, len(raw))) ** 1.2
        raw = _generate(model, pairs, scale, seed, clock)
    events = []
    for start, end, a, b in raw:
        events.append((start, 1, Contact(start, a + first_id, b + first_id, True)))
        events.append((end, 0, Contact(end, a + first_id, b + first_id, False)))
    events.sort(key=lambda e: (e[0], e[1], e[2].a, e[2].b))
    return [c for _, _, c in events]
