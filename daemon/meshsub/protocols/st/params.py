"""ST's parameters: the group-tree machine's with no depth bound, and its table bounds.

With ``preferred_levels`` at its maximum every merge test passes, so each
connected part of the network converges to one tree: the thesis's
"subscription tree" built and repaired by the same machine as TG, so that the
comparison isolates the grouping (docs/protocols/st.md).
"""

from __future__ import annotations

from dataclasses import dataclass

from meshsub.core.cluster.messages import MAX_PATH
from meshsub.core.cluster.params import ClusterParams
from meshsub.core.params import ParameterError


@dataclass(frozen=True, slots=True)
class STParams(ClusterParams):
    preferred_levels: int = MAX_PATH
    maximum_levels: int = MAX_PATH
    max_table: int = 4096
    """Subscriptions kept per tree neighbour (more are a counted drop)."""

    def validate(self) -> None:
        ClusterParams.validate(self)
        if not 1 <= self.max_table <= 1 << 20:
            raise ParameterError("max_table", "must be in 1..1048576")
