"""PUMA (Zheng 2008, ch. 5) and its paging baseline, on a shared mesh backbone."""

from meshsub.protocols.puma.paging import Paging
from meshsub.protocols.puma.params import BackboneParams, PagingParams, PumaParams, Role
from meshsub.protocols.puma.protocol import Puma

__all__ = ["BackboneParams", "Paging", "PagingParams", "Puma", "PumaParams", "Role"]
