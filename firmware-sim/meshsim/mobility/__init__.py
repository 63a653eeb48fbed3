"""Mobility: every model becomes piecewise-linear ``Trajectories``.

Both drivers only ask where node n is at time t: the simulator at its ticks in
virtual time, the virtual mesh at wall-clock ticks (medium and simulated GPS).

    plan = make_plan(scenario)                        # meshsim.scenario
    trajectories = trajectories_for(scenario, plan)   # = plan.trajectories
    trajectories.position(node, t)                    # (x, y) at t seconds from the start
    trajectories.positions(t)                         # every node's
    write_mobility_log(trajectories, path)            # replays as scripted mobility
    contact_timeline(scenario.contacts or ())         # [contacts] as events to apply in order
"""

from meshsim.mobility.build import make_trajectories, trajectories_for
from meshsim.mobility.contacts import contact_timeline
from meshsim.mobility.log import LOG_NAME, write_log, write_mobility_log
from meshsim.mobility.trajectories import Track, Trajectories

__all__ = ["LOG_NAME", "Track", "Trajectories", "contact_timeline", "make_trajectories",
           "trajectories_for", "write_log", "write_mobility_log"]
