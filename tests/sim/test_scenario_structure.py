"""``vmesh-roles-faults`` in the simulator: groups, roles, a lattice walk, faults, generators.

The checks read the run's telemetry, manifest and mobility log, so
tests/vmesh/test_structure_root.py applies the same ones to the virtual mesh
(with ``slack_s`` for the wall clock: a fault takes effect when the container
command returns, a tick when the medium is updated). Role-specific checks read
the protocol instances here and ``meshsubctl status`` on the devices there.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from simhelpers import SCENARIOS, read_run

from meshsim.des.engine import Simulation
from meshsim.des.run import run_scenario
from meshsim.mobility import Trajectories
from meshsim.scenario import load_scenario
from meshsim.scenario.plan import make_plan
from meshsub.core.content import Subscription
from meshsub.core.syntax import parse_event, parse_subscription

SCENARIO = SCENARIOS / "vmesh-roles-faults.toml"
STATIONS, WALKERS, SENSORS = range(1, 7), (7, 8), (9, 10)
CELL, ORIGIN, COLS, ROWS, STEP = 50.0, (15.0, 20.0), 3, 2, 6.0
CRASHED, CRASH_T, RECOVER_T = 2, 20.0, 40.0
LEAVE_T, JOIN_T, LATE, LATE_T = 25.0, 45.0, 8, 10.0
RANGE_M = 60.0
Rec = dict[str, Any]


def at(rec: Rec, t0_ns: int) -> float:
    return (rec["ts_ns"] - t0_ns) / 1e9


def by(recs: Iterable[Rec], event: str, node: int | None = None) -> list[Rec]:
    return [r for r in recs if r["event"] == event and (node is None or r["node"] == node)]


def epoch_of(event_id: str) -> int:
    return int(event_id.split("-")[1], 16)


def check_lattice_walk(mobility_log: Path) -> None:
    """The walkers go centre to centre, one cell per step, inside the 3 x 2 lattice."""
    points: dict[int, list[tuple[float, float, float]]] = {}
    for line in mobility_log.read_text().splitlines():
        if line.startswith("#") or not line.strip():
            continue
        t, node, x, y = line.split()
        points.setdefault(int(node), []).append((float(t), float(x), float(y)))
    centres = {(ORIGIN[0] + (i + 0.5) * CELL, ORIGIN[1] + (j + 0.5) * CELL)
               for i in range(COLS) for j in range(ROWS)}
    for walker in WALKERS:
        track = points[walker]
        assert len(track) >= 10, track
        for (t1, x1, y1), (t2, x2, y2) in itertools.pairwise(track):
            assert (round(x2, 6), round(y2, 6)) in centres
            assert t2 - t1 == pytest.approx(STEP)
            assert sorted((abs(x2 - x1), abs(y2 - y1))) == pytest.approx([0.0, CELL])
    for node in (*STATIONS, *SENSORS):
        assert len(points[node]) == 1  # static


def check_faults(recs: list[Rec], manifest: dict[str, Any], t0_ns: int, slack_s: float) -> None:
    """Crash/recover, leave/join and a late join, seen in the nodes' own records."""
    faults = {(f["t"], f["action"]): f["nodes"] for f in manifest["faults"]}
    assert faults[(CRASH_T, "crash")] == [CRASHED] and faults[(RECOVER_T, "recover")] == \
        [CRASHED]
    left = faults[(LEAVE_T, "leave")]
    assert len(left) == 1 and left[0] in SENSORS and faults[(JOIN_T, "join")] == left
    assert faults[(LATE_T, "join")] == [LATE] and manifest["absent_at_start"] == [LATE]
    # crashed: nothing at all while down, then a new boot (epoch) with its subscription back
    down = [r for r in recs if r["node"] == CRASHED
            and CRASH_T + slack_s < at(r, t0_ns) < RECOVER_T]
    assert not down, down[:3]
    own = [(at(r, t0_ns), epoch_of(r["event_id"])) for r in by(recs, "tx", CRASHED)
           if r["event_id"].startswith(f"{CRASHED:x}-")]
    before = {e for t, e in own if t < CRASH_T}
    after = {e for t, e in own if t > RECOVER_T + slack_s}
    assert before and after and min(after) > max(before), (before, after)
    resub = [r for r in by(recs, "subscribe", CRASHED) if at(r, t0_ns) >= RECOVER_T]
    assert resub, "the recovered daemon did not restore its subscription"
    # the sensor that left: no frames while away, its links back after the join
    node = left[0]
    away = [r for r in by(recs, "rx", node) if LEAVE_T + slack_s < at(r, t0_ns) < JOIN_T]
    assert not away, away[:3]
    assert [r for r in by(recs, "neighbor_down", node)
            if LEAVE_T <= at(r, t0_ns) <= LEAVE_T + slack_s + 10]
    assert [r for r in by(recs, "neighbor_up", node) if at(r, t0_ns) >= JOIN_T]
    # the walker that joined late heard nobody before it arrived
    early = [r for r in recs if r["node"] == LATE and r["event"] in ("rx", "neighbor_up")
             and at(r, t0_ns) < LATE_T]
    assert not early, early[:3]
    assert [r for r in by(recs, "neighbor_up", LATE) if at(r, t0_ns) >= LATE_T]


