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
SIZE = int(os.environ.get("MSUB_TEST_FLEET_SIZE", "20"))
"""The largest scenario of the suite (vmesh-hesper-grid) needs 20 devices. A smaller
``MSUB_TEST_FLEET_SIZE`` brings up fewer devices, for running one test file whose
scenarios need fewer (a scenario asking for more fails with a one-line error)."""
SCENARIOS = Path(__file__).resolve().parents[2] / "firmware-sim" / "meshsim" / "scenarios"


def log(message: str) -> None:
    print(f"vmesh: {message}", flush=True)


class SessionFleet:
    def __init__(self, home: Path) -> None:
        self.home = home
        self.size = SIZE

    def up(self, count: int) -> Any:
        """The fleet (brought up on first use); ``devices`` are its first ``count``."""
        from meshsim.vmesh import lifecycle

        if count > self.size:
            raise ValueError(f"the session fleet has {self.size} devices, {count} asked")
        res = lifecycle.up(self.size, RUN, log=log)
        return dataclasses.replace(res, devices=res.plan.nodes[:count])

    def scenario(self, scenario: Scenario | str, out: Path, **options: Any) -> Any:
        """Run a scenario (or a shipped one by name) on the fleet's first devices."""
        from meshsim.scenario import load_scenario
        from meshsim.vmesh.scenario_run import RunOptions, run_on_vmesh

        self.up(1)
        if isinstance(scenario, str):
            scenario = load_scenario(SCENARIOS / f"{scenario}.toml")
        return run_on_vmesh(scenario, RunOptions(out=out, vmesh_run=RUN, keep=True,
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

        Medium(make_plan(self.size, RUN).medium_netns, {}).remove()
        lifecycle.teardown(RUN, purge=True)


@contextlib.contextmanager
def session_fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SessionFleet]:
    from meshsim.vmesh.runstate import HOME_ENV

    old = os.environ.get(HOME_ENV)
    home = tmp_path_factory.mktemp("vmesh-fleet")
    os.environ[HOME_ENV] = str(home)
    fleet = SessionFleet(home)
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
