"""TG, the tree-group protocol of Liu (2011): Bloom-filter summaries on depth-bounded groups.

The groups, their trees, gateways, merges and repairs are the core's
group-tree machine (``meshsub.core.cluster``); TG adds what travels on them:

- **subscribing** (§3.2, §3.6): a node's local bitmap holds the Bloom key of
  each of its subscriptions (``meshsub.core.tags``: the sorted, joined tags of
  a conjunction); unsubscribing rebuilds it (no deletion from a Bloom filter).
  The machine ORs it with the children's bitmaps and reports the result to the
  parent, so every node summarises its subtree and the leader its group;
- **publishing** (§3.2): a publication climbs to the leader whether or not
  anything matches (the worked example: "every node follows this rule until
  the publication arrives at the root") and, at every node on the way and
  below, goes down into each child whose bitmap passes one of its probe keys
  (any subset of its tags, §3.6); the receiver delivers only what its exact
  subscriptions match (§3.7: the final node "checks its subscription
  database");
- **between groups** (§3.4): a global event is also steered down the branches
  that hold an active gateway to a group it has not visited; the active
  gateway "propagates the publication to all its parents", i.e. injects it
  into its other group, which routes it the same way. A local event stays in
  the publisher's groups (``LOCAL_GROUP_HOPS`` = 0) or crosses at most that
  many more.

Duplicates are suppressed per (event, group); the application gets an event
once (the core's delivery cache), also at a gateway that sees it in two
groups and at the members of an OR subscription.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import replace
from functools import lru_cache
from typing import Any, ClassVar

from meshsub.core import bodies
from meshsub.core.api import Message, MessageId, MsgKind, NodeId
from meshsub.core.bloom import BloomError, BloomFilter, HashScheme, key_mask
from meshsub.core.cluster.machine import GroupTreeProtocol
from meshsub.core.cluster.membership import Membership
from meshsub.core.content import Event, Subscription
from meshsub.core.dedup import DuplicateCache
from meshsub.core.params import ProtocolParams
from meshsub.core.tags import Scope, event_scope, probe_keys, subscription_key
from meshsub.protocols.tg.messages import PUBLISH, TG_KINDS, Publish
from meshsub.protocols.tg.params import TGParams

SCHEME = HashScheme.SHA256_DOUBLE
"""SHA-256 double hashing (docs/protocols/tg.md: the thesis names no hash functions)."""
PROBE_CACHE = 1024
MASK_CACHE = 4096

Positions = Callable[[str], Iterable[int]]


@lru_cache(maxsize=MASK_CACHE)
def _shared_mask(key: str, m: int, k: int) -> int:
    """``key_mask`` under TG's hash scheme, one cache for every node of the process.

    Why: a key's mask is a pure function of the key and the filter's ``m`` and ``k``,
    yet each node hashed (SHA-256) every probe key of every publication it heard
    once for itself; in the simulator, where all nodes share one process, that was
    a twentieth of a 500-node run. The per-node cache (``TG._masks``) stays first.
    """
    return key_mask(key, m, k, SCHEME)


class TG(GroupTreeProtocol[int]):
    """The tree-group protocol; bitmaps are kept as integers (bit ``p`` = ``1 << p``)."""

    name: ClassVar[str] = "tg"
    protocol_id: ClassVar[int] = 11
    Params: ClassVar[type[ProtocolParams]] = TGParams
    message_kinds: ClassVar[dict[int, MsgKind]] = TG_KINDS
    params: TGParams

    def __init__(self, node: NodeId, *, positions: Positions | None = None,
                 **kwargs: Any) -> None:
        """``positions`` replaces the hash functions (tests of the thesis's Fig. 1)."""
        super().__init__(node, **kwargs)
        self._positions = positions
        self._local = 0
        self._seen = DuplicateCache(self.params.seen_capacity)
        self._probes: OrderedDict[MessageId, tuple[int, ...] | None] = OrderedDict()
        self._masks: OrderedDict[str, int] = OrderedDict()
        self.stats.update({"published": 0, "duplicates": 0, "relayed": 0, "fp_local": 0})

    # ================================================================ the index

    def _mask(self, key: str) -> int:
        mask = self._masks.get(key)
        if mask is None:
            p = self.params
            if self._positions is None:
                mask = _shared_mask(key, p.m, p.k)
            else:
                mask = 0
                for pos in self._positions(key):
                    mask |= 1 << (pos % p.m)
            self._masks[key] = mask
            if len(self._masks) > MASK_CACHE:
                self._masks.popitem(last=False)
        return mask

    def _probe_masks(self, event_id: MessageId, event: Event) -> tuple[int, ...] | None:
        """The event's probe keys as masks, computed once per node."""
        if event_id in self._probes:
            return self._probes[event_id]
        keys = probe_keys(event)
        masks = None if keys is None else tuple(self._mask(k) for k in sorted(keys))
        self._probes[event_id] = masks
        if len(self._probes) > PROBE_CACHE:
            self._probes.popitem(last=False)
        return masks

    @staticmethod
    def passes(masks: tuple[int, ...] | None, bitmap: int) -> bool:
        """A bitmap passes a publication when any probe key is in it (§3.6)."""
        return masks is None or any(bitmap & mk == mk for mk in masks)

    def _rebuild_local(self) -> None:
        bits = 0
        for sub in self.subscriptions.values():
            bits |= self._mask(subscription_key(sub))
        self._local = bits

    # ================================================================ summary hooks

    def local_summary(self) -> int:
        return self._local

    def combine(self, a: int, b: int) -> int:
        return a | b

    def encode_summary(self, summary: int) -> bytes:
        p = self.params
        return BloomFilter.from_int(summary, p.m, p.k, SCHEME).to_bytes()

    def decode_summary(self, data: bytes) -> int:
        try:
            bf = BloomFilter.from_bytes(data)
        except BloomError as exc:
            raise bodies.BodyError(f"bitmap: {exc}") from None
        p = self.params
        if (bf.m, bf.k, bf.scheme) != (p.m, p.k, SCHEME):
            raise bodies.BodyError("bitmap: built with other Bloom parameters")
        return bf.to_int()

    def summary_empty(self, summary: int) -> bool:
        return summary == 0

    def prematch_score(self, own: int, offered: int) -> int:
        """Set bits both bitmaps share (§3.3 "more number of the same bits")."""
        return (own & offered).bit_count()

    def on_subscribe(self, sub_id: str, subscription: Subscription) -> None:
        self._local |= self._mask(subscription_key(subscription))
        super().on_subscribe(sub_id, subscription)

    def on_unsubscribe(self, sub_id: str, subscription: Subscription) -> None:
        self._rebuild_local()
        super().on_unsubscribe(sub_id, subscription)

    # ================================================================ publishing

    def on_publish(self, event: Event, event_id: MessageId) -> None:
        self.stats["published"] += 1
        self.deliver_local(event, event_id, hop=0, published_at=self.now)
        groups = list(self.memberships.values())
        if not groups:
            self.drop("unaffiliated", event_id=str(event_id), topic=event.topic)
            return
        p = self.params
        scope = event_scope(event)
        ttl = p.GLOBAL_GROUP_TTL if scope is Scope.GLOBAL else p.LOCAL_GROUP_HOPS
        visited = tuple(sorted(ms.gid for ms in groups))
        template = Message(PUBLISH, event_id, None, hop=0)
        for ms in groups:
            self._seen.check_and_add((event_id, ms.gid))
            pub = Publish(ms.gid, scope, ttl, visited, event, self.now)
            self._route(ms, pub, event_id, template, came_from=None)

    def on_own_frame(self, sender: NodeId, message: Message) -> None:
        if message.type != PUBLISH:
            self.drop("unknown_type", message, peer=sender)
            return
        try:
            pub = bodies.shared_decode(Publish.decode, message.body)
        except bodies.BodyError:
            self.drop("malformed", message, peer=sender)
            return
        if self._seen.check_and_add((message.id, pub.gid)):
            self.stats["duplicates"] += 1  # the rx records show every copy
            return
        masks = self._probe_masks(message.id, pub.event)
        delivered = 0
        if self.passes(masks, self._local):
            delivered = self.deliver_local(pub.event, message.id, hop=message.hop + 1,
                                           published_at=pub.published_at)
            if delivered == 0 and not any(s.matches(pub.event)
                                          for s in self.subscriptions.values()):
                self.stats["fp_local"] += 1
        ms = self.memberships.get(pub.gid)
        if ms is None:
            self.drop("stale_group", message, peer=sender)
            return
        template = message.forwarded() if message.ttl > 1 else None
        sent = self._route(ms, pub, message.id, template, came_from=sender)
        sent += self._relay(pub, message.id, template)
        if sent == 0 and delivered == 0 and sender == ms.parent:
            # a copy sent down on the bitmaps' word that no one below wanted (§3.7)
            self.drop("false_positive_forward", message, peer=sender)

    def _route(self, ms: Membership[int], pub: Publish, event_id: MessageId,
               template: Message | None, came_from: NodeId | None) -> int:
        """Up unless it came from the parent, down every passing branch (§3.2; tg.md, rule 7).

        ``template`` carries the hop count and TTL of the copies (None: the TTL is spent).
        """
        masks = self._probe_masks(event_id, pub.event)
        steer = pub.group_ttl > 0
        targets: set[NodeId] = set()
        for c in ms.tree.children():
            if c.node == came_from or c.summary is None:
                continue
            if self.passes(masks, c.summary.payload) or (steer and any(
                    r.active and r.here == ms.gid and r.there not in pub.visited
                    for r in c.summary.gw_records)):
                targets.add(c.node)
        parent = ms.parent
        if parent is not None and parent != came_from:
            targets.add(parent)
        if not targets:
            return 0
        if template is None:
            self.drop("ttl_expired", event_id=str(event_id), msg_type=PUBLISH)
            return 0
        self.send_data(frozenset(targets), replace(template, body=pub.encode()))
        return len(targets)

    def _relay(self, pub: Publish, event_id: MessageId, template: Message | None) -> int:
        """An active gateway injects a copy into its other groups (§3.4; tg.md, rule 12)."""
        if pub.group_ttl == 0:
            return 0
        sent = 0
        for other in list(self.memberships.values()):
            h = other.gid
            if h == pub.gid or h in pub.visited or not self.is_active_gateway(pub.gid, h):
                continue
            if self._seen.check_and_add((event_id, h)):
                continue
            self.stats["relayed"] += 1
            visited = (*pub.visited, h)[-64:]
            inner = Publish(h, pub.scope, pub.group_ttl - 1, visited, pub.event,
                            pub.published_at)
            sent += self._route(other, inner, event_id, template, came_from=None)
        return sent

    # ================================================================ memory

    def state_sizes(self) -> dict[str, tuple[int, int]]:
        """Bitmaps held: the local one and one per child, per group, ``m/8`` bytes each (Fig. 5)."""
        entries = sum(1 + len(ms.tree) for ms in self.memberships.values())
        return {"bitmaps": (entries, entries * ((self.params.m + 7) // 8))}
