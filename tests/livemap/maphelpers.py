"""Shared helpers of the live map's tests: the server as a subprocess and a headless Chromium.

Chromium is Debian's (scripts/apt-packages.txt), driven by Playwright for Python with
``executable_path``: Playwright's own browser download needs the internet.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import shutil
import subprocess
import sys
import tempfile
import threading
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


#: how long ``mesheval map`` may take to print its start line (a hang guard, not a timing
#: assertion: it prints it before it serves, on a loaded machine within seconds)
START_TIMEOUT_S = 60.0


@contextmanager
def map_server(*args: str, start_timeout: float = START_TIMEOUT_S) -> Iterator[str]:
    """``mesheval map ARGS --port 0``; yields the URL it prints, stops it afterwards.

    Only stdout is read, line by line by a thread, and waited for with a deadline: the
    map's log (stderr, a file here) can never stand in for its start line, and a map that
    never prints one fails the test with its log instead of blocking it.
    """
    with tempfile.TemporaryFile("w+") as log:
        proc = subprocess.Popen([sys.executable, "-m", "mesheval.cli", "map", *args,
                                 "--port", "0"],
                                stdout=subprocess.PIPE, stderr=log, text=True)
        try:
            yield _start_url(proc, log, start_timeout)
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _start_url(proc: subprocess.Popen[str], log: Any, timeout: float) -> str:
    """The URL of the map's start line, or a failed test naming what the map said."""
    assert proc.stdout is not None
    lines: queue.Queue[str | None] = queue.Queue()

    def pump(stream: Any) -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)  # end of file: the map exited

    threading.Thread(target=pump, args=(proc.stdout,), daemon=True).start()
    seen: list[str] = []
    line: str | None = ""
    deadline = time.monotonic() + timeout
    while (left := deadline - time.monotonic()) > 0:
        try:
            line = lines.get(timeout=left)
        except queue.Empty:
            break
        if line is None:
            break
        seen.append(line)
        if match := re.search(r"open (http://\S+)", line):
            return match.group(1)
    if line is None:  # its stdout closed: it is exiting, wait for its status
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
    log.seek(0)
    code = proc.poll()
    state = f"exited {code}" if code is not None else f"no start line in {timeout:.0f} s"
    pytest.fail(f"mesheval map did not start ({state}); stdout: {''.join(seen)!r}; "
                f"stderr: {log.read()[-2000:]!r}", pytrace=False)


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


def scrub_until(page: Any, selector: str, timeout_s: float = 60.0, step_s: float = 0.5) -> float:
    """Stop following and move the slider from the start, as a user would, until the page
    draws ``selector``; returns that time. Live records keep arriving, so the scan goes on
    over the growing range until the deadline (a hang guard; then the test fails)."""
    page.uncheck("#follow")
    t = 0.0
    deadline = time.monotonic() + timeout_s
    while True:
        tmax = float(page.eval_on_selector("#slider", "s => s.max"))
        while t <= tmax:
            set_time(page, t)
            if page.query_selector(selector) is not None:
                return t
            t += step_s
        if time.monotonic() > deadline:
            raise AssertionError(f"the page never drew {selector} (slider up to {tmax} s)")
        time.sleep(1.0)
