"""Discrete-event driver: the protocol state machines at 1000-node scale in virtual time."""

from meshsim.des.engine import NullSink, Simulation, TelemetrySink, default_run_id
from meshsim.des.run import RunResult, run_scenario
from meshsim.des.stats import SimStats
from meshsim.des.summary import EventOutcome, Totals, expected_pairs, outcomes, totals

__all__ = ["EventOutcome", "NullSink", "RunResult", "SimStats", "Simulation", "TelemetrySink",
           "Totals", "default_run_id", "expected_pairs", "outcomes", "run_scenario", "totals"]
