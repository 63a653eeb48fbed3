"""Mobility: every model becomes piecewise-linear ``Trajectories`` (see trajectories.py)."""

from meshsim.mobility.trajectories import Track, Trajectories

__all__ = ["Track", "Trajectories"]
