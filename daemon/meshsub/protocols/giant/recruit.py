"""RecruitFerry (Zheng 2008, Algorithm 6.1): hand a passing ferry another copy only if needed.

A broker that has handed copies of an item towards next-hop broker BID to
ferries at times TE_1..TE_n asks, when another ferry passes, whether those
ferries already reach BID with probability above ``Prob`` by the time the
new one could (``i + j`` units from now, the Manhattan offset to BID):

    p = prod over TE of (1 - P_hit(i, j, now - TE + i + j));  recruit iff 1 - p <= Prob

with ``P_hit`` of Theorem 6.1 (``meshsub.core.lattice``). The thesis's strict
``>`` is kept. Ferries are taken as independent walkers (the thesis's
assumption). Times are in units of one cell crossing.

``Prob`` per hop comes from the subscribers' end-to-end targets: a path of
``h`` hops that must deliver with ``DR`` needs ``DR**(1/h)`` per hop (the
thesis says per-hop targets rise with the hop count but gives no formula);
a link shared by several subscriptions takes the largest.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

HitFn = Callable[[int, int, int], float]
"""``P_hit(i, j, T)``: probability a walker visits offset (i, j) within T units."""


def achieved(i: int, j: int, elapsed: Iterable[int], hit: HitFn) -> float:
    """Probability that ferries handed copies ``elapsed`` units ago reach (i, j) in time.

    "In time" is by the moment a ferry handed a copy now could first arrive:
    each earlier ferry has its elapsed time plus ``i + j`` units.
    """
    miss = 1.0
    for units in elapsed:
        miss *= 1.0 - hit(i, j, max(0, units) + i + j)
    return 1.0 - miss


def recruit_ferry(i: int, j: int, elapsed: Iterable[int], prob: float, hit: HitFn) -> bool:
    """Algorithm 6.1: True if the ferry in contact should carry another copy."""
    return not achieved(i, j, elapsed, hit) > prob


def per_hop_prob(dr: float, hops: int) -> float:
    """The per-hop target that gives ``dr`` over ``hops`` independent hops."""
    return float(dr ** (1.0 / max(1, hops)))


@dataclass(frozen=True, slots=True)
class Trace:
    """One hop served by ferries arriving every ``interval`` units from time 0."""

    ferries: int
    """Ferries recruited before the target was reached."""
    stop: int
    """Arrival time of the first ferry not recruited."""
    reach: int
    """The shortest trip to the next broker (``i + j`` units)."""

    @property
    def delay(self) -> int:
        """Units from the first recruitment until the recruited ferries reach the target
        (§6.5.1's delivery delay): by the time the refused ferry could have arrived."""
        return self.stop + self.reach


def recruit_trace(i: int, j: int, prob: float, interval: int, hit: HitFn,
                  limit: int = 100_000) -> Trace:
    """Apply RecruitFerry to ferries arriving every ``interval`` units; stop at the first refusal.

    Reproduces the §6.5.2 set-up of a sender whose cell a ferry passes every
    ``interval`` units (the thesis's "arrival interval").
    """
    if interval < 1:
        raise ValueError("interval must be at least 1 unit")
    times: list[int] = []
    now = 0
    while len(times) < limit:
        if not recruit_ferry(i, j, (now - t for t in times), prob, hit):
            return Trace(len(times), now, i + j)
        times.append(now)
        now += interval
    raise ValueError(f"more than {limit} ferries would be needed")
