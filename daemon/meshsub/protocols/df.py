"""DF (Diffusion Filters), the per-subscriber geographic baseline HESPER is compared against.

Spec 004 §1.4 / §4.7.1: subscriptions are routed geographically (GEAR in the
thesis; here GPSR greedy + perimeter from ``meshsub.core.georouting``, the
energy-unaware special case of GEAR) to the event region, each on its own
path. Every node on the path keeps a gradient (filter -> the neighbour it came
from); events go from the region back down every matching gradient. Paths
share links only where greedy forwarding happens to pick the same node, and
then a node sends one copy per distinct next node, so overlap saves only by
chance, which is the property the thesis contrasts with HESPER's merging.

The region convention (``gx``/``gy`` attributes) and the grid are HESPER's
(``meshsub.core.region``); the rendezvous point of a region is
the centre of its cell, where the thesis's experiments put the publisher.
DF defines no soft state; subscriptions stay until unsubscribed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

import msgpack

from meshsub.core.api import (
    FIRST_PROTOCOL_TYPE,
    Message,
    MessageId,
    MsgKind,
    NeighborInfo,
    NodeId,
    Position,
)
from meshsub.core.content import ContentError, Event, Subscription
from meshsub.core.georouting import GeoHeader, GeoRoutingError, next_hop
from meshsub.core.grid import Cell, Point
from meshsub.core.params import OUR_DECISION, ParamDoc, ParameterError, ProtocolParams
from meshsub.core.protocol import Protocol
from meshsub.core.region import (
    GridParams,
    deployment_area,
    event_region,
    make_grid,
    subscription_region,
)

SUBSCRIBE = FIRST_PROTOCOL_TYPE
EVENT = FIRST_PROTOCOL_TYPE + 1
UNSUBSCRIBE = FIRST_PROTOCOL_TYPE + 2

LOCAL = -1
"""Downstream marker of a gradient that ends at this node's own subscription."""

TO_REGION = 0
DOWN = 1


@dataclass(frozen=True, slots=True)
class DFParams(GridParams):
    reliable_control: bool = False
    """Per-hop ACKs for SUBSCRIBE/UNSUBSCRIBE (off: the thesis's loss-free counts)."""
    max_gradients: int = 16384
    """Bound on a node's gradients and their downstream neighbours together; past it a
    new subscription is dropped as ``gradients_full``."""
    max_gradient_bytes: int = 4 * 1024 * 1024
    """Bound on the bytes the gradients keep (sub_ids and filters msgpack-encoded, a fixed
    part per downstream neighbour); past it as ``max_gradients``."""

    def validate(self) -> None:
        GridParams.validate(self)
        for key in ("max_gradients", "max_gradient_bytes"):
            if getattr(self, key) < 1:
                raise ParameterError(key, "must be at least 1")

    param_docs: ClassVar[Mapping[str, ParamDoc]] = {
        "reliable_control": ParamDoc("", OUR_DECISION),
        "max_gradients": ParamDoc("entries", OUR_DECISION),
        "max_gradient_bytes": ParamDoc("bytes", OUR_DECISION),
    }


@dataclass(slots=True)
class Gradient:
    filter: Subscription
    region: Cell
    nbytes: int
    """What ``max_gradient_bytes`` counts for the gradient itself (sub_id and filter)."""
    downstream: set[int] = field(default_factory=set)
    upstream: NodeId | None = None


DOWNSTREAM_BYTES = 8
"""What ``max_gradient_bytes`` counts per downstream neighbour (a node id)."""


def _geo(v: Any) -> GeoHeader:
    try:
        return GeoHeader.from_wire(v)
    except GeoRoutingError as exc:
        raise ValueError(str(exc)) from None


