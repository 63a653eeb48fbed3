"""Table 5.1 through the real protocols (harness) against the cost model they should match.

The model (``meshsub.protocols.puma.analysis``) states the counting rules and
computes the exact expectation; a few dozen harness runs of the protocols
must agree with it within their sampling error, and PUMA's client must send
exactly one message per delivered event (§5.4.2).
"""

from __future__ import annotations

import math

import pytest
from table51 import Table51, Totals

from meshsub.protocols.puma import Paging, Puma
from meshsub.protocols.puma.analysis import PagingModel, Setup, puma_expected


def ratio_and_error(t: Totals) -> tuple[float, float]:
    """Messages per delivered event and its standard error (ratio estimator over runs)."""
    assert t.per_run is not None
    n = len(t.per_run)
    mean_s = sum(s for s, _d in t.per_run) / n
    mean_d = sum(d for _s, d in t.per_run) / n
    r = mean_s / mean_d
    var = sum((s - r * d) ** 2 for s, d in t.per_run) / (n - 1)
    return r, math.sqrt(var / n) / mean_d


@pytest.mark.slow
def test_puma_matches_its_cost_model_and_the_client_sends_one_message_per_event() -> None:
    runs = 24
    totals = Table51(Puma, th=0.6, ack_timeout_s=0.2).run(3, runs, seed=3)
    assert totals.delivered == totals.events == 4 * runs  # reliable under the model
    assert totals.client == totals.delivered  # exactly one reply per event
    cost, err = ratio_and_error(totals)
    expected = puma_expected(Setup(), 3, 0.6).system
    assert abs(cost - expected) <= 3 * err + 0.05, (cost, err, expected)


@pytest.mark.slow
def test_paging_matches_its_cost_model() -> None:
    runs = 24
    totals = Table51(Paging, dist=2).run(2, runs, seed=5)
    assert totals.delivered == totals.events == 6 * runs
    cost, err = ratio_and_error(totals)
    model = PagingModel(Setup(), 2).costs(2, 4000, seed=1)
    assert abs(cost - model.system) <= 3 * err + 0.1, (cost, err, model.system)
