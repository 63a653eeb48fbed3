"""Piecewise-linear trajectories: where each node is at time t.

Every mobility model, scripted or random, ends up here, so the drivers only ask
"where is node n at time t": the simulator at its ticks in virtual time, the
virtual mesh at wall-clock ticks. A track is a list of points (t, x, y) with
strictly increasing times from 0; between two points the node moves in a straight
line at constant speed, after the last one it stays. Waypoints in the scenario's
sense (``t node x y``: the node *is at* (x, y) at time t) are exactly these points,
which is why a mobility log of any model replays as scripted mobility.
"""

from __future__ import annotations

import bisect
import heapq
from array import array
from collections.abc import Iterable, Iterator, Mapping

from meshsim.scenario.model import Waypoint


class Track:
    """One node's path. Times are stored in arrays of doubles (24 bytes a point)."""

    __slots__ = ("times", "xs", "ys")

    def __init__(self, x: float, y: float, t0: float = 0.0) -> None:
        self.times = array("d", [t0])
        self.xs = array("d", [x])
        self.ys = array("d", [y])

    def add(self, t: float, x: float, y: float) -> None:
        """Append a point; a point at the last point's time replaces it."""
        last = self.times[-1]
        if t > last:
            self.times.append(t)
            self.xs.append(x)
            self.ys.append(y)
        elif t == last:
            self.xs[-1], self.ys[-1] = x, y
        else:
            raise ValueError(f"track point at t={t!r} before the last one ({last!r})")

    @property
    def last_t(self) -> float:
        return self.times[-1]

    @property
    def end(self) -> tuple[float, float]:
        return self.xs[-1], self.ys[-1]

    def __len__(self) -> int:
        return len(self.times)

    def position(self, t: float) -> tuple[float, float]:
        times = self.times
        i = bisect.bisect_right(times, t)
        if i >= len(times):
            return self.xs[-1], self.ys[-1]
        if i == 0:
            return self.xs[0], self.ys[0]
        t0, t1 = times[i - 1], times[i]
        x0, y0 = self.xs[i - 1], self.ys[i - 1]
        frac = (t - t0) / (t1 - t0)
        return x0 + (self.xs[i] - x0) * frac, y0 + (self.ys[i] - y0) * frac

    def points(self) -> Iterator[tuple[float, float, float]]:
        return zip(self.times, self.xs, self.ys, strict=True)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Track):
            return NotImplemented
        return (self.times, self.xs, self.ys) == (other.times, other.xs, other.ys)

    def __repr__(self) -> str:
        return f"Track({len(self)} points, last_t={self.last_t:g})"


class Trajectories:
    """Every node's track; ``position(node, t)`` for any node of the run."""

    def __init__(self, tracks: Mapping[int, Track]) -> None:
        self._tracks = dict(sorted(tracks.items()))
        for node, track in self._tracks.items():
            if track.times[0] != 0.0:
                raise ValueError(f"track of node {node} starts at t={track.times[0]!r}, not 0")
        self.nodes = tuple(self._tracks)
        self.last_t = max((track.last_t for track in self._tracks.values()), default=0.0)

    @classmethod
    def from_waypoints(cls, waypoints: Iterable[Waypoint],
                       start: Mapping[int, tuple[float, float]]) -> Trajectories:
        """Scripted mobility: every node of ``start`` at its start position at t = 0,
        then at each of its waypoints (a waypoint at t = 0 replaces the start; of two
        at the same time the later one listed wins)."""
        tracks = {node: Track(x, y) for node, (x, y) in start.items()}
        for w in sorted(waypoints, key=lambda w: (w.node, w.t)):
            tracks[w.node].add(w.t, w.x, w.y)
        return cls(tracks)

    def track(self, node: int) -> Track:
        return self._tracks[node]

    def items(self) -> Iterator[tuple[int, Track]]:
        return iter(self._tracks.items())

    def position(self, node: int, t: float) -> tuple[float, float]:
        return self._tracks[node].position(t)

    def positions(self, t: float) -> dict[int, tuple[float, float]]:
        """Every node's position at ``t`` (what a wall-clock driver needs each tick)."""
        return {node: track.position(t) for node, track in self._tracks.items()}

    def moving(self) -> tuple[int, ...]:
        """The nodes whose track has more than its start point."""
        return tuple(node for node, track in self._tracks.items() if len(track) > 1)

    def waypoints(self) -> Iterator[Waypoint]:
        """Every track point as a waypoint, ordered by time then node (the mobility log)."""
        streams = [_labelled(node, track) for node, track in self._tracks.items()]
        for t, node, x, y in heapq.merge(*streams):
            yield Waypoint(t, node, x, y)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trajectories):
            return NotImplemented
        return self._tracks == other._tracks

    def __repr__(self) -> str:
        return f"Trajectories({len(self.nodes)} nodes, last_t={self.last_t:g})"


def _labelled(node: int, track: Track) -> Iterator[tuple[float, int, float, float]]:
    for t, x, y in track.points():
        yield t, node, x, y
