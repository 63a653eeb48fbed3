"""Simulated GPS: NMEA receivers for the virtual mesh, fed to the real gpsd of each device.

``nmea`` writes the sentences a receiver prints once per epoch.
"""

from meshsim.gps.nmea import Epoch, NmeaError, Satellite

__all__ = ["Epoch", "NmeaError", "Satellite"]
