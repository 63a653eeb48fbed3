"""``[workload.arrivals] steady_state``: a run that starts with the arrival process's
stationary population (``meshsim.scenario.stationary``).

The rule (an M/G/infinity system): Poisson(r E[L]) subscriptions alive, each with a
residual lifetime of density (1 - F(x)) / E[L] (uniform on [0, L] for a fixed L),
issued over a short window from ``start_s``. Off, the plan is the one it always was.
"""

from __future__ import annotations

import math
import random
import statistics

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simhelpers import SCENARIOS

from meshsim.scenario import ScenarioError, load_scenario
from meshsim.scenario.model import Lifetime
from meshsim.scenario.plan import plan_subscriptions, plan_unsubscriptions
from meshsim.scenario.stationary import (
    draw_poisson,
    draw_residual,
    mean_lifetime,
    stationary_population,
)

BRVST = SCENARIOS / "brvst-400.toml"
ON = "workload.arrivals.steady_state=true"


def ks_statistic(sample: list[float], cdf: object) -> float:
    """Kolmogorov-Smirnov distance between ``sample`` and the continuous ``cdf``."""
    xs = sorted(sample)
    n = len(xs)
    return max(max((i + 1) / n - cdf(x), cdf(x) - i / n)  # type: ignore[operator]
               for i, x in enumerate(xs))


KS_1PCT = 1.63
"""The KS test's 1 % critical value is about 1.63 / sqrt(n); the draws are seeded, so a
pass is reproducible, and a wrong law (e.g. residuals uniform on [0, E[L]]) fails by far."""


def test_a_fixed_lifetime_gives_poisson_r_l_alive_with_uniform_residuals() -> None:
    rate, life = 200 / 60, Lifetime("const", (300.0,))
    sizes, residuals = [], []
    for seed in range(40):
        pop = stationary_population(rate, life, 0.0, 1e-9, random.Random(seed))
        sizes.append(len(pop))
        residuals += [ends for _issued, ends in pop]
    mean = rate * 300.0
    # Poisson: mean r L, variance r L (40 draws: the sample mean within 4 standard errors)
    assert abs(statistics.fmean(sizes) - mean) < 4 * math.sqrt(mean / len(sizes))
    assert 0.6 * mean < statistics.variance(sizes) < 1.6 * mean
    assert all(0 <= r <= 300.0 for r in residuals)
    assert ks_statistic(residuals, lambda x: x / 300.0) < KS_1PCT / math.sqrt(len(residuals))


@pytest.mark.parametrize("life, cdf", [
    # residual density (1 - F(x)) / E[L]; its CDF for each law
    (Lifetime("exponential", (50.0,)), lambda x: 1 - math.exp(-x / 50.0)),
    (Lifetime("uniform", (100.0, 300.0)),
     lambda x: (x if x <= 100 else 100 + (x - 100) - (x - 100) ** 2 / 400) / 200),
])
def test_other_lifetimes_follow_the_equilibrium_residual_law(life: Lifetime, cdf: object) -> None:
    rng = random.Random(7)
    residuals = [draw_residual(life, rng) for _ in range(4000)]
    assert ks_statistic(residuals, cdf) < KS_1PCT / math.sqrt(len(residuals))


def test_forever_has_no_steady_state() -> None:
    with pytest.raises(ValueError, match="no steady state"):
        mean_lifetime(Lifetime())


@settings(max_examples=50, deadline=None)
@given(st.floats(0.01, 20.0), st.floats(1.0, 500.0), st.floats(0.0, 100.0),
       st.floats(0.1, 60.0), st.integers(0, 2**32))
def test_the_population_is_issued_inside_its_window_and_ends_after_issue(
        rate: float, life_s: float, start: float, window: float, seed: int) -> None:
    pop = stationary_population(rate, Lifetime("const", (life_s,)), start, window,
                                random.Random(seed))
    for issued, ends in pop:
        assert start <= issued < start + window
        assert issued < ends <= start + life_s
    again = stationary_population(rate, Lifetime("const", (life_s,)), start, window,
                                  random.Random(seed))
    assert again == pop  # deterministic per seed


