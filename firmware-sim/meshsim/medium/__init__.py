"""The virtual mesh's radio medium on the host: nftables, HTB and NFQUEUE.

The models themselves (unit disk, linear ramp, log-distance path loss) and the
link computation live in ``meshsim.radio``, pure functions shared with the
discrete-event simulator, so both tiers see the same links for the same
positions and the simulator never loads this host code. ``Medium`` turns
positions (or contact-trace links) into one atomic nftables update on the
medium bridge; ``htb`` limits a node's transmit rate; ``delay`` holds frames per
pair through NFQUEUE. docs/medium.md describes what is and is not modelled.
"""

from meshsim.medium.delay import DelayConfig, DelayStats, delay_config
from meshsim.medium.errors import MediumError
from meshsim.medium.medium import Medium, UpdateTiming

__all__ = ["DelayConfig", "DelayStats", "Medium", "MediumError", "UpdateTiming", "delay_config"]
