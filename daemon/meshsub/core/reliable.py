"""Per-hop reliable send: ACK, retransmission with back-off, bounded give-up.

Wi-Fi broadcast has no MAC retries and unicast retries are not enough under
mobility, so protocols that must not lose a hop (custody transfer, control
state) ask the core for an acknowledged send. Both halves are sans-I/O:

- ``ReliableSender`` numbers each send (``Message.reliable_id``), returns the
  ``SendTo`` and a retransmit timer ``rel:<id>``, retransmits on expiry with
  exponential back-off plus jitter, and reports the outcome (acked, or given
  up with a reason) to ``Protocol``, which calls the protocol's hooks.
- ``ReceivedIds`` remembers, per sender, which reliable ids arrived, so a
  retransmission whose ACK was lost is re-ACKed but not passed up twice.

Reliable ids are 32-bit and per sender. The first id is drawn at random from
``(seed, node, epoch)`` and receivers forget ids after ``memory_s`` seconds,
so a rebooted sender does not collide with ids a receiver still remembers.
"""

from __future__ import annotations

import math
import random
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import ClassVar

from meshsub.core.api import Action, CancelTimer, Message, NodeId, SendTo, SetTimer
from meshsub.core.params import OUR_DECISION, ParamDoc, ParameterError, ProtocolParams

TIMER_PREFIX = "rel:"
"""Timers with this prefix belong to the reliable sender; protocols must not use it."""
RID_MODULUS = 1 << 32


@dataclass(frozen=True, slots=True)
class RetransmitPolicy:
    """When to retransmit and when to give up.

    Attempt ``n`` (0-based) waits ``min(max_rto, initial_rto * factor**n)``
    stretched by a uniform factor in ``[1, 1 + jitter]`` (never earlier than
    the nominal RTO, so jitter only de-synchronises). ``max_attempts`` counts
    transmissions, the first one included.
    """

    initial_rto: float = 0.2
    factor: float = 2.0
    max_rto: float = 5.0
    max_attempts: int = 4
    jitter: float = 0.1

    def __post_init__(self) -> None:
        if not (math.isfinite(self.initial_rto) and self.initial_rto > 0):
            raise ParameterError("rto_initial", "must be a positive number of seconds")
        if not (math.isfinite(self.factor) and self.factor >= 1.0):
            raise ParameterError("rto_factor", "must be >= 1")
        if not (math.isfinite(self.max_rto) and self.max_rto >= self.initial_rto):
            raise ParameterError("rto_max", "must be >= rto_initial")
        if self.max_attempts < 1:
            raise ParameterError("rto_attempts", "must be at least 1")
        if not (math.isfinite(self.jitter) and 0.0 <= self.jitter <= 1.0):
            raise ParameterError("rto_jitter", "must be in [0, 1]")

    def rto(self, attempt: int) -> float:
        """Nominal timeout after transmission number ``attempt`` (0-based)."""
        return min(self.max_rto, self.initial_rto * self.factor ** attempt)

    def worst_case_span(self) -> float:
        """Longest time from the first transmission to give-up."""
        return sum(self.rto(n) * (1.0 + self.jitter) for n in range(self.max_attempts))


@dataclass(frozen=True, slots=True)
class ReliableParams(ProtocolParams):
    """Parameters of the per-hop reliable sender, to subclass in a protocol's params.

    Subclasses that override ``validate`` must call ``ReliableParams.validate(self)``
    (zero-argument ``super()`` does not work in slotted dataclasses on 3.11).
    """

    rto_initial: float = 0.2
    rto_factor: float = 2.0
    rto_max: float = 5.0
    rto_attempts: int = 4
    rto_jitter: float = 0.1

    param_docs: ClassVar[Mapping[str, ParamDoc]] = {
        "rto_initial": ParamDoc("s", OUR_DECISION,
                      "Wait for the ACK after the first transmission of a reliable send."),
        "rto_factor": ParamDoc("", OUR_DECISION,
                      "Each further wait is the previous one times this (exponential back-off)."),
        "rto_max": ParamDoc("s", OUR_DECISION,
                      "Longest wait between two transmissions."),
        "rto_attempts": ParamDoc("transmissions", OUR_DECISION,
                      "Transmissions in all before the send is given up (a counted drop)."),
        "rto_jitter": ParamDoc("fraction", OUR_DECISION,
                      "Each wait is stretched by a random factor up to 1 + this."),
    }

    def validate(self) -> None:
        self.retransmit_policy()

    def retransmit_policy(self) -> RetransmitPolicy:
        return RetransmitPolicy(self.rto_initial, self.rto_factor, self.rto_max,
                                self.rto_attempts, self.rto_jitter)


@dataclass(slots=True)
class PendingSend:
    """One unacknowledged send; ``message`` carries its ``reliable_id``."""

    node: NodeId
    message: Message
    first_sent: float
    attempts: int = 1

    @property
    def reliable_id(self) -> int:
        assert self.message.reliable_id is not None
        return self.message.reliable_id


@dataclass(slots=True)
class Outcome:
    """What a sender step produced: actions for the driver, results for the protocol."""

    actions: list[Action] = field(default_factory=list)
    acked: list[PendingSend] = field(default_factory=list)
    failed: list[tuple[PendingSend, str]] = field(default_factory=list)


