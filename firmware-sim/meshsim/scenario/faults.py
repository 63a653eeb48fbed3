"""``[[faults]]``: nodes that crash, recover, leave and join, at given times.

Two independent states per node: *up* (its daemon runs) and *present* (it has
radio links). ``crash`` and ``recover`` switch the first: a crashed daemon does
nothing and keeps only what it persisted (the daemon's SQLite store: its
store-carry-forward buffer and its applications' subscriptions). ``leave``
and ``join`` switch the second: the daemon runs on but hears no one (it walked
out of range, or has not arrived yet). A node named in a ``join`` before it
ever left starts absent.

Nodes are named by id or drawn: ``count`` or ``fraction`` of the candidates,
the members of ``group`` (default every node) that the action can apply to
then (``crash``: up nodes; ``recover``: crashed ones; ``leave``: present ones;
``join``: absent ones), from the stream ``faults:<index>``. Resolving happens
once, in the plan, so both tiers apply exactly the same faults.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass

from meshsim.scenario.model import FAULT_ACTIONS, FaultSpec, Meta
from meshsim.scenario.reader import ScenarioError, Table, check_int

APPLIES_TO = {"crash": "up", "recover": "crashed", "leave": "present", "join": "absent"}


@dataclass(frozen=True, slots=True)
class FaultEvent:
    """A resolved fault: at ``t``, ``action`` happens to exactly ``nodes``."""

    t: float
    action: str
    nodes: tuple[int, ...]


def parse_faults(root: Table, ids: set[int], groups: Mapping[str, tuple[int, ...]],
                 meta: Meta) -> tuple[FaultSpec, ...]:
    """``[[faults]]``, each checked; the order given is kept among equal times."""
    specs = []
    end = meta.duration_s + meta.drain_s
    for t in root.tables("faults"):
        when = t.number("t", lo=0.0)
        if when >= end:
            raise t.err("t", f"must be before the end of the run ({end:g} s)")
        action = t.string("action", choices=FAULT_ACTIONS)
        group = t.opt_string("group")
        if group is not None and group not in groups:
            raise t.err("group", f"{group!r} is not a node group "
                                 f"({', '.join(sorted(groups)) or 'none defined'})")
        nodes = None
        if t.has("nodes"):
            raw = t.array("nodes")
            if not raw:
                raise t.err("nodes", "expected a non-empty array of node ids")
            nodes = tuple(check_int(v, f"{t.path}.nodes[{i}]") for i, v in enumerate(raw))
            unknown = [n for n in nodes if n not in ids]
            if unknown:
                raise t.err("nodes", f"unknown node {unknown[0]}")
            if group is not None:
                raise t.err("group", "not with nodes (name the nodes or draw from a group)")
        count = t.opt_integer("count", lo=1)
        fraction = t.opt_number("fraction", lo=0.0, lo_open=True)
        if fraction is not None and fraction > 1:
            raise t.err("fraction", f"must be <= 1 (got {fraction:g})")
        if sum(x is not None for x in (nodes, count, fraction)) != 1:
            raise t.err("nodes", "give exactly one of nodes, count and fraction")
        t.done()
        specs.append(FaultSpec(when, action, nodes, count, fraction, group))
    return tuple(sorted(specs, key=lambda s: s.t))


def initially_absent(specs: tuple[FaultSpec, ...]) -> frozenset[int]:
    """Nodes named in a ``join`` before any ``leave`` of theirs: absent from the start."""
    absent: set[int] = set()
    left: set[int] = set()
    for spec in specs:
        for node in spec.nodes or ():
            if spec.action == "leave":
                left.add(node)
            elif spec.action == "join" and node not in left:
                absent.add(node)
    return frozenset(absent)


def resolve_faults(specs: tuple[FaultSpec, ...], ids: tuple[int, ...],
                   groups: Mapping[str, tuple[int, ...]], seed: int) -> tuple[FaultEvent, ...]:
    """Every fault with its exact nodes; ``ScenarioError`` if one cannot apply."""
    crashed: set[int] = set()
    absent = set(initially_absent(specs))
    events = []
    for index, spec in enumerate(specs):
        where = f"faults[{index}]"
        state = {"up": set(ids) - crashed, "crashed": crashed,
                 "present": set(ids) - absent, "absent": absent}[APPLIES_TO[spec.action]]
        if spec.nodes is not None:
            wrong = [n for n in spec.nodes if n not in state]
            if wrong:
                raise ScenarioError(f"{where}.nodes", f"node {wrong[0]} is not "
                                    f"{APPLIES_TO[spec.action]} at t={spec.t:g}, so it cannot "
                                    f"{spec.action}")
            chosen = tuple(sorted(set(spec.nodes)))
        else:
            pool = sorted(state & set(groups[spec.group] if spec.group else ids))
            n = spec.count if spec.count is not None else round((spec.fraction or 0) * len(pool))
            if n > len(pool):
                raise ScenarioError(f"{where}.count", f"{n} nodes to {spec.action} but only "
                                    f"{len(pool)} are {APPLIES_TO[spec.action]} at "
                                    f"t={spec.t:g}")
            chosen = tuple(sorted(random.Random(f"{seed}:faults:{index}").sample(pool, n)))
        if spec.action == "crash":
            crashed.update(chosen)
        elif spec.action == "recover":
            crashed.difference_update(chosen)
        elif spec.action == "leave":
            absent.update(chosen)
        else:
            absent.difference_update(chosen)
        if chosen:
            events.append(FaultEvent(spec.t, spec.action, chosen))
    return tuple(events)
