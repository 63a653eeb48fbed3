"""Bounded tables: every piece of BRVST state has a cap in entries and in bytes.

``BoundedMap`` is a dict with both caps. When an insertion would break a cap
it evicts victims (oldest insertion first, or the caller's ``victim`` rule,
e.g. the publication cache's fewest-hits rule) and returns them, so the
protocol counts each as a drop; a value that alone exceeds the byte cap, or
that the victim rule refuses to make room for, is returned as refused.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, ItemsView, Iterator, KeysView, ValuesView
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class BoundedMap(Generic[K, V]):
    """A mapping capped at ``max_entries`` entries and ``max_bytes`` accounted bytes."""

    def __init__(
        self,
        max_entries: int,
        max_bytes: int,
        size_of: Callable[[V], int],
        victim: Callable[[BoundedMap[K, V], K], K | None] | None = None,
    ) -> None:
        if max_entries < 1 or max_bytes < 1:
            raise ValueError("bounds must be positive")
        self.max_entries = max_entries
        self.max_bytes = max_bytes
        self._size_of = size_of
        self._victim = victim
        self._items: dict[K, V] = {}
        self._sizes: dict[K, int] = {}
        self.bytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def __contains__(self, key: object) -> bool:
        return key in self._items

    def __iter__(self) -> Iterator[K]:
        return iter(self._items)

    def __getitem__(self, key: K) -> V:
        return self._items[key]

    def get(self, key: K) -> V | None:
        return self._items.get(key)

    def items(self) -> ItemsView[K, V]:
        return self._items.items()

    def keys(self) -> KeysView[K]:
        return self._items.keys()

    def values(self) -> ValuesView[V]:
        return self._items.values()

    def pop(self, key: K) -> V | None:
        value = self._items.pop(key, None)
        if value is not None:
            self.bytes -= self._sizes.pop(key)
        return value

    def resize(self, key: K) -> None:
        """Re-account ``key`` after its value changed in place (caps are not re-checked)."""
        new = self._size_of(self._items[key])
        self.bytes += new - self._sizes[key]
        self._sizes[key] = new

    def put(self, key: K, value: V) -> list[tuple[K, V]]:
        """Insert or replace; return the entries evicted (or ``[(key, value)]`` if refused)."""
        size = self._size_of(value)
        if size > self.max_bytes:
            return [(key, value)]
        old = self.pop(key)
        evicted: list[tuple[K, V]] = []
        while len(self._items) >= self.max_entries or self.bytes + size > self.max_bytes:
            victim = self._pick_victim(key)
            if victim is None:
                if old is not None:  # put the replaced value back: nothing changes
                    self._store(key, old)
                return [*evicted, (key, value)]
            evicted.append((victim, self.pop(victim)))  # type: ignore[arg-type]
        self._store(key, value)
        return evicted

    def _store(self, key: K, value: V) -> None:
        size = self._size_of(value)
        self._items[key] = value
        self._sizes[key] = size
        self.bytes += size

    def _pick_victim(self, incoming: K) -> K | None:
        if not self._items:
            return None
        if self._victim is not None:
            return self._victim(self, incoming)
        return next(iter(self._items))
