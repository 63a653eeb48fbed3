"""The optimum over a contact history: minimum-hop time-respecting journeys.

In a delay-tolerant run no path may exist when an event is published; a delivery is
then a *journey*, a sequence of contacts taken in time order (each transfer at a moment
its contact is up, no earlier than the sender got the event), ending before the event's
deadline. Transfers are taken as instantaneous, so this is a bound on any protocol.

``journeys`` computes, for every node, the fewest hops of any journey from the publisher
before the deadline (a Bellman-Ford over hop counts: ``E_h(v)``, the earliest arrival
using at most ``h`` contacts, from ``E_{h-1}`` over every contact interval), and one such
journey per node. For the set of interested nodes the optimum is bounded, not solved:

- upper: the transfers (sender, receiver) of the union of one minimum-hop journey per
  interested node; doing each distinct transfer once, at the earliest time any of those
  journeys uses it, is itself a delivery before the deadline (a receiver that gets the
  event earlier only helps what it forwards later);
- lower, unicast: every interested node receives at least one transfer addressed to it,
  and the farthest one needs as many transfers as its minimum hop count;
- lower, broadcast (a transfer may reach every node in contact at once): the farthest
  node's minimum hop count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from mesheval.optimum.steiner import Bounds
from mesheval.optimum.topology import Contacts

INF = np.inf


@dataclass(frozen=True)
class JourneyResult:
    hops: dict[int, int]
    """Node id -> fewest hops of a journey before the deadline (reachable nodes only)."""
    transfers: dict[int, list[tuple[int, int]]]
    """Node id -> the (sender, receiver) transfers of one minimum-hop journey to it."""


def journeys(contacts: Contacts, source: int, t0: float, deadline: float) -> JourneyResult:
    """Minimum-hop journeys from ``source`` leaving at ``t0``, arriving by ``deadline``."""
    live = (contacts.end >= t0) & (contacts.start <= deadline)
    start, end = contacts.start[live], np.minimum(contacts.end[live], deadline)
    a, b = contacts.a[live], contacts.b[live]
    nodes = np.unique(np.concatenate([a, b, [source]]))
    index = {int(x): i for i, x in enumerate(nodes)}
    ai = np.array([index[int(x)] for x in a], dtype=np.int64)
    bi = np.array([index[int(x)] for x in b], dtype=np.int64)
    # both directions of every interval
    snd, rcv = np.concatenate([ai, bi]), np.concatenate([bi, ai])
    lo, hi = np.concatenate([start, start]), np.concatenate([end, end])
    arrival = np.full(len(nodes), INF)
    arrival[index[source]] = t0
    hops = {source: 0}
    # per node: [(level, arrival, parent index)] at every improvement
    history: dict[int, list[tuple[int, float, int]]] = {index[source]: [(0, t0, -1)]}
    level = 0
    while True:
        level += 1
        when = np.maximum(arrival[snd], lo)
        ok = np.flatnonzero(when <= hi)
        if len(ok) == 0:
            break
        # the earliest arrival at each receiver over this level, and the sender giving it
        order = ok[np.lexsort((when[ok], rcv[ok]))]
        receivers, first = np.unique(rcv[order], return_index=True)
        best = order[first]
        better = when[best] < arrival[receivers]
        if not better.any():
            break
        for v, t, parent in zip(receivers[better].tolist(), when[best][better].tolist(),
                                snd[best][better].tolist(), strict=True):
            history.setdefault(v, []).append((level, t, parent))
            hops.setdefault(int(nodes[v]), level)
        arrival[receivers[better]] = when[best][better]
    transfers: dict[int, list[tuple[int, int]]] = {}
    for node in hops:
        path: list[tuple[int, int]] = []
        v, limit = index[node], hops[node]
        while True:
            lvl, _, parent = max((h for h in history[v] if h[0] <= limit), key=lambda h: h[0])
            if parent < 0:
                break
            path.append((int(nodes[parent]), int(nodes[v])))
            v, limit = parent, lvl - 1
        transfers[node] = path[::-1]
    return JourneyResult(hops, transfers)


def journey_bounds(result: JourneyResult, terminals: Sequence[int]
                   ) -> tuple[Bounds, Bounds, int, int]:
    """(broadcast, unicast, reachable terminals, unreachable terminals) for one event."""
    reach = [t for t in dict.fromkeys(terminals) if t in result.hops and result.hops[t] > 0]
    missing = sum(1 for t in dict.fromkeys(terminals) if t not in result.hops)
    if not reach:
        zero = Bounds(0, 0, "trivial")
        return zero, zero, 0, missing
    union = {step for t in reach for step in result.transfers[t]}
    far = max(result.hops[t] for t in reach)
    upper = len(union)
    return (Bounds(min(far, upper), upper, "journeys"),
            Bounds(min(max(far, len(reach)), upper), upper, "journeys"), len(reach), missing)
