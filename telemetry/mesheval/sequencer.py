"""Duplicate and gap detection from each record's (run, node, epoch, rec) sequence.

Daemons number their records per boot epoch (``rec`` = 0, 1, 2, ...). A record
whose number was already seen is a duplicate (an MQTT redelivery, a re-sent
file); numbers skipped over are gaps (records lost before they reached us).
Memory per sequence is one integer plus the numbers seen above the first gap.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

Key = tuple[str, int, int]


class Sequencer:
    """Admits each (run, node, epoch, rec) once."""

    def __init__(self) -> None:
        self._next: dict[Key, int] = {}  # lowest rec not yet seen
        self._above: dict[Key, set[int]] = {}  # seen recs above a gap

    def admit(self, key: Key, rec: int) -> bool:
        """True if ``rec`` is new for ``key`` (and record it), False for a duplicate."""
        nxt = self._next.get(key, 0)
        above = self._above.get(key)
        if rec < nxt or (above is not None and rec in above):
            return False
        if rec == nxt:
            nxt += 1
            while above and nxt in above:
                above.discard(nxt)
                nxt += 1
            self._next[key] = nxt
            if above is not None and not above:
                del self._above[key]
        else:
            self._above.setdefault(key, set()).add(rec)
            self._next.setdefault(key, nxt)
        return True

    def missing(self) -> int:
        """Records skipped so far: numbers below the highest seen that never arrived."""
        total = 0
        for key, above in self._above.items():
            total += max(above) + 1 - self._next[key] - len(above)
        return total

    def gaps(self) -> dict[str, list[int]]:
        """Per sequence, the first few missing numbers (for the operator's log)."""
        out: dict[str, list[int]] = {}
        for key, above in self._above.items():
            missing = [r for r in range(self._next[key], max(above)) if r not in above][:10]
            out["/".join(map(str, key))] = missing
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "/".join(map(str, k)): [n, sorted(self._above.get(k, ()))]
            for k, n in self._next.items()
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Sequencer:
        seq = cls()
        for text, (nxt, above) in doc.items():
            run, node, epoch = text.rsplit("/", 2)
            key = (run, int(node), int(epoch))
            seq._next[key] = int(nxt)
            if above:
                seq._above[key] = {int(r) for r in above}
        return seq
