"""Fixtures for the unit tests of the bench scripts (bench/ is scripts, not a package)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH_DIR = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def bench(request: pytest.FixtureRequest) -> ModuleType:
    """The script ``bench/<BENCH>.py`` that the test module names in ``BENCH``, loaded
    as the module ``BENCH`` (its dataclasses resolve their module through sys.modules)."""
    name = str(request.module.BENCH)
    spec = importlib.util.spec_from_file_location(name, BENCH_DIR / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module
