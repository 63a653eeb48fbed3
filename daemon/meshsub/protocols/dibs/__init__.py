"""DIBS (Pham and Tran 2012): CRES virtual-address trees around references, SPN on top."""

from meshsub.protocols.dibs.params import DIBSParams
from meshsub.protocols.dibs.protocol import DIBS

__all__ = ["DIBS", "DIBSParams"]
