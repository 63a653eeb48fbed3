"""Duplicate and gap detection from each record's (run, node, epoch, rec) sequence.

Daemons number their records per boot epoch (``rec`` = 0, 1, 2, ...). A record
whose number was already seen is a duplicate (an MQTT redelivery, a re-sent
batch); numbers skipped over are gaps: records lost before they reached us
(a daemon's spool deleted them at its size bound) or merely late (they fill
the gap when they arrive). Memory per sequence is one integer plus one pair
per gap, never per record: a gap that is never filled (a real loss) must not
make every later record cost memory and state-file space.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from typing import Any

Key = tuple[str, int, int]


class Sequencer:
    """Admits each (run, node, epoch, rec) once."""

    def __init__(self) -> None:
        self._next: dict[Key, int] = {}  # lowest rec not yet seen
        # seen numbers above the first gap, as sorted disjoint inclusive runs [lo, hi]
        # with a gap before each run
        self._runs: dict[Key, list[list[int]]] = {}

    def admit(self, key: Key, rec: int) -> bool:
        """True if ``rec`` is new for ``key`` (and record it), False for a duplicate."""
        nxt = self._next.get(key, 0)
        runs = self._runs.get(key)
        if rec < nxt:
            return False
        if rec == nxt:
            nxt += 1
            if runs and runs[0][0] == nxt:  # the gap before the first run is filled
                nxt = runs.pop(0)[1] + 1
                if not runs:
                    del self._runs[key]
            self._next[key] = nxt
            return True
        self._next.setdefault(key, nxt)
        runs = self._runs.setdefault(key, [])
        i = bisect_right(runs, rec, key=_start) - 1  # the run starting at or before rec
        if i >= 0 and runs[i][1] >= rec:
            return False
        joins_left = i >= 0 and runs[i][1] == rec - 1
        joins_right = i + 1 < len(runs) and runs[i + 1][0] == rec + 1
        if joins_left and joins_right:
            runs[i][1] = runs.pop(i + 1)[1]
        elif joins_left:
            runs[i][1] = rec
        elif joins_right:
            runs[i + 1][0] = rec
        else:
            runs.insert(i + 1, [rec, rec])
        return True

    def missing(self) -> int:
        """Records skipped so far: numbers below the highest seen that never arrived."""
        total = 0
        for key, runs in self._runs.items():
            below = self._next[key]
            for lo, hi in runs:
                total += lo - below
                below = hi + 1
        return total

    def gaps(self) -> dict[str, list[int]]:
        """Per sequence, the first few missing numbers (for the operator's log)."""
        out: dict[str, list[int]] = {}
        for key, runs in self._runs.items():
            missing: list[int] = []
            below = self._next[key]
            for lo, hi in runs:
                missing += range(below, min(lo, below + 10 - len(missing)))
                below = hi + 1
                if len(missing) >= 10:
                    break
            out["/".join(map(str, key))] = missing
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "/".join(map(str, k)): [n, [list(r) for r in self._runs.get(k, ())]]
            for k, n in self._next.items()
        }

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Sequencer:
        """Also reads the older state format, which listed every number above a gap."""
        seq = cls()
        for text, (nxt, above) in doc.items():
            run, node, epoch = text.rsplit("/", 2)
            key = (run, int(node), int(epoch))
            pairs = [(int(a[0]), int(a[1])) if isinstance(a, list) else (int(a), int(a))
                     for a in above]
            seq._next[key], runs = _normalise(int(nxt), pairs)
            if runs:
                seq._runs[key] = runs
        return seq


def _start(run: list[int]) -> int:
    return run[0]


def _normalise(nxt: int, pairs: list[tuple[int, int]]) -> tuple[int, list[list[int]]]:
    """Sorted, merged runs above ``nxt``; a run that reaches ``nxt`` extends it."""
    runs: list[list[int]] = []
    for lo, hi in sorted(pairs):
        if hi < lo:
            raise ValueError(f"bad run [{lo}, {hi}]")
        if runs and lo <= runs[-1][1] + 1:
            runs[-1][1] = max(runs[-1][1], hi)
        else:
            runs.append([lo, hi])
    while runs and runs[0][0] <= nxt:
        nxt = max(nxt, runs.pop(0)[1] + 1)
    return nxt, runs
