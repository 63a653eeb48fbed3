"""Starting the workload agents of a virtual-mesh run: all of them before t0 (no root)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from meshsim.scenario import load_scenario
from meshsim.scenario.plan import make_plan
from meshsim.vmesh import devices, nodes, scenario_run

SCENARIO = (Path(__file__).resolve().parents[2] / "firmware-sim" / "meshsim" / "scenarios"
            / "vmesh-hesper-grid.toml")


def test_every_agent_starts_before_t0_even_when_each_exec_is_slow(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """20 devices, each exec 0.5 s: one after another the starts would take 20 s and the
    last agents would begin after t0 (the cause of late subscriptions on a loaded host)."""
    plan = make_plan(load_scenario(SCENARIO))
    devmap: dict[int, Any] = {sid: SimpleNamespace(container=f"c{sid}") for sid in plan.positions}
    started: dict[str, tuple[float, float]] = {}
    lock = threading.Lock()

    def slow_exec(container: str, cmd: list[str], **_kw: Any) -> str:
        time.sleep(0.5)
        return ""

    def slow_start(container: str, schedule_json: str) -> None:
        time.sleep(1.0)  # two execs
        with lock:
            started[container] = (time.time(), json.loads(schedule_json)["t0"])

    monkeypatch.setattr(nodes, "exec_in", slow_exec)
    monkeypatch.setattr(devices, "start_agent", slow_start)
    logged: list[str] = []
    t0, info = scenario_run.start_agents(devmap, plan, 100.0, 0.0, logged.append)
    assert sorted(started) == sorted(f"c{sid}" for sid in plan.positions)
    assert {sched_t0 for _, sched_t0 in started.values()} == {t0}  # one t0 for all
    assert all(at < t0 for at, _ in started.values())  # every agent was up before t0
    assert info["late_s"] == 0.0 and not logged
    assert info["exec_probe_s"] >= 0.5
