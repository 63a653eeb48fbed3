"""A ``meshsim sweep`` directory as mesheval's input: its finished runs, one report.

``DIR/sweep.json`` (written by the sweep runner) lists every point with its status and
run directory; the finished ones (``done`` or ``kept``) are evaluated together, each run
grouped by the values the sweep varied (the manifests' ``varied``), so the report has one
configuration per combination and one column per axis. The sweep's ``evaluate`` section
supplies defaults for the evaluation (``message_bits``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MANIFEST = "sweep.json"


class SweepInputError(ValueError):
    pass


@dataclass(frozen=True)
class SweepInput:
    directory: Path
    rundirs: list[Path]
    message_bits: int | None
    document: dict[str, Any]


def mark_not_evaluated(doc: dict[str, Any], chosen: Callable[[dict[str, Any]], bool]
                       ) -> dict[str, Any]:
    """The sweep manifest with every finished point that ``chosen`` rejects marked ``not
    evaluated`` (the page's plan line counts them apart); entries that are not points are
    left out."""
    return {**doc, "points": [
        p if chosen(p) or p.get("status") not in ("done", "kept")
        else {**p, "status": "not evaluated"} for p in doc["points"] if isinstance(p, dict)]}


def sweep_inputs(rundirs: Sequence[Path], only: Sequence[str] = (),
                 seeds: int | None = None) -> SweepInput | None:
    """The sweep behind a single directory argument, or None for plain run directories.
    ``only`` (point ids containing one of these texts) and ``seeds`` (the first N seeds of
    every block) evaluate a part of the finished points, as ``meshsim sweep`` runs one;
    the document's points outside that part are marked ``not evaluated``."""
    if len(rundirs) != 1 or not (rundirs[0] / MANIFEST).is_file():
        return None
    directory = rundirs[0]
    try:
        doc = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise SweepInputError(f"{directory / MANIFEST}: cannot read: {exc}") from None
    points = doc.get("points") if isinstance(doc, dict) else None
    if not isinstance(points, list):
        raise SweepInputError(f"{directory / MANIFEST}: no list of points")
    blocks = {str(b.get("name")): list(b.get("seeds") or []) for b in doc.get("blocks") or []
              if isinstance(b, dict)}

    def chosen(p: dict[str, Any]) -> bool:
        if only and not any(t in str(p.get("id", "")) for t in only):
            return False
        return seeds is None or p.get("seed") in blocks.get(str(p.get("block")), [])[:seeds]

    doc = mark_not_evaluated(doc, chosen)
    found = [directory / str(p["rundir"]) for p in doc["points"]
             if p.get("status") in ("done", "kept") and p.get("rundir")]
    if not found:
        raise SweepInputError(f"{directory}: no finished point yet (run meshsim sweep)")
    bits = (doc.get("evaluate") or {}).get("message_bits")
    if bits is not None and (isinstance(bits, bool) or not isinstance(bits, int) or bits <= 0):
        raise SweepInputError(f"{directory / MANIFEST}: evaluate.message_bits must be a "
                              f"positive integer, not {bits!r}")
    return SweepInput(directory, found, bits, doc)
