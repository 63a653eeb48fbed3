"""ST, the subscription-tree baseline of Liu (2011, §4.1-4.2, after her refs [22] and [13]).

One tree over the whole network ("constructs a subscription tree to
subscribe interests and forward publications"): the group-tree machine with
no depth bound, so adjacent trees always merge. On it, content-based routing
with exact tables:

- **subscriptions** travel along every tree link in both directions ("each
  subscription is propagated through subscriber's neighbors to all other
  nodes along the subscription tree", §4.2): each node offers each tree
  neighbour the subscriptions it holds (its own and those learned from its
  other tree neighbours), minus those another offered one covers (§4.2: "some
  subscriptions can be covered by others"); a link that joins the tree gets
  the whole table, one that leaves takes back what came over it, and a
  periodic full table repairs anything lost;
- **publications** go from the publisher along every tree link, except the
  incoming one, whose table holds a matching subscription; there is no climb
  to a root. The receiver delivers what its own subscriptions match.

Local and global events are routed alike (the tree has no groups).
"""

from __future__ import annotations

from typing import Any, ClassVar

from meshsub.core import bodies
from meshsub.core.api import Message, MessageId, MsgKind, NodeId
from meshsub.core.cluster.ids import Status
from meshsub.core.cluster.machine import GroupTreeProtocol
from meshsub.core.content import Event, Subscription
from meshsub.core.cover_set import uncovered
from meshsub.core.index import MatcherIndex
from meshsub.core.params import ProtocolParams
from meshsub.protocols.st.inbound import Inbound, Outcome
from meshsub.protocols.st.messages import (
    CACHE_ENTRIES,
    MAX_SUBS,
    PUBLISH,
    ST_KINDS,
    SUBS,
    Publish,
    Subs,
    SubscriptionCache,
)
from meshsub.protocols.st.params import STParams

T_TABLES = "st:tables"
ENTRY_OVERHEAD = 8
"""Bytes a table entry costs beyond the subscription: the neighbour it came from (st.md, Memory)."""


SHARED_SUBSCRIPTIONS = SubscriptionCache(limit=16 * CACHE_ENTRIES)
"""The decoded subscriptions of every ST node in the process, by packed form.

Why shared: a SUBS table travels the whole tree, so each node decoded the same
subscriptions its neighbours had already decoded (the simulator runs every node in
one process; the daemon, one). A hit is exact (``SubscriptionCache``: equal packed
forms, equal immutable subscriptions); sized for the distinct subscriptions of a
thousand-node network.
"""


