"""``python -m meshsim.traces``: generate a social contact trace, or describe one.

    python -m meshsim.traces generate haggle --seed 1 [--days 1] [--first-id 0] --out t.one
    python -m meshsim.traces stats t.one

Bad arguments or files are one line on stderr and exit status 2.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from meshsim.scenario.reader import ScenarioError
from meshsim.traces.one import read_one, write_one
from meshsim.traces.social import PRESETS, TraceModelError, generate, preset
from meshsim.traces.stats import trace_stats


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m meshsim.traces")
    sub = parser.add_subparsers(dest="command", required=True)
    gen = sub.add_parser("generate", help="write a generated trace in the ONE format")
    gen.add_argument("preset", choices=sorted(PRESETS))
    gen.add_argument("--seed", type=int, default=1)
    gen.add_argument("--days", type=float)
    gen.add_argument("--contacts", type=int)
    gen.add_argument("--first-id", type=int, default=0)
    gen.add_argument("--out", type=Path, required=True)
    st = sub.add_parser("stats", help="statistics of a ONE connection trace")
    st.add_argument("trace", type=Path)
    args = parser.parse_args(argv)
    try:
        if args.command == "generate":
            overrides: dict[str, float | int] = {}
            if args.days is not None:
                overrides["days"] = args.days
            if args.contacts is not None:
                overrides["contacts"] = args.contacts
            model = preset(args.preset, **overrides)
            contacts = generate(model, seed=args.seed, first_id=args.first_id)
            with args.out.open("w", encoding="utf-8") as fh:
                write_one(contacts, fh, header=f"meshsim.traces {args.preset} seed={args.seed}")
            print("\n".join(trace_stats(contacts, model.nodes).lines()))
        else:
            print("\n".join(trace_stats(read_one(args.trace)).lines()))
    except (TraceModelError, ScenarioError) as exc:
        print(f"meshsim.traces: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:
        print(f"meshsim.traces: {exc.filename}: {exc.strerror}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
