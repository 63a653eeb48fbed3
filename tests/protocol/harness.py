"""A tiny synchronous driver for protocol unit tests.

N protocol instances, explicit symmetric links (who hears whom), a virtual
clock and one event heap. Send/Broadcast actions reach linked nodes after a
fixed ``delay`` (0 = at the same virtual instant, still after the sender's
current step); a frame in flight is lost if the link went down before it
arrives. Timers are real heap entries (re-arming replaces, cancelling
removes). Deliver and Emit actions are collected for assertions. A ``loss``
callback lets a test drop chosen frames. Deterministic: ties in time run in
the order they were scheduled.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from meshsub.core.api import (
    Action,
    Broadcast,
    CancelTimer,
    Deliver,
    Emit,
    FrameReceived,
    Input,
    LocalPublish,
    LocalSubscribe,
    LocalUnsubscribe,
    Message,
    MessageId,
    NeighborDown,
    NeighborInfo,
    NeighborUp,
    NodeId,
    SendTo,
    SendToMany,
    SetTimer,
    TimerFired,
)
from meshsub.core.buffer import MemoryStore
from meshsub.core.content import Event, Subscription
from meshsub.core.protocol import Protocol

LossFn = Callable[[NodeId, NodeId, Message], bool]


@dataclass(frozen=True)
class Tx:
    """One transmission as the harness saw it (``dst`` None for a broadcast)."""

    time: float
    src: NodeId
    dst: NodeId | None
    message: Message


@dataclass
class Net:
    nodes: dict[NodeId, Protocol]
    delay: float = 0.0
    loss: LossFn | None = None
    now: float = 0.0
    adjacency: dict[NodeId, set[NodeId]] = field(default_factory=dict)
    delivered: list[tuple[float, NodeId, Deliver]] = field(default_factory=list)
    emitted: list[tuple[float, NodeId, Emit]] = field(default_factory=list)
    txs: list[Tx] = field(default_factory=list)
    _heap: list[tuple[float, int, Callable[[], None]]] = field(default_factory=list)
    _seq: int = 0
    _timers: dict[tuple[NodeId, str], int] = field(default_factory=dict)

    @classmethod
    def of(cls, protocol: type[Protocol], ids: Iterable[NodeId], **kwargs: Any) -> Net:
        """Build a net of ``protocol`` instances; ``kwargs`` go to the Net, except
        ``params``/``seed`` which go to every protocol."""
        proto_kwargs = {k: kwargs.pop(k) for k in ("params", "seed") if k in kwargs}
        return cls({n: protocol(n, **proto_kwargs) for n in ids}, **kwargs)

    # ---------------------------------------------------------------- events

    def at(self, time: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` at virtual ``time`` (never in the past)."""
        self._seq += 1
        heapq.heappush(self._heap, (max(time, self.now), self._seq, fn))

    def feed(self, node: NodeId, inp: Input) -> None:
        """Hand ``inp`` to ``node`` now and carry out its actions."""
        for action in self.nodes[node].handle(inp):
            self._act(node, action)

    def run(self, until: float = float("inf"), max_steps: int = 1_000_000) -> None:
        """Process events in time order up to ``until`` (inclusive)."""
        steps = 0
        while self._heap and self._heap[0][0] <= until:
            time, _, fn = heapq.heappop(self._heap)
            self.now = time
            fn()
            steps += 1
            if steps >= max_steps:
                raise RuntimeError("harness: too many steps (a protocol loops?)")
        if until != float("inf"):
            self.now = max(self.now, until)

    # ---------------------------------------------------------------- topology

    def linked(self, a: NodeId, b: NodeId) -> bool:
        return b in self.adjacency.get(a, ())

    def neighbors(self, node: NodeId) -> list[NodeId]:
        return sorted(self.adjacency.get(node, ()))

    def link(self, a: NodeId, b: NodeId, announce: Iterable[NodeId] | None = None) -> None:
        """Bring the link up now; the ``announce`` ends (default both) get ``NeighborUp``."""
        if self.linked(a, b):
            return
        self.adjacency.setdefault(a, set()).add(b)
        self.adjacency.setdefault(b, set()).add(a)
        for end, other in ((a, b), (b, a)):
            if announce is None or end in announce:
                self.feed(end, NeighborUp(self.now, NeighborInfo(other)))

    def unlink(self, a: NodeId, b: NodeId) -> None:
        """Take the link down now; both ends get ``NeighborDown``."""
        if not self.linked(a, b):
            return
        self.adjacency[a].discard(b)
        self.adjacency[b].discard(a)
        self.feed(a, NeighborDown(self.now, b))
        self.feed(b, NeighborDown(self.now, a))

    def line(self, ids: list[NodeId]) -> None:
        for a, b in itertools.pairwise(ids):
            self.link(a, b)

    def grid(self, width: int, height: int, first: NodeId = 1) -> list[list[NodeId]]:
        """Link ids ``first..`` as a ``width`` x ``height`` 4-neighbour grid (row-major)."""
        rows = [[first + r * width + c for c in range(width)] for r in range(height)]
        for r in range(height):
            for c in range(width):
                if c + 1 < width:
                    self.link(rows[r][c], rows[r][c + 1])
                if r + 1 < height:
                    self.link(rows[r][c], rows[r + 1][c])
        return rows

    # ---------------------------------------------------------------- application

    def subscribe(self, node: NodeId, sub_id: str, sub: Subscription) -> None:
        self.feed(node, LocalSubscribe(self.now, sub_id, sub))

    def unsubscribe(self, node: NodeId, sub_id: str) -> None:
        self.feed(node, LocalUnsubscribe(self.now, sub_id))

    def publish(self, node: NodeId, event: Event) -> MessageId:
        event_id = self.nodes[node].new_message_id()
        self.feed(node, LocalPublish(self.now, event, event_id))
        return event_id

    # ---------------------------------------------------------------- results

    def deliveries(self, event_id: MessageId | None = None) -> list[tuple[NodeId, str]]:
        """(node, sub_id) of every Deliver action, optionally for one event."""
        return [(n, d.sub_id) for _, n, d in self.delivered
                if event_id is None or d.event_id == event_id]

    def records(self, event: str) -> list[tuple[NodeId, Emit]]:
        return [(n, e) for _, n, e in self.emitted if e.event == event]

    def drops(self, reason: str) -> list[tuple[NodeId, Emit]]:
        return [(n, e) for n, e in self.records("drop") if e.attrs.get("reason") == reason]

    # ---------------------------------------------------------------- actions

    def _act(self, node: NodeId, action: Action) -> None:
        match action:
            case SendTo(node=dst, message=message):
                self._transmit(node, [dst], message, dst)
            case SendToMany(nodes=dsts, message=message):
                for dst in sorted(dsts):
                    self._transmit(node, [dst], message, dst)
            case Broadcast(message=message):
                self._transmit(node, self.neighbors(node), message, None)
            case Deliver():
                self.delivered.append((self.now, node, action))
            case Emit():
                self.emitted.append((self.now, node, action))
            case SetTimer(name=name, at=at):
                self._seq += 1
                token = self._seq
                self._timers[(node, name)] = token
                self.at(at, lambda: self._fire(node, name, token))
            case CancelTimer(name=name):
                self._timers.pop((node, name), None)
            case _:  # pragma: no cover - the Action union is exhaustive
                raise TypeError(f"unknown action {action!r}")

    def _fire(self, node: NodeId, name: str, token: int) -> None:
        if self._timers.get((node, name)) != token:
            return  # cancelled or re-armed
        del self._timers[(node, name)]
        self.feed(node, TimerFired(self.now, name))

    def _transmit(self, src: NodeId, dsts: list[NodeId], message: Message,
                  dst: NodeId | None) -> None:
        self.txs.append(Tx(self.now, src, dst, message))
        for receiver in dsts:
            if not self.linked(src, receiver):
                continue
            if self.loss is not None and self.loss(src, receiver, message):
                continue
            self.at(self.now + self.delay,
                    lambda r=receiver: self._arrive(src, r, message))  # type: ignore[misc]

    def _arrive(self, src: NodeId, receiver: NodeId, message: Message) -> None:
        if self.linked(src, receiver):  # the contact may have ended in flight
            self.feed(receiver, FrameReceived(self.now, src, message))


class BodiesOutOfIndex(MemoryStore):
    """A store that, like the daemon's SQLite table, keeps bodies out of the buffer's
    index (``resident`` false), counting the reads: a test sees what is read back."""

    resident = False

    def __init__(self) -> None:
        super().__init__()
        self.reads = 0

    def get(self, key: Any) -> Any:
        self.reads += 1
        return super().get(key)
