"""The stationary population of an arrival process: what is alive when a run starts late.

Subscriptions arriving as a Poisson process of rate ``r``, each living a lifetime ``L``
drawn from ``F``, form an M/G/infinity system. Its stationary state (the one the
process reaches once it has run for longer than any lifetime) is:

- the number alive is Poisson with mean ``r E[L]``;
- their remaining lifetimes are independent, each with the equilibrium (residual)
  density ``(1 - F(x)) / E[L]``: a fixed lifetime ``L`` gives residuals uniform on
  ``[0, L]``, an exponential one residuals of the same exponential law.

A residual is drawn as ``U * L'`` with ``L'`` the length-biased lifetime (density
``l f(l) / E[L]``) and ``U`` uniform on [0, 1): a subscription alive at a given instant
is more likely a long one, and it is found uniformly far into it.

``[workload.arrivals] steady_state`` (docs/scenarios.md) issues this population at the
start of the arrival window, so a run measures the process's steady state without
first running for a whole lifetime (BRVST's 300 s subscriptions, Li and Wang 2014, §V).
"""

from __future__ import annotations

import math
import random

from meshsim.scenario.model import Lifetime


def mean_lifetime(life: Lifetime) -> float:
    """``E[L]``; a ``forever`` lifetime has none (no steady state)."""
    if life.kind == "const" or life.kind == "exponential":
        return life.args[0]
    if life.kind == "uniform":
        return (life.args[0] + life.args[1]) / 2
    raise ValueError("a subscription that lasts forever has no steady state")


def draw_residual(life: Lifetime, rng: random.Random) -> float:
    """The remaining lifetime of a subscription alive in the steady state."""
    if life.kind == "const":
        length = life.args[0]
    elif life.kind == "uniform":  # length-biased uniform: density proportional to l on [a, b]
        a, b = life.args
        length = math.sqrt(a * a + rng.random() * (b * b - a * a))
    elif life.kind == "exponential":  # length-biased exponential: Gamma(2, mean)
        length = rng.expovariate(1.0 / life.args[0]) + rng.expovariate(1.0 / life.args[0])
    else:
        raise ValueError("a subscription that lasts forever has no steady state")
    return rng.random() * length


def draw_poisson(mean: float, rng: random.Random) -> int:
    """A Poisson count: the unit-rate arrivals that fall in ``[0, mean)`` (exact, and
    ``mean`` draws on average: cheap for the populations of a scenario)."""
    count, t = 0, rng.expovariate(1.0)
    while t < mean:
        count += 1
        t += rng.expovariate(1.0)
    return count


def stationary_population(rate_per_s: float, life: Lifetime, start_s: float, window_s: float,
                          rng: random.Random) -> list[tuple[float, float]]:
    """The population alive at ``start_s`` in the steady state, as ``(issued, ends)``
    pairs in draw order: each ends at ``start_s`` + its residual lifetime and is issued
    at a uniform time in ``[start_s, start_s + window_s)``, not all at once (no steady
    state has a burst of every subscription in one instant). One whose end comes before
    its issue is left out: it would have ended before being seen. From ``start_s +
    window_s`` on, these together with the process's own arrivals from ``start_s`` are
    exactly the stationary population."""
    out = []
    for _ in range(draw_poisson(rate_per_s * mean_lifetime(life), rng)):
        ends = start_s + draw_residual(life, rng)
        issued = start_s + rng.random() * window_s
        if ends > issued:
            out.append((issued, ends))
    return out
