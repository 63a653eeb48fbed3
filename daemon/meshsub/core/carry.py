"""The store-carry-forward base: a protocol that carries messages between contacts.

Epidemic routing, PULL, B-SUB and the ferry and broker protocols still to come
keep messages in one bounded ``ScfBuffer`` until a contact lets them go on,
and all need the same few things around it, which live here once:

- the buffer, sized by the protocol's ``buffer_size`` and ``drop_policy``
  parameters (override ``buffer_limits`` for other names) and backed by the
  ``store`` a driver passes (``buffer_store`` is declared true, so the daemon
  gives it a persistent one and a restart loses nothing);
- the buffer's defences against an insider with the key (``core/buffer.py``):
  a byte cap, remaining lifetimes cut to the protocol's own message lifetime
  (``ttl_s`` or ``TTL``; override ``buffer_lifetime`` for other names), and the
  node's own messages kept until a neighbour holds a copy;
- at the first input, a sweep of what expired while the node was down (the
  driver's clock is known only then);
- ``carry`` to take a message in, ``sweep`` to let expired ones go, and the
  expiry timer (``scf:expire``, a core timer the protocol never sees), each
  reporting every message the buffer gave up as a recorded ``drop``;
- ``on_buffer_drop``, where a subclass forgets its own bookkeeping about a
  message the buffer gave up, before the drop is recorded.

A message removed on purpose (custody passed on, copy limit reached) is not a
drop: the subclass calls ``self.buffer.discard``.
"""

from __future__ import annotations

from typing import Any, ClassVar

from meshsub.core.api import Message, NodeId
from meshsub.core.buffer import BufferEntry, BufferStore, Dropped, DropPolicy, ScfBuffer
from meshsub.core.content import Event, decode_timed_event
from meshsub.core.protocol import Protocol

TIMER_PREFIX = "scf:"
EXPIRY_TIMER = f"{TIMER_PREFIX}expire"


def encode_carried(event_wire: Any, published_at: float, remaining_s: float) -> list[Any]:
    """The body of a carried event, ``[event, published_at, remaining_s]``: what epidemic
    routing and PULL hand from node to node (the remaining lifetime travels with it, so a
    copy never outlives the original)."""
    return [event_wire, published_at, remaining_s]


def decode_carried(body: Any, what: str) -> tuple[Event, float, float]:
    """``(event, published_at, remaining_s)`` of an ``encode_carried`` body; ``ValueError``
    naming ``what`` (the protocol's message) if it is malformed."""
    event, published_at, remaining = decode_timed_event(
        body, what, ("published_at", "remaining_s"))
    return event, published_at, remaining


class StoreCarryForward(Protocol):
    """Base class of protocols that store, carry and forward messages (DTN style)."""

    buffer_store: ClassVar[bool] = True

    def __init__(self, node: NodeId, *, store: BufferStore | None = None, **kwargs: Any) -> None:
        """``store`` backs the buffer (the daemon passes a persistent one)."""
        super().__init__(node, **kwargs)
        capacity, policy = self.buffer_limits()
        self.buffer = ScfBuffer(capacity, policy, store, max_lifetime=self.buffer_lifetime(),
                                local=node)
        self._expiry_at: float | None = None
        self.add_core_timer(TIMER_PREFIX, self._on_expiry_timer)

    def buffer_limits(self) -> tuple[int, DropPolicy]:
        """Capacity and drop policy, from the ``buffer_size``/``drop_policy`` parameters."""
        try:
            size, policy = self.params.buffer_size, self.params.drop_policy  # type: ignore[attr-defined]
        except AttributeError:
            raise TypeError(f"{type(self).__name__}.Params needs buffer_size and drop_policy "
                            "(or override buffer_limits)") from None
        return int(size), DropPolicy(policy)

    def buffer_lifetime(self) -> float:
        """The longest remaining lifetime a carried message may have: the protocol's own
        message lifetime (``ttl_s``, else ``TTL``), so that junk from another node never
        outlives what the protocol allows (a remote lifetime is cut to it on arrival)."""
        for name in ("ttl_s", "TTL"):
            value = getattr(self.params, name, None)
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
        raise TypeError(f"{type(self).__name__}.Params needs ttl_s or TTL "
                        "(or override buffer_lifetime)")

    # ------------------------------------------------------------------ services

    def carry(self, message: Message, expires_at: float) -> bool:
        """Take ``message`` into the buffer until ``expires_at``; whether it is now held.

        What the buffer gives up for it (expired, or evicted when full) is a
        recorded drop; a message already held is left as it is (``False``).
        """
        stored, dropped = self.buffer.add(message, self.now, expires_at)
        self._report(dropped)
        if stored:
            self._arm_expiry()
        return stored

    def sweep(self) -> None:
        """Let go of every expired message (recorded drops) and re-arm the expiry timer."""
        self._report(self.buffer.expire(self.now))
        self._arm_expiry()

    def on_buffer_drop(self, entry: BufferEntry, reason: str) -> None:
        """The buffer gave up ``entry`` (``expired``/``buffer_full``): forget what you kept."""

    def state_sizes(self) -> dict[str, tuple[int, int]]:
        # the buffer charges each entry its encoded size as it stores it: no body is read
        return {**super().state_sizes(), "buffer": (len(self.buffer), self.buffer.bytes)}

    # ------------------------------------------------------------------ internals

    def on_start(self) -> None:
        super().on_start()
        self.sweep()  # a reloaded buffer: what expired while the node was down goes now

    def _on_expiry_timer(self, name: str) -> None:
        self._expiry_at = None
        self.sweep()

    def _report(self, dropped: list[Dropped]) -> None:
        for item in dropped:
            self.on_buffer_drop(item.entry, item.reason)
            self.drop(item.reason, item.entry.message)

    def _arm_expiry(self) -> None:
        at = self.buffer.next_expiry()
        if at is not None and (self._expiry_at is None or at < self._expiry_at):
            self._expiry_at = at
            self.set_timer(EXPIRY_TIMER, at - self.now)

    def status(self) -> dict[str, Any]:
        return {**super().status(), "buffered": len(self.buffer),
                "buffer_capacity": self.buffer.capacity, "buffer": self.buffer.status()}
