"""Scripted mobility: where each node is at virtual time t.

A waypoint (t, node, x, y) says the node *is at* (x, y) at time t; between
waypoints it moves in a straight line at constant speed, before its first
waypoint it moves from its placed position (at t = 0), after its last it stays.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping

from meshsim.scenario.model import Waypoint


class Trajectories:
    def __init__(self, waypoints: Iterable[Waypoint],
                 start: Mapping[int, tuple[float, float]]) -> None:
        tracks: dict[int, list[tuple[float, float, float]]] = {}
        for w in sorted(waypoints, key=lambda w: (w.node, w.t)):
            track = tracks.setdefault(w.node, [(0.0, *start[w.node])])
            if w.t == track[-1][0]:
                track[-1] = (w.t, w.x, w.y)
            else:
                track.append((w.t, w.x, w.y))
        self._tracks = tracks
        self._times = {node: [p[0] for p in track] for node, track in tracks.items()}
        self.nodes = tuple(sorted(tracks))
        self.last_t = max((track[-1][0] for track in tracks.values()), default=0.0)

    def position(self, node: int, t: float) -> tuple[float, float]:
        track = self._tracks[node]
        i = bisect.bisect_right(self._times[node], t)
        if i >= len(track):
            return track[-1][1], track[-1][2]
        if i == 0:
            return track[0][1], track[0][2]
        t0, x0, y0 = track[i - 1]
        t1, x1, y1 = track[i]
        frac = (t - t0) / (t1 - t0)
        return x0 + (x1 - x0) * frac, y0 + (y1 - y0) * frac
