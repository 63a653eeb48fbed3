"""One virtual fleet for the whole test session: brought up once, reconfigured per test.

Bringing devices up and installing meshsub is the slow part of a virtual-mesh test;
with the baked image a scenario on running devices needs only ``site.yml --tags
configure`` on the devices it uses. So the session's first virtual-mesh test brings
up ``SIZE`` devices (run ``ts``, in a private ``MSUB_VMESH_HOME``) and every test
after it reuses them: a scenario runs on the first N devices (``meshsim run``'s code,
``reuse_larger``), wiping what the test before left; the daemons of the other devices
are stopped. The session's end removes the devices, the medium and the run's state,
also when tests failed. ``tests/conftest.py`` exposes it as the ``vmesh_fleet``
fixture.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from collections.abc import Iterator
from itertools import permutations
from pathlib import Path
from typing import Any

import pytest

from meshsim.scenario.model import Scenario

RUN = "ts"
"""The fleet's run name in a session of one process; under pytest-xdist each worker has
its own (``run_name``), so two workers' fleets never share a name or a subnet."""
SIZE = int(os.environ.get("MSUB_TEST_FLEET_SIZE", "10"))
"""Devices brought up at first use. The default run's largest scenario (vmesh-hesper-lake)
needs 9; a test asking for more (the long tier's 20-device vmesh-hesper-grid) grows the
fleet, brought up again once at the larger size. A smaller ``MSUB_TEST_FLEET_SIZE``
brings up fewer devices for running one test file whose scenarios need fewer."""
FLEETS = 2
"""Session fleets that may run at once (``./test.sh``: two virtual-mesh workers,
tests/conftest.py): the host's inotify limit is raised for all of their devices."""
SCENARIOS = Path(__file__).resolve().parents[2] / "firmware-sim" / "meshsim" / "scenarios"


def log(message: str) -> None:
    print(f"vmesh: {message}", flush=True)


def run_name() -> str:
    """``RUN``, or under pytest-xdist ``RUN`` and the worker's number (``ts0``, ``ts1``, ...;
    each hashes to management and mesh subnets of its own, docs/vmesh.md)."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return f"{RUN}{worker.removeprefix('gw')}" if worker.startswith("gw") else RUN


LOCKS = Path("/run/lock")


class FleetInUse(Exception):
    """Another test session on this host holds the fleet's name."""


def fleet_lock(run: str, locks: Path = LOCKS) -> contextlib.closing[Any]:
    """Hold ``run``'s name for this session (released when closed or the process ends).

    Two sessions with one fleet name tear down each other's devices (2026-11-27: three
    ``pytest`` runs of ``*_root.py`` files started without the project's root lock
    removed the final suite's fleet). ``FleetInUse`` at once if another holds it.
    """
    import fcntl

    path = locks / f"msub-fleet-{run}.lock"
    handle = path.open("a")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.close()
        raise FleetInUse(f"the virtual fleet {run!r} is in use by another test session on "
                         f"this host ({path} is locked): run root tests under "
                         "`flock /tmp/msub-locks/root.lock`") from None
    return contextlib.closing(handle)


class SessionFleet:
    def __init__(self, home: Path, run: str = RUN) -> None:
        self.home = home
        self.run = run
        self.size = SIZE

    def up(self, count: int) -> Any:
        """The fleet (brought up on first use, again larger when ``count`` exceeds it);
        ``devices`` are its first ``count``."""
        from meshsim.vmesh import lifecycle

        if count > self.size:
            log(f"growing the session fleet {self.run!r} from {self.size} to {count} devices")
            self.size = count
        lifecycle.raise_host_limits(FLEETS * self.size, log)
        res = lifecycle.up(self.size, self.run, log=log)
        return dataclasses.replace(res, devices=res.plan.nodes[:count])

    def scenario(self, scenario: Scenario | str, out: Path, **options: Any) -> Any:
        """Run a scenario (or a shipped one by name) on the fleet's first devices."""
        from meshsim.scenario import load_scenario
        from meshsim.vmesh.scenario_run import RunOptions, run_on_vmesh

        if isinstance(scenario, str):
            scenario = load_scenario(SCENARIOS / f"{scenario}.toml")
        self.up(scenario.nodes.count)
        return run_on_vmesh(scenario, RunOptions(out=out, vmesh_run=self.run, keep=True,
                                                 reuse_larger=True, log=log, **options))

    def take(self, count: int) -> Any:
        """The first ``count`` devices wiped, all in range of each other, the others idle.

        For tests that deploy by hand (the playbook's own behaviour): every daemon is
        stopped and its state removed; the medium connects the ``count`` devices
        pairwise without loss and no one else.
        """
        from meshsim.medium import Medium, htb
        from meshsim.vmesh import devices

        res = self.up(count)
        devices.each(res.plan.nodes, lambda dev: devices.reset(dev.container))
        for dev in res.plan.nodes:
            htb.clear_rate(dev.netns, "mesh0")
        medium = Medium(res.plan.medium_netns, {d.node_id: d.medium_port for d in res.devices})
        medium.install()
        medium.set_links({pair: 0.0 for pair in permutations(medium.ports, 2)})
        return res

    def close(self) -> None:
        from meshsim.medium import Medium
        from meshsim.vmesh import lifecycle
        from meshsim.vmesh.plan import make_plan

        Medium(make_plan(self.size, self.run).medium_netns, {}).remove()
        lifecycle.teardown(self.run, purge=True)


@contextlib.contextmanager
def session_fleet(tmp_path_factory: pytest.TempPathFactory,
                  run: str = RUN) -> Iterator[SessionFleet]:
    from meshsim.vmesh.runstate import HOME_ENV

    old = os.environ.get(HOME_ENV)
    home = tmp_path_factory.mktemp("vmesh-fleet")
    os.environ[HOME_ENV] = str(home)
    fleet = SessionFleet(home, run)
    try:
        yield fleet
    finally:
        try:
            fleet.close()
        finally:
            if old is None:
                os.environ.pop(HOME_ENV, None)
            else:
                os.environ[HOME_ENV] = old
