"""When a virtual-mesh scenario may begin (``scenario_run._settle``), without devices.

t0 waits for every daemon to list its radio neighbours and, when the scenario
feeds simulated GPS, to have a position fix: a GIANT broker advertises only once
it knows its cell, and a suite run on a busy host began a ferry scenario before
one had its fix. The daemons' answers are scripted here (``devices.ctl_json``).
"""

from __future__ import annotations

from typing import Any

import pytest

from meshsim.vmesh import scenario_run
from meshsim.vmesh.plan import make_plan

DEVMAP = {n.node_id: n for n in make_plan(2, "tset").nodes}


@pytest.fixture
def daemons(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Device 1 hears 2 at once; device 2 gets its fix at the third question."""
    asked: dict[str, Any] = {"status": 0}
    first, second = DEVMAP[1].container, DEVMAP[2].container

    def ctl_json(container: str, what: str) -> Any:
        if what == "neighbors":
            return [{"node": 2 if container == first else 1}]
        asked["status"] += container == second
        fixed = container == first or asked["status"] >= 3
        return {"position": {"x": 1.0, "y": 2.0} if fixed else None}

    monkeypatch.setattr(scenario_run.devices, "ctl_json", ctl_json)
    monkeypatch.setattr(scenario_run.time, "sleep", lambda _s: None)
    return asked


def test_with_gps_the_start_waits_for_every_fix(daemons: dict[str, Any]) -> None:
    got = scenario_run._settle(DEVMAP, {1: {2}, 2: {1}}, 60.0, print, positions=True)
    assert got == {"complete": True, "missing": {}, "unfixed": []}
    assert daemons["status"] == 3


def test_without_gps_positions_are_not_asked(daemons: dict[str, Any]) -> None:
    got = scenario_run._settle(DEVMAP, {1: {2}, 2: {1}}, 60.0, print)
    assert got["complete"] and daemons["status"] == 0


def test_a_device_without_a_fix_is_named_when_the_time_is_up(
        daemons: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scenario_run.devices, "ctl_json",
                        lambda c, what: [] if what == "neighbors" else {"position": None})
    lines: list[str] = []
    got = scenario_run._settle({1: DEVMAP[1]}, {1: set()}, 0.0, lines.append,
                               positions=True)
    assert got == {"complete": False, "missing": {}, "unfixed": [1]}
    assert lines == ["1 daemons have no position fix after 0 s: 1"]