def test_poisson_draws_have_the_asked_mean() -> None:
    rng = random.Random(3)
    draws = [draw_poisson(12.5, rng) for _ in range(2000)]
    assert abs(statistics.fmean(draws) - 12.5) < 4 * math.sqrt(12.5 / 2000)
    assert draw_poisson(0.0, rng) == 0


def active(subs: tuple, t: float) -> int:  # type: ignore[type-arg]
    return sum(1 for s in subs if s.t <= t < (s.until if s.until is not None else math.inf))


def test_brvst_400_starts_at_its_steady_state_and_off_is_unchanged() -> None:
    """At the window's end and later the active count is Poisson(r L) = ~1000 (not the
    ~100 a cold start has at 30 s); the arrival process's own subscriptions are the same
    with the option on or off, and the key absent is the key false."""
    off = plan_subscriptions(load_scenario(BRVST))
    assert off == plan_subscriptions(load_scenario(BRVST, ["workload.arrivals.steady_state=false"]))
    scenario = load_scenario(BRVST, [ON])
    on = plan_subscriptions(scenario)
    assert [s for s in on if not s.sub_id.startswith("i")] == list(off)
    initial = [s for s in on if s.sub_id.startswith("i")]
    arrivals = scenario.workload.arrivals
    assert arrivals is not None and arrivals.steady_state_window_s is not None
    end_of_window = arrivals.start_s + arrivals.steady_state_window_s
    assert all(arrivals.start_s <= s.t < end_of_window for s in initial)
    mean = arrivals.rate_per_s * 300.0
    for t in (end_of_window, 60.0, 150.0, 299.0):
        assert abs(active(on, t) - mean) < 4 * math.sqrt(mean), t
    assert active(off, end_of_window) < mean / 5
    # each one ends in an unsubscribe at its residual end, inside the run
    unsubs = {(u.node, u.sub_id): u.t for u in plan_unsubscriptions(scenario, on)}
    assert all(unsubs[(s.node, s.sub_id)] == s.until for s in initial)
    assert plan_subscriptions(load_scenario(BRVST, [ON])) == on  # same seed, same plan


@pytest.mark.parametrize("overrides, message", [
    (["workload.arrivals.steady_state_window_s=10.0"],
     "workload.arrivals.steady_state_window_s: only with steady_state = true"),
    ([ON, "workload.arrivals.steady_state_window_s=0.0"],
     "workload.arrivals.steady_state_window_s"),
    ([ON, "workload.arrivals.steady_state_window_s=1000.0"],
     "workload.arrivals.steady_state_window_s: start_s + 1000 s is after stop_s (900)"),
    ([ON, 'workload.arrivals.process="periodic"'],
     'workload.arrivals.steady_state: only for process = "poisson"'),
    ([ON, 'workload.arrivals.lifetime="forever"'],
     "workload.arrivals.steady_state: needs a lifetime"),
    (['workload.arrivals.steady_state="yes"'],
     "workload.arrivals.steady_state: expected true or false"),
])
def test_bad_steady_state_settings_name_the_key(overrides: list[str], message: str) -> None:
    with pytest.raises(ScenarioError) as err:
        load_scenario(BRVST, overrides)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_the_virtual_mesh_schedules_play_the_same_population() -> None:
    """Both tiers run one plan: each device's schedule subscribes its share of the
    initial population inside the window and unsubscribes it at its residual end."""
    from meshsim.scenario import make_plan
    from meshsim.workload.schedule import schedules

    scenario = load_scenario(BRVST, [ON, "scenario.duration_s=120.0", "scenario.warmup_s=60.0"])
    plan = make_plan(scenario)
    initial = {(s.node, s.sub_id): s for s in plan.subscriptions if s.sub_id.startswith("i")}
    assert len(initial) > 800
    items = [(n, i) for n, sched in schedules(plan, t0=0.0, end_s=140.0).items()
             for i in sched.items if str(i.get("sub_id", "")).startswith("i")]
    subs = {(n, i["sub_id"]): i["t"] for n, i in items if i["op"] == "sub"}
    unsubs = {(n, i["sub_id"]): i["t"] for n, i in items if i["op"] == "unsub"}
    assert subs == {k: s.t for k, s in initial.items()}
    assert unsubs == {k: s.until for k, s in initial.items()
                      if s.until is not None and s.until < scenario.end_s}
    assert max(subs.values()) < 30.0 and 0 < len(unsubs) < len(subs)
