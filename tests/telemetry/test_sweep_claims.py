"""A small sweep (3 protocols x 2 ranges x 3 seeds) through ``meshsim sweep`` and
``mesheval DIR --claims``: one claim holds, one does not, and the report says so."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.slow
DATA = Path(__file__).parent / "data"


def test_small_sweep_and_claims(spark: Any, tmp_path: Path) -> None:
    from mesheval.cli import main

    for name in ("small-sweep.toml", "small-claims.toml"):
        shutil.copy(DATA / name, tmp_path / name)
    sweep = tmp_path / "small-sweep.toml"
    sweep.write_text(sweep.read_text().replace(
        "../../../firmware-sim", str(Path(__file__).parents[2] / "firmware-sim")))
    out = tmp_path / "sweep"
    proc = subprocess.run([sys.executable, "-m", "meshsim.cli", "sweep", str(sweep), "--out",
                           str(out), "--jobs", "2"], capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "18 of 18 points finished" in proc.stdout
    assert main([str(out), "--claims", str(tmp_path / "small-claims.toml")]) == 0
    verdicts = {c["id"]: c["status"] for c in
                json.loads((out / "eval" / "claims.json").read_text())}
    assert verdicts == {"flooding-sends-more": "holds", "pull-sends-more": "differs"}
    page = (tmp_path / "page.md").read_text()
    assert "1 hold, 1 differ, 0 cannot be tested" in page
    assert "| flooding-sends-more |" in page and "**differs** |" in page
    doc = json.loads((out / "eval" / "metrics.json").read_text())
    assert len(doc["runs"]) == 18 and len(doc["groups"]) == 6
    assert all(len(g["seeds"]) == 3 for g in doc["groups"])
    flood = next(g for g in doc["groups"] if g["varied"] == {"protocol": "flooding",
                                                              "range_m": 150.0})
    # every node broadcasts each event once: 50 per event in all three seeds
    assert flood["metrics"]["tx_data_per_event"]["mean"] == pytest.approx(50.0)
    assert flood["metrics"]["optimum_ratio"]["mean"] > 1.0
    report = (out / "eval" / "report.md").read_text()
    assert "| protocol | scenario | tier | protocol | range_m | runs |" in report
