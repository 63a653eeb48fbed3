"""Soft state with versions: entries that expire unless refreshed, and removals that stick.

Subscriptions travel hop by hop (over a backbone in PUMA, on ferries in
GIANT) and can arrive late, twice, or out of order: a ferry carrying an old
SUB may reach a broker after the UNSUB that followed it (Zheng 2008, §6.4.4
leaves this open). Each issue of a subscription therefore carries a version
that its origin increases (subscribe, every refresh, unsubscribe), and a
table keyed by subscription id:

- accepts an entry only with a version newer than anything it has seen for
  that key (a repeat of the same version just extends the lease);
- turns a removal into a *tombstone* holding the removal's version until its
  lease would have ended, so an older SUB cannot resurrect the entry;
- forgets entries whose lease ended (``expire``), which the owner reports;
- is bounded: a new key is refused when ``capacity`` live entries are held
  (the caller counts the drop); tombstones are evicted oldest first, since
  losing one only reopens a window that the next refresh closes anyway.
"""

from __future__ import annotations

import enum
from collections import OrderedDict
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Upsert(enum.StrEnum):
    """What ``VersionedLeases.upsert`` did."""

    NEW = "new"
    """A key not held before (or only as a tombstone of an older version)."""
    UPDATED = "updated"
    """A newer version replaced the held one."""
    RENEWED = "renewed"
    """The same version again: only the lease was extended."""
    STALE = "stale"
    """An older version than one already seen (held or removed): ignored."""
    FULL = "full"
    """A new key, refused because the table is full."""


@dataclass(slots=True)
class Leased(Generic[V]):
    value: V
    version: int
    expires: float


class VersionedLeases(Generic[K, V]):
    """A bounded map of versioned, expiring entries with sticky removals."""

    def __init__(self, capacity: int, tombstones: int | None = None) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self.tombstone_capacity = tombstones if tombstones is not None else capacity
        self._live: dict[K, Leased[V]] = {}
        self._dead: OrderedDict[K, tuple[int, float]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._live)

    def __contains__(self, key: object) -> bool:
        return key in self._live

    def __iter__(self) -> Iterator[K]:
        return iter(list(self._live))

    def items(self) -> list[tuple[K, Leased[V]]]:
        return list(self._live.items())

    def get(self, key: K) -> V | None:
        entry = self._live.get(key)
        return entry.value if entry is not None else None

    def entry(self, key: K) -> Leased[V] | None:
        return self._live.get(key)

    def version(self, key: K) -> int | None:
        """The newest version seen for ``key`` (held or removed), or None."""
        entry = self._live.get(key)
        if entry is not None:
            return entry.version
        dead = self._dead.get(key)
        return dead[0] if dead is not None else None

    def upsert(self, key: K, value: V, version: int, expires: float) -> Upsert:
        entry = self._live.get(key)
        if entry is not None:
            if version < entry.version:
                return Upsert.STALE
            if version == entry.version:
                entry.expires = max(entry.expires, expires)
                return Upsert.RENEWED
            entry.value, entry.version, entry.expires = value, version, expires
            return Upsert.UPDATED
        dead = self._dead.get(key)
        if dead is not None and version <= dead[0]:
            return Upsert.STALE
        if len(self._live) >= self.capacity:
            return Upsert.FULL
        self._dead.pop(key, None)
        self._live[key] = Leased(value, version, expires)
        return Upsert.NEW

    def remove(self, key: K, version: int, tombstone_until: float) -> V | None:
        """Remove ``key`` if its held version is not newer than ``version``; remember the removal.

        Returns the removed value (None when nothing was held or the held
        entry is newer, in which case it stays).
        """
        entry = self._live.get(key)
        if entry is not None and entry.version > version:
            return None
        removed = self._live.pop(key, None)
        dead = self._dead.get(key)
        if dead is None or dead[0] < version:
            self._dead[key] = (version, tombstone_until)
            self._dead.move_to_end(key)
            while len(self._dead) > self.tombstone_capacity:
                self._dead.popitem(last=False)
        return removed.value if removed is not None else None

    def expire(self, now: float) -> list[tuple[K, Leased[V]]]:
        """Drop live entries whose lease ended (returned) and tombstones past their time."""
        gone = [(k, e) for k, e in self._live.items() if e.expires <= now]
        for key, _entry in gone:
            del self._live[key]
        for key in [k for k, (_v, until) in self._dead.items() if until <= now]:
            del self._dead[key]
        return gone

    def next_expiry(self) -> float | None:
        return min((e.expires for e in self._live.values()), default=None)
