"""B-SUB on the virtual mesh (root): groups that meet through a broker, and a contact cut.

``vmesh-bsub-groups`` (a courier, elected broker by the users it met, carries
events between two groups that never meet) and ``vmesh-bsub-cut`` (a contact
cut in the middle of a session that moves 48 broker copies, then met again)
run with ``meshsim run``'s code on the same seven devices, one after the other
(each run wipes what the one before left). The assertions are the simulator
test's (tests/sim/test_vmesh_bsub_scenarios.py) on the daemons' telemetry:
contacts are delimited by the daemons' own ``neighbor_up``/``neighbor_down``
records, never by elapsed time. Everything is removed in the module's
finaliser, even when a test fails.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from privatehome import private_vmesh_home
from test_vmesh_bsub_scenarios import check_cut, check_groups, expected_deliveries

from meshsim.scenario import load_scenario

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.timeout(2400),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)"),
    pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman"),
]

SCENARIOS = Path(__file__).resolve().parents[2] / "firmware-sim" / "meshsim" / "scenarios"
RUN = "t8bs"
DEVICES = 7


@pytest.fixture(scope="module")
def vmesh_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    with private_vmesh_home(tmp_path_factory, RUN, DEVICES) as home:
        yield home


def run(name: str, out: Path) -> Any:
    from meshsim.vmesh.scenario_run import RunOptions, run_on_vmesh

    scenario = load_scenario(SCENARIOS / f"{name}.toml")
    assert len(scenario.source["nodes"]["positions"]) == DEVICES  # one set of devices
    return run_on_vmesh(scenario, RunOptions(out=out, vmesh_run=RUN, keep=True,
                                             log=lambda m: print(f"run: {m}", flush=True)))


def records(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted((out / "nodes").rglob("*.jsonl"))
            for line in path.read_text().splitlines()]


def seen_by_applications(res: Any) -> set[tuple[int, str, str]]:
    """(node, sub_id, event_id) the workload agents received over MQTT."""
    seen = set()
    for node, report in res.agents.items():
        assert report is not None, f"no workload report from node {node}"
        for d in report["deliveries"]:
            seen.add((node, d["body"]["sub_id"], d["body"]["event_id"]))
    return seen


# Run first: vmesh-bsub-cut shapes every mesh0 to 12 kbit/s, and a later run
# without radio.bitrate_bps leaves the devices' shaping as it was.
def test_groups_meet_through_an_elected_broker(vmesh_home: Path, tmp_path: Path) -> None:
    res = run("vmesh-bsub-groups", tmp_path / "run")
    recs = records(res.out)
    figures = check_groups(recs)
    print(figures)
    assert seen_by_applications(res) == expected_deliveries(recs)


def test_a_contact_cut_mid_session_loses_and_duplicates_nothing(
        vmesh_home: Path, tmp_path: Path) -> None:
    res = run("vmesh-bsub-cut", tmp_path / "run")
    recs = records(res.out)
    figures = check_cut(recs)
    print(figures)
    assert seen_by_applications(res) == expected_deliveries(recs)
