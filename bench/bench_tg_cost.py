"""CPU seconds per simulated second of TG and ST at Table 2's 500 nodes, before and after.

The recipe's runs (bench/tg_experiments.py, docs/results/tg.md) cost about a CPU second
per simulated second, and issue 19's sweeps need hours of them. This script measures
what one run costs with the code of a git revision (``--before``: by default main
before the simulator's shared decoding and caches) and with this checkout's, in fresh
processes taking turns (``--rounds``): each run built exactly as the recipe builds it
(``tg_experiments.simulate``: tg-500.toml at Table 2's density and publication rate,
2 m/s, 10 s pauses), shortened to ``--warmup`` + ``--measured`` seconds. The figure
is the CPU time of the run's process (``time.process_time``, so that waiting for a
shared CPU does not count) over the simulated seconds; the medians per scheme and
code are compared. Both codes must write the same node files (the speed-up changes no
behaviour): the script says whether they did.

    nice -n 19 python bench/bench_tg_cost.py [--before REV] [--rounds 3] [--nodes 500]
                                             [--warmup 8] [--measured 4] [--schemes TG,ST]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_sim import export, load

BEFORE = "0995520"
"""main before issue 19's speed-up (shared decoding, shared key masks and caches)."""
BENCH = Path(__file__).resolve().parent


def measure(scheme: str, nodes: int, warmup: float, measured: float, seed: int,
            out: Path) -> None:
    """One run into ``out`` with whichever ``meshsub``/``meshsim`` this process imports;
    its cost as a JSON line (the caller digests the run with its own code)."""
    import meshsim.des.run  # noqa: F401  (imports are not the run's cost)
    import tg_experiments as tx
    from meshsub.core.registry import load_registry

    load_registry()  # every protocol imported, as a sweep's worker has after its first run
    preset = tx.Preset("cost", nodes, warmup, measured, 1, drain_s=0.0)
    cpu = time.process_time()
    rundir, wall = tx.simulate(tx.Point(scheme, seed, preset), out, reuse=False)
    cpu = time.process_time() - cpu
    print(json.dumps({"cpu_s": cpu, "wall_s": wall, "sim_s": warmup + measured,
                      "rundir": str(rundir)}))


def measured(tree: Path | None, args: argparse.Namespace, scheme: str) -> dict[str, Any]:
    """``measure`` in a fresh process, with ``tree``'s code (None: this checkout's);
    the run digested here, with this checkout's code."""
    from meshsim.telemetry_files import node_files_digest

    env = dict(os.environ, PYTHONHASHSEED="0")
    if tree is not None:
        env["PYTHONPATH"] = f"{tree / 'daemon'}{os.pathsep}{tree / 'firmware-sim'}"
    with tempfile.TemporaryDirectory(prefix="msub-tgcost-") as out:
        done = subprocess.run(
            [sys.executable, str(Path(__file__).resolve()), "--measure", scheme,
             "--nodes", str(args.nodes), "--warmup", str(args.warmup),
             "--measured", str(args.measured), "--seed", str(args.seed), "--out", out],
            env=env, capture_output=True, text=True, check=True, cwd=BENCH)
        result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
        result["lines"], result["digest"] = node_files_digest(Path(result["rundir"]))
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--before", default=BEFORE, help=f"git revision (default {BEFORE})")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--nodes", type=int, default=500)
    ap.add_argument("--warmup", type=float, default=8.0)
    ap.add_argument("--measured", type=float, default=4.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--schemes", default="TG,ST", help="of tg_experiments.SCHEMES")
    ap.add_argument("--measure", help=argparse.SUPPRESS)
    ap.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.rounds < 1 or args.nodes < 2 or args.warmup < 0 or args.measured <= 0:
        print("bench_tg_cost: bad --rounds, --nodes, --warmup or --measured", file=sys.stderr)
        return 2
    if args.measure:
        measure(args.measure, args.nodes, args.warmup, args.measured, args.seed, args.out)
        return 0
    schemes = [s.strip() for s in args.schemes.split(",") if s.strip()]
    print(f"load before: {load()}")
    print(f"{args.nodes} nodes, {args.warmup:g} s + {args.measured:g} s, seed {args.seed}, "
          f"{args.rounds} rounds; {args.before} and this checkout taking turns", flush=True)
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="msub-tgcost-") as tmp:
        tree = export(args.before, Path(tmp))
        for rnd in range(1, args.rounds + 1):
            for scheme in schemes:
                for name, code in ((args.before, tree), ("this checkout", None)):
                    r = measured(code, args, scheme)
                    runs.setdefault((scheme, name), []).append(r)
                    print(f"round {rnd} {scheme} {name}: {r['cpu_s'] / r['sim_s']:.3f} CPU s "
                          f"per simulated s ({r['cpu_s']:.1f} CPU s, {r['wall_s']:.0f} s "
                          f"wall), {r['lines']:,} lines", flush=True)
    for scheme in schemes:
        before = [r["cpu_s"] / r["sim_s"] for r in runs[(scheme, args.before)]]
        after = [r["cpu_s"] / r["sim_s"] for r in runs[(scheme, "this checkout")]]
        same = len({(r["lines"], r["digest"]) for name in (args.before, "this checkout")
                    for r in runs[(scheme, name)]}) == 1
        b, a = statistics.median(before), statistics.median(after)
        print(f"{scheme}: median {b:.3f} -> {a:.3f} CPU s per simulated s ({a / b - 1:+.0%}; "
              f"{args.before}: {', '.join(f'{v:.3f}' for v in before)}; this checkout: "
              f"{', '.join(f'{v:.3f}' for v in after)}); same node files: "
              f"{'yes' if same else 'NO'}")
    print(f"load after: {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
