"""Mobility: every model becomes piecewise-linear ``Trajectories``.

Both drivers only ask where node n is at time t: the simulator at its ticks in
virtual time, the virtual mesh at wall-clock ticks (medium and simulated GPS).

    plan = make_plan(scenario)                # meshsim.scenario
    plan.trajectories.positions(t)            # every node's (x, y) at t seconds
    save_log(plan.trajectories, path)         # replayable as scripted mobility
    contact_timeline(scenario.contacts or ()) # [contacts] as events to apply in order
"""

from meshsim.mobility.build import make_trajectories
from meshsim.mobility.contacts import contact_timeline
from meshsim.mobility.log import LOG_NAME, save_log, write_log
from meshsim.mobility.trajectories import Track, Trajectories

__all__ = ["LOG_NAME", "Track", "Trajectories", "contact_timeline", "make_trajectories",
           "save_log", "write_log"]
