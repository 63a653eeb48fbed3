"""The base class of every protocol: input dispatch plus the shared services.

A subclass overrides the ``on_*`` hooks it needs and calls the services
(``send``, ``broadcast``, ``relay``, ``deliver_local``, ``set_timer``, ``emit``,
``drop``, ...), which queue actions; ``handle`` returns the queued actions to the
driver. ``handle`` is the only way in: every input of ``meshsub.core.api``
(frames, neighbours, position, energy, timers, local applications) goes
through it, so a driver never reaches into a protocol's state, and ``drops``
is read-only to drivers (``drop`` counts *and* records). State the driver must
see (neighbours, own position, energy, local subscriptions) is updated here
*before* the hook runs, so hooks read a consistent view.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from types import MappingProxyType
from typing import Any, ClassVar

import msgpack

from meshsub.core.api import (
    Action,
    Broadcast,
    CancelTimer,
    CoreType,
    Deliver,
    Emit,
    EnergyChanged,
    FrameReceived,
    Input,
    LocalPublish,
    LocalSubscribe,
    LocalUnsubscribe,
    Message,
    MessageId,
    MsgKind,
    NeighborChanged,
    NeighborDown,
    NeighborInfo,
    NeighborUp,
    NodeId,
    Position,
    PositionChanged,
    SendTo,
    SendToMany,
    SetTimer,
    Stopping,
    TelemetryValue,
    TimerFired,
)
from meshsub.core.content import Event, Subscription
from meshsub.core.dedup import DuplicateCache
from meshsub.core.disjunction import delivery_group
from meshsub.core.params import ProtocolParams
from meshsub.core.reliable import (
    TIMER_PREFIX,
    Outcome,
    ReceivedIds,
    ReliableParams,
    ReliableSender,
    RetransmitPolicy,
)
from meshsub.core.syntax import format_event, format_subscription

_ACK = int(CoreType.ACK)
"""``CoreType.ACK`` as a plain int: the hot path compares every frame's type with it."""
STATE_TIMER = "state:report"
DROP_SUMMARY_TIMER = "drops:summary"
DROP_SUMMARY_S = 10.0
"""Default longest interval a summarised drop waits before its ``drop`` record."""
SUMMARIZED_DROPS: frozenset[str] = frozenset(
    {"duplicate", "duplicate_event", "duplicate_bundle", "reliable_duplicate",
     "unknown_type", "malformed"})
"""High-volume drop reasons recorded as periodic summaries, not one record each.

A flood delivers every copy of every message to every node: the copies a node
suppresses outnumber everything else it records (flooding on 200 nodes: about
half of all records). They carry nothing per copy that the evaluation reads
(``rx`` records already show every copy), so each node sums them per reason and
writes one ``drop`` record with ``count`` per interval (docs/telemetry.md).

``unknown_type`` and ``malformed`` are there for another reason: an insider with
the fleet key can send authenticated frames of any type and body at any rate, and
one record per frame would let it fill the telemetry spool (and wear an SD card)
as an outsider's refused frames cannot (docs/security.md). Their counts stay exact.
"""


