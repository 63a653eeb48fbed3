"""Scenario runs on the virtual mesh (root): range, multi-hop, mobility and simulated GPS.

Three shipped scenarios run with ``meshsim run``'s code on six devices of the test
session's fleet (``vmesh_fleet``, tests/vmesh/fleet.py), one after the other (each
run wipes what the one before left). Assertions are on what happened (telemetry,
captures, the daemons' own status), never on elapsed time.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fleet import SCENARIOS

from meshsim.scenario import load_scenario
from meshsim.vmesh.devices import run_records
from meshsim.vmesh.plan import NodePlan

pytestmark = [
    pytest.mark.root,
    pytest.mark.slow,
    pytest.mark.timeout(2400),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (namespaces, containers)"),
    pytest.mark.skipif(not all(shutil.which(t) for t in ("podman", "tcpdump", "tshark")),
                       reason="needs podman, tcpdump and tshark"),
]


def run(fleet: Any, name: str, out: Path, **hooks: Any) -> Any:
    return fleet.scenario(name, out, **hooks)


def records(out: Path) -> list[dict[str, Any]]:
    return run_records(out)


def test_six_in_a_line_flood_over_five_hops_and_node_6_never_hears_node_1(
        vmesh_fleet: Any, tmp_path: Path) -> None:
    """Also the operator's view of the run: the medium's captures dissected by the
    Wireshark plugin, and the live map following the fleet's collector broker (each
    device's broker bridges its telemetry there, role mosquitto) in Chromium."""
    from collector import Collector
    from maphelpers import STATUS_ROWS, artefact_dir, chromium_page, map_server, scrub_until

    from meshsim.vmesh.capture import Capture, frames_by_source

    captures: dict[str, Capture] = {}

    def capture_nodes_2_3_6(_t0: float, devices: dict[int, NodePlan]) -> None:
        from meshsim.vmesh.lifecycle import load_plan

        netns = load_plan(vmesh_fleet.run).medium_netns
        for node in (6, 2, 3):
            cap = Capture(netns, devices[node].medium_port, tmp_path / f"n{node}.pcap")
            cap.start()
            captures[f"n{node}"] = cap

    fleet = vmesh_fleet.up(6).plan
    shots = artefact_dir(tmp_path, "livemap-vmesh")
    seen: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        collector = stack.enter_context(Collector(
            tmp_path / "collector", fleet.host_mgmt_addr.split("/")[0],
            [n.hostname for n in fleet.nodes]))
        url = stack.enter_context(map_server(
            "--broker", collector.address, "--topic", "meshsub/telemetry/#",
            "--username", "map", "--password-file", str(collector.map_password_file),
            "--tls-ca", str(collector.ca)))
        page = stack.enter_context(chromium_page())
        page.goto(url)

        def look_at_the_map(devices: dict[int, NodePlan]) -> None:  # the daemons still run
            _send_a_malformed_frame(devices[1], devices[2])  # into node 2's capture
            try:
                seen["t"] = scrub_until(page, "#paths .delivery[data-node='6']")
            finally:
                page.screenshot(path=str(shots / "vmesh-line6.png"))
            seen["paths"] = page.eval_on_selector_all(
                "#paths .delivery", "gs => gs.map(g => [+g.dataset.node, g.dataset.path])")
            seen["devices"] = page.eval_on_selector_all(
                "#devices .device", "gs => gs.map(g => [+g.dataset.node, +g.dataset.x,"
                " +g.dataset.y, g.classList.contains('fix')])")
            seen["links"] = page.eval_on_selector_all(
                "#links line", "ls => ls.map(l => [+l.dataset.a, +l.dataset.b])")
            page.click("#devices .device[data-node='6'] circle")
            page.wait_for_selector("#status-table")
            seen["status6"] = dict(page.eval_on_selector_all("#status-table tr", STATUS_ROWS))
            page.screenshot(path=str(shots / "vmesh-line6-status.png"))

        try:
            res = run(vmesh_fleet, "vmesh-line6", tmp_path / "run",
                      on_start=capture_nodes_2_3_6, on_end=look_at_the_map,
                      inventory_vars=collector.inventory_vars())
        finally:
            for cap in captures.values():
                cap.stop()
        assert page.errors == []
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
    mac = {n: _mac(res, n, vmesh_fleet.run) for n in (1, 5)}
    assert frames[mac[5]] > 0, frames  # the capture saw node 6's one neighbour
    assert frames[mac[1]] == 0, frames  # and never a frame straight from node 1
    # the Wireshark dissector on the medium's captures: node 1's alarms as node 2's radio
    # received them from node 1 (hop 0) and node 3's from node 2 (hop 1); the one
    # malformed frame is the truncated one node 1 sent node 2, shown as malformed
    dissected = _dissect(tmp_path / "n2.pcap", tmp_path / "n3.pcap")
    malformed = {pcap: [(p["ip.src"], p["_ws.expert.message"]) for p in packets
                        if "_ws.expert.message" in p] for pcap, packets in dissected.items()}
    assert malformed["n3"] == [] and len(malformed["n2"]) == 1, malformed
    (source,), (why,) = malformed["n2"][0]
    assert source == _node_plan(res, 1, vmesh_fleet.run).mesh_ip and "truncated" in why, malformed
    for pcap, (tx, hop) in (("n2", (1, 0)), ("n3", (2, 1))):
        packets = [p for p in dissected[pcap] if "_ws.expert.message" not in p]
        assert packets, pcap
        data = {(p["meshsub.origin"][0], p["meshsub.seq"][0],
                 p["meshsub.flooding.data.event"][0].split(",")[0]) for p in packets
                if p.get("meshsub.message") == ["flooding.DATA"]
                and p["meshsub.transmitter"] == [str(tx)] and p["meshsub.hop"] == [str(hop)]}
        topics = {"[" + pubs[e]["topic"] for e in from_1}
        assert len(data) == 2 and {(o, t in topics) for o, _, t in data} == {("1", True)}, \
            (pcap, data, topics)
    # the live map, from the devices' brokers through the collector: every device at its
    # place with its fix, the line's five links, and node 1's alarm drawn along the line
    # to node 6, whose status panel counts it
    drawn = {n: (x, y, fix) for n, x, y, fix in seen["devices"]}
    assert sorted(drawn) == list(range(1, 7)) and all(fix for *_, fix in drawn.values()), seen
    for n, (x, y, _) in drawn.items():
        assert math.dist((x, y), res.plan.positions[n]) < 0.01, (n, x, y)
    assert sorted(seen["links"]) == [[n, n + 1] for n in range(1, 6)], seen
    assert [6, "1 2 3 4 5 6"] in seen["paths"], seen
    assert seen["status6"]["neighbours"] == "5", seen  # its one neighbour, by id
    assert int(seen["status6"]["delivered"]) >= 1, seen


