"""The discrete-event driver: N protocol state machines over a radio model, in virtual time.

``meshsim.des.clock.Clock`` is the clock and the event heap; every scheduled thing
(a frame arrival, a timer, a workload input, a mobility tick, a contact) is one
callback at a time, so there are no generator processes and ties break by
scheduling order: the same scenario and seed always give the same run.

Model, deliberately simple (docs/scenarios.md): links from the radio model (or
from contact events), independent loss per receiver and per frame, arrival
after ``radio.delay_s`` (or the pair's ``links[].delay_s``) plus, with
``radio.bitrate_bps``, the serialisation time of the frames. There is no MAC:
no contention, collisions, queueing or airtime sharing.
"""

from __future__ import annotations

import gc
import hashlib
import json
import random
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any
from typing import Protocol as TypingProtocol

from meshsim.des.clock import Clock
from meshsim.des.codec import Sizer, make_sizer
from meshsim.des.energy import Batteries
from meshsim.des.stats import Delivery, Published, SimStats
from meshsim.gps.des import GpsView
from meshsim.mobility.contacts import contact_timeline
from meshsim.mobility.trajectories import Trajectories
from meshsim.radio import Links, compute_links, make_model, pair_delays
from meshsim.scenario.model import Contact, Scenario, SubscriptionSpec, to_plain
from meshsim.scenario.plan import Plan, make_plan
from meshsub.core.api import (
    Action,
    Broadcast,
    CancelTimer,
    Deliver,
    Emit,
    EnergyChanged,
    FrameReceived,
    Input,
    LocalPublish,
    LocalSubscribe,
    LocalUnsubscribe,
    Message,
    NeighborChanged,
    NeighborDown,
    NeighborInfo,
    NeighborUp,
    Position,
    PositionChanged,
    SendTo,
    SendToMany,
    SetTimer,
    Stopping,
    TelemetryValue,
    TimerFired,
)
from meshsub.core.buffer import MemoryStore
from meshsub.core.protocol import DROP_SUMMARY_S, Protocol
from meshsub.core.registry import get_protocol
from meshsub.core.telemetry import frame_attrs

EPOCH = 1
"""Every simulated node boots once."""
GC_THRESHOLD = 100_000
"""Allocations between two young-generation collections while a run is running."""
PROGRESS_STEPS = 200
"""Slices of virtual time between two progress reports."""


class TelemetrySink(TypingProtocol):
    """Where records go. A sink may also have ``record_many(nodes, ts_ns, event, attrs)``,
    the same record for each of ``nodes`` (the receivers of one frame), used when present."""

    def record(self, node: int, ts_ns: int, event: str,
               attrs: Mapping[str, TelemetryValue]) -> None: ...


class NullSink:
    """Discards records (benchmarks of the engine alone, dry runs)."""

    def record(self, node: int, ts_ns: int, event: str,
               attrs: Mapping[str, TelemetryValue]) -> None:
        return None

    def record_many(self, nodes: Sequence[int], ts_ns: int, event: str,
                    attrs: Mapping[str, TelemetryValue]) -> None:
        return None


def default_run_id(scenario: Scenario) -> str:
    """Deterministic: name, seed and a digest of the resolved scenario.

    Identical runs (same scenario, same seed) produce identical telemetry, so they
    may share an id; anything that changes the run changes the digest.
    """
    digest = hashlib.sha256(json.dumps(to_plain(scenario), sort_keys=True,
                                       default=str).encode()).hexdigest()[:8]
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", scenario.meta.name).strip("-") or "run"
    return f"{name}-s{scenario.meta.seed}-{digest}"


@dataclass(slots=True)
class _Node:
    proto: Protocol
    sizer: Sizer
    position: tuple[float, float]
    timers: dict[str, int] = field(default_factory=dict)
    epoch: int = EPOCH
    store: MemoryStore | None = None
    """What the node persisted (its SCF buffer): a crash keeps it, as the daemon's SQLite."""


