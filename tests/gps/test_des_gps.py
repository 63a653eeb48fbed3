"""``[gps]`` in the discrete-event driver: protocols see the daemon's view, the radio the truth."""

from __future__ import annotations

import itertools
import math
from typing import Any

import pytest

from meshsim.des.engine import Simulation
from meshsim.gps.des import GpsView
from meshsim.gps.feeder import GpsFeeder
from meshsim.gps.settings import GpsSettings, Outage
from meshsim.scenario import from_dict
from meshsub.core.api import Input, NeighborChanged, NeighborUp, Position, PositionChanged
from meshsub.core.geo import LocalFrame
from meshsub.core.tracking import UERE_M


def doc(gps: dict[str, Any], **mobility: Any) -> dict[str, Any]:
    d: dict[str, Any] = {
        "scenario": {"name": "gps", "seed": 3, "duration_s": 30.0, "drain_s": 0.0},
        "area": {"width_m": 400.0, "height_m": 100.0},
        "radio": {"range_m": 60.0},
        "nodes": {"count": 4, "placement": "line", "spacing_m": 50.0},
        "protocol": {"name": "flooding"},
        "gps": gps,
    }
    if mobility:
        d["mobility"] = mobility
    return d


class Recorder:
    """Wraps every node's ``handle`` to keep the position-related inputs it gets."""

    def __init__(self, sim: Simulation) -> None:
        self.inputs: dict[int, list[Input]] = {n: [] for n in sim.nodes}
        for node, st in sim.nodes.items():
            st.proto.handle = self._wrap(node, st.proto.handle)  # type: ignore[method-assign]

    def _wrap(self, node: int, handle: Any) -> Any:
        def wrapped(inp: Input) -> Any:
            if isinstance(inp, PositionChanged | NeighborUp | NeighborChanged):
                self.inputs[node].append(inp)
            return handle(inp)
        return wrapped

    def own(self, node: int) -> list[PositionChanged]:
        return [i for i in self.inputs[node] if isinstance(i, PositionChanged)]


def run(document: dict[str, Any]) -> tuple[Simulation, Recorder]:
    sim = Simulation(from_dict(document))
    recorder = Recorder(sim)
    sim.run()
    return sim, recorder


def test_off_by_default_protocols_get_the_truth() -> None:
    d = doc({})
    del d["gps"]
    sim, rec = run(d)
    assert sim.gps is None
    assert [(p.position.x, p.position.y) for p in rec.own(2)
            if p.position is not None] == [sim.plan.positions[2]]


def test_protocols_see_noisy_gated_fixes() -> None:
    sim, rec = run(doc({"enabled": True, "noise_m": 3.0}))
    assert sim.gps is not None
    for node, st in sim.nodes.items():
        own = rec.own(node)
        assert own and own[0].now == 0.0  # a fix before the first links
        for p in (i.position for i in own):
            assert p is not None
            assert p.error_m == pytest.approx(math.sqrt(2) * 3.0)  # HDOP x UERE = DRMS
            assert math.hypot(p.x - st.position[0], p.y - st.position[1]) < 6 * 3.0
        assert (own[-1].position.x, own[-1].position.y) != st.position  # type: ignore[union-attr]
        assert st.proto.position == own[-1].position
        assert sim.gps.believed(node) == own[-1].position
        # neighbours know this node by its believed position, as from its beacons
        for peer in sim.links[node]:
            assert sim.nodes[peer].proto.neighbors[node].position == st.proto.position


def test_same_seed_same_beliefs() -> None:
    a, _ = run(doc({"enabled": True, "noise_m": 3.0, "fix_loss_per_s": 0.05}))
    b, _ = run(doc({"enabled": True, "noise_m": 3.0, "fix_loss_per_s": 0.05}))
    assert [a.gps.believed(n) for n in a.nodes] == [b.gps.believed(n) for n in b.nodes]  # type: ignore[union-attr]


def test_outage_is_announced_to_the_node_and_its_neighbours() -> None:
    sim, rec = run(doc({"enabled": True, "noise_m": 0.0, "hdop": 1.0,
                        "outages": [{"start_s": 5.0, "end_s": 10.0, "nodes": [2]}]}))
    x, y = sim.plan.positions[2]
    own = [(i.now, i.position) for i in rec.own(2)]
    assert own == [(0.0, Position(x, y, 0.0, UERE_M, 0.0)),
                   (5.0, None),  # "no fix", once
                   (10.0, Position(x, y, 0.0, UERE_M, 10.0))]
    seen_by_1 = [(i.now, i.neighbor.position) for i in rec.inputs[1]
                 if isinstance(i, NeighborChanged) and i.neighbor.node == 2]
    assert [(t, p is None) for t, p in seen_by_1] == [(5.0, True), (10.0, False)]
    assert all(len(rec.own(n)) == 1 for n in (1, 3, 4))  # still, noise 0: announced once


def test_a_moving_node_is_reported_where_it_is_at_the_epoch() -> None:
    """Noise 0: each report is the true position at its epoch (mobility ticks first), and
    the daemon's movement threshold (10 m) decides when a report is due."""
    sim, rec = run(doc({"enabled": True, "noise_m": 0.0, "hdop": 1.0},
                       model="scripted", waypoints=[[20.0, 1, 100.0, 0.0]]))
    reports = [(i.now, (i.position.x, i.position.y)) for i in rec.own(1)
               if i.position is not None]
    assert reports[0] == (0.0, sim.plan.positions[1])
    for t, (x, y) in reports:
        assert (x, y) == pytest.approx(sim.trajectories.position(1, t))
    steps = [math.dist(a[1], b[1]) for a, b in itertools.pairwise(reports)]
    assert len(steps) >= 3 and all(s > 10.0 for s in steps)
    assert math.dist(reports[-1][1], (100.0, 0.0)) <= 10.0


def test_the_view_matches_the_feeders_receiver() -> None:
    """Same seed and node: the DES believes the fixes the virtual mesh's feeder would send."""
    settings = GpsSettings(enabled=True, noise_m=3.0, outages=(Outage(2.0, 3.0),))
    view = GpsView(settings, 5, [1])
    feeder = GpsFeeder({1: ("127.0.0.1", 29470)}, LocalFrame(45.0, 7.0),
                       lambda n, t: (10.0, 20.0), settings, 5)
    beliefs = []
    for t in range(4):
        record = feeder.compose(float(t), 1_795_000_000.0 + t)[0].record
        view.tick(float(t), {1: (10.0, 20.0)})
        beliefs.append((record, view.believed(1)))
    first, first_belief = beliefs[0]
    assert first_belief is not None
    assert (round(first_belief.x, 3), round(first_belief.y, 3)) == (first["rx"], first["ry"])
    assert [(r["fix"], b is not None) for r, b in beliefs] == \
        [(True, True), (True, True), (False, False), (True, True)]