def _send_a_malformed_frame(src: NodePlan, dst: NodePlan) -> None:
    """A truncated meshsub frame (3 bytes) from ``src``'s radio to ``dst``'s daemon port, as
    a broken or hostile transmitter would send it (the daemon counts it as a drop)."""
    import subprocess
    import sys

    code = ("import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM)"
            f".sendto(b'\\x01\\x00\\x05', ({dst.mesh_ip!r}, 4790))")
    subprocess.run(["ip", "netns", "exec", src.netns, sys.executable, "-c", code],
                   check=True, timeout=30, capture_output=True)


def _dissect(*pcaps: Path) -> dict[str, list[dict[str, list[str]]]]:
    """tshark with deploy/wireshark/meshsub.lua on each capture (the daemons' port 4790)."""
    import json
    import subprocess

    plugin = Path(__file__).resolve().parents[2] / "deploy" / "wireshark" / "meshsub.lua"
    fields = ("ip.src", "meshsub.message", "meshsub.transmitter", "meshsub.origin", "meshsub.seq",
              "meshsub.hop", "meshsub.flooding.data.event", "_ws.expert.message")
    out = {}
    for pcap in pcaps:
        run = subprocess.run(["tshark", "-n", "-X", f"lua_script:{plugin}", "-r", str(pcap),
                              "-Y", "meshsub", "-T", "json",
                              *(arg for name in fields for arg in ("-e", name))],
                             capture_output=True, text=True, timeout=120, check=False)
        assert run.returncode == 0, run.stderr
        out[pcap.stem] = [p["_source"]["layers"] for p in json.loads(run.stdout or "[]")]
    return out


def _node_plan(res: Any, node: int, run: str) -> NodePlan:
    from meshsim.vmesh.lifecycle import load_plan

    return load_plan(run).nodes[sorted(res.devices).index(node)]


def _mac(res: Any, node: int, run: str) -> str:
    return _node_plan(res, node, run).mesh_mac.lower()


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
