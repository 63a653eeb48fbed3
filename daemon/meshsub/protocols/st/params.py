"""ST's parameters: the group-tree machine's with no depth bound, and its table bounds.

With ``preferred_levels`` at its maximum every merge test passes, so each
connected part of the network converges to one tree: the thesis's
"subscription tree" built and repaired by the same machine as TG, so that the
comparison isolates the grouping (docs/protocols/st.md).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from meshsub.core.cluster.messages import MAX_PATH
from meshsub.core.cluster.params import ClusterParams
from meshsub.core.params import OUR_DECISION, ParamDoc, ParameterError


@dataclass(frozen=True, slots=True)
class STParams(ClusterParams):
    preferred_levels: int = MAX_PATH
    """No depth bound: every merge test passes, so adjacent trees merge into one."""
    maximum_levels: int = MAX_PATH
    """Deepest level at all (the machine's path bound)."""
    max_table: int = 4096
    """Subscriptions kept per tree neighbour (more are a counted drop)."""

    param_docs: ClassVar[Mapping[str, ParamDoc]] = {
        "preferred_levels": ParamDoc("levels", "Liu 2011, §4.1 (one tree); our decision"),
        "maximum_levels": ParamDoc("levels", OUR_DECISION),
        "max_table": ParamDoc("subscriptions", OUR_DECISION),
    }

    def validate(self) -> None:
        ClusterParams.validate(self)
        if not 1 <= self.max_table <= 1 << 20:
            raise ParameterError("max_table", "must be in 1..1048576")
