"""The session fleet's name lock (tests/vmesh/fleet.py): one test session per fleet name."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from fleet import FleetInUse, fleet_lock, run_name


def test_a_second_holder_of_a_fleet_name_is_refused_until_the_first_lets_go(
        tmp_path: Path) -> None:
    with fleet_lock("tq", tmp_path):
        with pytest.raises(FleetInUse, match="'tq' is in use by another test session"):
            fleet_lock("tq", tmp_path)
        # another process too (flock(2) locks are per open file, so per session)
        other = subprocess.run(
            [sys.executable, "-c", "import fcntl, sys; f = open(sys.argv[1], 'a'); "
             "fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)", str(tmp_path / "msub-fleet-tq.lock")],
            capture_output=True, text=True, check=False)
        assert other.returncode != 0 and "BlockingIOError" in other.stderr
        with fleet_lock("tr", tmp_path):  # another name is free
            pass
    with fleet_lock("tq", tmp_path):  # released
        pass


def test_each_xdist_worker_names_its_own_fleet(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert run_name() == "ts"
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw3")
    assert run_name() == "ts3"


def test_the_workers_fleets_have_subnets_of_their_own() -> None:
    from meshsim.vmesh.plan import make_plan

    names = ["ts", *(f"ts{n}" for n in range(4))]  # ./test.sh -n 4, and -n 0
    assert len({make_plan(1, name).mgmt_net for name in names}) == len(names)
