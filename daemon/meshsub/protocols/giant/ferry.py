"""What a GIANT ferry carries: bundles for brokers and the advertisements it spreads.

Everything sits in one ``ScfBuffer`` (bounded, expiring, persistable through
a ``BufferStore``) keyed by message id: bundles under the id the handing
broker gave the handover, advertisements under their own id. This class is
the ferry's whole store logic, so that it can move onto the shared
store-carry-forward base unchanged in shape.
"""

from __future__ import annotations

from collections.abc import Iterator

from meshsub.core import bodies
from meshsub.core.api import Message, MessageId
from meshsub.core.buffer import BufferStore, Dropped, DropPolicy, ScfBuffer
from meshsub.core.grid import Cell
from meshsub.protocols.giant import messages as m


class FerryStore:
    def __init__(self, capacity: int, policy: DropPolicy,
                 store: BufferStore | None = None, *,
                 max_lifetime: float | None = None) -> None:
        """``max_lifetime``: the longest lifetime any carried item may have (a longer
        one from another node is cut to it on arrival)."""
        self.buffer = ScfBuffer(capacity, policy, store, max_lifetime=max_lifetime)
        self._carried: dict[tuple[int, str, Cell], MessageId] = {}
        """(kind, item key, receiver) -> bundle id: one copy of an item per receiver."""
        self._keys: dict[MessageId, tuple[int, str, Cell]] = {}
        """The reverse of ``_carried``."""
        self._by_receiver: dict[Cell, dict[MessageId, None]] = {}
        """Receiver -> its bundles' ids, oldest first (the buffer's order). With the
        daemon's SQLite store the buffer's index holds no bodies: finding a broker's
        bundles or the advertisements by reading every body back would cost the whole
        store on each HELLO."""
        self._adverts: dict[MessageId, None] = {}
        """Advertisement ids, oldest first."""
        self.corrupt = self.buffer.corrupt
        for message in list(self.buffer):
            self._index(message)

    def __len__(self) -> int:
        return len(self.buffer)

    @staticmethod
    def _item_key(bundle: m.Bundle) -> tuple[int, str, Cell]:
        item = bundle.item
        key = str(item.event_id) if isinstance(item, m.EventItem) \
            else f"{item.sub_id}@{item.version}"
        return bundle.kind, key, bundle.receiver

    def _index(self, message: Message) -> None:
        if message.type == m.ADV:
            self._adverts[message.id] = None
        if message.type != m.BUNDLE:
            return
        try:
            bundle = m.Bundle.decode(message.body)
        except bodies.BodyError:
            self.buffer.discard(message.id)
            self.corrupt += 1
            return
        key = self._item_key(bundle)
        self._carried[key] = message.id
        self._keys[message.id] = key
        self._by_receiver.setdefault(bundle.receiver, {})[message.id] = None

    def carries(self, bundle: m.Bundle) -> bool:
        return self._item_key(bundle) in self._carried

    def add(self, message: Message, now: float, expires_at: float) -> list[Dropped]:
        """Store a bundle or an advertisement (a newer advertisement replaces the held one)."""
        if message.type == m.ADV and message.id in self.buffer:
            self.buffer.discard(message.id)
            self._adverts.pop(message.id, None)
        held, dropped = self.buffer.add(message, now, expires_at)
        if held:
            self._index(message)
        for d in dropped:
            self._unindex(d.entry.message)
        return dropped

    def remove(self, key: MessageId) -> None:
        """A bundle was delivered (its receiver acknowledged it)."""
        if self.buffer.discard(key):
            self._forget(key)

    def _unindex(self, message: Message) -> None:
        self._forget(message.id)

    def _forget(self, mid: MessageId) -> None:
        self._adverts.pop(mid, None)
        key = self._keys.pop(mid, None)
        if key is None:
            return
        if self._carried.get(key) == mid:
            del self._carried[key]
        ids = self._by_receiver.get(key[2])
        if ids is not None:
            ids.pop(mid, None)
            if not ids:
                del self._by_receiver[key[2]]

    def expire(self, now: float) -> list[Dropped]:
        dropped = self.buffer.expire(now)
        for d in dropped:
            self._unindex(d.entry.message)
        return dropped

    def bundles_for(self, receiver: Cell) -> Iterator[tuple[Message, m.Bundle]]:
        """The bundles for ``receiver``, oldest first; only their bodies are read."""
        for mid in list(self._by_receiver.get(receiver, ())):
            message = self.buffer.get(mid)
            if message is None:  # unreadable in the store: the buffer forgot it
                self._forget(mid)
                continue
            yield message, m.Bundle.decode(message.body)

    def advertisements(self) -> list[Message]:
        out = []
        for mid in list(self._adverts):
            message = self.buffer.get(mid)
            if message is None:
                self._forget(mid)
            else:
                out.append(message)
        return out

    def remaining(self, key: MessageId, now: float) -> float:
        entry = self.buffer.entry(key)
        return 0.0 if entry is None else max(0.0, entry.expires_at - now)