def check_generated(recs: list[Rec], t0_ns: int, slack_s: float, end_s: float) -> None:
    """The k-of-n tag sets, the dependent ranges and the subscriptions' lifetimes."""
    subs: dict[tuple[int, str], list[tuple[float, Subscription]]] = {}
    for r in by(recs, "subscribe"):
        subs.setdefault((r["node"], r["sub_id"]), []).append(
            (at(r, t0_ns), parse_subscription(r["content"])))
    tag_sets = [s for (n, _), lst in subs.items() if n in STATIONS for _, s in lst]
    assert tag_sets
    for s in tag_sets:
        assert s.topic == "tags/#" and 1 <= len(s.predicates) <= 2
        assert all(re.fullmatch(r"tag[0-5]", p.attr) and p.op.name == "EXISTS"
                   for p in s.predicates)
    arrivals = {k: lst[0] for k, lst in subs.items() if k[0] in WALKERS}
    assert len(arrivals) >= 4 and all(k[1].startswith("a") for k in arrivals)
    unsubs = {(r["node"], r["sub_id"]): at(r, t0_ns) for r in by(recs, "unsubscribe")}
    for key, (t, s) in arrivals.items():
        (p,) = s.predicates
        assert p.attr == "level" and 20 <= p.hi - p.lo <= 60  # type: ignore[operator]
        if key in unsubs:
            assert unsubs[key] > t
    ended = [k for k in arrivals if k in unsubs]
    assert len(ended) >= len(arrivals) - 1  # only one may outlive the run
    pubs = [parse_event(r["content"]) for r in by(recs, "publish")]
    assert len(pubs) == 25
    for e in pubs:
        tags = [a for a in e.attrs if a.startswith("tag")]
        assert 1 <= len(tags) <= 3 and isinstance(e.attrs["level"], int)
        lo, hi = e.attrs["span_lo"], e.attrs["span_hi"]
        assert isinstance(lo, int) and isinstance(hi, int) and 0 <= lo <= hi <= 1000
        assert hi - lo <= 500


def check_state(recs: list[Rec], t0_ns: int) -> None:
    """Every node reports what it holds every 10 s (state_every_s); stations carry events."""
    states = by(recs, "state")
    for node in (*STATIONS, *WALKERS, *SENSORS):
        mine = [r for r in states if r["node"] == node]
        assert {r["store"] for r in mine} == {"subscriptions", "buffer"}, node
        assert all(r["bytes"] > 0 for r in mine if r["entries"] > 0)
        assert all(r["bytes"] == 0 for r in mine if r["entries"] == 0)
    final = {r["node"]: r["entries"] for r in sorted(states, key=lambda r: r["ts_ns"])
             if r["store"] == "buffer"}  # each node's last report (daemons' timers differ)
    assert all(final.get(n, 0) >= 20 for n in (1, 4, 5, 6)), final  # most of the 25 events


def interested(recs: list[Rec], t0_ns: int) -> set[tuple[int, str, str]]:
    """(node, sub_id, event_id): subscriptions in force at publication that match."""
    spans: dict[tuple[int, str], list[tuple[float, float, Subscription]]] = {}
    for r in sorted(by(recs, "subscribe") + by(recs, "unsubscribe"), key=lambda r: r["ts_ns"]):
        key = (r["node"], r["sub_id"])
        if r["event"] == "subscribe":
            if not spans.get(key) or spans[key][-1][1] != math.inf:
                spans.setdefault(key, []).append(
                    (at(r, t0_ns), math.inf, parse_subscription(r["content"])))
        elif spans.get(key):
            start, _, s = spans[key][-1]
            spans[key][-1] = (start, at(r, t0_ns), s)
    out = set()
    for r in by(recs, "publish"):
        t, event = at(r, t0_ns), parse_event(r["content"])
        for (node, sub_id), lst in spans.items():
            if node != r["node"] and any(a <= t < b and s.matches(event) for a, b, s in lst):
                out.add((node, sub_id, r["event_id"]))
    return out


def delivery(recs: list[Rec], t0_ns: int) -> tuple[int, int]:
    want = interested(recs, t0_ns)
    got = {(r["node"], r["sub_id"], r["event_id"]) for r in by(recs, "deliver")}
    return len(want & got), len(want)


