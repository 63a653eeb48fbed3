"""The demo runs the packaged scenario and explains it."""

from __future__ import annotations

from pathlib import Path

import pytest

from meshsim.demo import main


def test_demo_reports_every_section(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--out", str(tmp_path / "run")]) == 0
    out = capsys.readouterr().out
    for heading in ("Topology", "Subscriptions (", "Events published (", "Duplicates",
                    "Transmissions", "Run"):
        assert heading in out
    assert "mean degree" in out and "diameter" in out
    assert "0 to non-matching subscriptions" in out
    assert str(tmp_path / "run") in out
    assert (tmp_path / "run" / "manifest.json").exists()


def test_demo_user_errors_are_one_line(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--out", str(tmp_path / "r"), "--set", "protocol.name=nope"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "unknown protocol 'nope'" in err