class Simulation:
    """One run of a scenario. ``run()`` once; results in ``stats``."""

    def __init__(
        self,
        scenario: Scenario,
        sink: TelemetrySink | None = None,
        *,
        plan: Plan | None = None,
        sizer_factory: Callable[[int, int, int], Sizer] = make_sizer,
        drop_summary_s: float = DROP_SUMMARY_S,
    ) -> None:
        """``drop_summary_s``: the protocols' drop-summary interval (0: a record per drop)."""
        self.scenario = scenario
        self.drop_summary_s = drop_summary_s
        self.plan = plan if plan is not None else make_plan(scenario)
        self.sink: TelemetrySink = sink if sink is not None else NullSink()
        self._record_many: Callable[[Sequence[int], int, str, Mapping[str, TelemetryValue]],
                                    None] = getattr(self.sink, "record_many", self._each)
        self.env = Clock()
        self._at: Callable[..., None] = self.env.at
        """Schedule ``fn(*args)`` at absolute virtual time ``t`` (FIFO among equals)."""
        self.rng = random.Random(f"{scenario.meta.seed}:radio")
        self.model = make_model(scenario.radio)
        self.pair_delay = pair_delays(scenario.radio.links)
        self.stats = SimStats(nodes=len(self.plan.positions))
        self._unrecorded = frozenset(scenario.meta.unrecorded)
        self._timer_gen = 0
        self.cls = get_protocol(scenario.protocol.name)
        self._handle_each = self.cls.handle_each
        self.protocol_name = scenario.protocol.name
        self.sizer_factory = sizer_factory
        self.roles = self.plan.roles(scenario)
        """Every node's roles: its protocol's capabilities, what its neighbours see."""
        self.nodes: dict[int, _Node] = {}
        for node, pos in sorted(self.plan.positions.items()):
            store = MemoryStore() if self.cls.buffer_store else None
            self.nodes[node] = _Node(self._protocol(node, EPOCH, store),
                                     sizer_factory(node, EPOCH, scenario.radio.payload_size),
                                     pos, store=store)
        self._protos: dict[int, Protocol] = {node: st.proto for node, st in self.nodes.items()}
        """Every node's running protocol instance (``_Node.proto``), for a frame's receivers
        in one C-level ``map``."""
        self.crashed: dict[int, float] = {}
        """Nodes whose daemon is down (``[[faults]]`` crash), and since when: no input at all."""
        self.absent: set[int] = set(self.plan.absent)
        """Nodes without links (left, or not joined yet): their daemon runs on."""
        self._deferred: dict[int, list[Callable[[], None]]] = {}
        """Application requests to a crashed node, fed when it recovers (the broker's queue)."""
        self._contacts_up: dict[frozenset[int], float] = {}
        self._link_epoch = 0
        """Counts link ups and downs: a frame sent since the last one needs no link check."""
        self.links: Links = {node: {} for node in self.nodes}
        self._sorted_links: dict[int, list[tuple[int, float]]] = {}
        """``sorted(self.links[node].items())``, made at a node's first broadcast since its
        links last changed (``_link_up``, ``_link_down`` and a changed loss clear it):
        a flooded message is broadcast by every node, links change far less often."""
        self.trajectories: Trajectories = self.plan.trajectories
        self.gps = (GpsView(scenario.gps, scenario.meta.seed, self.nodes)
                    if scenario.gps.enabled else None)
        """``[gps]`` enabled: protocols see the daemon's view of a noisy fix; radio, truth."""
        self.batteries = (Batteries(scenario.energy, self.nodes, scenario.radio.range_m)
                          if scenario.energy.enabled else None)
        """``[energy]`` enabled: every node's battery, drained by its transmissions."""
        self._ran = False

    # ------------------------------------------------------------------ running

    def run(self, progress: Callable[[float], None] | None = None,
            steps: int = PROGRESS_STEPS) -> SimStats:
        """Run to the end; ``progress(virtual seconds done)`` after each of ``steps``
        equal slices of virtual time (running in slices changes no event's order)."""
        if self._ran:
            raise RuntimeError("a Simulation runs once")
        self._ran = True
        started = time.perf_counter()
        self._start()
        end = self.scenario.end_s
        # The nodes' state built so far lives to the end: keep the collector from
        # scanning it again and again, and collect the young less often (no model
        # object depends on when the collector runs).
        gc.collect()
        gc.freeze()
        threshold = gc.get_threshold()
        gc.set_threshold(GC_THRESHOLD, *threshold[1:])
        try:
            if progress is None:
                self.env.run(end)
            else:
                for step in range(1, steps + 1):
                    until = end if step == steps else end * step / steps
                    if until > self.env.now:
                        self.env.run(until)
                    progress(self.env.now)
        finally:
            gc.set_threshold(*threshold)
            gc.unfreeze()
        self._stop()
        self.stats.sim_time_s = self.scenario.end_s
        self.stats.wall_s = time.perf_counter() - started
        return self.stats

    def _protocol(self, node: int, epoch: int, store: MemoryStore | None) -> Protocol:
        """A node's protocol instance (a new one per boot: a recovery is a reboot)."""
        s = self.scenario
        kwargs: dict[str, Any] = {"epoch": epoch, "params": s.protocol.params_for(
            s.nodes.role_of(node)), "seed": s.meta.seed + epoch - EPOCH,
            "capabilities": self.roles[node], "state_every_s": s.meta.state_every_s,
            "drop_summary_s": self.drop_summary_s}
        if store is not None:
            kwargs["store"] = store
        return self.cls(node, **kwargs)

    def _start(self) -> None:
        for node, st in self.nodes.items():
            self._position(node, st.position)
        if self.gps is not None:
            self._gps_epoch()  # first fixes before the first links, as a booting daemon
        if self.scenario.contacts is None:
            self._set_links(self._radio_links())
        for contact in contact_timeline(self.scenario.contacts or ()):
            self._at(contact.t, self._contact, contact)
        if self.trajectories.last_t > 0:
            tick = self.scenario.mobility.tick_s
            self._at(tick, self._tick, tick)
        members = {}  # an application's subscription is one core subscription per alternative
        for sub in self.plan.subscriptions:
            members[(sub.node, sub.sub_id)] = [m for m, _ in sub.members()]
            for member, core_sub in sub.members():
                self._at(sub.t, self._feed, sub.node,
                         lambda now, m=member, c=core_sub: LocalSubscribe(now, m, c))
        for unsub in self.plan.unsubscriptions:
            for member in members.get((unsub.node, unsub.sub_id), [unsub.sub_id]):
                self._at(unsub.t, self._feed, unsub.node,
                         lambda now, m=member: LocalUnsubscribe(now, m))
        for fault in self.plan.faults:
            self._at(fault.t, self._fault, fault.action, fault.nodes)
        for index, pub in enumerate(self.plan.publications):
            self._at(pub.t, self._publish, index)
        if self.gps is not None:  # scheduled after the mobility tick: epochs see the move
            self._at(self.gps.period_s, self._gps_tick)
        if self.batteries is not None:
            self._energy_tick()

    def _stop(self) -> None:
        """The end of the run: every running daemon records what it still holds
        (pending drop summaries); nothing it would send goes out any more."""
        now = self.env.now
        for node, st in self.nodes.items():
            if node in self.crashed:
                continue  # a dead daemon's pending counts died with it
            for action in st.proto.handle(Stopping(now)):
                if isinstance(action, Emit):
                    self._record(node, action.event, action.attrs)

    # ------------------------------------------------------------------- inputs

    def _feed(self, node: int, make: Callable[[float], Input]) -> None:
        """An application's request; a crashed node gets it when it recovers."""
        if node in self.crashed:
            self._deferred.setdefault(node, []).append(lambda: self._feed(node, make))
            return
        self._handle(node, make(self.env.now))

    def _handle(self, node: int, inp: Input) -> None:
        if node in self.crashed:
            return  # a daemon that is down hears nothing
        st = self.nodes[node]
        self.stats.node_events += 1
        actions = st.proto.handle(inp)
        if actions:
            self._apply(node, st, actions)

    def _publish(self, index: int) -> None:
        pub = self.plan.publications[index]
        if pub.node in self.crashed:
            self._deferred.setdefault(pub.node, []).append(lambda: self._publish(index))
            return
        proto = self.nodes[pub.node].proto
        event_id = proto.new_message_id()
        now = self.env.now
        self.stats.published.append(Published(index, str(event_id), pub.node, now, pub.event))
        self._handle(pub.node, LocalPublish(now, pub.event, event_id))

    def _fire(self, node: int, name: str, gen: int) -> None:
        st = self.nodes[node]
        if st.timers.get(name) != gen:
            return  # cancelled or re-armed since
        del st.timers[name]
        self._handle(node, TimerFired(self.env.now, name))

    # ------------------------------------------------------------------ actions

    def _apply(self, node: int, st: _Node, actions: Sequence[Action]) -> None:
        for action in actions:
            match action:
                case Broadcast(message=message):
                    self._transmit(node, st, None, message)
                case SetTimer(name=name, at=at):  # the most frequent actions first
                    self._timer_gen += 1
                    st.timers[name] = self._timer_gen
                    self._at(at, self._fire, node, name, self._timer_gen)
                case SendTo(node=dest, message=message):
                    self._transmit(node, st, (dest,), message)
                case SendToMany(nodes=dests, message=message):
                    self._transmit(node, st, tuple(sorted(dests)), message)
                case Emit(event=event, attrs=attrs):
                    self._record(node, event, attrs)
                case Deliver(sub_id=sub_id, event_id=event_id, hop=hop):
                    self.stats.deliveries.append(
                        Delivery(str(event_id), node, sub_id, self.env.now, hop))
                case CancelTimer(name=name):
                    st.timers.pop(name, None)

    def _each(self, nodes: Sequence[int], ts_ns: int, event: str,
              attrs: Mapping[str, TelemetryValue]) -> None:
        """``record_many`` for a sink that has only ``record``."""
        for node in nodes:
            self.sink.record(node, ts_ns, event, attrs)

    def _record(self, node: int, event: str, attrs: Mapping[str, TelemetryValue]) -> None:
        if event in self._unrecorded:  # counted, for the manifest (docs/scenarios.md)
            self.stats.unrecorded[event] += 1
            return
        self.stats.records += 1
        self.sink.record(node, round(self.env.now * 1e9), event, attrs)

    def _transmit(self, node: int, st: _Node, dests: tuple[int, ...] | None,
                  message: Message) -> None:
        """One broadcast, or one unicast per destination; one encode per action."""
        proto = st.proto
        kind = proto.kind_of(message.type).value
        try:
            sizes = st.sizer(proto.protocol_id, message)
        except Exception as exc:  # the codec refused the message: a counted drop
            reason = getattr(exc, "reason", type(exc).__name__)
            self.stats.encode_errors[reason] += 1
            self._record(node, "drop", {"reason": f"encode_{reason}",
                                        "event_id": str(message.id),
                                        "msg_type": message.type, "msg_kind": kind})
            return
        nbytes = sum(sizes)
        nframes = len(sizes)
        radio = self.scenario.radio
        serial = 0.0 if radio.bitrate_bps is None else nbytes * 8 / radio.bitrate_bps
        delay = radio.delay_s + serial
        neighbors = self.links[node]
        attrs = frame_attrs(message, kind, nbytes)
        batteries = self.batteries
        if dests is None:
            self._count_tx(node, kind, nbytes, nframes, attrs)
            if batteries is not None:
                batteries.charge_tx(node, nbytes, None)
            candidates = self._sorted_links.get(node)
            if candidates is None:
                candidates = self._sorted_links[node] = sorted(neighbors.items())
        else:
            candidates = []
            for dest in dests:
                self._count_tx(node, kind, nbytes, nframes, {**attrs, "peer": dest})
                if batteries is not None:
                    batteries.charge_tx(node, nbytes, self._distance(node, dest))
                loss = neighbors.get(dest)
                if loss is None:
                    self.stats.no_link += 1
                else:
                    candidates.append((dest, loss))
        rng = self.rng
        if nframes == 1:  # the common case: one draw per lossy link, in order, as below
            random = rng.random
            receivers = [dest for dest, loss in candidates
                         if not (loss > 0.0 and random() < loss)]
            self.stats.lost += len(candidates) - len(receivers)
        else:
            receivers = []
            for dest, loss in candidates:
                if loss > 0.0 and any(rng.random() < loss for _ in range(nframes)):
                    self.stats.lost += 1
                else:
                    receivers.append(dest)
        if not receivers:
            return
        epoch = self._link_epoch
        if not self.pair_delay:
            self._at(self.env.now + delay, self._arrive, node, receivers, message, nbytes, kind,
                     epoch, attrs)
            return
        by_delay: dict[float, list[int]] = {}
        for dest in receivers:  # per-pair overrides replace radio.delay_s for their pair
            pair = self.pair_delay.get((node, dest))
            hop = delay if pair is None else pair + serial
            by_delay.setdefault(hop, []).append(dest)
        for hop, group in sorted(by_delay.items()):
            self._at(self.env.now + hop, self._arrive, node, group, message, nbytes, kind,
                     epoch, attrs)

    def _count_tx(self, node: int, kind: str, nbytes: int, nframes: int,
                  attrs: Mapping[str, TelemetryValue]) -> None:
        self.stats.tx[kind] += 1
        self.stats.tx_bytes[kind] += nbytes
        self.stats.tx_frames += nframes
        self._record(node, "tx", attrs)

    def _arrive(self, sender: int, receivers: list[int], message: Message, nbytes: int,
                kind: str, link_epoch: int, sent: Mapping[str, TelemetryValue]) -> None:
        """One frame reaches its receivers: every ``rx`` record in one batch (one line
        pattern for all), then each receiver's protocol in turn. Per node, the order
        of records is the same as one receiver at a time: handling a frame changes
        no link and writes records only for the node that handles it.

        ``link_epoch``: ``_link_epoch`` when the frame was sent; unchanged, every
        receiver still has its link to the sender. ``sent``: the transmission's
        ``frame_attrs`` without a peer (never changed: the ``tx`` record may hold it);
        with the sender as ``peer`` they are this frame's ``rx`` attributes."""
        now = self.env.now
        stats, nodes = self.stats, self.nodes
        if link_epoch == self._link_epoch:
            heard = receivers
        else:
            links = self.links
            heard = [dest for dest in receivers if sender in links[dest]]
            stats.lost += len(receivers) - len(heard)  # links that went down in flight
            if not heard:
                return
        count = len(heard)
        stats.rx[kind] += count
        attrs = {**sent, "peer": sender}  # frame_attrs(message, kind, nbytes, sender)
        if kind == "data":
            reached = stats.rx_reached.get(message.id)
            if reached is None:
                reached = stats.rx_reached[message.id] = set()
            reached.update(heard)
        stats.records += count
        self._record_many(heard, round(now * 1e9), "rx", attrs)
        batteries = self.batteries
        inp = FrameReceived(now, sender, message)
        stats.node_events += count
        apply = self._apply
        if batteries is None and self.cls.duplicate_types:  # copies counted in one call
            for index, actions in self._handle_each(list(map(self._protos.__getitem__, heard)),
                                                    inp):
                dest = heard[index]
                apply(dest, nodes[dest], actions)
            return
        for dest in heard:
            if batteries is not None:
                batteries.charge_rx(dest, nbytes)
            st = nodes[dest]
            actions = st.proto.handle(inp)
            if actions:
                apply(dest, st, actions)

    # ------------------------------------------------------------------- energy

    def _distance(self, a: int, b: int) -> float:
        (xa, ya), (xb, yb) = self.nodes[a].position, self.nodes[b].position
        return float(((xa - xb) ** 2 + (ya - yb) ** 2) ** 0.5)

    def _energy_tick(self) -> None:
        """Every node's battery reading, as its protocol's energy input; then the next."""
        assert self.batteries is not None
        now = self.env.now
        for node in self.nodes:
            fraction, on_mains = self.batteries.reading(node)
            self._handle(node, EnergyChanged(now, fraction, on_mains))
        period = self.scenario.energy.report_s
        if now + period < self.scenario.end_s:
            self._at(now + period, self._energy_tick)

    # ----------------------------------------------------------------- topology

    def _radio_links(self) -> Links:
        positions = {node: st.position for node, st in self.nodes.items()
                     if node not in self.crashed and node not in self.absent}
        return compute_links(positions, self.model, self.scenario.radio.links)

    def _info(self, node: int, loss: float) -> NeighborInfo:
        caps = self.roles[node]
        if self.gps is not None:  # what the neighbour's beacons carry: its own belief
            return NeighborInfo(node, self.gps.believed(node), 1.0 - loss, capabilities=caps)
        x, y = self.nodes[node].position
        return NeighborInfo(node, Position(x, y, fixed_at=self.env.now), 1.0 - loss,
                            capabilities=caps)

    def _position(self, node: int, pos: tuple[float, float]) -> None:
        self.nodes[node].position = pos
        if self.gps is not None or node in self.crashed:
            return  # the true position moves the radio; the protocol hears the GPS
        now = self.env.now
        self._record(node, "position", {"x": pos[0], "y": pos[1]})
        self._handle(node, PositionChanged(now, Position(pos[0], pos[1], fixed_at=now)))

    def _gps_tick(self) -> None:
        assert self.gps is not None
        self._gps_epoch()
        if self.env.now + self.gps.period_s < self.scenario.end_s:
            self._at(self.env.now + self.gps.period_s, self._gps_tick)

    def _gps_epoch(self) -> None:
        """A receiver epoch: announce what each daemon's tracker reports, as the daemon does."""
        assert self.gps is not None
        now = self.env.now
        true = {node: st.position for node, st in self.nodes.items()}
        for node, position in self.gps.tick(now, true):
            if position is not None:
                self._record(node, "position", {"x": position.x, "y": position.y})
            self._handle(node, PositionChanged(now, position))
            for peer in sorted(self.links[node]):  # links are symmetric
                loss = self.links[peer].get(node)
                if loss is not None:
                    self._handle(peer, NeighborChanged(now, self._info(node, loss)))

    def _link_up(self, a: int, b: int, loss: float) -> None:
        self.links[a][b] = loss
        self._link_epoch += 1
        self._sorted_links.pop(a, None)
        self.stats.neighbor_changes += 1
        self._record(a, "neighbor_up", {"peer": b})
        self._handle(a, NeighborUp(self.env.now, self._info(b, loss)))

    def _link_down(self, a: int, b: int) -> None:
        del self.links[a][b]
        self._link_epoch += 1
        self._sorted_links.pop(a, None)
        self.stats.neighbor_changes += 1
        self._record(a, "neighbor_down", {"peer": b})
        self._handle(a, NeighborDown(self.env.now, b))

    def _set_links(self, new: Links, moved: frozenset[int] = frozenset()) -> None:
        """Move from the current link graph to ``new``, telling every node what changed."""
        for a in sorted(self.nodes):
            old_nb, new_nb = self.links[a], new.get(a, {})
            for b in sorted(set(old_nb) - set(new_nb)):
                self._link_down(a, b)
            for b in sorted(new_nb):
                if b not in old_nb:
                    self._link_up(a, b, new_nb[b])
                elif b in moved or old_nb[b] != new_nb[b]:
                    old_nb[b] = new_nb[b]
                    self._sorted_links.pop(a, None)
                    self._handle(a, NeighborChanged(self.env.now, self._info(b, new_nb[b])))

    def _tick(self, period: float) -> None:
        now = self.env.now
        moved = []
        for node in self.trajectories.nodes:
            pos = self.trajectories.position(node, now)
            if pos != self.nodes[node].position:
                self._position(node, pos)
                moved.append(node)
        if moved and self.scenario.contacts is None:
            # with [gps], neighbours see a move only when the mover's GPS reports it
            self._set_links(self._radio_links(),
                            frozenset(moved) if self.gps is None else frozenset())
        elif moved and self.gps is None:
            moved_set = set(moved)
            for a in sorted(self.nodes):
                for b, loss in sorted(self.links[a].items()):
                    if b in moved_set:
                        self._handle(a, NeighborChanged(now, self._info(b, loss)))
        if now + period < self.scenario.end_s and now < self.trajectories.last_t:
            self._at(now + period, self._tick, period)

    def _contact(self, c: Contact) -> None:
        pair = frozenset((c.a, c.b))
        if c.up:
            loss = self.scenario.radio.loss
            for o in self.scenario.radio.links:
                if {o.a, o.b} == {c.a, c.b} and o.loss is not None:
                    loss = o.loss
            self._contacts_up[pair] = loss
            if c.b in self.links[c.a] or not (self._active(c.a) and self._active(c.b)):
                return
            self._link_up(c.a, c.b, loss)
            self._link_up(c.b, c.a, loss)
        else:
            self._contacts_up.pop(pair, None)
            if c.b in self.links[c.a]:
                self._link_down(c.a, c.b)
                self._link_down(c.b, c.a)

    # ------------------------------------------------------------------- faults

    def _active(self, node: int) -> bool:
        """Up and present: a node that has links."""
        return node not in self.crashed and node not in self.absent

    def _relink(self) -> None:
        """The link graph after a fault: the radio's, or the contacts up, among active nodes."""
        if self.scenario.contacts is None:
            self._set_links(self._radio_links())
            return
        links: Links = {node: {} for node in self.nodes}
        for pair, loss in self._contacts_up.items():
            a, b = sorted(pair)
            if self._active(a) and self._active(b):
                links[a][b] = links[b][a] = loss
        self._set_links(links)

    def _fault(self, action: str, nodes: tuple[int, ...]) -> None:
        """``[[faults]]``: crash, recover, leave or join, as the plan resolved it."""
        if action == "crash":
            for node in nodes:
                self.crashed[node] = self.env.now
                self.nodes[node].timers.clear()  # a dead daemon's timers die with it
        elif action == "recover":
            down_since = {node: self.crashed.pop(node) for node in nodes}
        elif action == "leave":
            self.absent.update(nodes)
        else:
            self.absent.difference_update(nodes)
        if action == "crash":  # neighbours lose it before anything else happens
            self._relink()
        if action == "recover":
            for node in nodes:
                self._reboot(node, down_since[node])
        if action != "crash":
            self._relink()

    def _reboot(self, node: int, down_since: float) -> None:
        """A recovered node: a new daemon (next epoch) with what it persisted.

        As the daemon starts: its store-carry-forward buffer from the store, its
        position, its energy, the applications' subscriptions (the MQTT bridge
        restores them), then what the applications sent while it was down.
        """
        st = self.nodes[node]
        st.epoch += 1
        st.proto = self._protos[node] = self._protocol(node, st.epoch, st.store)
        st.sizer = self.sizer_factory(node, st.epoch, self.scenario.radio.payload_size)
        st.timers.clear()
        now = self.env.now
        if self.gps is None:
            x, y = st.position
            self._handle(node, PositionChanged(now, Position(x, y, fixed_at=now)))
        if self.batteries is not None:
            fraction, on_mains = self.batteries.reading(node)
            self._handle(node, EnergyChanged(now, fraction, on_mains))
        for sub in self._active_subscriptions(node, down_since):
            for member, core_sub in sub.members():
                self._handle(node, LocalSubscribe(now, member, core_sub))
        for thunk in self._deferred.pop(node, []):
            thunk()

    def _active_subscriptions(self, node: int, at: float) -> list[SubscriptionSpec]:
        """The node's subscriptions in force when it went down at ``at`` (what it persisted;
        the ones due since then were deferred and come after)."""
        return [s for s in self.plan.subscriptions
                if s.node == node and s.t <= at and (s.until is None or s.until > at)]