PairKey = tuple[int, str, int, str]
Pair = tuple[int, str, str]


def pair_keys(recs: list[Rec], pairs: Iterable[Pair]) -> dict[PairKey, Pair]:
    """(subscriber, subscription, publisher, event text) of each (node, sub_id, event_id):
    the same pair in both tiers, whose event ids differ (epochs)."""
    pubs = {r["event_id"]: r for r in by(recs, "publish")}
    return {(n, s, pubs[e]["node"], pubs[e]["content"]): (n, s, e) for n, s, e in pairs}


def spare(recs: list[Rec], t0_ns: int) -> dict[PairKey, float]:
    """For each interested pair delivered: how long its subscription stayed in force after
    the delivery (``inf`` for one never ended). A walker's subscription that ends 1.3 s
    after the contact that brought its event is delivered in the simulator; on the
    virtual mesh the same contact begins a discovery beacon and a medium update later."""
    ends: dict[tuple[int, str], list[float]] = {}
    for r in by(recs, "unsubscribe"):
        ends.setdefault((r["node"], r["sub_id"]), []).append(at(r, t0_ns))
    delivered = {(r["node"], r["sub_id"], r["event_id"]): at(r, t0_ns) for r in by(recs, "deliver")}
    out = {}
    for key, (n, s, e) in pair_keys(recs, interested(recs, t0_ns)).items():
        if (n, s, e) in delivered:
            t = delivered[(n, s, e)]
            out[key] = min((u for u in ends.get((n, s), []) if u >= t), default=math.inf) - t
    return out


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any], list[Rec]]:
    out = tmp_path_factory.mktemp("structure") / "run"
    run_scenario(load_scenario(SCENARIO), out)
    manifest, records = read_run(out)
    return out, manifest, records


def test_lattice_walk_moves_the_walkers_cell_by_cell(run: Any) -> None:
    check_lattice_walk(run[0] / "mobility.log")


def test_faults_crash_recover_leave_and_join(run: Any) -> None:
    check_faults(run[2], run[1], 0, 0.0)


def test_generated_workloads(run: Any) -> None:
    check_generated(run[2], 0, 0.0, 75.0)


def test_protocols_report_their_state(run: Any) -> None:
    check_state(run[2], 0)


def test_every_interested_subscription_gets_its_events(run: Any) -> None:
    assert delivery(run[2], 0) == (19, 19)


def test_groups_and_roles_reach_every_protocol() -> None:
    scenario = load_scenario(SCENARIO)
    sim = Simulation(scenario)
    sim.run()
    roles = {n: st.proto.capabilities for n, st in sim.nodes.items()}
    assert roles == {**dict.fromkeys(STATIONS, ("base_station",)),
                     **dict.fromkeys(WALKERS, ("client",)),
                     **dict.fromkeys(SENSORS, ("sensor",))}
    capacity = {n: st.proto.buffer.capacity for n, st in sim.nodes.items()}  # type: ignore[attr-defined]
    assert {capacity[n] for n in WALKERS} == {50}  # [protocol.epidemic.roles.client]
    assert {capacity[n] for n in (*STATIONS, *SENSORS)} == {1000}
    station = sim.nodes[5].proto  # its neighbours' roles, as beacons would carry them
    assert {i.node: i.capabilities for i in station.neighbors.values()
            if i.node in SENSORS} == {9: ("sensor",), 10: ("sensor",)}
    plan = make_plan(scenario)
    assert plan.positions[1] == (40.0, 45.0) and plan.positions[6] == (140.0, 95.0)
    # stations are on mains, the others drain nothing here ([energy] is off)
    assert scenario.energy.mains == tuple(STATIONS)


def check_links_follow(recs: list[Rec], traj: Trajectories, t0_ns: int, slack_s: float) -> None:
    """A walker's neighbours are stations within range of where the walk has it: at the
    time of the record, or up to one mobility tick (1 s) and ``slack_s`` before it."""
    ups = [r for r in by(recs, "neighbor_up") if r["node"] in WALKERS and r["peer"] in STATIONS]
    assert ups
    for r in ups:
        t = at(r, t0_ns)
        times = [t - k * 0.1 for k in range(int((1.0 + slack_s) * 10) + 1)]
        closest = min(math.dist(traj.position(r["node"], s), traj.position(r["peer"], s))
                      for s in times)
        assert closest <= RANGE_M + 1e-6, (r, closest)


def test_the_walkers_links_follow_the_walk(run: Any) -> None:
    traj = make_plan(load_scenario(SCENARIO)).trajectories
    check_links_follow(run[2], traj, 0, 0.0)
