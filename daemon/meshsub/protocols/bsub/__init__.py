"""B-SUB: Bloom-filter-based pub/sub for human networks (Zhao & Wu, ICDCS 2010)."""

from meshsub.protocols.bsub.params import BSubParams, RoleMode
from meshsub.protocols.bsub.protocol import BSub

__all__ = ["BSub", "BSubParams", "RoleMode"]
