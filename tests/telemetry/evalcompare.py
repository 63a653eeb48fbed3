"""Comparing two metrics.json documents, and the small runs they are made of."""

from __future__ import annotations

import math
import tarfile
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "compare"
RUNS = ("demo", "tg", "hand")
"""The run directories of ``data/compare/runs.tgz`` (data/compare/README.md)."""


def unpack_runs(into: Path) -> list[Path]:
    """Unpack the three small runs under ``into``; their directories, in order."""
    with tarfile.open(DATA / "runs.tgz") as tar:
        tar.extractall(into, filter="data")
    return [into / name for name in RUNS]


def differences(old: Any, new: Any, where: str = "") -> list[str]:
    """Where the two documents differ (floats within a relative 1e-9)."""
    if isinstance(old, dict) and isinstance(new, dict):
        out = [f"{where}.{k}: only before" for k in old.keys() - new.keys()]
        out += [f"{where}.{k}: only now" for k in new.keys() - old.keys()]
        for key in old.keys() & new.keys():
            out += differences(old[key], new[key], f"{where}.{key}")
        return out
    if isinstance(old, list) and isinstance(new, list):
        if len(old) != len(new):
            return [f"{where}: {len(old)} items before, {len(new)} now"]
        return [d for i, (a, b) in enumerate(zip(old, new, strict=True))
                for d in differences(a, b, f"{where}[{i}]")]
    if isinstance(old, float) or isinstance(new, float):
        if isinstance(old, int | float) and isinstance(new, int | float) and math.isclose(
                old, new, rel_tol=1e-9, abs_tol=1e-12):
            return []
    elif old == new:
        return []
    return [f"{where}: {old!r} before, {new!r} now"]


def without_node_count(now: dict[str, Any]) -> dict[str, Any]:
    """Today's metrics.json without the two keys added after ``metrics-before.json`` was
    made (``mesheval.batch.NODES_IN_DOCUMENT``), checked first: every node listed."""
    assert now.pop("nodes_listed") == "all"
    assert now.pop("nodes_total") == len(now["nodes"])
    return now
