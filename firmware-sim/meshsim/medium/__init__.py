"""The radio medium: propagation models and the virtual mesh's nftables medium.

``radio`` holds the models (unit disk, linear ramp, log-distance path loss) and
the link computation shared by the discrete-event simulator and the virtual
mesh, so both tiers see the same links for the same positions. ``Medium`` turns
positions (or contact-trace links) into one atomic nftables update on the
medium bridge; ``htb`` limits a node's transmit rate; ``delay`` holds frames per
pair through NFQUEUE. docs/medium.md describes what is and is not modelled.
"""

from meshsim.medium.delay import DelayConfig, DelayStats, delay_config
from meshsim.medium.errors import MediumError
from meshsim.medium.medium import Medium, UpdateTiming
from meshsim.medium.radio import LogDistance, make_model

__all__ = ["DelayConfig", "DelayStats", "LogDistance", "Medium", "MediumError", "UpdateTiming",
           "delay_config", "make_model"]
