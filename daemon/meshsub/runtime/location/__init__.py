"""Own position: providers (static, gpsd, NMEA serial), gating and the service."""

from meshsub.core.tracking import Gating, LocationTracker, PositionReport
from meshsub.runtime.location.fix import Fix, FixSource
from meshsub.runtime.location.gpsd import GpsdParser, GpsdSource
from meshsub.runtime.location.nmea import NmeaAssembler, NmeaSerialSource
from meshsub.runtime.location.service import LocationService, make_source, make_tracker
from meshsub.runtime.location.static import StaticSource

__all__ = [
    "Fix",
    "FixSource",
    "Gating",
    "GpsdParser",
    "GpsdSource",
    "LocationService",
    "LocationTracker",
    "NmeaAssembler",
    "NmeaSerialSource",
    "PositionReport",
    "StaticSource",
    "make_source",
    "make_tracker",
]