class Protocol:
    """Base class; subclasses set the class attributes and override hooks."""

    name: ClassVar[str] = ""
    protocol_id: ClassVar[int] = 0
    """Carried in every frame header; a receiver drops frames of another protocol."""
    Params: ClassVar[type[ProtocolParams]] = ProtocolParams
    message_kinds: ClassVar[Mapping[int, MsgKind]] = {}
    """Message type -> telemetry kind, for the protocol's own types (>= 16)."""
    reloadable_params: ClassVar[frozenset[str]] = frozenset()
    """Parameters a running node may change (daemon SIGHUP): ones read at each use."""
    summarized_drops: ClassVar[frozenset[str]] = SUMMARIZED_DROPS
    """Drop reasons recorded as periodic summaries with a ``count`` (``drop``)."""
    duplicate_types: ClassVar[frozenset[int]] = frozenset()
    """Message types whose copies the core drops as ``duplicate`` before ``on_frame``
    when ``dedup`` already holds their id (without refreshing it in the cache): for a
    protocol whose ``on_frame`` would begin so anyway (flooding). Every node hears each
    flooded message once from each neighbour, and a copy that ends here costs none of
    the hook calls (docs/benchmarks.md, "Third round")."""
    buffer_store: ClassVar[bool] = False
    """True if the constructor takes ``store``, a ``meshsub.core.buffer.BufferStore`` for
    the messages it carries: a driver with storage (the daemon) passes a persistent one,
    so a restart loses nothing (``meshsub.core.carry.StoreCarryForward`` sets it)."""

    def __init__(
        self,
        node: NodeId,
        *,
        epoch: int = 0,
        params: ProtocolParams | None = None,
        seed: int = 0,
        dedup_capacity: int = 65536,
        capabilities: tuple[str, ...] = (),
        state_every_s: float = 0.0,
        drop_summary_s: float = DROP_SUMMARY_S,
    ) -> None:
        self.node = node
        self.epoch = epoch
        self.params = params if params is not None else self.Params()
        self.capabilities = tuple(capabilities)
        """This node's roles (``meshsub.core.roles``), the same its beacons advertise."""
        self.rng = random.Random(seed ^ (node * 0x9E3779B1))
        self.now = 0.0
        self.position: Position | None = None
        self.neighbors: dict[NodeId, NeighborInfo] = {}
        self.subscriptions: dict[str, Subscription] = {}
        self.energy_fraction: float | None = None
        """Remaining battery charge in [0, 1] as last reported; ``None``: not known."""
        self.on_mains = False
        self.dedup = DuplicateCache(dedup_capacity)
        self._drops: Counter[str] = Counter()
        self._seq = 0
        self._delivered = DuplicateCache(dedup_capacity)
        self._actions: list[Action] = []
        self._clock_known = False
        policy = self.retransmit_policy()
        rel_rng = random.Random(f"rel:{seed}:{node}:{epoch}")
        self.reliable = ReliableSender(policy, rel_rng, first_id=rel_rng.getrandbits(32))
        self._reliable_received = ReceivedIds(memory_s=max(60.0, 4 * policy.worst_case_span()))
        self._core_timers: dict[str, Callable[[str], None]] = {
            TIMER_PREFIX: lambda name: self._apply_reliable(self.reliable.on_timer(self.now,
                                                                                   name)),
        }
        """Timer-name prefix -> the core service that owns those timers."""
        self._core_prefixes = tuple(self._core_timers)
        """The prefixes, for one ``str.startswith`` test of a protocol's own timer."""
        self.state_every_s = state_every_s
        """How often to report ``state_sizes`` as ``state`` records (a driver setting; 0: never)."""
        self.add_core_timer(STATE_TIMER, self._report_state)
        self.drop_summary_s = drop_summary_s
        """Longest wait of a summarised drop for its record (a driver setting; 0: one record
        per drop, as for every other reason)."""
        self._pending_drops: Counter[str] = Counter()
        """Summarised drops not yet recorded, by reason (``SUMMARIZED_DROPS``)."""
        self._copies = 0
        """``duplicate`` drops counted by ``handle_each`` and not yet added to ``_drops`` and
        ``_pending_drops`` (``_count_copies``): one integer per copy instead of two counter
        updates. Only while a summary is pending (its timer armed), which adds them first,
        as does every reading of ``drops``."""
        self._summarize_duplicates = drop_summary_s > 0 and "duplicate" in self.summarized_drops
        self._early_duplicates: frozenset[int] = frozenset()
        """``duplicate_types`` once the clock is known (the first input) if duplicates are
        summarised, else empty: the types whose copies ``handle_each`` counts itself, in
        one test per receiver."""
        self.add_core_timer(DROP_SUMMARY_TIMER, self._record_drop_summary)

    @property
    def drops(self) -> Mapping[str, int]:
        """Drops by reason (read-only: ``drop`` is the one way to count one)."""
        self._count_copies()
        return MappingProxyType(self._drops)

    # ------------------------------------------------------------------ driver

    def handle(self, inp: Input) -> list[Action]:
        """Process one input and return the actions it caused, in order."""
        self.now = inp.now
        if not self._clock_known:  # the first input: the driver's clock is known now
            self._clock_known = True
            if self._summarize_duplicates:
                self._early_duplicates = self.duplicate_types
            if self.state_every_s > 0:
                self.set_timer(STATE_TIMER, self.state_every_s)
            self.on_start()
        if type(inp) is FrameReceived:  # by far the most frequent input: no pattern matching
            message = inp.message
            if message.reliable_id is None and message.type != _ACK:
                # what _on_frame_core does with it
                if message.type not in self.duplicate_types or not self._duplicate(
                        inp.sender, message):
                    self.on_frame(inp.sender, message)
            else:
                self._on_frame_core(inp.sender, message)
            actions, self._actions = self._actions, []
            return actions
        if type(inp) is TimerFired:  # the next most frequent: rebroadcasts, retransmissions
            name = inp.name
            core = self._core_timer(name)
            if core is not None:
                core(name)
            else:
                self.on_timer(name)
            actions, self._actions = self._actions, []
            return actions
        match inp:
            case FrameReceived(sender=sender, message=message):
                self._on_frame_core(sender, message)
            case NeighborUp(neighbor=info):
                self.neighbors[info.node] = info
                self.on_neighbor_up(info)
            case NeighborChanged(neighbor=info):
                self.neighbors[info.node] = info
                self.on_neighbor_changed(info)
            case NeighborDown(node=node):
                known = self.neighbors.pop(node, None) is not None
                self._apply_reliable(self.reliable.on_neighbor_down(node))
                if known:
                    self.on_neighbor_down(node)
            case PositionChanged(position=position):
                self.position = position
                self.on_position(position)
            case EnergyChanged(fraction=fraction, on_mains=on_mains):
                self.energy_fraction = fraction
                self.on_mains = on_mains
                self.on_energy(fraction, on_mains)
            case TimerFired(name=name):
                core = self._core_timer(name)
                if core is not None:
                    core(name)
                else:
                    self.on_timer(name)
            case LocalSubscribe(sub_id=sub_id, subscription=sub):
                self.subscriptions[sub_id] = sub
                self.emit("subscribe", sub_id=sub_id, topic=sub.topic,
                          content=format_subscription(sub))
                self.on_subscribe(sub_id, sub)
            case LocalUnsubscribe(sub_id=sub_id):
                removed = self.subscriptions.pop(sub_id, None)
                if removed is not None:
                    self.emit("unsubscribe", sub_id=sub_id, topic=removed.topic)
                    self.on_unsubscribe(sub_id, removed)
            case LocalPublish(event=event, event_id=event_id):
                self.emit("publish", event_id=str(event_id), topic=event.topic,
                          content=format_event(event))
                self.on_publish(event, event_id)
            case Stopping():
                self._record_drop_summary(DROP_SUMMARY_TIMER)
        actions, self._actions = self._actions, []
        return actions

    @staticmethod
    def handle_each(protocols: Sequence[Protocol], inp: FrameReceived
                    ) -> list[tuple[int, list[Action]]]:
        """``[(i, a) for i, p in enumerate(protocols) if (a := p.handle(inp))]``: one
        frame heard by many nodes, and the actions of those that had any.

        For a driver that hands the same frame to every receiver (the simulator; the
        daemon has one node). The same inputs, state changes and actions as ``handle``
        one node after another; a copy of a message the node already holds
        (``duplicate_types``) is counted here without a call per node: in a flood
        that is nine receptions in ten, and most of them have no action at all, so
        only the receivers with actions are returned (docs/benchmarks.md, "Third
        round" and "Fourth round"). The driver applies them in the order of
        ``protocols``: no node's handling depends on another's actions.
        """
        message, now = inp.message, inp.now
        mtype, mid = message.type, message.id
        out: list[tuple[int, list[Action]]] = []
        append = out.append
        if message.reliable_id is not None or mtype == _ACK:  # never a plain copy
            for index, proto in enumerate(protocols):
                actions = proto.handle(inp)
                if actions:
                    append((index, actions))
            return out
        for index, proto in enumerate(protocols):
            if mtype in proto._early_duplicates and proto.dedup.seen(mid):
                proto.now = now  # what handle() and _duplicate() do with such a copy
                if proto._pending_drops:  # a summary is pending: its timer is armed
                    proto._copies += 1
                    continue
                proto._drops["duplicate"] += 1
                proto._pend_drop("duplicate")  # arms the summary timer
                actions, proto._actions = proto._actions, []
            else:
                actions = proto.handle(inp)
            if actions:
                append((index, actions))
        return out

    def new_message_id(self) -> MessageId:
        """A fresh id for a message this node originates.

        Drivers call this too, to name an application's event before they
        persist it and feed it in as ``LocalPublish``.
        """
        self._seq += 1
        return MessageId(self.node, self.epoch, self._seq)

    def update_params(self, params: ProtocolParams) -> tuple[str, ...]:
        """Adopt ``params`` if every changed field is in ``reloadable_params``.

        Returns the changed fields that cannot change at run time; when there
        are any, nothing is applied (a restart is needed).
        """
        if type(params) is not type(self.params):
            raise TypeError(f"expected {type(self.params).__name__}, got {type(params).__name__}")
        changed = [f.name for f in dataclasses.fields(params)
                   if getattr(params, f.name) != getattr(self.params, f.name)]
        fixed = tuple(name for name in changed if name not in self.reloadable_params)
        if not fixed:
            self.params = params
        return fixed

    def kind_of(self, message_type: int) -> MsgKind:
        """Telemetry kind of a message type (core types included)."""
        if message_type == CoreType.BEACON:
            return MsgKind.BEACON
        return self.message_kinds.get(message_type, MsgKind.CONTROL)

    def state_sizes(self) -> dict[str, tuple[int, int]]:
        """What this node holds, by store: ``(entries, bytes)``, bytes msgpack-encoded.

        The evaluation's state-size measure (``state`` records). The base class
        reports the local subscriptions; a protocol adds its own tables (a
        broker's routing table, filters about others) under their own names.
        """
        subs = self.subscriptions.values()
        return {"subscriptions": (len(subs), sum(len(msgpack.packb(s.to_wire())) for s in subs))}

    def join_group(self, group: str) -> None:
        """This node is now in ``group`` (a ``member`` record: scoped ground truth)."""
        self.emit("member", group=group, reason="join")

    def leave_group(self, group: str) -> None:
        self.emit("member", group=group, reason="leave")

    def status(self) -> dict[str, Any]:
        """Protocol state for operators (``meshsubctl status``); extend in subclasses."""
        return {
            "protocol": self.name,
            "roles": list(self.capabilities),
            "neighbors": len(self.neighbors),
            "subscriptions": len(self.subscriptions),
            "drops": dict(self.drops),
            "reliable": {**self.reliable.stats, "pending": len(self.reliable.pending)},
        }

    # ----------------------------------------------------------------- hooks

    def on_start(self) -> None:
        """The first input arrived: ``self.now`` is the driver's clock from here on."""

    def on_frame(self, sender: NodeId, message: Message) -> None:
        """A protocol message arrived from neighbour ``sender``."""

    def on_neighbor_up(self, info: NeighborInfo) -> None:
        """A neighbour came into range (a contact begins, in DTN terms)."""

    def on_neighbor_changed(self, info: NeighborInfo) -> None:
        """A neighbour's position or link quality changed."""

    def on_neighbor_down(self, node: NodeId) -> None:
        """A neighbour left (a contact ends)."""

    def on_position(self, position: Position | None) -> None:
        """Own position changed; ``None`` means the fix was lost."""

    def on_energy(self, fraction: float | None, on_mains: bool) -> None:
        """The energy store changed (already in ``energy_fraction``/``on_mains``)."""

    def on_timer(self, name: str) -> None:
        """A timer set with ``set_timer`` fired (the core's own, ``rel:``/``scf:``, never)."""

    def on_subscribe(self, sub_id: str, subscription: Subscription) -> None:
        """A local application subscribed (already in ``self.subscriptions``)."""

    def on_unsubscribe(self, sub_id: str, subscription: Subscription) -> None:
        """A local application unsubscribed (already removed)."""

    def on_publish(self, event: Event, event_id: MessageId) -> None:
        """A local application published ``event``."""

    def on_reliable_acked(self, node: NodeId, message: Message) -> None:
        """``node`` acknowledged ``message`` sent with ``send_reliable`` (custody moves now)."""

    def on_reliable_failed(self, node: NodeId, message: Message) -> None:
        """A ``send_reliable`` to ``node`` was given up (retries spent or neighbour down)."""

    # -------------------------------------------------------------- services

    def send(self, node: NodeId, message: Message) -> None:
        self._actions.append(SendTo(node, message))

    def send_many(self, nodes: frozenset[NodeId], message: Message) -> None:
        if nodes:
            self._actions.append(SendToMany(nodes, message))

    def send_reliable(self, node: NodeId, message: Message) -> int:
        """Unicast with per-hop ACK and retransmission; return the reliable id.

        Exactly one of ``on_reliable_acked`` / ``on_reliable_failed`` follows.
        A failure is also a counted drop (``reliable_give_up`` or
        ``neighbor_down``).
        """
        rid, out = self.reliable.send(self.now, node, message)
        self._actions.extend(out.actions)
        return rid

    def retransmit_policy(self) -> RetransmitPolicy:
        """Reliable-send timing: from ``ReliableParams`` fields, else the defaults.

        Override to map a protocol's own parameter names onto a policy; it is
        called from ``__init__``, so it may read ``self.params`` only.
        """
        if isinstance(self.params, ReliableParams):
            return self.params.retransmit_policy()
        return RetransmitPolicy()

    def broadcast(self, message: Message) -> None:
        self._actions.append(Broadcast(message))

    def relay(self, message: Message) -> Message | None:
        """The copy to forward, or ``None`` (counted drop) when its TTL is spent."""
        if message.ttl <= 1:
            self.drop("ttl_expired", message)
            return None
        return message.forwarded()

    def is_duplicate(self, message_id: MessageId) -> bool:
        """True if seen before; records it otherwise (bounded LRU)."""
        return self.dedup.check_and_add(message_id)

    def deliver_local(
        self,
        event: Event,
        event_id: MessageId,
        hop: int,
        published_at: float | None = None,
    ) -> int:
        """Deliver to every local subscription that exactly matches; return how many.

        Each (event, subscription) pair is delivered at most once, so protocols
        may call this on every copy they receive. The members of a disjunction
        (ids ``group|i``, ``meshsub.core.disjunction``) count as one
        subscription: the event is delivered once, named by the group (the
        application's id), when any member matches.
        """
        delivered = 0
        for sub_id, sub in self.subscriptions.items():
            if not sub.matches(event):
                continue
            group = delivery_group(sub_id)
            if self._delivered.check_and_add((event_id, group)):
                continue
            self._actions.append(Deliver(group, event, event_id, hop, published_at))
            self.emit("deliver", event_id=str(event_id), sub_id=group, hop=hop,
                      topic=event.topic)
            delivered += 1
        return delivered

    def set_timer(self, name: str, delay: float) -> None:
        """Arm ``name`` to fire ``delay`` seconds from now (re-arming replaces it)."""
        self._actions.append(SetTimer(name, self.now + max(0.0, delay)))

    def cancel_timer(self, name: str) -> None:
        self._actions.append(CancelTimer(name))

    def emit(self, event: str, **attrs: TelemetryValue) -> None:
        self._actions.append(Emit(event, attrs))

    def drop(self, reason: str, message: Message | None = None, **attrs: TelemetryValue) -> None:
        """Count and record a discarded message, event or piece of state; never silent.

        The one way to count a drop: ``drops`` (``meshsubctl status``) and the
        ``drop`` records (the evaluation) always agree, once the pending summaries
        are recorded: a reason in ``summarized_drops`` is counted now and recorded
        by the next summary (``count`` = how many), at most ``drop_summary_s``
        later or when the driver stops.
        """
        self._drops[reason] += 1
        if self.drop_summary_s > 0 and reason in self.summarized_drops:
            self._pend_drop(reason)
            return
        if message is not None:
            attrs.setdefault("event_id", str(message.id))
            attrs.setdefault("msg_type", message.type)
            attrs.setdefault("msg_kind", self.kind_of(message.type).value)
        self.emit("drop", reason=reason, **attrs)

    # -------------------------------------------------------------- internals

    def add_core_timer(self, prefix: str, handler: Callable[[str], None]) -> None:
        """Route timers named ``prefix...`` to a core service instead of ``on_timer``."""
        self._core_timers[prefix] = handler
        self._core_prefixes = tuple(self._core_timers)

    def _pend_drop(self, reason: str) -> None:
        """Count a summarised drop for the next summary (arming its timer if none waits)."""
        if not self._pending_drops:
            self.set_timer(DROP_SUMMARY_TIMER, self.drop_summary_s)
        self._pending_drops[reason] += 1

    def _count_copies(self) -> None:
        """Add the copies ``handle_each`` counted (``_copies``) to the drop counts."""
        copies = self._copies
        if copies:
            self._copies = 0
            self._drops["duplicate"] += copies
            self._pending_drops["duplicate"] += copies

    def _record_drop_summary(self, name: str) -> None:
        """One ``drop`` record per reason with its ``count`` since the last summary."""
        self._count_copies()
        pending, self._pending_drops = self._pending_drops, Counter()
        for reason, count in sorted(pending.items()):
            self.emit("drop", reason=reason, count=count)

    def _report_state(self, name: str) -> None:
        for store, (entries, nbytes) in sorted(self.state_sizes().items()):
            self.emit("state", store=store, entries=entries, bytes=nbytes)
        self.set_timer(STATE_TIMER, self.state_every_s)

    def _core_timer(self, name: str) -> Callable[[str], None] | None:
        if not name.startswith(self._core_prefixes):
            return None  # a protocol's own timer (a flood's rebroadcasts: most of them)
        for prefix, handler in self._core_timers.items():
            if name.startswith(prefix):
                return handler
        return None

    def _on_frame_core(self, sender: NodeId, message: Message) -> None:
        """Core message types are handled here; the rest go to ``on_frame``.

        A frame with a ``reliable_id`` is acknowledged every time it arrives
        (ACKs get lost too) but passed up only the first time.
        """
        if message.type == CoreType.ACK:
            rid = message.body
            if isinstance(rid, bool) or not isinstance(rid, int) or not 0 <= rid < 1 << 32:
                self.drop("malformed", message, peer=sender)
                return
            self._apply_reliable(self.reliable.on_ack(sender, rid))
            return
        rid = message.reliable_id
        if rid is not None:
            if isinstance(rid, bool) or not isinstance(rid, int) or not 0 <= rid < 1 << 32:
                self.drop("malformed", message, peer=sender)
                return
            self.send(sender, Message(CoreType.ACK, message.id, rid, ttl=1))
            if not self._reliable_received.accept(self.now, sender, rid):
                self.drop("reliable_duplicate", message, peer=sender)
                return
        if message.type in self.duplicate_types and self._duplicate(sender, message):
            return
        self.on_frame(sender, message)

    def _duplicate(self, sender: NodeId, message: Message) -> bool:
        """Drop ``message`` as a ``duplicate`` if ``dedup`` holds its id (``duplicate_types``)."""
        if not self.dedup.seen(message.id):
            return False
        if self._summarize_duplicates:  # drop()'s summarised case, without its attributes
            self._drops["duplicate"] += 1
            self._pend_drop("duplicate")
        else:
            self.drop("duplicate", message, peer=sender)
        return True

    def _apply_reliable(self, out: Outcome) -> None:
        """Queue a reliable-sender step's actions and run the protocol's hooks."""
        self._actions.extend(out.actions)
        for entry in out.acked:
            self.on_reliable_acked(entry.node, entry.message)
        for entry, reason in out.failed:
            self.drop(reason, entry.message, peer=entry.node)
            self.on_reliable_failed(entry.node, entry.message)
