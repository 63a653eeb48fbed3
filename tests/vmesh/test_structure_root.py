"""``vmesh-roles-faults`` on the virtual mesh (root): groups, roles, a lattice walk,
faults and the generated workloads with real daemons, installed by the playbook.

The checks are the simulator test's (tests/sim/test_scenario_structure.py) on the
daemons' telemetry, with ``SLACK_S`` for the wall clock (a fault takes effect when
its container command returns, a move when the medium is updated). Roles are read
from the daemons themselves (``meshsubctl status``/``neighbors``) just before t0.
The scenario runs on the first ten devices of the test session's fleet
(``vmesh_fleet``, tests/vmesh/fleet.py), which removes everything at the session's end.
"""

from __future__ import annotations

import os
import shutil
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from test_scenario_structure import (
    SCENARIO,
    SENSORS,
    WALKERS,
    check_faults,
    check_generated,
    check_lattice_walk,
    check_links_follow,
    check_state,
    delivery,
)

from meshsim.scenario import load_scenario
from meshsim.scenario.plan import make_plan
from meshsim.vmesh.devices import run_records
from meshsim.vmesh.plan import NodePlan

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)"),
    pytest.mark.skipif(shutil.which("podman") is None, reason="needs podman"),
]

SLACK_S = 3.0


@pytest.fixture(scope="module")
def result(vmesh_fleet: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from meshsim.vmesh import devices

    seen: dict[str, Any] = {}

    def ask(_t0: float, devmap: dict[int, NodePlan]) -> None:
        queries = [(1, "status"), (7, "status"), (8, "status"), (9, "status"),
                   (5, "neighbors")]
        with ThreadPoolExecutor(max_workers=len(queries)) as pool:
            answers = pool.map(lambda q: devices.ctl_json(devmap[q[0]].container, q[1]),
                               queries)
            seen.update({f"{n}:{what}": a for (n, what), a in zip(queries, answers,
                                                                    strict=True)})

    out = tmp_path_factory.mktemp("structure-vm") / "run"
    res = vmesh_fleet.scenario(load_scenario(SCENARIO), out, on_start=ask)
    recs = run_records(out)
    return res, recs, seen


def test_roles_and_role_parameters_reach_the_daemons(result: Any) -> None:
    _, _, seen = result
    assert seen["1:status"]["protocol"]["roles"] == ["base_station"]
    assert seen["9:status"]["protocol"]["roles"] == ["sensor"]
    for walker in WALKERS:
        proto = seen[f"{walker}:status"]["protocol"]
        assert proto["roles"] == ["client"]
        assert proto["buffer_capacity"] == 50  # [protocol.epidemic.roles.client]
    assert seen["1:status"]["protocol"]["buffer_capacity"] == 1000
    caps = {n["node"]: n["capabilities"] for n in seen["5:neighbors"]}  # from beacons
    assert all(caps.get(s) == ["sensor"] for s in SENSORS), caps
    assert caps.get(4) == ["base_station"] and caps.get(6) == ["base_station"], caps


def test_the_walk_faults_and_generated_workload(result: Any) -> None:
    res, recs, _ = result
    t0_ns = res.manifest["t0_ns"]
    check_lattice_walk(res.out / "mobility.log")
    check_faults(recs, res.manifest, t0_ns, SLACK_S)
    check_generated(recs, t0_ns, SLACK_S, 75.0)
    check_state(recs, t0_ns)
    traj = make_plan(load_scenario(SCENARIO)).trajectories
    check_links_follow(recs, traj, t0_ns, SLACK_S)
    done = res.manifest["stats"]["medium"]["faults"]
    assert [(f["t"], f["action"], f["error"]) for f in done] == [
        (10.0, "join", None), (20.0, "crash", None), (25.0, "leave", None),
        (40.0, "recover", None), (45.0, "join", None)]
    workload = res.manifest["stats"]["workload"]
    assert workload["actions_failed"] == 0 and workload["unsubscriptions_done"] >= 3


def test_interested_subscriptions_get_their_events(result: Any) -> None:
    res, recs, _ = result
    got, want = delivery(recs, res.manifest["t0_ns"])
    print(f"delivered {got} of {want} interested pairs")
    assert want >= 15 and got >= want - 1
