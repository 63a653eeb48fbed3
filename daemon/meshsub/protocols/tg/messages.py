"""TG's publication (Liu 2011, §3.2, §3.4), on top of the group-tree machine's messages.

PUBLISH ``[gid, scope, group_ttl, visited, event, published_at]``: the copy
travels in group ``gid``'s tree; ``visited`` lists the groups it has been
routed in and ``group_ttl`` the groups it may still enter (0 for a local
event, §3.4). The frame's message id is the event's end-to-end id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from meshsub.core import bodies as b
from meshsub.core.api import MsgKind
from meshsub.core.cluster.ids import GroupId
from meshsub.core.cluster.messages import FIRST_OWN_TYPE, KINDS
from meshsub.core.content import Event
from meshsub.core.tags import Scope

PUBLISH = FIRST_OWN_TYPE
TG_KINDS: dict[int, MsgKind] = {**KINDS, PUBLISH: MsgKind.DATA}
MAX_VISITED = 64


@dataclass(frozen=True, slots=True)
class Publish:
    gid: GroupId
    scope: Scope
    group_ttl: int
    visited: tuple[GroupId, ...]
    event: Event
    published_at: float

    def encode(self) -> list[Any]:
        return [self.gid.wire(), self.scope.value, self.group_ttl,
                [g.wire() for g in self.visited], self.event.to_wire(), self.published_at]

    @classmethod
    def decode(cls, body: Any) -> Publish:
        gid, scope, ttl, visited, event, at = b.fields(body, 6, "PUBLISH")
        try:
            sc = Scope(scope)
        except ValueError:
            raise b.BodyError("PUBLISH scope: expected 'local' or 'global'") from None
        return cls(GroupId.decode(gid), sc, b.integer(ttl, "group_ttl", 0, 255),
                   tuple(GroupId.decode(g, "visited") for g in b.items(visited, "visited",
                                                                       MAX_VISITED)),
                   b.event(event, "event"), b.number(at, "published_at"))
