"""From a ``Scenario`` to what actually happens: positions, trajectories, subscriptions,
unsubscriptions, publications and faults.

Everything random is drawn here from named streams derived from the seed
(``random.Random(f"{seed}:placement")`` ...), so a change to one generator does not
shift the draws of another and the same seed always gives the same plan, whatever
driver (simulator or virtual mesh) runs it.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass
from typing import TYPE_CHECKING

from meshsim.radio import compute_links, is_connected, make_model
from meshsim.scenario.faults import FaultEvent, initially_absent, resolve_faults
from meshsim.scenario.groups import lattice_shape
from meshsim.scenario.model import (
    Area,
    Lifetime,
    NodeGroup,
    PublicationSpec,
    Scenario,
    SubscriptionArrivals,
    SubscriptionSpec,
    SubTemplate,
    UnsubscriptionSpec,
)
from meshsim.scenario.reader import ScenarioError
from meshsim.scenario.stationary import stationary_population
from meshsim.scenario.templates import (
    draw_lifetime,
    sample_alternatives,
    sample_event,
)
from meshsub.core.content import ContentError, Subscription
from meshsub.core.syntax import format_alternatives

if TYPE_CHECKING:
    from meshsim.mobility.trajectories import Trajectories


@dataclass(frozen=True, slots=True)
class Plan:
    positions: dict[int, tuple[float, float]]
    """Every node's position at t = 0 (its trajectory's start)."""
    subscriptions: tuple[SubscriptionSpec, ...]
    publications: tuple[PublicationSpec, ...]
    trajectories: Trajectories
    """Every node's track for the whole run (``meshsim.mobility``)."""
    unsubscriptions: tuple[UnsubscriptionSpec, ...] = ()
    """Subscriptions ending: ``until`` of explicit ones, lifetimes of generated ones."""
    faults: tuple[FaultEvent, ...] = ()
    """``[[faults]]`` resolved to exact nodes, in time order."""
    absent: frozenset[int] = frozenset()
    """Nodes without links from t = 0 (named in a ``join`` before they ever left)."""

    def roles(self, scenario: Scenario) -> dict[int, tuple[str, ...]]:
        """Every node's roles (its group's role), what its protocol gets as capabilities."""
        return {node: ((role,) if (role := scenario.nodes.role_of(node)) else ())
                for node in self.positions}


def manifest_facts(scenario: Scenario, plan: Plan) -> dict[str, object]:
    """What the evaluation needs of the structure, in every tier's manifest: the node
    groups (members, role), and the faults as resolved (scoped ground truth, state by
    role, who was down when)."""
    return {
        "groups": {g.name: {"nodes": list(g.ids), "role": g.role}
                   for g in scenario.nodes.groups},
        "faults": [{"t": f.t, "action": f.action, "nodes": list(f.nodes)} for f in plan.faults],
        "absent_at_start": sorted(plan.absent),
    }


def make_plan(scenario: Scenario) -> Plan:
    # imported here: meshsim.mobility imports the scenario model
    from meshsim.mobility.build import make_trajectories

    trajectories = make_trajectories(scenario, place_nodes(scenario))
    subscriptions = plan_subscriptions(scenario)
    groups = {g.name: g.ids for g in scenario.nodes.groups}
    return Plan(trajectories.positions(0.0), subscriptions, plan_publications(scenario),
                trajectories, plan_unsubscriptions(scenario, subscriptions),
                resolve_faults(scenario.faults, scenario.nodes.ids, groups, scenario.meta.seed),
                initially_absent(scenario.faults))


def rng_for(scenario: Scenario, stream: str) -> random.Random:
    return random.Random(f"{scenario.meta.seed}:{stream}")


# -------------------------------------------------------------------- placement


def place_nodes(scenario: Scenario) -> dict[int, tuple[float, float]]:
    """Every node's initial position: the placement's, then the pinned nodes' own."""
    return _pin(scenario, _placed(scenario))


def _pin(scenario: Scenario,
         positions: dict[int, tuple[float, float]]) -> dict[int, tuple[float, float]]:
    for pid, x, y in scenario.nodes.pinned:
        positions[pid] = (x, y)
    return positions


def _placed(scenario: Scenario) -> dict[int, tuple[float, float]]:
    nodes = scenario.nodes
    if not nodes.groups:
        return _placed_legacy(scenario)
    rngs = {g.name: rng_for(scenario, f"placement:{g.name}") for g in nodes.groups}
    model = make_model(scenario.radio)
    for _ in range(nodes.max_tries):
        positions: dict[int, tuple[float, float]] = {}
        for group in nodes.groups:
            positions.update(_place_group(scenario, group, rngs[group.name]))
        _pin(scenario, positions)
        if not nodes.connected \
                or is_connected(compute_links(positions, model, scenario.radio.links)):
            return positions
    raise ScenarioError("nodes.connected", f"no connected placement of {len(nodes.ids)} nodes "
                                           f"in {nodes.max_tries} tries (extend the radio "
                                           "range, shrink the area or raise nodes.max_tries)")


