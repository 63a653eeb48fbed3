"""What is specific to HESPER's chapter (Zheng 2008, ch. 4): figures no general metric gives.

The runs, metrics, verdicts and the page are data (experiments/hesper.sweep.toml,
experiments/hesper.claims.toml; docs/experiments.md). Two figures are not:

- Theorem 4.1's radio hops per cell hop, by Monte Carlo (TR = 1, cell side 1/sqrt 2, a
  node uniform in its cell and the next cell's broker uniform in its cell): H_h (axis
  neighbour), H_d (diagonal neighbour) and the largest stretch of (4.17),
  ``sqrt2 * hypot(H_h, H_d - H_h)`` over the path's angle;
- the same in simulation: a least-squares fit of each HESPER-I first delivery's radio
  hops on the numbers of axis and diagonal cell hops of its Algorithm 4.1 path (less the
  broker-to-subscriber hop), from the deliver records and mobility.log of a sweep's runs.

    .venv/bin/python bench/hesper_paper.py --out experiments/hesper-figures.json \
        [--sweep runs/hesper] [--samples 400000]
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

from meshsim.run_records import run_records


def monte_carlo_hops(samples: int, seed: int = 4) -> tuple[float, float, float]:
    """(H_h, H_d, largest stretch) of Theorem 4.1 with TR = 1 and s = 1/sqrt 2."""
    rng = random.Random(seed)
    s = 1 / math.sqrt(2)
    axis = diag = 0
    for _ in range(samples):
        dx, dy = rng.random() * s, rng.random() * s
        bx, by = s + rng.random() * s, rng.random() * s
        axis += (dx - bx) ** 2 + (dy - by) ** 2 <= 1.0
        by += s
        diag += (dx - bx) ** 2 + (dy - by) ** 2 <= 1.0
    h_h, h_d = 2 - axis / samples, 2 - diag / samples
    return h_h, h_d, math.sqrt(2) * math.hypot(h_h, h_d - h_h)


def _positions(rundir: Path) -> dict[int, tuple[float, float]]:
    pos: dict[int, tuple[float, float]] = {}
    for line in (rundir / "mobility.log").read_text().splitlines():
        parts = line.split()
        if len(parts) == 4 and not line.startswith("#") and float(parts[0]) == 0.0:
            pos.setdefault(int(parts[1]), (float(parts[2]), float(parts[3])))
    return pos


def cell_hop_rows(rundir: Path, tr: float, publisher: int = 1) -> list[tuple[int, int, int]]:
    """(axis cell hops, diagonal cell hops, radio hops) of every first delivery."""
    pos = _positions(rundir)
    s = tr / math.sqrt(2)
    px, py = (int(c // s) for c in pos[publisher])
    first: dict[tuple[str, int], int] = {}
    for rec in run_records(rundir, {"deliver"}):
        key = (str(rec["event_id"]), int(rec["node"]))
        if key not in first and rec.get("hop") is not None:
            first[key] = int(rec["hop"])
    rows = []
    for (_, node), hop in first.items():
        gx, gy = (int(c // s) for c in pos[node])
        dx, dy = abs(gx - px), abs(gy - py)
        if (dx, dy) != (0, 0):
            rows.append((abs(dx - dy), min(dx, dy), hop))
    return rows


def fit(rows: list[tuple[int, int, int]]) -> tuple[float, float]:
    """Least squares hop - 1 ~ a * axis + b * diagonal (the 1 is the SHB -> subscriber hop)."""
    sxx = sxy = syy = sxh = syh = 0.0
    for ax, dg, hop in rows:
        y = hop - 1.0
        sxx += ax * ax
        sxy += ax * dg
        syy += dg * dg
        sxh += ax * y
        syh += dg * y
    det = sxx * syy - sxy * sxy
    if det == 0:
        return math.nan, math.nan
    return (sxh * syy - syh * sxy) / det, (syh * sxx - sxh * sxy) / det


def sweep_fits(sweep: Path) -> dict[str, dict[str, Any]]:
    """H axis / H diagonal per network size, over every HESPER-I run of a sweep."""
    from mesheval.stats import mean_ci

    doc = json.loads((sweep / "sweep.json").read_text())
    by_size: dict[tuple[Any, Any], list[tuple[float, float]]] = defaultdict(list)
    for p in doc["points"]:
        v = p["values"]
        if p["status"] not in ("done", "kept") or v.get("protocol") != "HESPER-I" \
                or "nodes" not in v:  # Table 4.1's block only (not the voids fields)
            continue
        rows = cell_hop_rows(sweep / p["rundir"], float(v["TR"]))
        if len(rows) > 10:
            by_size[(v["nodes"], v["TR"])].append(fit(rows))
    out: dict[str, dict[str, Any]] = {}
    for (nodes, tr), fits in sorted(by_size.items()):
        for i, name in enumerate(("axis", "diagonal")):
            ci = mean_ci([f[i] for f in fits if math.isfinite(f[i])])
            out[f"H_{name}_sim_{nodes}_tr{tr}"] = {
                "value": ci.mean, "half_width": ci.half_width, "n": ci.n,
                "label": f"radio hops per {name} cell hop, HESPER-I runs, {nodes} nodes, "
                         f"TR {tr} m (least squares per run, mean over runs)"}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--samples", type=int, default=400_000)
    ap.add_argument("--sweep", type=Path, help="a sweep directory: fit its HESPER-I runs")
    args = ap.parse_args(argv)
    h_h, h_d, stretch = monte_carlo_hops(args.samples)
    n = args.samples
    figures: dict[str, dict[str, Any]] = {
        "H_h": {"value": h_h, "n": n, "label": "Theorem 4.1: radio hops per axis cell hop "
                                               "(Monte Carlo)"},
        "H_d": {"value": h_d, "n": n, "label": "Theorem 4.1: radio hops per diagonal cell "
                                               "hop (Monte Carlo)"},
        "stretch_bound": {"value": stretch, "n": n,
                          "label": "(4.17): largest hops / ideal over the path's angle"},
    }
    if args.sweep is not None:
        figures.update(sweep_fits(args.sweep))
    cmd = "bench/hesper_paper.py" + (f" --sweep {args.sweep}" if args.sweep else "")
    args.out.write_text(json.dumps({"command": cmd, "figures": figures}, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
