"""Fixtures for the simulated-GPS tests: real gpsd processes, always stopped.

The helpers live in ``gpsdproc`` next to this file; pytest's importlib mode
does not put test folders on ``sys.path``, so this folder is added here.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

if str(Path(__file__).parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).parent))

from gpsdproc import Gpsd, start_gpsd


@pytest.fixture
def gpsd_factory(tmp_path: Path) -> Iterator[Callable[[], Gpsd]]:
    """``start()`` -> a running gpsd; every one is stopped after the test."""
    started: list[Gpsd] = []
    yield lambda: start_gpsd(started, tmp_path / f"gpsd-{len(started)}.stderr")
    for gpsd in started:
        gpsd.stop()


@pytest.fixture
def gpsd(gpsd_factory: Callable[[], Gpsd]) -> Gpsd:
    return gpsd_factory()
