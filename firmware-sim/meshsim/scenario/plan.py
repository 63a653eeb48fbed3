"""From a ``Scenario`` to what actually happens: positions, trajectories, subscriptions,
publications.

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
from meshsim.scenario.model import (
    AttrDist,
    PublicationSpec,
    Scenario,
    SubscriptionSpec,
    Template,
)
from meshsim.scenario.reader import ScenarioError
from meshsub.core.content import ContentError, Event

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


def make_plan(scenario: Scenario) -> Plan:
    # imported here: meshsim.mobility imports the scenario model
    from meshsim.mobility.build import make_trajectories

    trajectories = make_trajectories(scenario, place_nodes(scenario))
    return Plan(trajectories.positions(0.0), plan_subscriptions(scenario),
                plan_publications(scenario), trajectories)


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
    nodes, area = scenario.nodes, scenario.area
    ids = nodes.ids
    n = len(ids)
    if nodes.placement == "explicit":
        return {pid: (x, y) for pid, x, y in nodes.positions}
    if nodes.placement == "line":
        step = nodes.spacing_m if nodes.spacing_m is not None else area.width_m / n
        if step * (n - 1) > area.width_m:
            raise ScenarioError("nodes.spacing_m", f"{n} nodes {step:g} m apart do not fit "
                                                   f"in area.width_m = {area.width_m:g}")
        x0 = (area.width_m - step * (n - 1)) / 2
        return {node: (x0 + i * step, area.height_m / 2) for i, node in enumerate(ids)}
    if nodes.placement == "grid":
        cols = math.ceil(math.sqrt(n))
        rows = math.ceil(n / cols)
        if nodes.spacing_m is not None:
            dx = dy = nodes.spacing_m
            if dx * (cols - 1) > area.width_m or dy * (rows - 1) > area.height_m:
                raise ScenarioError("nodes.spacing_m", f"a {cols}x{rows} grid {dx:g} m apart "
                                                       "does not fit in the area")
        else:
            dx, dy = area.width_m / cols, area.height_m / rows
        x0 = (area.width_m - dx * (cols - 1)) / 2
        y0 = (area.height_m - dy * (rows - 1)) / 2
        return {node: (x0 + (i % cols) * dx, y0 + (i // cols) * dy)
                for i, node in enumerate(ids)}
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
        count = gen.count if gen.count is not None else round(
            (gen.fraction or 0.0) * len(gen.candidates))
        chosen = sorted(rng.sample(list(gen.candidates), count))
        weights = [e.weight for e in gen.expressions]
        made = 0
        for node in chosen:
            for k in range(gen.per_node):
                pick = rng.choices(gen.expressions, weights)[0]
                at = gen.t + made * gen.interval_s
                made += 1
                subs.append(SubscriptionSpec(node, pick.expr, pick.subscription, at,
                                             f"g{k}"))
    return tuple(sorted(subs, key=lambda s: s.t))


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


TEXT_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789 "


def sample_event(template: Template, rng: random.Random | None) -> Event:
    """One event from ``template``; with no rng, the first value of each distribution."""
    attrs = {name: _draw(dist, rng) for name, dist in template.attrs}
    return Event(template.topic, attrs)


def _draw(dist: AttrDist, rng: random.Random | None) -> int | float | str | bool:
    if dist.kind == "const":
        return dist.args[0]  # type: ignore[no-any-return]
    if dist.kind == "choice":
        return dist.args[0] if rng is None else rng.choice(dist.args)  # type: ignore[no-any-return]
    lo, hi = dist.args
    if dist.kind == "random_text":
        size = lo if rng is None else rng.randint(lo, hi)
        return "x" * size if rng is None else "".join(rng.choices(TEXT_ALPHABET, k=size))
    if dist.kind == "uniform_int":
        return int(lo if rng is None else rng.randint(lo, hi))
    value = float(lo if rng is None else rng.uniform(lo, hi))
    return round(value, dist.decimals) if dist.decimals is not None else value
