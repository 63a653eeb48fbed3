"""Replay protection: a sliding bitmap window per (transmitter, boot epoch).

The window follows what one transmitter sends over one hop (its frame
sequence), not end-to-end message ids: relayed and store-carry-forward copies
of a message arrive out of order and hours late through other carriers, and
each of those transmissions is a new frame with a fresh sequence number from
whoever sent it. Duplicate *messages* are the core's dedup cache's business.

What a restart forgets must not reopen a replay, so the driver persists each
transmitter's (epoch, highest sequence, last heard) (``changes``) and loads it
at start (``restore``); a restored transmitter counts every sequence up to
its highest as seen. A node that lost its own state cannot go back either:
its epoch is seeded from the real-time clock (the driver's business), so it
is heard again at its next frame.

The table is bounded, and a live transmitter is never pushed out by new
ones: when it is full, the least recently heard entry is forgotten only if
it has been silent for ``idle_evict_s``; otherwise the newcomer is refused
(``has_room`` is false, counted in ``refused``).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from meshsub.core.api import NodeId

DEFAULT_WINDOW: Final = 1024
DEFAULT_MAX_TRANSMITTERS: Final = 4096
DEFAULT_IDLE_EVICT_S: Final = 600.0
"""How long a transmitter must have been silent before a new one may take its place:
far beyond any neighbour timeout (a few beacon intervals)."""

SavedState = tuple[int, int, float]
"""(epoch, highest sequence, last heard) of one transmitter, as persisted."""


@dataclass(slots=True)
class _State:
    epoch: int
    top: int  # highest sequence accepted
    bits: int  # bit i set: sequence top - i accepted
    heard: float  # driver clock of the last accepted frame


class ReplayWindow:
    """Accepts each (epoch, seq) of a transmitter at most once.

    Rejected: a sequence seen before, one ``window`` or more below the
    highest seen, or an epoch older than the newest seen for that
    transmitter. A newer epoch (a reboot) starts a fresh window.
    """

    def __init__(
        self,
        window: int = DEFAULT_WINDOW,
        max_transmitters: int = DEFAULT_MAX_TRANSMITTERS,
        idle_evict_s: float = DEFAULT_IDLE_EVICT_S,
    ) -> None:
        if window < 1:
            raise ValueError("replay window must be at least 1 frame wide")
        if max_transmitters < 1:
            raise ValueError("replay max_transmitters must be at least 1")
        if not idle_evict_s >= 0:
            raise ValueError("replay idle_evict_s must not be negative")
        self.window = window
        self.max_transmitters = max_transmitters
        self.idle_evict_s = idle_evict_s
        self._mask = (1 << window) - 1
        self._states: OrderedDict[NodeId, _State] = OrderedDict()  # least recently heard first
        self._dirty: set[NodeId] = set()
        self.evicted = 0
        """Silent transmitters forgotten to make room for a new one."""
        self.refused = 0
        """New transmitters refused because every entry was in use (an insider's ids)."""

    def __len__(self) -> int:
        return len(self._states)

    def __contains__(self, transmitter: object) -> bool:
        return transmitter in self._states

    def has_room(self, transmitter: NodeId, now: float) -> bool:
        """Whether a frame of ``transmitter`` may be tracked: known, or a free (or
        silent enough) slot for it. False is counted in ``refused``."""
        if transmitter in self._states or len(self._states) < self.max_transmitters:
            return True
        oldest = next(iter(self._states.values()))
        if now - oldest.heard >= self.idle_evict_s:
            return True
        self.refused += 1
        return False

    def check(self, transmitter: NodeId, epoch: int, seq: int) -> str | None:
        """Why the frame would be a replay (text), or ``None`` if it is fresh. No update."""
        state = self._states.get(transmitter)
        if state is None or epoch > state.epoch:
            return None
        if epoch < state.epoch:
            return f"stale epoch {epoch} < {state.epoch}"
        if seq > state.top:
            return None
        offset = state.top - seq
        if offset >= self.window:
            return f"seq {seq} is older than the window (top {state.top})"
        if state.bits >> offset & 1:
            return f"seq {seq} already seen"
        return None

    def accept(self, transmitter: NodeId, epoch: int, seq: int, now: float = 0.0) -> bool:
        """Record a frame that passed ``check`` and authentication.

        Returns True if it is the newest frame of that transmitter so far (a
        new epoch, or a sequence above the highest): only such a frame may
        teach the driver where the transmitter is. A late frame inside the
        window returns False.
        """
        state = self._states.get(transmitter)
        self._dirty.add(transmitter)
        if state is None:
            if len(self._states) >= self.max_transmitters:
                gone, _ = self._states.popitem(last=False)
                self._dirty.discard(gone)
                self.evicted += 1
            self._states[transmitter] = _State(epoch, seq, 1, now)
            return True
        self._states.move_to_end(transmitter)
        if epoch < state.epoch:  # stale: ``check`` refuses it; never move the window back
            return False
        state.heard = max(state.heard, now)
        if epoch > state.epoch:
            state.epoch, state.top, state.bits = epoch, seq, 1
            return True
        if seq > state.top:
            shift = seq - state.top
            state.bits = ((state.bits << shift) & self._mask | 1) if shift < self.window else 1
            state.top = seq
            return True
        state.bits |= 1 << (state.top - seq)
        return False

    def newest_epoch(self, transmitter: NodeId) -> int | None:
        """The newest boot epoch accepted from ``transmitter`` (None if not tracked)."""
        state = self._states.get(transmitter)
        return None if state is None else state.epoch

    def highest_seq(self, transmitter: NodeId) -> int | None:
        """The highest frame sequence accepted in that epoch (None if not tracked)."""
        state = self._states.get(transmitter)
        return None if state is None else state.top

    # ------------------------------------------------------------ persistence

    def changes(self) -> dict[NodeId, SavedState]:
        """What changed since the last call (for the driver to persist), and forget it."""
        out = {n: (s.epoch, s.top, s.heard) for n in self._dirty
               if (s := self._states.get(n)) is not None}
        self._dirty.clear()
        return out

    def unsaved(self, nodes: Iterable[NodeId]) -> None:
        """The driver could not persist these: report them again at the next ``changes``."""
        self._dirty.update(n for n in nodes if n in self._states)

    def snapshot(self) -> dict[NodeId, SavedState]:
        """Every tracked transmitter."""
        return {n: (s.epoch, s.top, s.heard) for n, s in self._states.items()}

    def restore(self, saved: Mapping[NodeId, SavedState]) -> int:
        """Load persisted states (least recently heard first); return how many were used.

        Everything up to a transmitter's highest sequence counts as seen: the
        bitmap was not saved, so the window only moves forward from there. A
        state older than one already held is ignored; the table bound holds.
        """
        used = 0
        for node, (epoch, top, heard) in sorted(saved.items(), key=lambda item: item[1][2]):
            state = self._states.get(node)
            if state is not None and (state.epoch, state.top) >= (epoch, top):
                continue
            if state is None and len(self._states) >= self.max_transmitters:
                self._states.popitem(last=False)
                self.evicted += 1
            self._states[node] = _State(epoch, top, self._mask, heard)
            self._states.move_to_end(node)
            used += 1
        return used
