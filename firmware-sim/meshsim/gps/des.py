"""Simulated GPS in virtual time: what each node's daemon would believe its position is.

In the virtual mesh a node's protocol sees its position only through gpsd and
the daemon's ``LocationTracker`` (gating, movement threshold, "no fix"). The
discrete-event driver reproduces that path without NMEA: the same
``ReceiverModel`` (same seed, same draws, so the same errors and outages as
the feeder would send) feeds the same tracker with the daemon's default
gating. The tracker's reports are what the protocol gets as
``PositionChanged``, and what its neighbours learn from its beacons; the
radio keeps using the true positions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from meshsim.gps.model import ReceiverModel
from meshsim.gps.settings import GpsSettings
from meshsub.core.api import Position
from meshsub.core.tracking import Fix, Gating, LocationTracker


class GpsView:
    """Per node: a simulated receiver and the daemon's tracker over it."""

    def __init__(self, settings: GpsSettings, seed: int, nodes: Iterable[int],
                 gating: Gating | None = None) -> None:
        self.settings = settings
        gating = gating if gating is not None else Gating()
        self._models = {n: ReceiverModel(settings, seed, n) for n in sorted(nodes)}
        self._trackers = {n: LocationTracker(gating, None, "gps") for n in self._models}

    @property
    def period_s(self) -> float:
        return self.settings.period_s

    def believed(self, node: int) -> Position | None:
        """The position node's daemon last announced (``None``: no fix yet, or lost)."""
        return self._trackers[node].position

    def tick(self, now: float, true: Mapping[int, tuple[float, float]]
             ) -> list[tuple[int, Position | None]]:
        """One receiver epoch for every node; the tracker reports to pass on, by node id."""
        out = []
        satellites = self.settings.satellites
        for node, model in self._models.items():
            tracker = self._trackers[node]
            reading = model.step(now)
            if reading.fix:
                x, y = true[node]
                fix = Fix(now, 3, hdop=reading.hdop, satellites=satellites,
                          local=(x + reading.east_m, y + reading.north_m, 0.0))
            else:
                fix = Fix(now, 1)
            report = tracker.update(fix, now) or tracker.tick(now)
            if report is not None:
                out.append((node, report.position))
        return out
