"""PUMA against paging in the thesis's Table 5.1 set-up (Zheng 2008, §5.4): docs/results/puma.md.

One command regenerates the page:

    .venv/bin/python bench/puma_experiments.py --quick    # 4 seeds x 6 runs per point
    .venv/bin/python bench/puma_experiments.py            # 10 seeds x 40 runs per point

Set-up (Table 5.1): a 25 x 25 grid of base stations, one client subscribing at
the centre cell (its previous broker) and walking one cell per time unit for
12 units (the renormalised walk at the border), an event every I_event units
published at the previous broker; system cost = every last-mile message
(delivery trees, hand-overs, replies and their relay, paging reports and
pages) per delivered event, client cost = the client's messages per
delivered event (§5.4.1's definitions).

Figures:

- **model** (``meshsub.protocols.puma.analysis``): the exact expectation of
  the cost over the walk for th = 40..100 %, under the protocol's counting
  (trees rooted at the previous broker, reply relayed back, direct hand-over
  at home) and under the reading that reproduces the thesis's I_event = 2, 3
  minima (docs/protocols/puma.md); it picks the best th;
- **measured**: the real PUMA and paging protocols driven through the test
  harness (tests/protocol/table51.py: the same code meshsubd runs), at the
  model's best th, at th = 100 %, and paging at dist = 2 (its best in the
  thesis); mean and 95 % interval over seeds (each seed a batch of runs);
- **optimum**: a previous broker that knows the client's cell sends the event
  down the shortest path and gets the reply back over it: 2 d + 2 messages
  (2 at home), d the client's distance from the previous broker, in exact
  expectation over the walk. PUMA's ratio to it is printed per I_event.

Each verdict is computed from these figures by the rule printed beside it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from meshsub.core.grid import manhattan
from meshsub.core.lattice import walk_distribution
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
from paper_verdicts import Estimate, Verdict, estimate, machine_note, verdict_table, within

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "docs" / "results" / "puma.md"
INTERVALS = (2, 3, 4, 5, 6, 7)
REL_COST = 0.25
"""Tolerance on a cost the thesis prints: within 25 % of it."""
ABS_TH = 0.1
ABS_SHARE = 0.10


def oracle_cost(setup: Setup, interval: int) -> float:
    """Expected messages per event for a broker that knows the client's cell."""
    times = setup.event_times(interval)
    total = 0.0
    for t in times:
        for cell, p in walk_distribution(setup.centre, t, setup.lattice).items():
            total += p * (2 + 2 * manhattan(cell, setup.centre))
    return total / len(times)


def measure(cls_name: str, seeds: int, runs: int, interval: int, **params: object
            ) -> tuple[Estimate, Estimate, Estimate]:
    """(system cost, client cost, delivery ratio) over seeds, through the harness."""
    sys.path.insert(0, str(ROOT / "tests" / "protocol"))
    from table51 import Table51  # the harness driver of tests/protocol/test_puma_costs.py

    from meshsub.protocols.puma import Paging, Puma

    cls = Puma if cls_name == "puma" else Paging
    driver = _drivers.get((cls_name, tuple(sorted(params.items()))))
    if driver is None:
        driver = _drivers[(cls_name, tuple(sorted(params.items())))] = Table51(cls, **params)
    system, client, ratio = [], [], []
    for seed in range(1, seeds + 1):
        totals = driver.run(interval, runs, seed=1000 * interval + seed)
        delivered = max(1, totals.delivered)
        system.append(totals.system / delivered)
        client.append(totals.client / delivered)
        ratio.append(totals.delivered / max(1, totals.events))
    return estimate(system), estimate(client), estimate(ratio)


_drivers: dict[tuple[str, tuple[tuple[str, object], ...]], object] = {}


