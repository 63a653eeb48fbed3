"""ST: the single network-wide subscription tree with covering, TG's baseline (Liu 2011, §4.1)."""

from meshsub.protocols.st.params import STParams
from meshsub.protocols.st.protocol import ST

__all__ = ["ST", "STParams"]
