"""The shipped systemd unit's exposure, as ``systemd-analyze security --offline`` rates it.

Issue 25 item 11: the unit had no resource limits and rated 2.1. This test fails as soon
as an edit raises the exposure above the level reached (1.2), and checks the limits that
contain a flood or a leak are there.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

UNIT = Path(__file__).resolve().parents[2] / "deploy" / "systemd" / "meshsubd.service"
MAX_EXPOSURE = 1.2

needs_analyze = pytest.mark.skipif(shutil.which("systemd-analyze") is None,
                                   reason="systemd-analyze is not installed")


def exposure(unit: Path) -> float:
    res = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--no-pager",
                          str(unit)], capture_output=True, text=True, timeout=120, check=False)
    found = re.search(r"Overall exposure level for \S+: (\d+\.\d)", res.stdout + res.stderr)
    assert found, res.stdout[-2000:] + res.stderr[-2000:]
    return float(found.group(1))


@needs_analyze
def test_exposure_does_not_rise() -> None:
    assert exposure(UNIT) <= MAX_EXPOSURE


@needs_analyze
def test_the_threshold_option_agrees() -> None:
    """``--threshold`` (tenths) makes systemd-analyze itself fail above the level."""
    ok = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--no-pager",
                         f"--threshold={round(MAX_EXPOSURE * 10)}", str(UNIT)],
                        capture_output=True, text=True, timeout=120, check=False)
    assert ok.returncode == 0, ok.stdout[-1500:]


def test_resource_limits_and_filters_are_set() -> None:
    settings = dict(line.split("=", 1) for line in UNIT.read_text().splitlines()
                    if "=" in line and not line.startswith("#"))
    assert settings["MemoryMax"] == "200M" and settings["TasksMax"] == "64"
    assert settings["IPAddressDeny"] == "any"
    assert settings["UMask"] == "0077" and settings["StateDirectoryMode"] == "0700"
    assert settings["RuntimeDirectory"] == "meshsub"
    assert settings["CapabilityBoundingSet"] == ""
