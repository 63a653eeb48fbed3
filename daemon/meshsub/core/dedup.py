"""A bounded "seen before?" cache: duplicate suppression without unbounded memory."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable


class DuplicateCache:
    """Remembers the ``capacity`` most recently seen keys (LRU).

    A key that fell out of the cache is treated as new: the cost of a bounded
    cache is a rare late duplicate, never unbounded growth. Drivers may persist
    ``keys()`` and reload them with ``extend`` so that suppression survives a
    restart.
    """

    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._seen: OrderedDict[Hashable, None] = OrderedDict()
        self.evicted = 0
        self.seen: Callable[[Hashable], bool] = self._seen.__contains__
        """``key in cache`` without a Python-level call: for per-frame hot paths."""

    def __len__(self) -> int:
        return len(self._seen)

    def __contains__(self, key: Hashable) -> bool:
        return key in self._seen

    def check_and_add(self, key: Hashable) -> bool:
        """Return True if ``key`` was already present; otherwise add it."""
        if key in self._seen:
            self._seen.move_to_end(key)
            return True
        self._seen[key] = None
        if len(self._seen) > self.capacity:
            self._seen.popitem(last=False)
            self.evicted += 1
        return False

    def extend(self, keys: Iterable[Hashable]) -> None:
        for key in keys:
            self.check_and_add(key)

    def keys(self) -> list[Hashable]:
        return list(self._seen)
