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
from appdeliveries import app_deliveries
from simhelpers import read_run
from test_scenario_structure import (
    SCENARIO,
    SENSORS,
    WALKERS,
    PairKey,
    by,
    check_faults,
    check_generated,
    check_lattice_walk,
    check_links_follow,
    check_state,
    interested,
    pair_keys,
    spare,
)

from meshsim.des.run import run_scenario
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
SPARE_S = 3.0
"""A pair the simulator delivers with its subscription in force this much longer must be
delivered here too; one it delivers with less to spare may miss on the wall clock."""


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


@pytest.fixture(scope="module")
def simulated(tmp_path_factory: pytest.TempPathFactory) -> dict[PairKey, float]:
    """The same scenario in the simulator: each pair it delivers, and with how much to spare."""
    out = tmp_path_factory.mktemp("structure-sim") / "run"
    run_scenario(load_scenario(SCENARIO), out)
    return spare(read_run(out)[1], 0)


def test_interested_subscriptions_get_their_events(result: Any,
                                                   simulated: dict[PairKey, float]) -> None:
    """Every pair the simulator delivers with time to spare is delivered here. A delivery
    counts if the daemon recorded it or the application got it over MQTT (a crash loses
    the records of the last second, not what the broker already has)."""
    res, recs, _ = result
    want = pair_keys(recs, interested(recs, res.manifest["t0_ns"]))
    got = {(r["node"], r["sub_id"], r["event_id"]) for r in by(recs, "deliver")}
    got |= app_deliveries(res)
    must = {key for key, left in simulated.items() if left >= SPARE_S and key in want}
    missed = sorted(k for k in must if want[k] not in got)
    print(f"delivered {sum(p in got for p in want.values())} of {len(want)} interested "
          f"pairs; {len(must)} with >= {SPARE_S} s to spare in the simulator, missed {missed}")
    assert len(want) >= 15 and len(must) >= 12
    assert not missed
