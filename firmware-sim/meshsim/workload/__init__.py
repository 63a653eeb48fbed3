"""The applications of the virtual mesh: a scenario's workload as one schedule per device.

The agent that plays a schedule on a device is its own distribution
(``meshsub_workload``, workload/ in the repository), installed on virtual devices only.
"""
