"""BRVST (Li and Wang 2014): attribute range vectors, summary forests, grid and zone managers.

``Brvst`` is the protocol (registered as ``brvst``, protocol id 10), ``BrvstParams``
its parameters. The ARV arithmetic lives in ``meshsub.core.arv``; the forest,
schema mapping, zones, election, manager state and messages are separate
modules here so that tests can check each against the paper's examples.
"""

from meshsub.protocols.brvst.params import BrvstParams
from meshsub.protocols.brvst.protocol import Brvst

__all__ = ["Brvst", "BrvstParams"]
