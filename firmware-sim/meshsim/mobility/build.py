"""From a scenario's ``[mobility]`` (or each node group's) to every node's trajectory.

Random models draw from one stream per node (``random.Random(f"{seed}:mobility:{node}")``,
and per group for reference points), separate from the placement, workload and
radio streams: mobility never shifts another draw, and changing which nodes move
does not change how the others move.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from typing import TYPE_CHECKING

from meshsim.mobility.gauss_markov import gauss_markov
from meshsim.mobility.geometry import Box
from meshsim.mobility.group import member_track, reference_track
from meshsim.mobility.lattice_walk import lattice_walk
from meshsim.mobility.random_walk import random_walk
from meshsim.mobility.random_waypoint import random_waypoint
from meshsim.mobility.setdest import setdest_tracks
from meshsim.mobility.trajectories import Track, Trajectories
from meshsim.scenario.model import (
    GaussMarkov,
    GroupMobility,
    LatticeWalk,
    Mobility,
    RandomWalk,
    RandomWaypoint,
    Scenario,
    Setdest,
)

if TYPE_CHECKING:
    from meshsim.scenario.plan import Plan


def area_box(scenario: Scenario) -> Box:
    return Box(0.0, 0.0, scenario.area.width_m, scenario.area.height_m)


def mobility_rng(scenario: Scenario, name: str | int) -> random.Random:
    return random.Random(f"{scenario.meta.seed}:mobility:{name}")


def make_trajectories(scenario: Scenario,
                      placed: Mapping[int, tuple[float, float]]) -> Trajectories:
    """Every node's track from t = 0 to at least the end of the run.

    ``placed`` is the placement (``meshsim.scenario.plan.place_nodes``); nodes a model
    does not move stay there. With node groups, each group's own mobility moves it.
    """
    groups = scenario.nodes.groups
    if not groups:
        return Trajectories(_tracks(scenario, scenario.mobility, placed))
    tracks: dict[int, Track] = {}
    for group in groups:
        tracks.update(_tracks(scenario, group.mobility, {n: placed[n] for n in group.ids}))
    return Trajectories(tracks)


def _tracks(scenario: Scenario, m: Mobility,
            placed: Mapping[int, tuple[float, float]]) -> dict[int, Track]:
    """The tracks of the nodes in ``placed`` under mobility ``m``."""
    if m.model == "scripted":
        return dict(Trajectories.from_waypoints(m.waypoints, placed).items())
    tracks = {node: Track(x, y) for node, (x, y) in placed.items()}
    box, until, params = area_box(scenario), scenario.end_s, m.params
    if isinstance(params, Setdest):
        tracks.update(setdest_tracks(params, placed))
    elif isinstance(params, RandomWaypoint):
        for node in m.nodes:
            tracks[node] = random_waypoint(mobility_rng(scenario, node), box, params,
                                           placed[node], until)
    elif isinstance(params, RandomWalk):
        for node in m.nodes:
            tracks[node] = random_walk(mobility_rng(scenario, node), box, params,
                                       placed[node], until)
    elif isinstance(params, GaussMarkov):
        for node in m.nodes:
            tracks[node] = gauss_markov(mobility_rng(scenario, node), box, params,
                                        placed[node], until)
    elif isinstance(params, GroupMobility):
        tracks.update(group_tracks(scenario, params, box, until)[1])
    elif isinstance(params, LatticeWalk):
        for node in m.nodes:
            tracks[node] = lattice_walk(mobility_rng(scenario, node), params, placed[node],
                                        until)
    elif m.model != "static":
        raise ValueError(f"mobility model {m.model!r} has no parameters")
    return tracks


def trajectories_for(scenario: Scenario, plan: Plan) -> Trajectories:
    """The run's trajectories: ``make_plan`` builds them with the start positions, so a
    driver holding the plan gets exactly the simulator's tracks."""
    return plan.trajectories


def group_tracks(scenario: Scenario, p: GroupMobility, box: Box, until: float
                 ) -> tuple[dict[int, Track], dict[int, Track]]:
    """(reference point per group, keyed by its first member; track per member)."""
    references: dict[int, Track] = {}
    members: dict[int, Track] = {}
    for group in p.groups:
        key = group[0]
        ref = reference_track(mobility_rng(scenario, f"group:{key}"), box, p, until)
        references[key] = ref
        for node in group:
            members[node] = member_track(mobility_rng(scenario, node), box, p, ref, until)
    return references, members
