"""A GIANT broker's tables (Zheng 2008, Data Structures 6.1 and 6.2), as implemented.

``RoutingEntry`` is one delivery tree: one per (advertised topic, publisher's
broker), since several PHBs may advertise one topic (the thesis does not
say). It holds the candidate upstream brokers learned from advertisements
(``last_hop_list``), the chosen one (the thesis's *active* status: the
sentence defining the statuses has them reversed), the subscriptions that
came from downstream brokers or local applications (``next_hop_list`` plus
``filter``; versioned leases) and what this broker sent upstream.

``Outgoing`` is the thesis's ``forwarded_event`` generalised to subscriptions
and unsubscriptions, which GIANT also has to carry on ferries: the item, and
per next-hop broker still *unready* the times copies were handed to ferries.
Times are kept per (item, next hop), not per item (the thesis's layout would
count one ferry carrying copies for two next hops towards both).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from meshsub.core.api import MessageId, NodeId
from meshsub.core.content import Subscription
from meshsub.core.grid import Cell
from meshsub.core.leases import Leased, VersionedLeases
from meshsub.protocols.giant import messages as m
from meshsub.protocols.giant.recruit import per_hop_prob
from meshsub.protocols.giant.upstream import Candidate, Choice


@dataclass
class Downstream:
    side: Cell | None
    """The broker the subscription came from; None for a local application."""
    filter: Subscription
    DR: float
    hops_total: int
    path: tuple[Cell, ...]


@dataclass
class RoutingEntry:
    topic: str
    phb: Cell
    downstream: VersionedLeases[str, Downstream]
    candidates: dict[Cell, Candidate] = field(default_factory=dict)
    upstream: Choice | None = None
    sent_up: dict[str, tuple[int, Subscription]] = field(default_factory=dict)
    """Subscriptions forwarded upstream: id -> (version, filter)."""
    adv_id: MessageId | None = None
    adv_senders: tuple[m.SenderRecord, ...] = ()
    adv_expires: float = 0.0
    handed: set[NodeId] = field(default_factory=set)
    """Ferries given this advertisement in the current refresh period."""

    def needed(self) -> list[tuple[str, Leased[Downstream]]]:
        """The subscriptions upstream must know: none covered by another one held here.

        Covering (§6.3) means every event matching the covered filter matches the
        covering one; of equal filters the smallest id stays. Deterministic, so
        a broker asks upstream for the same set whatever the arrival order.
        """
        held = sorted(self.downstream.items(), key=lambda kv: kv[0])
        keep: list[tuple[str, Leased[Downstream]]] = []
        for sid, entry in held:
            flt = entry.value.filter
            covered = any(
                other.value.filter.covers(flt)
                and (not flt.covers(other.value.filter) or osid < sid)
                for osid, other in held if osid != sid)
            if not covered:
                keep.append((sid, entry))
        return keep

    def link_prob(self, side: Cell) -> float:
        """Prob on the hop towards ``side``: the largest ``DR**(1/hops)`` it serves."""
        probs = [per_hop_prob(e.value.DR, e.value.hops_total)
                 for _k, e in self.downstream.items() if e.value.side == side]
        return max(probs, default=0.0)

    def sides(self) -> set[Cell]:
        return {e.value.side for _k, e in self.downstream.items() if e.value.side is not None}


@dataclass
class Unready:
    """A next-hop broker not yet reached with its target probability."""

    prob: float
    times: list[float] = field(default_factory=list)
    """When copies were handed to ferries (driver seconds)."""
    ferries: set[NodeId] = field(default_factory=set)
    """Ferries already carrying a copy (one ferry is never recruited twice for it)."""


@dataclass
class Outgoing:
    kind: int
    item: m.EventItem | m.SubItem
    expires: float
    unready: dict[Cell, Unready] = field(default_factory=dict)


OutKey = tuple[int, str]


def out_key(kind: int, item: m.EventItem | m.SubItem) -> OutKey:
    if isinstance(item, m.EventItem):
        return kind, str(item.event_id)
    return kind, f"{item.sub_id}@{item.version}"
