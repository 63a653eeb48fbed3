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
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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


@pytest.fixture(scope="session")
def vmesh_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """The test session's virtual fleet (``tests/vmesh/fleet.py``): root tests only.

    Brought up by the first test that uses it and shared by every virtual-mesh test
    after it; removed at the end of the session, also when tests failed.
    """
    from fleet import session_fleet

    with session_fleet(tmp_path_factory) as fleet:
        yield fleet