def differences(model: dict[str, dict[int, dict[float, float]]], best_th: dict[int, float],
                puma_best: dict[int, tuple[Estimate, Estimate, Estimate]],
                paging2: dict[int, tuple[Estimate, Estimate, Estimate]],
                oracle: dict[int, float]) -> list[str]:
    """Why the figures differ from the thesis, with this run's numbers."""
    proto = {i: min(model["protocol"][i].values()) for i in INTERVALS}
    thesis_rule = {i: min(model["thesis"][i].values()) for i in INTERVALS}
    exact = [i for i in INTERVALS if abs(thesis_rule[i] - THESIS_MIN_COST[i]) < 0.05]
    implied = {i: THESIS_MIN_COST[i] / THESIS_SHARE_OF_PAGING[i] for i in INTERVALS}

    def row(values: dict[int, float]) -> str:
        return " / ".join(f"{values[i]:.1f}" for i in INTERVALS)

    return [
        "## Why the figures differ from the thesis", "",
        "- **Counting.** The thesis gives no cost formula (§5.4.1). Counted as the protocol",
        "  sends (trees rooted at the previous broker, the reply relayed back to it, a direct",
        "  hand-over at home), the model's minima for I_event = 2..7 are "
        f"{row(proto)}; counted from",
        "  the last reply's cell without the relay or the hand-over they are "
        f"{row(thesis_rule)}",
        f"  (thesis {' / '.join(str(THESIS_MIN_COST[i]) for i in INTERVALS)}): "
        + (f"equal to the thesis at I_event = {', '.join(map(str, exact))}."
           if exact else "equal to the thesis at no interval."),
        "  The measured PUMA column is the protocol itself, so it follows the first counting;",
        "  the best th moves with the counting (here "
        + " / ".join(f"{best_th[i]:.0%}" for i in INTERVALS) + ").",
        "- **Paging.** Under the literal §5.4.1 rules paging at dist 2 costs "
        + " / ".join(f"{paging2[i][0].mean:.1f}" for i in INTERVALS) + " messages per",
        "  event; the thesis's shares imply paging costs of "
        + " / ".join(f"{implied[i]:.1f}" for i in INTERVALS) + " (its PUMA minimum",
        "  divided by its share). The thesis's paging counted more than its text describes,",
        "  so the shares, and the headline saving that rests on them, cannot be reproduced",
        "  from the text (docs/protocols/paging.md). PUMA / paging here: "
        + " / ".join(f"{puma_best[i][0].mean / paging2[i][0].mean:.2f}" for i in INTERVALS)
        + ".",
        "- **The optimum** (not in the thesis) is a previous broker that knows the client's",
        "  cell: the shortest path down and the reply back. The longer the client walks",
        "  between events, the wider the predicted set PUMA must cover: PUMA / optimum is "
        + " / ".join(f"{puma_best[i][0].mean / oracle[i]:.2f}" for i in INTERVALS) + ".",
    ]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="4 seeds x 6 runs per point")
    ap.add_argument("--seeds", type=int, default=0)
    ap.add_argument("--runs", type=int, default=0, help="runs per seed")
    ap.add_argument("--paging-model-runs", type=int, default=0)
    ap.add_argument("--out", type=Path, default=PAGE)
    args = ap.parse_args(argv)
    seeds = args.seeds or (4 if args.quick else 10)
    runs = args.runs or (6 if args.quick else 40)
    pm_runs = args.paging_model_runs or (1000 if args.quick else 4000)
    started = time.monotonic()
    setup = Setup()
    thesis_rule = {"anchor": "last", "relay": False, "direct": False}

    model: dict[str, dict[int, dict[float, float]]] = {"protocol": {}, "thesis": {}}
    for interval in INTERVALS:
        model["protocol"][interval] = {th: puma_expected(setup, interval, th).system
                                       for th in TH_VALUES}
        model["thesis"][interval] = {
            th: puma_expected(setup, interval, th, **thesis_rule).system  # type: ignore[arg-type]
            for th in TH_VALUES}
    best_th = {i: min(TH_VALUES, key=lambda th, i=i: (round(model["protocol"][i][th], 9), th))
               for i in INTERVALS}

    puma_best, puma_ald, paging2 = {}, {}, {}
    for interval in INTERVALS:
        print(f"I_event {interval}: PUMA at th {best_th[interval]:.0%}, th 100 %, paging",
              flush=True)
        puma_best[interval] = measure("puma", seeds, runs, interval, th=best_th[interval],
                                      ack_timeout_s=0.2)
        puma_ald[interval] = measure("puma", seeds, runs, interval, th=1.0, ack_timeout_s=0.2)
        paging2[interval] = measure("paging", seeds, runs, interval, dist=2)
    paging_model = {i: {d: PagingModel(setup, d).costs(i, pm_runs, seed=i * 100 + d)
                        for d in DIST_VALUES} for i in INTERVALS}
    oracle = {i: oracle_cost(setup, i) for i in INTERVALS}
    elapsed = time.monotonic() - started

    verdicts: list[Verdict] = []
    for i in INTERVALS:
        m = puma_best[i][0]
        verdicts.append(Verdict(
            f"minimum system cost, I_event = {i}", f"{THESIS_MIN_COST[i]}",
            f"{m.fmt()} (th {best_th[i]:.0%})",
            f"mean within {REL_COST:.0%} of the thesis", within(m.mean, THESIS_MIN_COST[i],
                                                                 REL_COST)))
    for i in INTERVALS:
        verdicts.append(Verdict(
            f"optimal th, I_event = {i}", f"{THESIS_BEST_TH[i]:.0%}", f"{best_th[i]:.0%} (model)",
            f"within {ABS_TH:.0%} (one step of the th grid)",
            abs(best_th[i] - THESIS_BEST_TH[i]) <= ABS_TH + 1e-9))
    client = [puma_best[i][1] for i in INTERVALS] + [puma_ald[i][1] for i in INTERVALS]
    verdicts.append(Verdict(
        "client message cost exactly 1 per event", "1",
        f"{min(c.mean for c in client):.3f} .. {max(c.mean for c in client):.3f}",
        "every point's mean equals 1 (no tolerance)",
        all(abs(c.mean - 1.0) < 1e-12 and c.half < 1e-12 for c in client)))
    a2, a7 = puma_ald[2][0], puma_ald[7][0]
    verdicts.append(Verdict(
        "cost at th = 100 % climbs from I_event 2 to 7",
        f"{THESIS_ALD_COST[2]:.0f} -> {THESIS_ALD_COST[7]:.0f}", f"{a2.fmt()} -> {a7.fmt()}",
        f"both ends within {REL_COST:.0%} of the thesis",
        within(a2.mean, THESIS_ALD_COST[2], REL_COST)
        and within(a7.mean, THESIS_ALD_COST[7], REL_COST)))
    verdicts.append(Verdict(
        "cost at th = 100 % grows with I_event", "grows", f"{a2.mean:.1f} -> {a7.mean:.1f}",
        "mean at 7 above mean at 2 beyond both intervals", a7.mean - a7.half > a2.mean + a2.half))
    for i in INTERVALS:
        share = puma_best[i][0].mean / paging2[i][0].mean
        verdicts.append(Verdict(
            f"PUMA's best as a share of paging's, I_event = {i}",
            f"{THESIS_SHARE_OF_PAGING[i]:.0%}", f"{share:.0%} (paging dist 2)",
            f"within {ABS_SHARE * 100:.0f} points", abs(share - THESIS_SHARE_OF_PAGING[i])
            <= ABS_SHARE))
    saved2 = 1 - puma_best[2][0].mean / paging2[2][0].mean
    verdicts.append(Verdict(
        "headline: about 80 % of paging's system cost saved at I_event = 2 (erratum P4: "
        "not 'up to 91 %')", "≈ 80 %", f"{saved2:.0%}", "saving >= 70 %", saved2 >= 0.70))
    for i in INTERVALS:
        adv = 1 - 1 / paging2[i][1].mean if paging2[i][1].mean > 0 else float("-inf")
        verdicts.append(Verdict(
            f"client cost advantage over paging, I_event = {i}",
            f"{THESIS_CLIENT_ADVANTAGE[i]:.0%}", f"{adv:+.0%} (paging client "
            f"{paging2[i][1].fmt(2)})", "PUMA's client sends fewer messages (advantage > 0)",
            adv > 0))
    verdicts.append(Verdict(
        "ratio to the optimum", "not given", "see the table below", "no claim to test", None))

    command = " ".join(["bench/puma_experiments.py", *(argv if argv is not None
                                                      else sys.argv[1:])])
    lines = [
        "# PUMA against paging (Zheng 2008, §5.4)", "",
        "<!-- generated by bench/puma_experiments.py: edit the script, not this page -->", "",
        f"Generated by `.venv/bin/python {command}`: {seeds} seeds x {runs} runs per point, "
        f"paging model {pm_runs} runs per point; {elapsed:.0f} s; {machine_note()}.",
        "Set-up, counting rules and the optimum are described in the script's docstring and",
        "docs/protocols/puma.md. Intervals are 95 % Student-t over seeds.", "",
        "## Verdicts", "", *verdict_table(verdicts), "",
        "The defensible headline is the saving at I_event = 2 (about 80 % in the thesis): the",
        "\"up to over 90 %\" of §1.4/§5.5 misreads PUMA's cost being 91 % *of* paging's at",
        "I_event = 7 (erratum P4).", "",
        "## Measured (the protocols through the harness)", "",
        "| I_event | th (model best) | PUMA system | PUMA client | delivered | th 100 % system "
        "| paging dist 2 system | paging client | optimum (exact) | PUMA / optimum |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i in INTERVALS:
        s, c, d = puma_best[i]
        lines.append(
            f"| {i} | {best_th[i]:.0%} | {s.fmt()} | {c.fmt(2)} | {d.fmt(3)} | "
            f"{puma_ald[i][0].fmt()} | {paging2[i][0].fmt()} | {paging2[i][1].fmt(2)} | "
            f"{oracle[i]:.2f} | {s.mean / oracle[i]:.2f} |")
    lines += ["", "## Model: expected system cost by th (exact)", "",
              "| counting | I_event | " + " | ".join(f"{th:.0%}" for th in TH_VALUES)
              + " | thesis min (th) |", "|---|---|" + "---|" * len(TH_VALUES) + "---|"]
    for rule in ("protocol", "thesis"):
        for i in INTERVALS:
            lines.append(f"| {rule} | {i} | " + " | ".join(
                f"{model[rule][i][th]:.1f}" for th in TH_VALUES)
                + f" | {THESIS_MIN_COST[i]} ({THESIS_BEST_TH[i]:.0%}) |")
    lines += ["", "## Paging model by dist (literal §5.4.1 rules, Monte Carlo)", "",
              "| I_event | " + " | ".join(f"dist {d}" for d in DIST_VALUES) + " |",
              "|---|" + "---|" * len(DIST_VALUES)]
    for i in INTERVALS:
        lines.append(f"| {i} | " + " | ".join(
            f"{paging_model[i][d].system:.1f} / {paging_model[i][d].client:.2f}"
            for d in DIST_VALUES) + " |")
    lines += ["", "(system / client cost per delivered event)", "",
              *differences(model, best_th, puma_best, paging2, oracle), ""]
    args.out.write_text("\n".join(lines))
    print("\n".join(verdict_table(verdicts)))
    print(f"written {args.out} ({elapsed:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
