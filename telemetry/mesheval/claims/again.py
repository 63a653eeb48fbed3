"""``mesheval page CLAIMS.toml EVALDIR``: a results page judged again from an evaluation's
metrics.json, without Spark.

Evaluating a whole sweep is the expensive step (B-SUB's 285 runs took 44 minutes on a
shared two-core machine), while the claims file (a tolerance, an explanation of a
difference, the page's command) and a paper-specific script's figures change far more
often than the runs. The verdicts depend only on metrics.json's groups and those figures,
so they can be judged again in seconds. The page's plan line still tells which points the
figures stand on: a point of the sweep counts as evaluated only if its run directory is
among the evaluation's inputs (``inputs`` in metrics.json).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mesheval.claims.page import write_page
from mesheval.claims.spec import ClaimsError
from mesheval.cli import OneLineParser
from mesheval.sweep import MANIFEST, mark_not_evaluated


class PageInputError(Exception):
    """An evaluation directory or sweep manifest that cannot be judged again (one line)."""


def page_parser() -> argparse.ArgumentParser:
    p = OneLineParser(
        prog="mesheval page",
        description="Write a claims file's results page again from an earlier evaluation "
                    "(its metrics.json), without Spark: after editing the claims file or "
                    "a paper-specific script's figures.")
    p.add_argument("claims", type=Path, metavar="CLAIMS.toml")
    p.add_argument("evaldir", type=Path, metavar="EVALDIR",
                   help="the evaluation's output (metrics.json; for a sweep DIR/eval); "
                        "claims.json is written beside it")
    p.add_argument("--sweep", type=Path, metavar="DIR",
                   help="the sweep the evaluation read (default: EVALDIR's parent if it "
                        f"holds {MANIFEST})")
    return p


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PageInputError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise PageInputError(f"{path}: not JSON: {exc}") from None


def read_metrics(evaldir: Path) -> dict[str, Any]:
    path = evaldir / "metrics.json"
    doc = _read_json(path)
    if not isinstance(doc, dict) or doc.get("tool") != "mesheval" \
            or not isinstance(doc.get("groups"), list):
        raise PageInputError(f"{path}: not a mesheval metrics document (no tool = mesheval "
                             "with a list of groups)")
    return doc


def evaluated_part(sweep_dir: Path, doc: Mapping[str, Any]) -> dict[str, Any]:
    """The sweep manifest with every finished point the evaluation did not read marked
    ``not evaluated``, as ``mesheval DIR --only/--seeds`` marks them. A point's run
    directory (``runs/ID``) is matched against the end of each input path, so the
    evaluation may have been run from any working directory."""
    path = sweep_dir / MANIFEST
    sweep = _read_json(path)
    if not isinstance(sweep, dict) or not isinstance(sweep.get("points"), list):
        raise PageInputError(f"{path}: no list of points")
    inputs = [Path(str(i)).parts for i in doc.get("inputs") or []]

    def read(point: Mapping[str, Any]) -> bool:
        parts = Path(str(point.get("rundir") or "")).parts
        return bool(parts) and any(i[-len(parts):] == parts for i in inputs)

    return mark_not_evaluated(sweep, read)


def page_main(argv: Sequence[str]) -> int:
    args = page_parser().parse_args(argv)
    try:
        doc = read_metrics(args.evaldir)
        sweep_dir = args.sweep
        if sweep_dir is None and (args.evaldir.resolve().parent / MANIFEST).is_file():
            sweep_dir = args.evaldir.resolve().parent
        sweep = evaluated_part(sweep_dir, doc) if sweep_dir is not None else None
        page = write_page(args.claims, doc, args.evaldir, sweep)
    except (PageInputError, ClaimsError) as exc:
        print(f"mesheval page: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # the page or its plots cannot be written
        print(f"mesheval page: error: {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    print(f"results page: {page}")
    return 0
