"""Simulated GPS: NMEA receivers for the virtual mesh, fed to the real gpsd of each device.

``settings`` holds the ``[gps]`` knobs, ``nmea`` writes the sentences,
``sky`` and ``model`` decide what a receiver reports (satellites, error,
HDOP, fix loss), ``feeder`` sends it over UDP at the receiver's rate and
records the truth next to it in ``gps.jsonl``, which ``log`` reads back;
``des`` gives the discrete-event simulator the daemon's view of the same
receivers. The feeder (asyncio, sockets) is imported from
``meshsim.gps.feeder`` so that loading a scenario does not pull it in.
"""

from meshsim.gps.model import Reading, ReceiverModel
from meshsim.gps.nmea import Epoch, NmeaError, Satellite
from meshsim.gps.settings import GpsSettings, GpsSettingsError, Outage

__all__ = [
    "Epoch",
    "GpsSettings",
    "GpsSettingsError",
    "NmeaError",
    "Outage",
    "Reading",
    "ReceiverModel",
    "Satellite",
]
