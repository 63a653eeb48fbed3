"""A scenario's workload as one schedule per device: what its applications do, and when.

The virtual mesh runs the workload as an application would, over MQTT on each
device (``meshsub_workload.agent``). The host turns the scenario's plan into a
small JSON document per node; times are seconds after the run's start ``t0``,
which the host chooses once every daemon is up. Same plan, same schedule: the
simulator and the virtual mesh run identical workloads.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from meshsim.scenario.plan import Plan
from meshsub.core.syntax import format_alternatives

SCHEDULE_VERSION = 1


@dataclass(frozen=True, slots=True)
class Schedule:
    """One device's workload (``items`` in time order) and when its agent may stop."""

    node: int
    t0: float
    """Unix time of scenario time 0."""
    end_s: float
    """Scenario time at which the agent stops listening for deliveries and exits."""
    prefix: str
    items: tuple[dict[str, Any], ...]

    def to_json(self) -> str:
        return json.dumps({"version": SCHEDULE_VERSION, "node": self.node, "t0": self.t0,
                           "end_s": self.end_s, "prefix": self.prefix,
                           "items": list(self.items)}, separators=(",", ":"))


def schedules(plan: Plan, *, t0: float, end_s: float, prefix: str = "meshsub",
              nodes: list[int] | None = None) -> dict[int, Schedule]:
    """Every node's schedule (an empty one for nodes without workload)."""
    items: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for sub in plan.subscriptions:
        items[sub.node].append({"t": sub.t, "op": "sub", "sub_id": sub.sub_id,
                                "expr": format_alternatives(
                                    sub.alternatives or (sub.subscription,))})
    for unsub in plan.unsubscriptions:
        items[unsub.node].append({"t": unsub.t, "op": "unsub", "sub_id": unsub.sub_id})
    for index, pub in enumerate(plan.publications):
        items[pub.node].append({"t": pub.t, "op": "pub", "index": index,
                                "topic": pub.event.topic, "attrs": dict(pub.event.attrs)})
    every = sorted(set(nodes if nodes is not None else plan.positions) | set(items))
    # subscriptions, then unsubscriptions, then publications at equal times (the
    # simulator's order), then the plan's order
    order = {"sub": 0, "unsub": 1, "pub": 2}
    return {n: Schedule(n, t0, end_s, prefix,
                        tuple(sorted(items.get(n, []), key=lambda i: (i["t"], order[i["op"]]))))
            for n in every}
