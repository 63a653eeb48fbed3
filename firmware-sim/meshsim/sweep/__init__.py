"""``meshsim sweep``: a grid of protocols x parameter values x scenario overrides x seeds.

``spec`` reads the sweep file, ``points`` expands it into grid points, ``point`` runs one
point (a pure function of the spec and the point, writing only into its own directory,
so it can become a task of a cluster job), ``runner`` runs them all, resumably, with
progress and the sweep manifest. docs/experiments.md describes the file.
"""

from meshsim.sweep.points import Point, expand
from meshsim.sweep.spec import SweepError, SweepSpec, load_sweep

__all__ = ["Point", "SweepError", "SweepSpec", "expand", "load_sweep"]
