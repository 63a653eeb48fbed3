"""Shared helpers of the live map's tests: the server as a subprocess and a headless Chromium.

Chromium is Debian's (scripts/apt-packages.txt), driven by Playwright for Python with
``executable_path``: Playwright's own browser download needs the internet.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
#: the status panel's rows as [label, value] pairs
STATUS_ROWS = "rs => rs.map(r => [r.cells[0].textContent, r.cells[1].textContent])"


def artefact_dir(tmp_path: Path, name: str) -> Path:
    """Where a test keeps its screenshots: $MESHSUB_ARTEFACTS/NAME, else under tmp_path."""
    root = os.environ.get("MESHSUB_ARTEFACTS")
    out = Path(root) / name if root else tmp_path / "artefacts"
    out.mkdir(parents=True, exist_ok=True)
    print(f"live map screenshots: {out}")
    return out


@contextmanager
def map_server(*args: str) -> Iterator[str]:
    """``mesheval map ARGS --port 0``; yields the URL it prints, stops it afterwards."""
    proc = subprocess.Popen([sys.executable, "-m", "mesheval.cli", "map", *args, "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        match = re.search(r"open (http://\S+)", line)
        assert match, f"mesheval map did not start: {line}{proc.stdout.read()}"
        yield match.group(1)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def chromium_page() -> Iterator[Any]:
    playwright = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (scripts/apt-packages.txt)")
    with playwright.sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 800})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.errors = errors
            yield page
        finally:
            browser.close()


def set_time(page: Any, seconds: float) -> None:
    """Move the slider as a user would (its input event renders the mesh at that time)."""
    page.evaluate("""(t) => { const s = document.getElementById('slider');
        s.value = t; s.dispatchEvent(new Event('input')); }""", f"{seconds:.1f}")


def wait_until(predicate: Any, timeout_s: float = 20.0) -> None:
    end = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > end:
            raise AssertionError("timed out")
        time.sleep(0.2)