def timer_name(reliable_id: int) -> str:
    return f"{TIMER_PREFIX}{reliable_id}"


class ReliableSender:
    """The sending half: pending sends keyed by reliable id."""

    def __init__(self, policy: RetransmitPolicy, rng: random.Random, first_id: int = 1) -> None:
        self.policy = policy
        self.rng = rng
        self._next_id = first_id % RID_MODULUS
        self.pending: dict[int, PendingSend] = {}
        self.stats: dict[str, int] = {"sent": 0, "retransmitted": 0, "acked": 0,
                                      "given_up": 0, "ack_unknown": 0}

    def _allocate_id(self) -> int:
        for _ in range(RID_MODULUS):
            rid = self._next_id
            self._next_id = (self._next_id + 1) % RID_MODULUS
            if rid not in self.pending:
                return rid
        raise RuntimeError("no free reliable id")  # pragma: no cover - 2**32 pending sends

    def _arm(self, now: float, entry: PendingSend, out: Outcome) -> None:
        delay = self.policy.rto(entry.attempts - 1) * (1.0 + self.policy.jitter * self.rng.random())
        out.actions.append(SetTimer(timer_name(entry.reliable_id), now + delay))

    def send(self, now: float, node: NodeId, message: Message) -> tuple[int, Outcome]:
        """Number ``message``, send it to ``node`` and arm its retransmit timer."""
        rid = self._allocate_id()
        entry = PendingSend(node, _with_rid(message, rid), now)
        self.pending[rid] = entry
        self.stats["sent"] += 1
        out = Outcome(actions=[SendTo(node, entry.message)])
        self._arm(now, entry, out)
        return rid, out

    def on_ack(self, sender: NodeId, reliable_id: int) -> Outcome:
        """An ACK arrived; unknown or foreign ids (late, duplicated ACKs) are ignored."""
        entry = self.pending.get(reliable_id)
        if entry is None or entry.node != sender:
            self.stats["ack_unknown"] += 1
            return Outcome()
        del self.pending[reliable_id]
        self.stats["acked"] += 1
        return Outcome(actions=[CancelTimer(timer_name(reliable_id))], acked=[entry])

    def on_timer(self, now: float, name: str) -> Outcome:
        """Retransmit, or give up (reason ``reliable_give_up``) after the last attempt."""
        try:
            rid = int(name[len(TIMER_PREFIX):])
        except ValueError:
            return Outcome()
        entry = self.pending.get(rid)
        if entry is None:  # acked or cancelled while the timer was in flight
            return Outcome()
        if entry.attempts >= self.policy.max_attempts:
            del self.pending[rid]
            self.stats["given_up"] += 1
            return Outcome(failed=[(entry, "reliable_give_up")])
        entry.attempts += 1
        self.stats["retransmitted"] += 1
        out = Outcome(actions=[SendTo(entry.node, entry.message)])
        self._arm(now, entry, out)
        return out

    def on_neighbor_down(self, node: NodeId) -> Outcome:
        """Give up every pending send to ``node`` at once (reason ``neighbor_down``)."""
        out = Outcome()
        for rid in [r for r, e in self.pending.items() if e.node == node]:
            entry = self.pending.pop(rid)
            self.stats["given_up"] += 1
            out.actions.append(CancelTimer(timer_name(rid)))
            out.failed.append((entry, "neighbor_down"))
        return out

    def pending_to(self, node: NodeId) -> int:
        return sum(1 for e in self.pending.values() if e.node == node)


def _with_rid(message: Message, rid: int) -> Message:
    return replace(message, reliable_id=rid)


class ReceivedIds:
    """Per-sender memory of received reliable ids, bounded in count and time.

    ``accept`` returns True the first time a (sender, id) pair is seen within
    ``memory_s`` seconds. At most ``per_sender`` ids per sender and
    ``max_senders`` senders (least recently heard evicted) are kept, so a
    flood of ids costs bounded memory; an evicted id could be passed up twice,
    which receivers tolerate (protocols de-duplicate by ``MessageId``).
    """

    def __init__(self, memory_s: float = 60.0, per_sender: int = 1024,
                 max_senders: int = 4096) -> None:
        if memory_s <= 0 or per_sender < 1 or max_senders < 1:
            raise ValueError("ReceivedIds bounds must be positive")
        self.memory_s = memory_s
        self.per_sender = per_sender
        self.max_senders = max_senders
        self._seen: OrderedDict[NodeId, OrderedDict[int, float]] = OrderedDict()

    def accept(self, now: float, sender: NodeId, reliable_id: int) -> bool:
        ids = self._seen.get(sender)
        if ids is None:
            ids = self._seen[sender] = OrderedDict()
            if len(self._seen) > self.max_senders:
                self._seen.popitem(last=False)
        else:
            self._seen.move_to_end(sender)
        horizon = now - self.memory_s
        while ids and next(iter(ids.values())) < horizon:
            ids.popitem(last=False)
        if reliable_id in ids:
            return False
        ids[reliable_id] = now
        if len(ids) > self.per_sender:
            ids.popitem(last=False)
        return True

    def __len__(self) -> int:
        return sum(len(ids) for ids in self._seen.values())
