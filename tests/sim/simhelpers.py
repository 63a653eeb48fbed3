"""Helpers for the simulator tests: a minimal scenario document and a run reader."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from meshsub.core.telemetry import parse_line

SCENARIOS = Path(__file__).resolve().parents[2] / "firmware-sim" / "meshsim" / "scenarios"

BASE: dict[str, Any] = {
    "scenario": {"name": "t", "seed": 1, "duration_s": 10.0, "drain_s": 2.0},
    "area": {"width_m": 300.0, "height_m": 100.0},
    "radio": {"model": "unit_disk", "range_m": 60.0},
    "nodes": {"count": 5, "placement": "line", "spacing_m": 50.0},
    "protocol": {"name": "flooding"},
    "workload": {
        "subscriptions": [{"node": 5, "expr": "a/b x>1"}],
        "publications": [{"t": 1.0, "node": 1, "event": "a/b x=2"}],
    },
}


def base_doc() -> dict[str, Any]:
    """A small valid scenario document (5 nodes in a line, flooding), fresh each call."""
    return copy.deepcopy(BASE)


def read_run(run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(manifest, every record of every node file, each validated against the schema)."""
    manifest = json.loads((run_dir / "manifest.json").read_text())
    records = []
    for name in manifest["files"]:
        with (run_dir / name).open(encoding="utf-8") as fh:
            records.extend(parse_line(line) for line in fh)
    assert not list(run_dir.glob("*.tmp")), "temporary files left behind"
    return manifest, records
