"""TG (Liu 2011): semantic pub/sub over depth-bounded group trees with Bloom-filter summaries."""

from meshsub.protocols.tg.params import TGParams
from meshsub.protocols.tg.protocol import TG

__all__ = ["TG", "TGParams"]
