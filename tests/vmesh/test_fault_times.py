"""When a virtual-mesh fault took effect (``meshsim.vmesh.faults``), without devices.

A crash is a SIGKILL and then a ``systemctl stop``; on a busy host the stop can
return many seconds after the kill (a CI run saw 12 s), so a check that asks
"was the daemon gone before this publication?" needs the time the kill was
sent, not the time the whole fault returned. ``nodes.systemctl_in`` is replaced by a
recorder that takes as long as each command would on such a host.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from meshsim.scenario.faults import FaultEvent
from meshsim.vmesh import faults as vfaults
from meshsim.vmesh.plan import make_plan

SLOW = {"kill": 0.05, "stop": 0.4, "start": 0.1}
DEVMAP = {n.node_id: n for n in make_plan(2, "tflt").nodes}


class _Timeline:
    def __init__(self) -> None:
        self.absent: set[int] = set()
        self.hooks: list[Any] = []


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str, float]]:
    calls: list[tuple[str, str, float]] = []

    def systemctl_in(container: str, args: list[str], timeout: float) -> None:
        time.sleep(SLOW[args[0]])
        calls.append((container, args[0], time.time()))

    monkeypatch.setattr(vfaults.nodes, "systemctl_in", systemctl_in)
    return calls


def test_a_crash_is_in_effect_when_the_kill_returned_not_the_stop(ran: Any) -> None:
    t0 = time.time()
    f = vfaults.VmeshFaults(DEVMAP, _Timeline(), lambda: t0)  # type: ignore[arg-type]
    f.apply(FaultEvent(1.0, "crash", (1, 2)))
    (done,) = f.done
    assert [c[1] for c in ran if c[0] == DEVMAP[1].container] == ["kill", "stop"]
    kills = [at - t0 for _c, what, at in ran if what == "kill"]
    assert done["at_s"] <= min(kills) and done["effective_s"] == pytest.approx(max(kills), abs=0.02)
    assert done["effective_s"] + 0.3 < done["at_s"] + done["took_s"]  # the stops came after
    assert done["error"] is None


def test_recover_leave_and_join_record_when_they_took_effect(ran: Any) -> None:
    t0 = time.time()
    tl = _Timeline()
    f = vfaults.VmeshFaults({1: DEVMAP[1]}, tl, lambda: t0)  # type: ignore[arg-type]
    f.apply(FaultEvent(1.0, "recover", (1,)))
    f.apply(FaultEvent(2.0, "leave", (1,)))
    assert tl.absent == {1}
    f.apply(FaultEvent(3.0, "join", (1,)))
    assert tl.absent == set()
    recover, leave, join = f.done
    assert recover["effective_s"] >= recover["at_s"] + SLOW["start"] - 0.01
    assert leave["effective_s"] == leave["at_s"] and join["effective_s"] == join["at_s"]
