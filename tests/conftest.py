"""Test-wide set-up.

pytest runs with ``--import-mode=importlib`` so that test modules in different
folders may share a basename (tests/sim/test_cli.py and
tests/runtime/test_cli.py). That mode does not put test folders on
``sys.path``, so the folders holding shared test helpers (``harness``,
``simhelpers``) are added here.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

_TESTS = Path(__file__).parent
for helper_dir in ("protocol", "sim", "runtime", "e2e", "telemetry", "vmesh", "ansible",
                   "medium"):
    path = str(_TESTS / helper_dir)
    if path not in sys.path:
        sys.path.insert(0, path)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests marked ``root`` skip, visibly, when not run as root."""
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (network namespaces, nftables, containers)")
    for item in items:
        if "root" in item.keywords:
            item.add_marker(skip)
