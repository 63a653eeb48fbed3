"""Progress of a long run: a bar with the time left on a terminal, plain lines in a log.

A simulation reports virtual seconds done of its total, a sweep finished runs of
its plan; either way ``Progress.update(done)`` is all the caller does. On a
terminal the bar is redrawn in place at most a few times a second; anywhere else
(a log, a pipe, CI) one plain line is written every ``every_s`` wall seconds, so
a log shows that the run is alive and when it will end without filling up. A run
shorter than one interval writes nothing.
The time left is extrapolated from the rate so far (work is rarely uniform, so it
is an estimate, and says so only by being one).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TextIO

BAR_WIDTH = 30
TTY_REFRESH_S = 0.2


def format_duration(seconds: float) -> str:
    """``42 s``, ``3:05`` (min:s) or ``1:02:03`` (h:min:s)."""
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, secs = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}:{secs:02d}"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}"


class Progress:
    """Reports ``done`` of ``total`` (``unit``: what is counted) under ``label``."""

    def __init__(self, label: str, total: float, *, unit: str = "", stream: TextIO | None = None,
                 every_s: float = 10.0, tty: bool | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.label = label
        self.total = float(total)
        self.unit = unit
        self.stream = stream if stream is not None else sys.stderr
        self.tty = tty if tty is not None else bool(getattr(self.stream, "isatty", lambda: False)())
        self.every_s = every_s
        self.clock = clock
        self.started = clock()
        self._last = self.started  # nothing for a run shorter than one interval
        self.drawn = False
        """Whether anything was written (a short run writes nothing at all)."""

    @staticmethod
    def _number(value: float) -> str:
        return f"{value:g}" if value == int(value) else f"{value:.1f}"

    def text(self, done: float, now: float) -> str:
        """``label: 45% (12.3 of 27 s), 1:23 left`` (no estimate before any progress)."""
        fraction = min(1.0, done / self.total) if self.total > 0 else 1.0
        elapsed = now - self.started
        left = "estimating"
        if fraction >= 1.0:
            left = f"done in {format_duration(elapsed)}"
        elif fraction > 0:
            left = f"{format_duration(elapsed * (1 - fraction) / fraction)} left"
        of = f"{self._number(done)} of {self._number(self.total)} {self.unit}".rstrip()
        return f"{self.label}: {fraction:.0%} ({of}), {left}"

    def update(self, done: float) -> None:
        """Report progress; writes only when the bar or the next log line is due."""
        now = self.clock()
        if now - self._last < (TTY_REFRESH_S if self.tty else self.every_s):
            return
        self._last = now
        self._write(done, now)

    def finish(self, done: float | None = None) -> None:
        """The final state (``total`` if not given) after earlier reports; ends the bar."""
        if not self.drawn:
            return
        self._write(self.total if done is None else done, self.clock())
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()

    def _write(self, done: float, now: float) -> None:
        line = self.text(done, now)
        if self.tty:
            fraction = min(1.0, done / self.total) if self.total > 0 else 1.0
            filled = round(BAR_WIDTH * fraction)
            bar = "#" * filled + "." * (BAR_WIDTH - filled)
            self.stream.write(f"\r[{bar}] {line}\x1b[K")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()
        self.drawn = True
