"""Zheng 2008, Table 5.1 (§5.4) in the discrete-event simulator, costs counted from telemetry.

The set-up is the scenario file ``firmware-sim/meshsim/scenarios/puma-table51.toml``:
625 base stations on a 25 x 25 lattice of 50 m cells, clients that start at the
centre cell, subscribe there half a unit in (the centre station is their previous
broker) and walk one cell per 1 s time unit, the renormalised walk at the border, for
12 units. ``simulate`` loads that file through the scenario API ``meshsim simulate``
uses (``load_scenario`` with ``--set``-style overrides: the protocol and its
parameters, the seed, how many clients, and a workload that gives each client a
topic of its own with an event on it published at the previous broker every
``I_event`` units, a quarter unit after the walk's jump) and runs it in the
simulator's engine with ``CostCounter`` as the telemetry sink: the records a run
directory would hold, counted as they are made instead of written.

**Several clients share one simulation** (one simulation is one seed's batch of
runs). That is sound because each of them is a thesis run on its own:

- the simulator has no MAC (no contention, no queueing: docs/scenarios.md), so
  traffic for one client cannot delay or lose another's;
- each client's walk is drawn from its own stream (``mobility:<node>``), so it
  walks the same whether others are there or not;
- every last-mile message is attributable to one client from its telemetry
  record alone: DELIVER, LOCAL and PAGE carry the event's id (``event_id``), whose
  ``publish`` record names the topic, whose one ``subscribe`` record names the
  client; REPLY, REPORT and HELLO keep the client's own message id on every relay
  hop, so the id's origin is the client;
- the previous broker keeps a track, a pending delivery and a timer per client
  and event, and its tables (``max_clients``, ``max_pending``) hold far more
  clients than a batch.

``tests/sim/test_puma_table51.py`` checks the last two: a client alone and the
same client among others are counted alike, and the counting is the hand count
of a small run.

Counting (§5.4.1): the *system cost* of a client's run is every last-mile
message of it (the delivery trees' DELIVERs, the LOCAL hand-over to the client,
the client's REPLY and its relay hops; for paging the PAGE hops, the paging
area's DELIVERs, the LOCAL and the client's REPORTs with their relay), per
delivered event; the *client cost* is the client's own messages per delivered
event. Subscription traffic (SUBSCRIBE, the spreading over the broker tree) and
BEACONs are not last-mile messages, as in the thesis.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meshsim.des.engine import Simulation
from meshsim.scenario import load_scenario
from meshsim.scenario.model import Scenario
from meshsub.core.api import MessageId, TelemetryValue
from meshsub.protocols.puma import messages as m

SCENARIO = (Path(__file__).resolve().parent.parent / "firmware-sim" / "meshsim" / "scenarios"
            / "puma-table51.toml")
SIDE = 25
"""Cells per side of the scenario's lattice (Table 5.1)."""
DURATION = 12
"""Time units of a run (Table 5.1)."""
STATIONS = SIDE * SIDE
CENTRE_STATION = 1 + (SIDE // 2) * SIDE + SIDE // 2
"""The lattice group fills rows from the lower left: node 1 + gy * 25 + gx; (12, 12)."""
FIRST_CLIENT = STATIONS + 1
SUBSCRIBE_AT = 0.5
"""Units into the run: the client subscribes before its first jump (at 1 unit)."""
PUBLISH_AFTER = 0.25
"""Units after the walk's jump: the event finds the client in its new cell."""
EVENT_TYPES = frozenset({m.DELIVER, m.LOCAL, m.PAGE})
"""Last-mile messages that carry the event's id."""
CLIENT_ROUTED = m.LAST_MILE - EVENT_TYPES
"""Last-mile messages a client originates (REPLY, REPORT, HELLO); every relay hop keeps the
client's message id."""


class AttributionError(ValueError):
    """The telemetry names a topic twice or a message no client owns."""


@dataclass
class ClientCounts:
    """One client's run: last-mile messages (all, and its own) and its events."""

    system: int = 0
    client: int = 0
    events: int = 0
    delivered: int = 0
    by_type: Counter[int] = field(default_factory=Counter)


class CostCounter:
    """A telemetry sink (``meshsim.des.engine.TelemetrySink``) that counts each client's
    last-mile messages and events as the records are made.

    ``add(node, event, attrs)`` takes one record as written to a run directory
    (``attrs`` its attribute fields), so the same counting runs over a run
    directory's files. Records come in time order; a client's ``subscribe``
    precedes the ``publish`` of its events, which precedes their messages.
    """

    def __init__(self, clients: Iterable[int]) -> None:
        self.clients: dict[int, ClientCounts] = {c: ClientCounts() for c in clients}
        self._topic: dict[str, int] = {}
        self._event: dict[str, int] = {}
        self._delivered: set[tuple[int, str]] = set()
        self.unattributed: Counter[int] = Counter()
        """Last-mile messages of no known client, by type (0 in a sound run)."""
        self.drops: Counter[str] = Counter()

    # the TelemetrySink protocol
    def record(self, node: int, ts_ns: int, event: str,
               attrs: Mapping[str, TelemetryValue]) -> None:
        self.add(node, event, attrs)

    def record_many(self, nodes: Sequence[int], ts_ns: int, event: str,
                    attrs: Mapping[str, TelemetryValue]) -> None:
        if event == "rx":
            return  # receptions: each transmission is counted once, at its sender
        for node in nodes:
            self.add(node, event, attrs)

    def add(self, node: int, event: str, attrs: Mapping[str, Any]) -> None:
        if event == "tx":
            mtype = attrs["msg_type"]
            if mtype in m.LAST_MILE:
                self._tx(node, int(mtype), str(attrs["event_id"]))
        elif event == "subscribe" and node in self.clients:
            topic = str(attrs["topic"])
            owner = self._topic.setdefault(topic, node)
            if owner != node:
                raise AttributionError(f"topic {topic!r} subscribed by clients {owner} "
                                       f"and {node}: their events are not attributable")
        elif event == "publish":
            client = self._topic.get(str(attrs["topic"]))
            if client is not None:
                self._event[str(attrs["event_id"])] = client
                self.clients[client].events += 1
        elif event == "deliver" and node in self.clients:
            key = (node, str(attrs["event_id"]))
            if key not in self._delivered and self._event.get(key[1]) == node:
                self._delivered.add(key)
                self.clients[node].delivered += 1
        elif event == "drop":
            self.drops[str(attrs["reason"])] += int(attrs.get("count") or 1)

    def _tx(self, node: int, mtype: int, event_id: str) -> None:
        if mtype in EVENT_TYPES:
            owner = self._event.get(event_id)
        else:
            owner = MessageId.parse(event_id).origin
        counts = self.clients.get(owner) if owner is not None else None
        if counts is None:
            self.unattributed[mtype] += 1
            return
        counts.system += 1
        counts.by_type[mtype] += 1
        if node == owner:
            counts.client += 1


@dataclass(frozen=True, slots=True)
class Batch:
    """One simulation: ``clients`` thesis runs at ``interval``, under one protocol set-up."""

    protocol: str
    """``puma`` or ``paging``."""
    interval: int
    clients: int
    seed: int
    params: tuple[tuple[str, float | int], ...] = ()
    """The protocol's parameters beyond the scenario file's (``th``, ``dist``)."""


def event_units(interval: int) -> list[int]:
    """The units after whose jump an event is published: I_event, 2 I_event, ... <= 12."""
    return list(range(interval, DURATION + 1, interval))


def overrides(batch: Batch) -> list[str]:
    """The ``--set`` assignments that turn the scenario file into ``batch``."""
    if batch.clients < 1:
        raise ValueError("a batch needs at least one client")
    nodes = range(FIRST_CLIENT, FIRST_CLIENT + batch.clients)
    subs = ", ".join(f'{{node = {c}, expr = "c{c}", t = {SUBSCRIBE_AT}}}' for c in nodes)
    pubs = ", ".join(f'{{t = {u + PUBLISH_AFTER}, node = {CENTRE_STATION}, '
                     f'event = "c{c} n={u}"}}'
                     for u in event_units(batch.interval) for c in nodes)
    out = [f"scenario.seed={batch.seed}", f"protocol.name={batch.protocol}",
           f"nodes.groups[1].count={batch.clients}",
           f"workload.subscriptions=[{subs}]", f"workload.publications=[{pubs}]"]
    out += [f"protocol.{batch.protocol}.{k}={v}" for k, v in batch.params]
    return out


def scenario_for(batch: Batch, path: Path = SCENARIO) -> Scenario:
    scenario = load_scenario(path, overrides(batch))
    unit = float(getattr(scenario.protocol.params, "unit_s", 1.0))
    if unit != 1.0:
        raise ValueError(f"{path}: the counting assumes 1 s time units, not {unit}")
    return scenario


def simulate(batch: Batch, path: Path = SCENARIO) -> CostCounter:
    """Run ``batch`` in the simulator; its clients' counts (node id -> ``ClientCounts``)."""
    scenario = scenario_for(batch, path)
    counter = CostCounter(range(FIRST_CLIENT, FIRST_CLIENT + batch.clients))
    sim = Simulation(scenario, counter)
    centre = sim.plan.positions[CENTRE_STATION]
    if (int(centre[0] // 50.0), int(centre[1] // 50.0)) != (SIDE // 2, SIDE // 2):
        raise ValueError(f"{path}: node {CENTRE_STATION} is not the centre cell's station")
    sim.run()
    if counter.unattributed:
        raise AttributionError(f"last-mile messages of no client: {dict(counter.unattributed)}")
    return counter