def _place_group(scenario: Scenario, group: NodeGroup,
                 rng: random.Random) -> dict[int, tuple[float, float]]:
    area, ids = scenario.area, group.ids
    if group.placement == "explicit":
        return {pid: (x, y) for pid, x, y in group.positions}
    if group.placement == "lattice":
        assert group.spacing_m is not None
        cols, _ = lattice_shape(group)
        s, (ox, oy) = group.spacing_m, group.origin
        return {node: (ox + (i % cols + 0.5) * s, oy + (i // cols + 0.5) * s)
                for i, node in enumerate(ids)}
    if group.placement == "random":
        x0, y0, x1, y1 = group.box or (0.0, 0.0, area.width_m, area.height_m)
        return {node: (rng.uniform(x0, x1), rng.uniform(y0, y1)) for node in ids}
    where = f"nodes.groups.{group.name}.spacing_m"
    return _line_or_grid(group.placement, ids, group.spacing_m, group.columns, area, where)


def _line_or_grid(placement: str, ids: tuple[int, ...], spacing: float | None,
                  columns: int | None, area: Area, where: str) -> dict[int, tuple[float, float]]:
    n = len(ids)
    if placement == "line":
        step = spacing if spacing is not None else area.width_m / n
        if step * (n - 1) > area.width_m:
            raise ScenarioError(where, f"{n} nodes {step:g} m apart do not fit "
                                       f"in area.width_m = {area.width_m:g}")
        x0 = (area.width_m - step * (n - 1)) / 2
        return {node: (x0 + i * step, area.height_m / 2) for i, node in enumerate(ids)}
    cols = columns if columns is not None else math.ceil(math.sqrt(n))
    rows = math.ceil(n / cols)
    if spacing is not None:
        dx = dy = spacing
        if dx * (cols - 1) > area.width_m or dy * (rows - 1) > area.height_m:
            raise ScenarioError(where, f"a {cols}x{rows} grid {dx:g} m apart "
                                       "does not fit in the area")
    else:
        dx, dy = area.width_m / cols, area.height_m / rows
    x0 = (area.width_m - dx * (cols - 1)) / 2
    y0 = (area.height_m - dy * (rows - 1)) / 2
    return {node: (x0 + (i % cols) * dx, y0 + (i // cols) * dy) for i, node in enumerate(ids)}


def _placed_legacy(scenario: Scenario) -> dict[int, tuple[float, float]]:
    """One placement for every node (``[nodes]`` without groups)."""
    nodes, area = scenario.nodes, scenario.area
    ids = nodes.ids
    n = len(ids)
    if nodes.placement == "explicit":
        return {pid: (x, y) for pid, x, y in nodes.positions}
    if nodes.placement in ("line", "grid"):
        return _line_or_grid(nodes.placement, ids, nodes.spacing_m, None, area,
                             "nodes.spacing_m")
    rng = rng_for(scenario, "placement")
    model = make_model(scenario.radio)
    for _ in range(nodes.max_tries):
        positions = {node: (rng.uniform(0, area.width_m), rng.uniform(0, area.height_m))
                     for node in ids}
        _pin(scenario, positions)  # connectivity is judged with the pinned nodes in place
        if not nodes.connected:
            return positions
        if is_connected(compute_links(positions, model, scenario.radio.links)):
            return positions
    raise ScenarioError("nodes.connected", f"no connected placement of {n} nodes in "
                                           f"{nodes.max_tries} tries (extend the radio range, "
                                           "shrink the area or raise nodes.max_tries)")


# ------------------------------------------------------------------- workload


def plan_subscriptions(scenario: Scenario) -> tuple[SubscriptionSpec, ...]:
    wl = scenario.workload
    subs = list(wl.subscriptions)
    gen = wl.subscribers
    if gen is not None:
        rng = rng_for(scenario, "subscribers")
        lives = rng_for(scenario, "subscribers:lifetime")
        count = gen.count if gen.count is not None else round(
            (gen.fraction or 0.0) * len(gen.candidates))
        chosen = sorted(rng.sample(list(gen.candidates), count))
        weights = [e.weight for e in (gen.templates or gen.expressions)]
        made = 0
        for node in chosen:
            per_node = gen.per_node if gen.per_node_max is None \
                else rng.randint(gen.per_node, gen.per_node_max)
            for k in range(per_node):
                at = gen.t + made * gen.interval_s
                made += 1
                if gen.templates:
                    template = rng.choices(gen.templates, weights)[0]
                    alts = _generated(template, rng, "workload.subscribers.templates")
                    expr = format_alternatives(alts)
                else:
                    pick = rng.choices(gen.expressions, weights)[0]
                    alts, expr = (pick.subscription,), pick.expr
                subs.append(SubscriptionSpec(node, expr, alts[0], at, f"g{k}",
                                             _until(at, gen.lifetime, lives),
                                             alts if len(alts) > 1 else ()))
    arrivals = wl.arrivals
    if arrivals is not None:
        rng = rng_for(scenario, "arrivals")
        lives = rng_for(scenario, "arrivals:lifetime")
        for k, at in enumerate(_times(rng, arrivals.process, arrivals.rate_per_s,
                                      arrivals.start_s, arrivals.stop_s, arrivals.count)):
            subs.append(_arrival(arrivals, rng, at, f"a{k}", _until(at, arrivals.lifetime, lives)))
        if arrivals.steady_state_window_s is not None:
            # a stream of its own: the arrivals' draws are the same with it on or off
            rng = rng_for(scenario, "arrivals:steady_state")
            population = stationary_population(
                arrivals.rate_per_s, arrivals.lifetime, arrivals.start_s,
                arrivals.steady_state_window_s, rng)
            for k, (at, ends) in enumerate(population):
                subs.append(_arrival(arrivals, rng, at, f"i{k}", ends))
    return tuple(sorted(subs, key=lambda s: s.t))


def _arrival(arrivals: SubscriptionArrivals, rng: random.Random, at: float, sub_id: str,
             until: float | None) -> SubscriptionSpec:
    """One subscription of ``[workload.arrivals]``: its node and content drawn from ``rng``."""
    node = rng.choice(arrivals.nodes)
    template = rng.choices(arrivals.templates, [tp.weight for tp in arrivals.templates])[0]
    alts = _generated(template, rng, "workload.arrivals.templates")
    return SubscriptionSpec(node, format_alternatives(alts), alts[0], at, sub_id, until,
                            alts if len(alts) > 1 else ())


def _generated(template: SubTemplate, rng: random.Random, where: str
               ) -> tuple[Subscription, ...]:
    try:
        return sample_alternatives(template, rng)
    except ContentError as exc:
        raise ScenarioError(where, str(exc)) from None


def _until(at: float, life: Lifetime, rng: random.Random) -> float | None:
    span = draw_lifetime(life, rng)
    return None if span is None else at + span


def _times(rng: random.Random, process: str, rate: float, start: float, stop: float,
           count: int | None) -> list[float]:
    """Arrival times of a Poisson or periodic process in ``[start, stop)``."""
    out: list[float] = []
    t = start
    while True:
        if process == "poisson":
            t += rng.expovariate(rate)
        elif out:
            t += 1.0 / rate
        if t >= stop or (count is not None and len(out) >= count):
            return out
        out.append(t)


def plan_unsubscriptions(scenario: Scenario, subs: tuple[SubscriptionSpec, ...]
                         ) -> tuple[UnsubscriptionSpec, ...]:
    """An unsubscribe for every subscription whose end falls inside the run."""
    return tuple(sorted((UnsubscriptionSpec(s.until, s.node, s.sub_id) for s in subs
                         if s.until is not None and s.until < scenario.end_s),
                        key=lambda u: u.t))


def plan_publications(scenario: Scenario) -> tuple[PublicationSpec, ...]:
    wl = scenario.workload
    pubs = list(wl.publications)
    gen = wl.generator
    if gen is not None:
        rng = rng_for(scenario, "publications")
        weights = [tp.weight for tp in gen.templates]
        publisher_weights = _publisher_weights(scenario)
        t = gen.start_s
        made = 0
        while True:
            if gen.process == "poisson":
                t += rng.expovariate(gen.rate_per_s)
            elif made:
                t += 1.0 / gen.rate_per_s
            if t >= gen.stop_s or (gen.count is not None and made >= gen.count):
                break
            template = rng.choices(gen.templates, weights)[0]
            node = (rng.choice(gen.publishers) if publisher_weights is None
                    else rng.choices(gen.publishers, publisher_weights)[0])
            try:
                event = sample_event(template, rng)
            except ContentError as exc:
                raise ScenarioError("workload.generator.templates", str(exc)) from None
            pubs.append(PublicationSpec(t, node, "", event))
            made += 1
    return tuple(heapq.nsmallest(len(pubs), pubs, key=lambda p: p.t))


def _publisher_weights(scenario: Scenario) -> list[float] | None:
    """Per-publisher weights of ``publisher_weight``, or None for uniform draws."""
    gen = scenario.workload.generator
    if gen is None or gen.publisher_weight == "uniform":
        return None
    from meshsim.traces.stats import degree_centrality

    centrality = degree_centrality(scenario.contacts or ())
    weights = [centrality.get(node, 0.0) for node in gen.publishers]
    if not any(weights):
        raise ScenarioError("workload.generator.publisher_weight",
                            "contact_degree needs publishers that appear in [contacts]")
    return weights