class DF(Protocol):
    """Independent per-subscriber geographic paths; events down the union of gradients."""

    name: ClassVar[str] = "df"
    protocol_id: ClassVar[int] = 6
    Params: ClassVar[type[ProtocolParams]] = DFParams
    message_kinds: ClassVar[dict[int, MsgKind]] = {
        SUBSCRIBE: MsgKind.SUBSCRIPTION, UNSUBSCRIBE: MsgKind.SUBSCRIPTION, EVENT: MsgKind.DATA,
    }

    params: DFParams

    def __init__(self, node: NodeId, **kwargs: Any) -> None:
        super().__init__(node, **kwargs)
        self.grid = make_grid(self.params)
        self.area = deployment_area(self.params)
        self.gradients: dict[str, Gradient] = {}
        self._held = (0, 0)
        """Entries and bytes ``gradients`` holds (``max_gradients``, ``max_gradient_bytes``)."""
        self._npos: dict[NodeId, Point] = {}
        self._waiting: list[str] = []

    # ---------------------------------------------------------------- inputs

    def on_position(self, position: Position | None) -> None:
        if position is not None:
            waiting, self._waiting = self._waiting, []
            for sub_id in waiting:
                sub = self.subscriptions.get(sub_id)
                if sub is not None:
                    self.on_subscribe(sub_id, sub)

    def on_neighbor_up(self, info: NeighborInfo) -> None:
        self._neighbor(info.node, info.position)

    def on_neighbor_changed(self, info: NeighborInfo) -> None:
        self._neighbor(info.node, info.position)

    def _neighbor(self, node: NodeId, pos: Position | None) -> None:
        if pos is None:
            self._npos.pop(node, None)
        else:
            self._npos[node] = (pos.x, pos.y)

    def on_neighbor_down(self, node: NodeId) -> None:
        self._npos.pop(node, None)

    def on_subscribe(self, sub_id: str, subscription: Subscription) -> None:
        region = subscription_region(subscription)
        if region is None or not self.grid.in_grid(region):
            self.drop("no_region", sub_id=sub_id, topic=subscription.topic)
            return
        if self.position is None:
            self._waiting.append(sub_id)
            return
        self._on_sub(f"{self.node:x}/{sub_id}", subscription, region, LOCAL, GeoHeader(),
                     self.new_message_id(), 0)

    def on_unsubscribe(self, sub_id: str, subscription: Subscription) -> None:
        self._on_unsub(f"{self.node:x}/{sub_id}", LOCAL, self.new_message_id(), 0,
                       self.params.max_hops)

    def on_publish(self, event: Event, event_id: MessageId) -> None:
        if self.position is None:
            self.drop("no_position", event_id=str(event_id), topic=event.topic)
            return
        cell = self.grid.locate(self.position.x, self.position.y)
        named = event_region(event)
        if cell is None or (named is not None and named != cell):
            self.drop("region_mismatch", event_id=str(event_id), topic=event.topic)
            return
        self._on_event(event, cell, self.now, TO_REGION, GeoHeader(),
                       Message(EVENT, event_id, None, hop=0, ttl=self.params.max_hops))

    def on_frame(self, sender: NodeId, message: Message) -> None:
        hop = message.hop + 1
        # max_hops is an end-to-end budget (at most the wire's 16-bit hop field): a
        # message goes no further than this node's own budget allows, whatever its TTL.
        msg = Message(message.type, message.id, message.body, hop,
                      min(message.ttl - 1, self.params.max_hops - hop))
        body = message.body
        try:
            if message.type == SUBSCRIBE:
                sid, flt, geo = _items(body, 3)
                sub = Subscription.from_wire(flt)
                region = subscription_region(sub)
                if region is None or not isinstance(sid, str):
                    raise ValueError("subscription without a region")
                self._on_sub(sid, sub, region, sender, _geo(geo), msg.id, msg.hop, msg.ttl)
            elif message.type == EVENT:
                ev, region_w, at, mode, geo = _items(body, 5)
                gx, gy = _items(region_w, 2)
                if isinstance(at, bool) or not isinstance(at, int | float) or mode not in (0, 1) \
                        or not isinstance(gx, int) or not isinstance(gy, int):
                    raise ValueError("bad EVENT fields")
                self._on_event(Event.from_wire(ev), Cell(gx, gy), float(at), mode, _geo(geo), msg)
            elif message.type == UNSUBSCRIBE:
                (sid,) = _items(body, 1)
                if not isinstance(sid, str):
                    raise ValueError("bad sub_id")
                self._on_unsub(sid, sender, msg.id, msg.hop, msg.ttl)
            else:
                self.drop("unknown_type", message, peer=sender)
        except (ValueError, ContentError, TypeError):
            self.drop("malformed", message, peer=sender)

    def status(self) -> dict[str, Any]:
        return {**super().status(), "gradients": len(self.gradients)}

    def state_sizes(self) -> dict[str, tuple[int, int]]:
        return {**super().state_sizes(), "gradients": self._held}

    # ------------------------------------------------------------- internals

    def _target(self, region: Cell) -> Point:
        """The region's centre; of its part inside the area when the grid overhangs it."""
        return self.grid.clipped(region, self.area).centre

    def _send(self, node: NodeId, msg: Message) -> None:
        if msg.ttl <= 0:
            self.drop("ttl_expired", msg, hop=msg.hop)
        elif self.params.reliable_control and msg.type != EVENT:
            self.send_reliable(node, msg)
        else:
            self.send(node, msg)

    def _step(self, target: Point, header: GeoHeader) -> tuple[NodeId | None, GeoHeader]:
        assert self.position is not None
        return next_hop(self.node, (self.position.x, self.position.y), self._npos, target, header,
                        radio_range=self.params.TR)

    def _on_sub(self, sid: str, sub: Subscription, region: Cell, prev: int, header: GeoHeader,
                mid: MessageId, hop: int, ttl: int | None = None) -> None:
        """Keep the gradient to ``prev``; go on towards the region's centre (GPSR).

        A subscription that comes back to a node it already passed (a perimeter walk
        around a void, leaving a dead end or closing a loop) adds no downstream there,
        and the node unsubscribes the loop behind it: its nodes would otherwise carry
        every event round the loop once more and keep the gradient for ever.
        """
        if self.position is None or not self.grid.in_grid(region):
            self.drop("no_position", sub_id=sid)
            return
        grad = self.gradients.get(sid)
        loop: NodeId | None = None
        if grad is None:
            nbytes = len(sid.encode()) + len(msgpack.packb(sub.to_wire()))
            if not self._hold(2, nbytes + DOWNSTREAM_BYTES, sid, sub.topic):
                return
            grad = self.gradients[sid] = Gradient(sub, region, nbytes)
            grad.downstream.add(prev)
        elif grad.upstream is not None:
            loop = grad.upstream
        elif not self._add_downstream(grad, prev, sid):
            return
        nxt, out = self._step(self._target(region), header)
        grad.upstream = nxt  # None: home, the node closest to the region's centre (root)
        if loop is not None and loop != nxt:
            self._send(loop, Message(UNSUBSCRIBE, self.new_message_id(), [sid], 0,
                                     self.params.max_hops))
        if nxt is None:
            return
        ttl = self.params.max_hops if ttl is None else ttl
        self._send(nxt, Message(SUBSCRIBE, mid, [sid, sub.to_wire(), out.to_wire()], hop, ttl))

    def _hold(self, entries: int, nbytes: int, sid: str, topic: str) -> bool:
        """Count ``entries`` more of ``nbytes`` into the gradients if they fit; otherwise
        the subscription is dropped as ``gradients_full``."""
        held, held_bytes = self._held
        p = self.params
        if held + entries > p.max_gradients or held_bytes + nbytes > p.max_gradient_bytes:
            self.drop("gradients_full", sub_id=sid, topic=topic)
            return False
        self._held = (held + entries, held_bytes + nbytes)
        return True

    def _add_downstream(self, grad: Gradient, prev: int, sid: str) -> bool:
        if prev in grad.downstream:
            return True
        if not self._hold(1, DOWNSTREAM_BYTES, sid, grad.filter.topic):
            return False
        grad.downstream.add(prev)
        return True

    def _on_unsub(self, sid: str, sender: int, mid: MessageId, hop: int, ttl: int) -> None:
        grad = self.gradients.get(sid)
        if grad is None:
            return
        if sender in grad.downstream:
            grad.downstream.discard(sender)
            self._held = (self._held[0] - 1, self._held[1] - DOWNSTREAM_BYTES)
        if grad.downstream:
            return
        del self.gradients[sid]
        self._held = (self._held[0] - 1, self._held[1] - grad.nbytes)
        if grad.upstream is not None:
            self._send(grad.upstream, Message(UNSUBSCRIBE, mid, [sid], hop, ttl))

    def _on_event(self, event: Event, region: Cell, at: float, mode: int, header: GeoHeader,
                  msg: Message) -> None:
        if mode == TO_REGION:
            nxt, out = self._step(self._target(region), header)
            if nxt is not None:
                self._send(nxt, Message(EVENT, msg.id, [event.to_wire(), list(region), at,
                                                        TO_REGION, out.to_wire()],
                                        msg.hop, msg.ttl))
                return
        if self.is_duplicate(msg.id):
            self.drop("duplicate_event", msg)
            return
        targets: set[int] = set()
        for grad in self.gradients.values():
            if grad.region == region and grad.filter.matches(event):
                targets |= grad.downstream
        if LOCAL in targets:
            self.deliver_local(event, msg.id, msg.hop, at)
        body = [event.to_wire(), list(region), at, DOWN, [0]]
        for node in sorted(targets - {LOCAL}):
            self._send(node, Message(EVENT, msg.id, body, msg.hop, msg.ttl))


def _items(v: Any, n: int) -> list[Any] | tuple[Any, ...]:
    if not isinstance(v, list | tuple) or len(v) != n:
        raise ValueError(f"expected a list of {n} items")
    return v