class ST(GroupTreeProtocol[int]):
    """One subscription tree; the group machine's summary is unused (always 0)."""

    name: ClassVar[str] = "st"
    protocol_id: ClassVar[int] = 12
    Params: ClassVar[type[ProtocolParams]] = STParams
    message_kinds: ClassVar[dict[int, MsgKind]] = ST_KINDS
    params: STParams

    def __init__(self, node: NodeId, **kwargs: Any) -> None:
        super().__init__(node, **kwargs)
        self.learned: dict[NodeId, dict[bytes, Subscription]] = {}
        """Per neighbour: the subscriptions it offered (reachable through it)."""
        self._decoded = SHARED_SUBSCRIPTIONS
        self._inbound: dict[NodeId, Inbound] = {}
        """Per neighbour: its SUBS messages put back in order (``learned`` is its table)."""
        self._index: dict[NodeId, MatcherIndex] = {}
        self._sent: dict[NodeId, dict[bytes, Subscription]] = {}
        self._gen = self.epoch << 32
        """The generation of the last full table sent (on any link): increasing, across
        reboots too (the boot epoch), so a neighbour never takes a new one for stale."""
        self._out: dict[NodeId, tuple[int, int]] = {}
        """Per neighbour: (generation, last delta number) of what we sent it."""
        self._full_due: set[NodeId] = set()
        self._dirty = False
        self._refresh_armed = False
        self._own: dict[bytes, Subscription] = {}
        """The local subscriptions by key (``Subscription.key`` packs on every call)."""
        self._versions: dict[NodeId, int] = {}
        """Per neighbour, a counter of changes to what it offered (own: key ``self.node``)."""
        self._offered: dict[NodeId, tuple[tuple[NodeId, int], ...]] = {}
        """Per neighbour, the versions its current offer was computed from."""
        self.stats.update({"published": 0, "duplicates": 0})

    # ================================================================ summary hooks (unused)

    def local_summary(self) -> int:
        return 0

    def combine(self, a: int, b: int) -> int:
        return 0

    def encode_summary(self, summary: int) -> bytes:
        return b""

    def decode_summary(self, data: bytes) -> int:
        if data:
            raise bodies.BodyError("ST carries no subtree summary")
        return 0

    def summary_empty(self, summary: int) -> bool:
        return True

    # ================================================================ tables

    def tree_neighbors(self) -> frozenset[NodeId]:
        """The tree's links; a gateway candidate's extra group counts only once it is active.

        Candidates join and (standing by) leave again; a table exchanged over
        such a link would sweep through both trees and back for nothing.
        """
        out: set[NodeId] = set()
        for ms in self.memberships.values():
            parent = ms.parent
            if parent is not None and (not ms.secondary or any(
                    status is Status.ACTIVE for status, _ in ms.gw_status.values())):
                out.add(parent)
            out.update(ms.tree)
        return frozenset(out)

    def on_tree_edge(self, node: NodeId, up: bool) -> None:
        self._dirty = True
        if up:
            self._sent[node] = {}
            self._full_due.add(node)
            return
        self._sent.pop(node, None)
        self._out.pop(node, None)
        self._full_due.discard(node)
        self._forget(node)

    def _forget(self, node: NodeId) -> None:
        self.learned.pop(node, None)
        self._inbound.pop(node, None)
        self._index.pop(node, None)
        self._versions.pop(node, None)
        self._offered.pop(node, None)

    def on_neighbor_down(self, node: NodeId) -> None:
        super().on_neighbor_down(node)
        if node not in self.edges:
            self._forget(node)

    def on_subscribe(self, sub_id: str, subscription: Subscription) -> None:
        self._own_changed()
        super().on_subscribe(sub_id, subscription)

    def on_unsubscribe(self, sub_id: str, subscription: Subscription) -> None:
        self._own_changed()
        super().on_unsubscribe(sub_id, subscription)

    def _own_changed(self) -> None:
        self._own = {s.key: s for s in self.subscriptions.values()}
        self._versions[self.node] = self._versions.get(self.node, 0) + 1
        self._dirty = True

    def on_settled(self) -> None:
        if not self._refresh_armed:
            self._refresh_armed = True
            self.set_timer(T_TABLES, self.params.T_FILTER_REFRESH)
        if self._dirty:
            self._flush_tables()

    def on_own_timer(self, name: str) -> None:
        if name == T_TABLES:
            self._full_due.update(self.edges)
            self._dirty = True
            self._flush_tables(reliable=False)
            self.set_timer(T_TABLES, self.params.T_FILTER_REFRESH)

    def offer(self, node: NodeId) -> dict[bytes, Subscription]:
        """What ``node`` should hold from us: ours and our other neighbours', uncovered."""
        provided = dict(self._own)
        for n, table in self.learned.items():
            if n != node and n in self.edges:
                provided.update(table)
        return uncovered(provided)

    def _flush_tables(self, reliable: bool = True) -> None:
        self._dirty = False
        for node in sorted(self.edges):
            inputs = tuple(sorted((k, v) for k, v in self._versions.items()
                                  if k != node and (k in self.edges or k == self.node)))
            if node not in self._full_due and self._offered.get(node) == inputs:
                continue  # nothing it depends on changed
            self._offered[node] = inputs
            desired = self.offer(node)
            sent = self._sent.setdefault(node, {})
            if node in self._full_due:
                self._full_due.discard(node)
                self._send_subs(node, True, list(desired.values()), [], reliable)
            else:
                adds = [desired[k] for k in sorted(desired.keys() - sent.keys())]
                removes = [sent[k] for k in sorted(sent.keys() - desired.keys())]
                if adds or removes:
                    self._send_subs(node, False, adds, removes, True)
            self._sent[node] = desired

    def _send_subs(self, node: NodeId, full: bool, adds: list[Subscription],
                   removes: list[Subscription], reliable: bool) -> None:
        if full:
            self._gen += 1
            parts = [tuple(adds[i:i + MAX_SUBS]) for i in range(0, len(adds), MAX_SUBS)] or [()]
            self._out[node] = (self._gen, 0)
            chunks = [Subs(self._gen, 0, i, len(parts), part, ()) for i, part in enumerate(parts)]
        else:
            gen, seq = self._out.get(node, (self._gen, 0))
            chunks = []
            while adds or removes:
                seq += 1
                take_adds = adds[:MAX_SUBS]
                take_removes = removes[:MAX_SUBS - len(take_adds)]
                adds, removes = adds[len(take_adds):], removes[len(take_removes):]
                chunks.append(Subs(gen, seq, 0, 0, tuple(take_adds), tuple(take_removes)))
            self._out[node] = (gen, seq)
        for chunk in chunks:
            message = Message(SUBS, self.new_message_id(), chunk.encode(), ttl=1)
            if reliable:
                self.send_reliable(node, message)
            else:
                self.send(node, message)

    def _on_subs(self, sender: NodeId, message: Message, subs: Subs) -> None:
        if sender not in self.edges and sender not in self.neighbors:
            self.drop("not_tree_neighbor", message, peer=sender)
            return
        inbound = self._inbound.get(sender)
        if inbound is None:
            inbound = self._inbound[sender] = Inbound(self.params.max_table)
        before = dict(inbound.table)
        outcome = inbound.receive(subs)
        if outcome in (Outcome.STALE, Outcome.OVERFLOW):
            self.drop("stale" if outcome is Outcome.STALE else "subs_backlog", message,
                      peer=sender)
            return
        if outcome is Outcome.WAITING:
            return
        if outcome is Outcome.TABLE_FULL:
            self.drop("table_full", message, peer=sender)
        table = inbound.table
        index = self._index.setdefault(sender, MatcherIndex())
        for key in before.keys() - table.keys():
            index.remove(key.hex())
        for key in table.keys() - before.keys():
            index.add(key.hex(), table[key])
        self.learned[sender] = table
        self._versions[sender] = self._versions.get(sender, 0) + 1
        self._dirty = True

    # ================================================================ publications

    def on_publish(self, event: Event, event_id: MessageId) -> None:
        self.stats["published"] += 1
        self.is_duplicate(event_id)
        self.deliver_local(event, event_id, hop=0, published_at=self.now)
        self._forward(Publish(event, self.now), Message(PUBLISH, event_id, None, hop=0),
                      came_from=None)

    def on_own_frame(self, sender: NodeId, message: Message) -> None:
        try:
            if message.type == SUBS:
                self._on_subs(sender, message, Subs.decode(message.body, self._decoded))
                return
            if message.type != PUBLISH:
                self.drop("unknown_type", message, peer=sender)
                return
            pub = bodies.shared_decode(Publish.decode, message.body)
        except bodies.BodyError:
            self.drop("malformed", message, peer=sender)
            return
        if self.is_duplicate(message.id):
            self.stats["duplicates"] += 1
            return
        self.deliver_local(pub.event, message.id, hop=message.hop + 1,
                           published_at=pub.published_at)
        self._forward(pub, message.forwarded() if message.ttl > 1 else None, came_from=sender)

    def _forward(self, pub: Publish, template: Message | None, came_from: NodeId | None) -> None:
        targets = frozenset(n for n in self.edges if n != came_from and n in self._index
                            and self._index[n].match(pub.event))
        if not targets:
            return
        if template is None:
            self.drop("ttl_expired", msg_type=PUBLISH)
            return
        self.send_data(targets, Message(PUBLISH, template.id, pub.encode(), hop=template.hop,
                                        ttl=template.ttl))

    # ================================================================ memory

    def state_sizes(self) -> dict[str, tuple[int, int]]:
        """Subscription table entries about other nodes, over the tree links (st.md, Memory)."""
        tables = [t for n, t in self.learned.items() if n in self.edges]
        return {"tables": (sum(len(t) for t in tables),
                           sum(len(k) + ENTRY_OVERHEAD for t in tables for k in t))}
