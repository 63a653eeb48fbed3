"""HESPER (Zheng 2008, ch. 4): grid cells, hashed per-topic brokers, sector routing.

``Hesper`` is the protocol (registered as ``hesper``, protocol id 3), with
``variant = "I"`` or ``"II"``; ``HesperParams`` its parameters. The pure
geometry (``sectors``), election, energy model, messages and broker state are
separate modules so that tests can check each against worked vectors.
"""

from meshsub.protocols.hesper.params import HesperParams
from meshsub.protocols.hesper.protocol import Hesper

__all__ = ["Hesper", "HesperParams"]
