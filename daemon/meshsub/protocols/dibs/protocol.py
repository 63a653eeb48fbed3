"""DIBS (Pham and Tran 2012): location-free pub/sub over CRES's virtual-address trees.

SPN, the subscription/publication/notification suite of §3.2, on the CRES
substrate (``meshsub.protocols.dibs.cres``):

- **subscribe**: a query (key interval, ``meshsub.core.keyspace``)
  climbs the subscriber's cluster tree while it is not inside the node's
  prefix zone and descends into every successor whose prefix zone it meets
  (never back to the sender); it is stored where it meets the node's key zone
  (the exact test; ``paper_mode``: the paper's two conditions). Queries are
  leased and refreshed by their subscribers (``lease_s``); lease 0 removes;
- **handover** (§3.3.1): a predecessor hands a new successor the queries
  meeting its prefix zone and deletes those no longer meeting its own key
  zone; after a VA change (§3.3.2) a node passes queries down the same way
  and re-injects those it no longer owns from where it is (re-placement);
- **publish**: one copy per known reference, each routed separately (§3.2):
  the shortest-path phase into that cluster, then prefix routing to the one
  node whose key zone holds the key (the designated node);
- **notify**: the designated node checks its stored queries (only there:
  the computation cost) and routes one NOTIFY per subscriber to the
  subscriber's (cluster, VA) in the query; the subscriber delivers what its
  own subscriptions match.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from typing import Any, ClassVar

import msgpack

from meshsub.core import bodies
from meshsub.core.api import Message, MessageId, NodeId
from meshsub.core.content import Event, Subscription
from meshsub.core.dedup import DuplicateCache
from meshsub.core.keyspace import KeyError_, event_key, query_interval
from meshsub.protocols.dibs import va as vam
from meshsub.protocols.dibs.cres import Cres
from meshsub.protocols.dibs.messages import NOTIFY, PUBLISH, SUBSCRIBE, Notify, Publish, Query

T_REFRESH = "dibs:refresh"
SEEN_CAPACITY = 65536


@dataclass(slots=True)
class Stored:
    query: Query
    expires_at: float
    size: int


class DIBS(Cres):
    """DIBS: CRES plus SPN."""

    name: ClassVar[str] = "dibs"
    protocol_id: ClassVar[int] = 13

    def __init__(self, node: NodeId, **kwargs: Any) -> None:
        super().__init__(node, **kwargs)
        self.store: dict[tuple[NodeId, str], Stored] = {}
        self._store_bytes = 0
        self._seen_sub = DuplicateCache(SEEN_CAPACITY)
        self._seen_evt = DuplicateCache(SEEN_CAPACITY)
        self._inj_seq = 0
        self._refresh_armed = False
        self.stats.update({"published": 0, "copies": 0, "evaluations": 0, "matches": 0,
                           "notified": 0, "stored": 0, "subscribe_tx": 0,
                           "publish_tx": 0, "notify_tx": 0})

    # ================================================================ subscribing

    def on_subscribe(self, sub_id: str, subscription: Subscription) -> None:
        if query_interval(subscription, self.params.k, self.params.key_attr) is None:
            self.drop("empty_key_interval", sub_id=sub_id)
            return
        self._inject(sub_id, subscription, self.params.lease_s)
        if not self._refresh_armed:
            self._refresh_armed = True
            self.set_timer(T_REFRESH, self.params.lease_s / 3)

    def on_unsubscribe(self, sub_id: str, subscription: Subscription) -> None:
        self._inject(sub_id, subscription, 0.0)

    def _inject(self, sub_id: str, subscription: Subscription, lease: float) -> None:
        """Start a query at this node (§3.2); unattached, it waits for the next refresh."""
        if not self.attached or self.va is None or self.cl is None:
            return  # sent on attaching (on_va_change) or at the next refresh
        interval = query_interval(subscription, self.params.k, self.params.key_attr)
        if interval is None:
            return
        self._inj_seq += 1
        q = Query(self.node, sub_id, self.node, self._inj_seq, interval[0], interval[1],
                  self.cl, self.va, lease, subscription)
        self._on_query(q, None)

    def _reinject(self, q: Query) -> None:
        self._inj_seq += 1
        fresh = Query(q.sub_node, q.sub_id, self.node, self._inj_seq, q.lo, q.hi, q.sub_cl,
                      q.sub_va, q.lease_s, q.subscription)
        self._on_query(fresh, None)

    def on_dibs_timer(self, name: str) -> None:
        if name == T_REFRESH:
            for sub_id, sub in sorted(self.subscriptions.items()):
                if query_interval(sub, self.params.k, self.params.key_attr) is not None:
                    self._inject(sub_id, sub, self.params.lease_s)
            self._expire_queries()
            self.set_timer(T_REFRESH, self.params.lease_s / 3)

    def _expire_queries(self) -> None:
        for qid in [q for q, s in self.store.items() if s.expires_at <= self.now]:
            self._unstore(qid)

    def stores(self, q: Query) -> bool:
        """Does this node keep ``q`` (§3.2)? Exact: its key zone meets the interval."""
        assert self.va is not None
        k = self.params.k
        if not self.params.paper_mode:
            return vam.meets(self.kzone(), q.lo, q.hi)
        pz = vam.pzone(self.va, k)
        if pz is None or not vam.meets([pz], q.lo, q.hi):
            return False
        return not any(vam.within(vam.pzone(vam.child_va(self.va, s), k), q.lo, q.hi)
                       for s in self.succ.values())

    def _on_query(self, q: Query, sender: NodeId | None) -> None:
        if self.va is None:
            self.drop("unattached", sub_id=q.sub_id)
            return
        if self._seen_sub.check_and_add((q.query_id, q.inj_node, q.inj_seq)):
            self.drop("duplicate", event_id=f"{q.sub_node}/{q.sub_id}")
            return
        if q.lease_s <= 0:
            self._unstore(q.query_id)
        elif self.stores(q):
            self._keep(q)
        else:
            self._unstore(q.query_id)
        k = self.params.k
        body = q.encode(k)
        if self.pred is not None and self.pred != sender \
                and not vam.within(vam.pzone(self.va, k), q.lo, q.hi):
            self._send_query(self.pred, body)
        for child, slot in sorted(self.succ.items()):
            if child != sender and vam.meets(
                    [z for z in [vam.pzone(vam.child_va(self.va, slot), k)] if z], q.lo, q.hi):
                self._send_query(child, body)

    def _send_query(self, node: NodeId, body: list[Any]) -> None:
        self.stats["subscribe_tx"] += 1
        self.send_reliable(node, Message(SUBSCRIBE, self.new_message_id(), body, ttl=1))

    def _keep(self, q: Query) -> None:
        old = self.store.get(q.query_id)
        size = len(msgpack.packb(q.encode(self.params.k)))
        grow = size - (old.size if old is not None else 0)
        p = self.params
        if old is None and len(self.store) >= p.max_queries:
            self.drop("query_store_full", sub_id=q.sub_id)
            return
        if self._store_bytes + grow > p.max_query_bytes:
            self.drop("query_store_bytes", sub_id=q.sub_id)
            return
        if old is None:
            self.stats["stored"] += 1
        self.store[q.query_id] = Stored(q, self.now + q.lease_s, size)
        self._store_bytes += grow

    def _unstore(self, qid: tuple[NodeId, str]) -> None:
        old = self.store.pop(qid, None)
        if old is not None:
            self._store_bytes -= old.size

    def on_child_attached(self, child: NodeId, child_va: str) -> None:
        """Hand the new successor what meets its prefix zone; keep what meets ours (§3.3.1)."""
        zone = vam.pzone(child_va, self.params.k)
        for stored in list(self.store.values()):
            q = stored.query
            if zone is not None and vam.meets([zone], q.lo, q.hi):
                self._inj_seq += 1
                handed = Query(q.sub_node, q.sub_id, self.node, self._inj_seq, q.lo, q.hi,
                               q.sub_cl, q.sub_va, max(0.0, stored.expires_at - self.now),
                               q.subscription)
                self._send_query(child, handed.encode(self.params.k))
            if not self.stores(q):
                self._unstore(q.query_id)

    def on_va_change(self, old_va: str | None, old_cl: NodeId | None) -> None:
        """Pass queries down, keep what we own, re-place the rest (§3.3.2 completed)."""
        assert self.va is not None
        k = self.params.k
        for stored in list(self.store.values()):
            q = stored.query
            if self.stores(q):
                for child, slot in sorted(self.succ.items()):
                    zone = vam.pzone(vam.child_va(self.va, slot), k)
                    if zone is not None and vam.meets([zone], q.lo, q.hi):
                        self._inj_seq += 1
                        self._send_query(child, Query(
                            q.sub_node, q.sub_id, self.node, self._inj_seq, q.lo, q.hi,
                            q.sub_cl, q.sub_va, q.lease_s, q.subscription).encode(k))
                continue
            self._unstore(q.query_id)
            self._reinject(q)
        for sub_id, sub in sorted(self.subscriptions.items()):
            self._inject(sub_id, sub, self.params.lease_s)  # sub_va and sub_cl are new

    # ================================================================ publishing

    def on_publish(self, event: Event, event_id: MessageId) -> None:
        self.stats["published"] += 1
        self.deliver_local(event, event_id, hop=0, published_at=self.now)
        try:
            key = event_key(event, self.params.k, self.params.key_attr)
        except KeyError_:
            self.drop("bad_key", event_id=str(event_id), topic=event.topic)
            return
        refs = self.references()
        if not refs:
            self.drop("no_reference", event_id=str(event_id), topic=event.topic)
            return
        for ref in refs:  # m copies, routed separately (§3.2)
            self.stats["copies"] += 1
            pub = Publish(ref, key, event, self.now)
            self._route_publish(pub, Message(PUBLISH, event_id, None, hop=0,
                                             ttl=self.params.ttl), hops=0)

    def _route_publish(self, pub: Publish, template: Message, hops: int) -> None:
        k = self.params.k
        if self.cl == pub.target_cl and self.va is not None \
                and vam.owns(self.va, self.slots(), pub.key, k):
            self._designated(pub, template.id, hops)
            return
        nxt = self.next_hop(pub.target_cl, vam.key_bits(pub.key, k))
        if nxt is None:
            self.drop("no_route", template, peer=pub.target_cl)
            return
        if template.ttl < 1:
            self.drop("ttl_expired", template)
            return
        self.stats["publish_tx"] += 1
        self.send_reliable(nxt, Message(PUBLISH, template.id, pub.encode(k), hop=template.hop,
                                        ttl=template.ttl))

    def _designated(self, pub: Publish, event_id: MessageId, hops: int) -> None:
        """Match the stored queries here, the only node of the cluster that does (§3.2)."""
        if self._seen_evt.check_and_add((event_id, pub.target_cl)):
            self.drop("duplicate_event", event_id=str(event_id))
            return
        self.stats["evaluations"] += len(self.store)
        self.emit("counter", reason="dibs_checked", event_id=str(event_id),
                  entries=len(self.store), peer=pub.target_cl, hop=hops)
        by_sub: dict[tuple[NodeId, NodeId, str], list[str]] = defaultdict(list)
        for stored in self.store.values():
            q = stored.query
            if q.lo <= pub.key <= q.hi and stored.expires_at > self.now \
                    and q.subscription.matches(pub.event):
                by_sub[(q.sub_node, q.sub_cl, q.sub_va)].append(q.sub_id)
        for (sub_node, sub_cl, sub_va), ids in sorted(by_sub.items()):
            self.stats["matches"] += len(ids)
            note = Notify(sub_cl, sub_va, sub_node, tuple(sorted(ids))[:64], pub.event,
                          pub.published_at, hops, self.node)
            self._route_notify(note, Message(NOTIFY, event_id, None, hop=hops,
                                             ttl=self.params.ttl))

    def _route_notify(self, note: Notify, template: Message) -> None:
        if note.sub_node == self.node:
            self.stats["notified"] += 1
            self.deliver_local(note.event, template.id, hop=template.hop,
                               published_at=note.published_at)
            return
        if self.cl == note.dst_cl and self.va == note.dst_va:
            self.drop("stale_va", template, peer=note.sub_node)
            return
        nxt = self.next_hop(note.dst_cl, note.dst_va)
        if nxt is None:
            self.drop("no_route", template, peer=note.dst_cl)
            return
        if template.ttl < 1:
            self.drop("ttl_expired", template)
            return
        self.stats["notify_tx"] += 1
        self.send_reliable(nxt, Message(NOTIFY, template.id, note.encode(), hop=template.hop,
                                        ttl=template.ttl))

    def on_spn_frame(self, sender: NodeId, message: Message) -> None:
        k = self.params.k
        t = message.type
        try:
            if t == SUBSCRIBE:
                self._on_query(Query.decode(message.body, k), sender)
            elif t == PUBLISH:
                pub = Publish.decode(message.body, k)
                self._route_publish(pub, message.forwarded(), hops=message.hop + 1)
            elif t == NOTIFY:
                self._route_notify(Notify.decode(message.body), message.forwarded())
            else:
                self.drop("unknown_type", message, peer=sender)
        except bodies.BodyError:
            self.drop("malformed", message, peer=sender)

    # ================================================================ memory

    def state_sizes(self) -> dict[str, tuple[int, int]]:
        """Stored queries (the paper's storage cost) and the neighbour table (§3.1)."""
        return {**super().state_sizes(),
                "queries": (len(self.store), self._store_bytes),
                "neighbors": (len(self.nbs), self.nbs.bytes)}

    def status(self) -> dict[str, Any]:
        return {**super().status(), "stored_queries": len(self.store)}
