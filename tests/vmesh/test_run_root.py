"""Scenario runs on the virtual mesh (root): range, multi-hop, mobility and simulated GPS.

Three shipped scenarios run with ``meshsim run``'s code on six devices of the test
session's fleet (``vmesh_fleet``, tests/vmesh/fleet.py), one after the other (each
run wipes what the one before left). Assertions are on what happened (telemetry,
captures, the daemons' own status), never on elapsed time.
"""

from __future__ import annotations

import math
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fleet import RUN, SCENARIOS

from meshsim.scenario import load_scenario
from meshsim.vmesh.devices import run_records
from meshsim.vmesh.plan import NodePlan

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.timeout(2400),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)"),
    pytest.mark.skipif(shutil.which("podman") is None or shutil.which("tcpdump") is None,
                       reason="needs podman and tcpdump"),
]


def run(fleet: Any, name: str, out: Path, **hooks: Any) -> Any:
    return fleet.scenario(name, out, **hooks)


def records(out: Path) -> list[dict[str, Any]]:
    return run_records(out)


def test_six_in_a_line_flood_over_five_hops_and_node_6_never_hears_node_1(
        vmesh_fleet: Any, tmp_path: Path) -> None:
    from meshsim.vmesh.capture import Capture, frames_by_source

    captures: dict[str, Capture] = {}

    def capture_node_6(_t0: float, devices: dict[int, NodePlan]) -> None:
        from meshsim.vmesh.lifecycle import load_plan

        netns = load_plan(RUN).medium_netns
        cap = Capture(netns, devices[6].medium_port, tmp_path / "n6.pcap")
        cap.start()
        captures["n6"] = cap

    try:
        res = run(vmesh_fleet, "vmesh-line6", tmp_path / "run", on_start=capture_node_6)
    finally:
        for cap in captures.values():
            cap.stop()
    recs = records(res.out)
    pubs = {r["event_id"]: r for r in recs if r["event"] == "publish"}
    delivered = [(r["node"], r["sub_id"], r["event_id"], r["hop"])
                 for r in recs if r["event"] == "deliver"]
    from_1 = sorted(e for e, r in pubs.items() if r["node"] == 1)
    assert len(pubs) == 3 and len(from_1) == 2
    # node 6 gets both of node 1's alarms (level >= 3), each once, over five hops
    assert sorted((e, hop) for n, s, e, hop in delivered if n == 6) == [(e, 5) for e in from_1]
    assert len(delivered) == len(set(delivered)) == 4
    frames = frames_by_source(tmp_path / "n6.pcap")
    mac = {n: _mac(res, n) for n in (1, 5)}
    assert frames[mac[5]] > 0, frames  # the capture saw node 6's one neighbour
    assert frames[mac[1]] == 0, frames  # and never a frame straight from node 1


def _mac(res: Any, node: int) -> str:
    from meshsim.vmesh.lifecycle import load_plan

    index = sorted(res.devices).index(node)
    return load_plan(RUN).nodes[index].mesh_mac.lower()


@pytest.mark.long  # ./test.sh -m long
def test_gps_positions_stay_within_the_noise_under_random_waypoint(
        vmesh_fleet: Any, tmp_path: Path) -> None:
    from meshsim.gps.log import GpsLog
    from meshsim.vmesh import devices as dev
    from meshsub.core.geo import LocalFrame

    scenario = load_scenario(SCENARIOS / "vmesh-gps-rwp.toml")
    samples: list[tuple[int, float, dict[str, Any]]] = []
    stop = threading.Event()

    def poll(devices: dict[int, NodePlan]) -> None:
        while not stop.wait(3.0):
            for node, d in devices.items():
                asked = time.time()
                status = dev.ctl_json(d.container, "status")
                loc = status.get("location") if isinstance(status, dict) else None
                if loc and loc.get("fix"):
                    samples.append((node, asked, loc))

    threads: list[threading.Thread] = []

    def start_polling(_t0: float, devices: dict[int, NodePlan]) -> None:
        th = threading.Thread(target=poll, args=(devices,), daemon=True)
        th.start()
        threads.append(th)

    try:
        res = run(vmesh_fleet, "vmesh-gps-rwp", tmp_path / "run", on_start=start_polling)
    finally:
        stop.set()
        for th in threads:
            th.join(30)
    log = GpsLog.load(res.out / "_gps" / "fixes.jsonl")
    frame = LocalFrame(scenario.area.origin_lat, scenario.area.origin_lon)
    sigma = scenario.gps.noise_m
    errors: dict[int, list[float]] = {}
    for node, asked, loc in samples:
        # the daemon's fix came about age_s before it answered (podman exec takes a
        # while, so the epoch is found by its content among those of the last seconds)
        fix_ns = round((asked - loc["age_s"]) * 1e9)
        near = [r for r in log.records(node) if r.fix and abs(r.ts_ns - fix_ns) <= 10e9]
        assert near, (node, asked, loc)
        sent = min(near, key=lambda r: abs(r.lat - loc["lat"]) + abs(r.lon - loc["lon"]))
        # the daemon holds a fix the simulated receiver sent (NMEA rounding only) ...
        assert abs(sent.lat - loc["lat"]) < 1e-6 and abs(sent.lon - loc["lon"]) < 1e-6
        x, y, _ = frame.to_local(loc["lat"], loc["lon"], 0.0)
        errors.setdefault(node, []).append(math.hypot(x - sent.x, y - sent.y))
    assert sorted(errors) == sorted(res.devices)  # every daemon had fixes
    assert all(len(e) >= 5 for e in errors.values()), {n: len(e) for n, e in errors.items()}
    every = [e for errs in errors.values() for e in errs]
    # ... and that fix lies within the configured noise of the true position: per axis
    # N(0, sigma^2), so the radial error exceeds 5.5 sigma with probability 3e-7
    assert max(every) < 5.5 * sigma, max(every)
    rms = math.sqrt(sum(e * e for e in every) / len(every))
    assert rms < 2.0 * sigma, rms  # sqrt(2) sigma expected
    positions = [r for r in records(res.out) if r["event"] == "position"]
    assert {r["node"] for r in positions} == set(res.devices)


def test_two_groups_meet_by_mobility_and_epidemic_carries_the_old_event(
        vmesh_fleet: Any, tmp_path: Path) -> None:
    res = run(vmesh_fleet, "vmesh-groups-meet", tmp_path / "run")
    recs = records(res.out)
    t0_ns = res.manifest["t0_ns"]
    (early,) = [r for r in recs if r["event"] == "publish" and r["node"] == 1]
    assert early["ts_ns"] - t0_ns < 10e9  # published at t = 5 s, long before the meeting
    got = {(r["node"], r["sub_id"]): r for r in recs
           if r["event"] == "deliver" and r["event_id"] == early["event_id"]}
    assert set(got) == {(2, "near"), (5, "far"), (6, "flood")}
    for node in (5, 6):  # group B could hear group A only after walking over (t >= 20 s)
        assert got[(node, "far" if node == 5 else "flood")]["ts_ns"] - t0_ns > 20e9
    ups = [r for r in recs if r["event"] == "neighbor_up" and r["node"] in (4, 5, 6)
           and r["peer"] in (1, 2, 3)]
    assert ups and min(r["ts_ns"] for r in ups) - t0_ns > 20e9
    delivered = [(r["node"], r["sub_id"], r["event_id"]) for r in recs if r["event"] == "deliver"]
    assert len(delivered) == len(set(delivered))  # once each
