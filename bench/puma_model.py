"""PUMA and paging in the Table 5.1 set-up (Zheng 2008, §5.4): the cost model beside the thesis.

Prints, for I_event = 2..7 and th = 40..100 %, PUMA's average system message
cost per delivered event under two counting rules (docs/protocols/puma.md):

- ``protocol``: what the implementation sends (trees rooted at the previous
  broker, the reply relayed back to it, a client at home handed the event
  directly), computed exactly from the walk's distribution;
- ``thesis``: trees rooted at the last reply's cell, no relay, no direct
  hand-over: the reading under which the thesis's I_event = 2, 3 minima
  come out;

then paging's costs (Monte Carlo of the literal §5.4.1 rules), PUMA's best
as a share of paging's, and the client costs. ``--sim RUNS`` also runs the
real protocols in the simulator (``puma_table51``: one simulation of RUNS
clients per point, a few seconds each) at the thesis's optimal th and prints
their measured costs beside the model.

    .venv/bin/python bench/puma_model.py [--paging-runs 4000] [--sim 0]
"""

from __future__ import annotations

import argparse
import math
import sys

from meshsub.protocols.puma.analysis import (
    DIST_VALUES,
    TH_VALUES,
    THESIS_ALD_COST,
    THESIS_BEST_TH,
    THESIS_CLIENT_ADVANTAGE,
    THESIS_MIN_COST,
    THESIS_SHARE_OF_PAGING,
    PagingModel,
    Setup,
    puma_expected,
)

INTERVALS = (2, 3, 4, 5, 6, 7)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--paging-runs", type=int, default=4000)
    ap.add_argument("--sim", type=int, default=0, help="simulated runs per point (0: none)")
    args = ap.parse_args(argv)
    setup = Setup()
    rules = {"protocol": {}, "thesis": {"anchor": "last", "relay": False, "direct": False}}
    best: dict[str, dict[int, tuple[float, float]]] = {r: {} for r in rules}
    for rule, kw in rules.items():
        print(f"\nPUMA system cost per event, counting '{rule}' (rows I_event, columns th)")
        print("I   " + " ".join(f"{int(th * 100):>6}%" for th in TH_VALUES)
              + "    min  at th | thesis min  at th")
        for interval in INTERVALS:
            costs = {th: puma_expected(setup, interval, th, **kw).system  # type: ignore[arg-type]
                     for th in TH_VALUES}
            th_best = min(costs, key=lambda th: (round(costs[th], 9), th))
            best[rule][interval] = (costs[th_best], th_best)
            print(f"{interval:<3} " + " ".join(f"{costs[th]:7.1f}" for th in TH_VALUES)
                  + f"  {costs[th_best]:5.1f}  {int(th_best * 100):>4}% |"
                  f"   {THESIS_MIN_COST[interval]:5.1f}   {int(THESIS_BEST_TH[interval] * 100)}%")
        ald = [puma_expected(setup, i, 1.0, **kw).system for i in (2, 7)]  # type: ignore[arg-type]
        print(f"th = 100 %: {ald[0]:.1f} at I_event 2 -> {ald[1]:.1f} at 7 "
              f"(thesis {THESIS_ALD_COST[2]:.0f} -> {THESIS_ALD_COST[7]:.0f})")

    print(f"\npaging ({args.paging_runs} runs per point, report at >= dist): system / client")
    print("I   " + " ".join(f"   dist {d}   " for d in DIST_VALUES))
    paging: dict[int, dict[int, tuple[float, float]]] = {}
    for interval in INTERVALS:
        row = {}
        for d in DIST_VALUES:
            c = PagingModel(setup, d).costs(interval, args.paging_runs, seed=interval * 100 + d)
            row[d] = (c.system, c.client)
        paging[interval] = row
        print(f"{interval:<3} " + " ".join(f"{s:6.1f}/{c:5.2f} " for s, c in row.values()))

    print("\nPUMA's best as a share of paging's cost, and the client advantage")
    print("I   share (protocol rule; paging dist 2 | paging best) | thesis share | "
          "client advantage at dist 2 | thesis")
    for interval in INTERVALS:
        puma_best = best["protocol"][interval][0]
        at2 = paging[interval][2][0]
        paging_best = min(s for s, _c in paging[interval].values())
        client_adv = 1.0 - 1.0 / paging[interval][2][1]
        print(f"{interval:<3} {puma_best / at2:6.2f} | {puma_best / paging_best:6.2f}"
              f"                              | {THESIS_SHARE_OF_PAGING[interval]:.2f}        | "
              f"{client_adv:+.2f}                       | {THESIS_CLIENT_ADVANTAGE[interval]:.2f}")
    print("(a negative advantage: paging's client sends fewer messages per event than "
          "PUMA's one)")
    if args.sim:
        simulate(args.sim)
    return 0


def simulate(runs: int) -> None:
    """The real protocols in the simulator at the thesis's optimal th, beside the model."""
    from puma_table51 import Batch
    from puma_table51 import simulate as run_batch

    setup = Setup()
    print(f"\nthe protocols in the simulator, {runs} runs (clients of one simulation) per "
          "point (mean +- 2 SE)")
    for interval in INTERVALS:
        th = THESIS_BEST_TH[interval]
        clients = run_batch(Batch("puma", interval, runs, interval, (("th", th),))).clients
        mean, err = _ratio([(c.system, c.delivered) for c in clients.values()])
        delivered = sum(c.delivered for c in clients.values())
        events = sum(c.events for c in clients.values())
        client = sum(c.client for c in clients.values()) / max(1, delivered)
        model = puma_expected(setup, interval, th).system
        print(f"PUMA   I_event {interval} th {int(th * 100)}%: {mean:6.2f} +- {2 * err:4.2f} "
              f"(model {model:6.2f}); client {client:.3f}; delivered {delivered}/{events}")
    for interval in INTERVALS:
        clients = run_batch(Batch("paging", interval, runs, interval, (("dist", 2),))).clients
        mean, err = _ratio([(c.system, c.delivered) for c in clients.values()])
        delivered = sum(c.delivered for c in clients.values())
        client = sum(c.client for c in clients.values()) / max(1, delivered)
        model = PagingModel(setup, 2).costs(interval, 4000, seed=interval)
        print(f"paging I_event {interval} dist 2: {mean:6.2f} +- {2 * err:4.2f} "
              f"(model {model.system:6.2f}); client {client:.3f} "
              f"(model {model.client:.3f})")


def _ratio(per_run: list[tuple[int, int]]) -> tuple[float, float]:
    n = len(per_run)
    ms = sum(s for s, _ in per_run) / n
    md = sum(d for _, d in per_run) / n
    r = ms / md
    var = sum((s - r * d) ** 2 for s, d in per_run) / max(1, n - 1)
    return r, math.sqrt(var / n) / md


if __name__ == "__main__":
    sys.exit(main())
