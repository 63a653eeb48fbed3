"""GIANT (Zheng 2008, ch. 6): brokers and random-walking ferries, with its Prim-MST baseline."""

from meshsub.protocols.giant.params import GiantParams, Role, Tree
from meshsub.protocols.giant.protocol import Giant

__all__ = ["Giant", "GiantParams", "Role", "Tree"]
