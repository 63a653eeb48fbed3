"""The demo runs the packaged scenario, explains it and evaluates it (simulator tier here;
the virtual-mesh tier is what tests/vmesh/test_run_root.py exercises)."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshsim.demo import main


@pytest.mark.slow
def test_demo_reports_every_section_and_the_evaluation(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pyspark")
    assert main(["--out", str(tmp_path / "demo"), "--tier", "sim"]) == 0
    out = capsys.readouterr().out
    for heading in ("Topology", "Subscriptions (", "Events published (", "Duplicates",
                    "Transmissions", "Run", "Virtual mesh skipped: --tier sim",
                    "Evaluation (mesheval"):
        assert heading in out
    assert "mean degree" in out
    assert "0 to non-matching subscriptions" in out
    assert str(tmp_path / "demo" / "sim") in out
    assert (tmp_path / "demo" / "sim" / "manifest.json").exists()
    # the headline table: one configuration, simulation tier
    assert any(line.split()[:3] == ["flooding", "demo", "simulation"]
               for line in out.splitlines())
    report = tmp_path / "demo" / "report"
    assert (report / "report.html").stat().st_size > 10_000
    for png in ("delivery_ratio.png", "latency_cdf.png", "load_map.png", "protocols.png"):
        assert (report / png).read_bytes()[:4] == b"\x89PNG"


def test_demo_user_errors_are_one_line(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--out", str(tmp_path / "r"), "--set", "protocol.name=nope"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "unknown protocol 'nope'" in err
    assert main(["--out", str(tmp_path / "r"), "--tier", "moon"]) == 2
    assert "--tier" in capsys.readouterr().err


def test_demo_prints_the_live_map_and_does_not_wait_without_a_terminal(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--out", str(tmp_path / "d"), "--tier", "sim", "--no-report"]) == 0
    out = capsys.readouterr().out
    assert f"mesheval map {tmp_path / 'd' / 'sim'} --port 8765" in out
    assert "Starting it now" not in out


def test_demo_in_a_terminal_starts_the_live_map(tmp_path: Path) -> None:
    """In a terminal (a pty here) the demo serves the map of its run until stopped."""
    import json
    import os
    import pty
    import re
    import signal
    import subprocess
    import sys
    import time
    import urllib.request

    controller, terminal = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "meshsim.demo", "--out", str(tmp_path / "d"),
                             "--tier", "sim", "--no-report", "--map-port", "0"],
                            stdin=terminal, stdout=terminal, stderr=terminal)
    os.close(terminal)
    try:
        text, deadline = "", time.monotonic() + 120  # a hang guard
        while not (match := re.search(r"window; open (http://\S+)", text)):
            assert time.monotonic() < deadline and proc.poll() is None, text
            try:
                text += os.read(controller, 4096).decode(errors="replace")
            except OSError:
                break
        assert match, text
        info = json.load(urllib.request.urlopen(match.group(1) + "api/info", timeout=10))
        assert info["mode"] == "replay" and info["protocol"] == "flooding"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(controller)
