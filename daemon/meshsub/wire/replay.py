"""Replay protection: a sliding bitmap window per (transmitter, boot epoch).

The window follows what one transmitter sends over one hop (its frame
sequence), not end-to-end message ids: relayed and store-carry-forward copies
of a message arrive out of order and hours late through other carriers, and
each of those transmissions is a new frame with a fresh sequence number from
whoever sent it. Duplicate *messages* are the core's dedup cache's business.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from meshsub.core.api import NodeId

DEFAULT_WINDOW: Final = 1024
DEFAULT_MAX_TRANSMITTERS: Final = 4096


@dataclass(slots=True)
class _State:
    epoch: int
    top: int  # highest sequence accepted
    bits: int  # bit i set: sequence top - i accepted


class ReplayWindow:
    """Accepts each (epoch, seq) of a transmitter at most once.

    Rejected: a sequence seen before, one ``window`` or more below the
    highest seen, or an epoch older than the newest seen for that
    transmitter. A newer epoch (a reboot) starts a fresh window. At most
    ``max_transmitters`` are tracked; the least recently heard is forgotten
    first, which re-opens its old frames to replay: size it above the number
    of neighbours a node can hear within the key's lifetime.
    """

    def __init__(
        self, window: int = DEFAULT_WINDOW, max_transmitters: int = DEFAULT_MAX_TRANSMITTERS
    ) -> None:
        if window < 1:
            raise ValueError("replay window must be at least 1 frame wide")
        if max_transmitters < 1:
            raise ValueError("replay max_transmitters must be at least 1")
        self.window = window
        self.max_transmitters = max_transmitters
        self._mask = (1 << window) - 1
        self._states: OrderedDict[NodeId, _State] = OrderedDict()
        self.evicted = 0

    def __len__(self) -> int:
        return len(self._states)

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

    def admit(self, transmitter: NodeId, epoch: int, seq: int) -> str | None:
        """``check`` and, if fresh, ``accept`` in one look-up (the receive path's call).

        Only for frames whose tag verified: a fresh frame moves the window.
        """
        state = self._states.get(transmitter)
        if state is not None and epoch == state.epoch and seq > state.top:
            # the common case: the next frame of a known transmitter's boot
            self._states.move_to_end(transmitter)
            shift = seq - state.top
            state.bits = ((state.bits << shift) & self._mask | 1) if shift < self.window else 1
            state.top = seq
            return None
        why = self.check(transmitter, epoch, seq)
        if why is None:
            self.accept(transmitter, epoch, seq)
        return why

    def accept(self, transmitter: NodeId, epoch: int, seq: int) -> None:
        """Record a frame that passed ``check`` and authentication."""
        state = self._states.get(transmitter)
        if state is None:
            self._states[transmitter] = _State(epoch, seq, 1)
            if len(self._states) > self.max_transmitters:
                self._states.popitem(last=False)
                self.evicted += 1
            return
        self._states.move_to_end(transmitter)
        if epoch < state.epoch:  # stale: ``check`` refuses it; never move the window back
            return
        if epoch > state.epoch:
            state.epoch, state.top, state.bits = epoch, seq, 1
        elif seq > state.top:
            shift = seq - state.top
            state.bits = ((state.bits << shift) & self._mask | 1) if shift < self.window else 1
            state.top = seq
        else:
            state.bits |= 1 << (state.top - seq)

    def newest_epoch(self, transmitter: NodeId) -> int | None:
        """The newest boot epoch accepted from ``transmitter`` (None if not tracked)."""
        state = self._states.get(transmitter)
        return None if state is None else state.epoch

    def highest_seq(self, transmitter: NodeId) -> int | None:
        """The highest frame sequence accepted in that epoch (None if not tracked)."""
        state = self._states.get(transmitter)
        return None if state is None else state.top
