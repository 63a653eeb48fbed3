"""``meshsim vmesh`` answers misuse with one line and creates nothing."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from meshsim.cli import main
from meshsim.vmesh.runstate import HOME_ENV


@pytest.fixture(autouse=True)
def _home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(HOME_ENV, str(tmp_path))


def _one_line(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("argv,expect", [
    (["vmesh", "up", "--nodes", "0", "--name", "zz"], "--nodes must be 1..1000"),
    (["vmesh", "up", "--nodes", "3", "--name", "Bad-Name"], "bad run name"),
    (["vmesh", "exec", "--name", "zz", "1", "true"], "run 'zz' is not up"),
    (["vmesh", "logs", "--name", "zz", "2"], "run 'zz' is not up"),
])
def test_misuse_is_one_line_and_creates_nothing(argv: list[str], expect: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 1
    err = _one_line(capsys)
    assert (expect if os.geteuid() == 0 else "needs root") in err
    assert list(tmp_path.iterdir()) == []


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vmesh", "up"]) == 2
    assert "--nodes" in _one_line(capsys)
    assert main(["vmesh", "frobnicate"]) == 2
    _one_line(capsys)


@pytest.mark.skipif(os.geteuid() != 0, reason="status needs root")
def test_status_of_a_run_that_is_not_up(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["vmesh", "status", "--name", "zz"]) == 1
    assert capsys.readouterr().out.strip() == "run zz: not up"
