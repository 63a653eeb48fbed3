"""B-SUB (Zhao & Wu, ICDCS 2010): content-based pub/sub over contacts with TCBFs.

A contact starts at ``NeighborUp`` and ends at ``NeighborDown``; in between
the two nodes run the contact procedure (Zhao and Wu 2010, §V-C and §V-D) as a session, every
step with the core's per-hop reliable send:

1. IDENT both ways (session nonce, roles, degree, parameter digest); a user
   runs broker allocation and may send DESIGNATE.
2. FILTERs by role pair (``wire.filters_sent``): genuine TCBF to a broker,
   interest BF to a producer, relay BF to a producer, relay TCBF between
   brokers. A broker sends its relay filter after decay and after pinning its
   own interests (``R <- M(R, G)``) and keeps that copy as its *pre-merge
   snapshot*.
3. Once every filter the peer owes has arrived, decide: direct deliveries
   (mode 0, uncounted), producer copies to the broker (mode 1, at most C
   distinct brokers, counted on ACK, deleted at C), broker handoffs by
   preference computed on the pre-merge snapshots (mode 2, highest first,
   deleted on ACK). The decisions go out as an OFFER; the peer REQUESTs the
   ids it lacks and only those travel as DATA (ours: the paper sends DATA directly). An offered
   message the peer already holds stays here: a broker that already carries
   a copy is not "given" it (which would delete ours and merge two of the C
   copies into one), and a consumer never receives a message twice. When all
   of that is answered and acknowledged, A-merge the peer's genuine filter
   (once per session) and M-merge its relay filter; a contact cut before then
   merges nothing, so the next contact decides afresh.

Custody moves only on acknowledgement: a contact that ends mid-session leaves
every unacknowledged message with its sender, so nothing is lost; a lost ACK
can leave two copies, which receivers detect by message id. The consumer
matches exactly (``deliver_local``) before the application sees anything;
a direct delivery that passed a Bloom filter but matches no subscription is
reported as the drop ``false_positive_forward``.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any, ClassVar

from meshsub.core.api import Message, MessageId, MsgKind, NeighborInfo, NodeId
from meshsub.core.buffer import BufferEntry
from meshsub.core.carry import StoreCarryForward
from meshsub.core.content import Event, Subscription
from meshsub.core.params import ProtocolParams
from meshsub.core.tcbf import (
    C_MAX,
    TCBF,
    FilterKind,
    TCBFConfigMismatch,
    TCBFDecodeError,
    decode_filter,
    encode_filter,
    positions,
)
from meshsub.core.topics import is_wildcard
from meshsub.protocols.bsub.carried import Carried, Kind
from meshsub.protocols.bsub.election import ContactLog, Meeting, designation
from meshsub.protocols.bsub.params import BSubParams, RoleMode
from meshsub.protocols.bsub.wire import (
    DATA,
    DESIGNATE,
    FILTER,
    IDENT,
    OFFER,
    OFFER_CHUNK,
    REQUEST,
    ROLE,
    Data,
    Designate,
    FilterMsg,
    Ident,
    Mode,
    Offer,
    Request,
    Role,
    RoleMsg,
    filters_sent,
    params_digest,
)


@dataclass
class _Contact:
    """One contact session with ``peer`` (ours: ``session``; the peer's: ``peer_session``)."""

    peer: NodeId
    session: int
    roles: Role
    """Our roles as advertised in this session's IDENT (stable for the session)."""
    peer_session: int | None = None
    peer_roles: Role = Role.NONE
    peer_degree: int = 0
    filters: dict[tuple[int, FilterKind], TCBF] = field(default_factory=dict)
    snapshot: TCBF | None = None
    """Our relay filter as sent to the peer: the pre-merge view for preferences."""
    decided: bool = False
    merge_due: bool = False
    merged_genuine: bool = False
    offers: dict[int, list[tuple[MessageId, Mode]]] = field(default_factory=dict)
    """Our OFFERs the peer has not answered yet, by offer number."""
    next_offer: int = 0
    queue: deque[tuple[MessageId, Mode]] = field(default_factory=deque)
    inflight: set[MessageId] = field(default_factory=set)
    sent: set[MessageId] = field(default_factory=set)
    """Ids offered in this session (never offered twice to the same peer)."""

    def peer_filter(self, *kinds: FilterKind) -> TCBF | None:
        for kind in kinds:
            f = self.filters.get((self.peer_session or 0, kind))
            if f is not None:
                return f
        return None


class BSub(StoreCarryForward):
    """B-SUB over contacts: brokers, TCBF interest propagation, preference forwarding."""

    name: ClassVar[str] = "bsub"
    protocol_id: ClassVar[int] = 4
    Params: ClassVar[type[ProtocolParams]] = BSubParams
    message_kinds: ClassVar[dict[int, MsgKind]] = {
        IDENT: MsgKind.CONTROL,
        DESIGNATE: MsgKind.CONTROL,
        FILTER: MsgKind.SUBSCRIPTION,
        DATA: MsgKind.DATA,
        OFFER: MsgKind.CONTROL,
        REQUEST: MsgKind.CONTROL,
        ROLE: MsgKind.CONTROL,
    }

    params: BSubParams

    def __init__(self, node: NodeId, **kwargs: Any) -> None:
        super().__init__(node, **kwargs)
        p = self.params
        self.df = p.decay_per_s()
        self.digest = params_digest(p.m, p.k, p.I, C_MAX)
        self.genuine = TCBF(p.m, p.k, initial=p.I)
        self.relay_filter = TCBF(p.m, p.k, initial=p.I, df=self.df)
        self.broker = p.role_mode is RoleMode.PINNED_BROKER
        self.last_role_change = float("-inf")
        self.pending_role: tuple[bool, NodeId] | None = None
        self.log = ContactLog(p.T_w)
        self.contacts: dict[NodeId, _Contact] = {}
        self.pending_copies: dict[MessageId, int] = {}
        self._items: dict[MessageId, Carried] = {}
        self.received: dict[MessageId, float] = {}
        """Ids delivered here -> their expiry: a consumer does not request them again."""
        self._received_pruned = 0
        self._pos_cache: dict[bytes, frozenset[int]] = {}
        self.leased: dict[MessageId, NodeId] = {}
        self.unconfirmed: dict[MessageId, tuple[NodeId, Mode]] = {}
        """Copies/handoffs whose ACK never came: to whom, in which mode."""
        self.stats: dict[str, int] = {"contacts": 0, "designations": 0, "a_merges": 0,
                                      "m_merges": 0, "copies": 0, "handoffs": 0,
                                      "direct": 0}
        if self.broker:
            self.emit("broker", role="broker")

    # ------------------------------------------------------------------ roles

    @property
    def roles(self) -> Role:
        """Roles advertised in IDENT.

        Every node may publish at any moment, so every node is a producer (in
        the paper's simulation all nodes produce and consume). A producer role
        that followed the buffer would leave a message published during a
        contact without the peer's interest or relay filter until the next
        contact, and would make the result depend on the message rate.
        """
        r = Role.PRODUCER
        if not self.genuine.is_empty():
            r |= Role.CONSUMER
        if self.broker:
            r |= Role.BROKER
        return r

    def _set_role(self, broker: bool) -> None:
        if broker == self.broker:
            return
        self.broker = broker
        self.last_role_change = self.now
        if broker:  # a new broker starts with an empty relay filter (§V-B)
            p = self.params
            self.relay_filter = TCBF(p.m, p.k, initial=p.I, df=self.df, now=self.now)
        self.emit("broker", role="broker" if broker else "user")

    # ------------------------------------------------------------------ local API

    def on_subscribe(self, sub_id: str, subscription: Subscription) -> None:
        if is_wildcard(subscription.topic):
            # A Bloom filter holds exact keys only: such a subscription still gets
            # exact deliveries of what reaches this node, but advertises nothing.
            self.drop("subscription_not_a_key", sub_id=sub_id, topic=subscription.topic)
        self._rebuild_genuine()

    def on_unsubscribe(self, sub_id: str, subscription: Subscription) -> None:
        self._rebuild_genuine()

    def _rebuild_genuine(self) -> None:
        """Genuine filters do not decay; they are rebuilt when subscriptions change."""
        g = TCBF(self.params.m, self.params.k, initial=self.params.I)
        for sub in self.subscriptions.values():
            if not is_wildcard(sub.topic):
                g.insert(sub.topic)
        self.genuine = g

    def on_publish(self, event: Event, event_id: MessageId) -> None:
        self.deliver_local(event, event_id, hop=0, published_at=self.now)
        self._note_received(event_id, self.now + self.params.TTL)
        item = Carried(Kind.OWN, event, self.now, told=[self.node])
        if self._store(event_id, item, self.now + self.params.TTL):
            self._consider_everywhere(event_id, exclude=None)

    # ------------------------------------------------------------------ contacts

    def on_neighbor_up(self, info: NeighborInfo) -> None:
        c = self.contacts.get(info.node)
        if c is None:
            self._start_session(info.node)
        elif c.decided and c.merge_due:
            # The peer saw the link first: its IDENT and filters arrived before our
            # NeighborUp, so the session decided while the peer was not yet a
            # neighbour and ``_pump`` held back its DATA and its merge. Without
            # this the merge waits for an ACK that never comes (nothing to send):
            # a broker would never learn the consumer's interest from this contact.
            self._refresh(c)
            self._offer(c, self._plans(c))  # what arrived meanwhile (not yet offered)
            self._pump(c)

    def on_neighbor_down(self, node: NodeId) -> None:
        self.contacts.pop(node, None)
        if self.pending_role is not None and self.pending_role[1] == node:
            # A role change takes effect when the contact that asked for it ends.
            broker, _ = self.pending_role
            self.pending_role = None
            self._set_role(broker)

    def _start_session(self, peer: NodeId) -> _Contact:
        self.sweep()
        session = self.rng.getrandbits(32) or 1
        c = _Contact(peer, session, self.roles)
        self.contacts[peer] = c
        self.stats["contacts"] += 1
        ident = Ident(session, c.roles, min(self.log.degree(self.now), 0xFFFF), self.digest)
        self._send_control(peer, IDENT, ident.encode())
        return c

    def _send_control(self, peer: NodeId, mtype: int, body: Any) -> None:
        self.send_reliable(peer, Message(mtype, self.new_message_id(), body, ttl=1))

    def on_frame(self, sender: NodeId, message: Message) -> None:
        handlers = {IDENT: self._on_ident, DESIGNATE: self._on_designate,
                    FILTER: self._on_filter, DATA: self._on_data, OFFER: self._on_offer,
                    REQUEST: self._on_request, ROLE: self._on_role}
        handler = handlers.get(message.type)
        if handler is None:
            self.drop("unknown_type", message, peer=sender)
            return
        try:
            handler(sender, message)
        except ValueError as exc:  # every decoder's one-line complaint
            self.drop("malformed", message, peer=sender, content=str(exc)[:200])

    def _on_ident(self, sender: NodeId, message: Message) -> None:
        ident = Ident.decode(message.body)
        if ident.digest != self.digest:
            self.drop("config_mismatch", message, peer=sender)
            return
        c = self.contacts.get(sender)
        if c is None:
            c = self._start_session(sender)
        elif c.peer_session is not None and c.peer_session != ident.session:
            # The peer began a new contact we did not see end: start ours again too.
            c = self._start_session(sender)
        if c.peer_session == ident.session:
            return
        c.peer_session = ident.session
        c.peer_roles = ident.roles
        c.peer_degree = ident.degree
        peer_broker = Role.BROKER in ident.roles
        self.log.record(Meeting(sender, self.now, peer_broker, ident.degree))
        if not self.broker:  # users allocate brokers; brokers never do (§V-B)
            verdict = designation(self.log, self.now, sender, peer_broker, ident.degree,
                                  self.params.low, self.params.up)
            if verdict is not None:
                self.stats["designations"] += 1
                self._send_control(sender, DESIGNATE, Designate(c.session, verdict).encode())
        self._send_filters(c)
        self._decide(c)

    def _on_designate(self, sender: NodeId, message: Message) -> None:
        order = Designate.decode(message.body)
        takes = (self.params.role_mode is RoleMode.AUTO and order.broker != self.broker
                 # hysteresis: users that disagree must not make a node oscillate
                 and self.now - self.last_role_change >= self.params.T_hold
                 # nor against a change that waits for its contact to end
                 and (self.pending_role is None or self.pending_role[0] == order.broker))
        if takes:
            if sender not in self.contacts:
                self._set_role(order.broker)
            elif self.pending_role is None:
                self.pending_role = (order.broker, sender)
        # Answer with the role we will have, taken or refused: the user counts us by it.
        self._send_control(sender, ROLE, RoleMsg(order.session, self._future_role()).encode())

    def _future_role(self) -> bool:
        """The role after the contact that asked for a change ends."""
        return self.pending_role[0] if self.pending_role is not None else self.broker

    def _on_role(self, sender: NodeId, message: Message) -> None:
        # The node we designated says which role it takes: count it so from now on.
        self.log.set_role(sender, RoleMsg.decode(message.body).broker, self.now)

    def _send_filters(self, c: _Contact) -> None:
        for kind in sorted(filters_sent(c.roles, c.peer_roles)):
            if kind in (FilterKind.GENUINE, FilterKind.INTEREST_BF):
                encoded = encode_filter(self.genuine, kind)
            else:
                relay = self._relay_view()
                c.snapshot = relay.copy()
                encoded = encode_filter(relay, kind, self.now)
            self._send_control(c.peer, FILTER, FilterMsg(c.session, encoded).encode())

    def _relay_view(self) -> TCBF:
        """The relay filter now: decayed, with this node's own interests pinned at >= I."""
        self.relay_filter.apply_decay(self.now)
        if not self.genuine.is_empty():
            self.relay_filter.m_merge(self.genuine, self.now)
        return self.relay_filter

    def _on_filter(self, sender: NodeId, message: Message) -> None:
        msg = FilterMsg.decode(message.body)
        c = self.contacts.get(sender)
        if c is None:
            self.drop("no_session", message, peer=sender)
            return
        p = self.params
        try:
            kind, f = decode_filter(msg.encoded, m=p.m, k=p.k, now=self.now, initial=p.I)
        except TCBFConfigMismatch:
            self.drop("config_mismatch", message, peer=sender)
            return
        except TCBFDecodeError as exc:
            raise ValueError(str(exc)) from None
        if kind is FilterKind.RELAY:
            f.set_df(self.df, self.now)  # received counters decay at our DF (ours)
        c.filters[(msg.session, kind)] = f
        self._decide(c)

    # ------------------------------------------------------------------ decisions

    def _decide(self, c: _Contact) -> None:
        """Once the peer's IDENT and every filter it owes us are in: forward, then merge."""
        if c.decided or c.peer_session is None:
            return
        owed = filters_sent(c.peer_roles, c.roles)
        if any((c.peer_session, kind) not in c.filters for kind in owed):
            return
        c.decided = True
        self.sweep()
        self._refresh(c)
        self._offer(c, self._plans(c))
        c.merge_due = True
        self._pump(c)

    def _plans(self, c: _Contact) -> list[tuple[MessageId, Mode]]:
        """Every buffered message that goes to ``c.peer`` and how, in sending order."""
        plans = [plan for mid in list(self.buffer.summary_vector())
                 if (plan := self._plan(c, mid)) is not None]
        plans.sort(key=lambda p: p[0])
        return [(mid, mode) for _, mid, mode in plans]

    def _merge(self, c: _Contact) -> None:
        """Step 7 of the contact, once our forwarding (step 6) is complete.

        A contact cut before that merges nothing, so the next contact repeats
        the same decisions instead of finding the gradient already flattened.
        """
        c.merge_due = False
        if not (self.broker and Role.BROKER in c.roles):
            return
        genuine = c.peer_filter(FilterKind.GENUINE)
        if genuine is not None and not c.merged_genuine:
            c.merged_genuine = True  # once per (peer, session): retransmissions add nothing
            self.relay_filter.a_merge(genuine, self.now)
            self.stats["a_merges"] += 1
        peer_relay = c.peer_filter(FilterKind.RELAY)
        if peer_relay is not None:
            self.relay_filter.m_merge(peer_relay, self.now)
            self.stats["m_merges"] += 1

    def _plan(self, c: _Contact, mid: MessageId) -> tuple[tuple[Any, ...], MessageId, Mode] | None:
        """How (if at all) message ``mid`` goes to ``c.peer``, with its sort key."""
        entry = self.buffer.entry(mid)
        if entry is None or entry.expires_at <= self.now or mid in c.sent:
            return None
        item = self._item(mid, entry.message)
        if item.knows(c.peer):
            return None
        pos = self._positions(item)
        interest = c.peer_filter(FilterKind.GENUINE, FilterKind.INTEREST_BF)
        peer_broker = Role.BROKER in c.peer_roles
        # Filters were brought to ``now`` by ``_refresh``: counters are read as they are.
        if item.kind is Kind.OWN:
            relay_bits = c.peer_filter(FilterKind.RELAY, FilterKind.RELAY_BF)
            if peer_broker and relay_bits is not None and relay_bits.counter_at(pos) > 0 \
                    and item.copies_given + self.pending_copies.get(mid, 0) < self.params.C:
                return (1,), mid, Mode.COPY
        elif peer_broker and mid not in self.leased:
            pref, c_peer = self._preference(c, pos)
            if pref > 0:
                return (2, -pref, -c_peer, entry.expires_at), mid, Mode.HANDOFF
        if interest is not None and interest.counter_at(pos) > 0:
            return (0,), mid, Mode.DIRECT
        return None

    def _preference(self, c: _Contact, pos: frozenset[int]) -> tuple[float, int]:
        """PREF_{self,peer} of a relay message's key, and the peer's counter.

        A broker compares its pre-merge snapshot with the peer's relay TCBF. A
        demoted broker advertises no relay filter (its counter is 0), so the
        peer's preference is its counter: it hands its relay messages to the
        next broker whose relay filter holds the key (Zhao and Wu 2010, §V-D).
        """
        if self.broker:
            peer_relay = c.peer_filter(FilterKind.RELAY)
            if peer_relay is None or c.snapshot is None:
                return 0.0, 0
            c_own = c.snapshot.counter_at(pos)
            c_peer = peer_relay.counter_at(pos)
            return (float(c_peer) if c_own == 0 else (c_peer - c_own) / c_own), c_peer
        bits = c.peer_filter(FilterKind.RELAY, FilterKind.RELAY_BF)
        c_peer = bits.counter_at(pos) if bits is not None else 0
        return float(c_peer), c_peer

    def _item(self, mid: MessageId, stored: Message) -> Carried:
        """The decoded entry (cached: decoding events is the costly part of planning)."""
        item = self._items.get(mid)
        if item is None:
            item = self._items[mid] = Carried.from_message(stored)
        return item

    def _kind(self, mid: MessageId) -> Kind | None:
        item = self._items.get(mid)
        if item is None:
            stored = self.buffer.get(mid)
            if stored is None:
                return None
            item = self._item(mid, stored)
        return item.kind

    def _positions(self, item: Carried) -> frozenset[int]:
        key = item.key
        pos = self._pos_cache.get(key)
        if pos is None:
            if len(self._pos_cache) > 4096:
                self._pos_cache.clear()
            pos = self._pos_cache[key] = positions(key, self.params.m, self.params.k)
        return pos

    def _refresh(self, c: _Contact) -> None:
        """Bring the contact's filters to ``now`` once, before a round of queries."""
        for f in c.filters.values():
            f.apply_decay(self.now)
        if c.snapshot is not None:
            c.snapshot.apply_decay(self.now)

    def _consider_everywhere(self, mid: MessageId, exclude: NodeId | None) -> None:
        """A message that appeared during contacts: offer it where decisions were made."""
        for c in self.contacts.values():
            if c.decided and c.peer != exclude and c.peer in self.neighbors:
                self._refresh(c)
                plan = self._plan(c, mid)
                if plan is not None:
                    self._offer(c, [(mid, plan[2])])

    # ------------------------------------------------------------------ offers

    def _offer(self, c: _Contact, items: list[tuple[MessageId, Mode]]) -> None:
        """OFFER ``items`` (in sending order) to ``c.peer``; DATA follows its REQUEST."""
        for i in range(0, len(items), OFFER_CHUNK):
            chunk = items[i:i + OFFER_CHUNK]
            number = c.next_offer
            c.next_offer += 1
            c.offers[number] = chunk
            c.sent.update(mid for mid, _ in chunk)
            self._send_control(c.peer, OFFER, Offer(number, tuple(chunk)).encode())

    def _on_offer(self, sender: NodeId, message: Message) -> None:
        offer = Offer.decode(message.body)
        wanted = tuple(mid for mid, mode in offer.items if self._lacks(mid, mode))
        self._send_control(sender, REQUEST, Request(offer.offer, wanted).encode())

    def _lacks(self, mid: MessageId, mode: Mode) -> bool:
        """Whether an offered message is worth its DATA here.

        A carrier (copy or handoff) is wanted unless we carry it already; a
        direct delivery unless it was delivered here before.
        """
        if mid in self.buffer:
            return False
        if mode is Mode.DIRECT:
            expiry = self.received.get(mid)
            return expiry is None or expiry <= self.now
        return True

    def _on_request(self, sender: NodeId, message: Message) -> None:
        request = Request.decode(message.body)
        c = self.contacts.get(sender)
        if c is None or request.offer not in c.offers:
            return  # an answer to a contact that has ended: nothing is owed
        wanted = set(request.ids)
        for mid, mode in c.offers.pop(request.offer):
            if mid in wanted:
                c.queue.append((mid, mode))
            else:
                self._peer_holds(mid, sender)
        self._pump(c)

    def _peer_holds(self, mid: MessageId, node: NodeId) -> None:
        """``node`` has ``mid`` already: remember it, and keep our copy (nothing moved).

        Unless our own earlier copy or handoff to ``node`` went unacknowledged:
        then that DATA arrived and only its ACK was lost, so the transfer is
        completed now (the duplicate is detected by its message id).
        """
        unconfirmed = self.unconfirmed.get(mid)
        if unconfirmed is not None and unconfirmed[0] == node:
            self._transferred(mid, node, unconfirmed[1])
            return
        entry = self.buffer.entry(mid)
        if entry is not None:
            item = self._item(mid, entry.message)
            if not item.knows(node):
                item.tell(node, self.params.max_told)
                self._update(mid, item, entry.expires_at)

    def _note_received(self, mid: MessageId, expires_at: float) -> None:
        self.received[mid] = expires_at
        if len(self.received) > 2 * self._received_pruned + 1024:
            self.received = {m: t for m, t in self.received.items() if t > self.now}
            self._received_pruned = len(self.received)

    def _pump(self, c: _Contact) -> None:
        """Send queued DATA while fewer than ``window`` are unacknowledged."""
        if c.peer not in self.neighbors or self.contacts.get(c.peer) is not c:
            return
        while c.queue and len(c.inflight) < self.params.window:
            mid, mode = c.queue.popleft()
            entry = self.buffer.entry(mid)
            if entry is None or entry.expires_at <= self.now:
                continue
            item = self._item(mid, entry.message)
            if mode is Mode.COPY:
                if item.copies_given + self.pending_copies.get(mid, 0) >= self.params.C:
                    continue
                self.pending_copies[mid] = self.pending_copies.get(mid, 0) + 1
            elif mode is Mode.HANDOFF:
                if mid in self.leased:
                    continue
                self.leased[mid] = c.peer  # in flight to one broker at a time
            # A broker copy also names the brokers that got the others.
            told = () if mode is Mode.DIRECT else tuple(
                item.told + [n for n in item.given_to if n not in item.told])
            data = Data(mode, item.event, item.published_at, entry.expires_at - self.now, told)
            c.inflight.add(mid)
            self.send_reliable(c.peer, Message(DATA, mid, data.encode(), hop=0, ttl=1))
        if c.merge_due and not c.offers and not c.queue and not c.inflight:
            self._merge(c)

    # ------------------------------------------------------------------ receiving data

    def _on_data(self, sender: NodeId, message: Message) -> None:
        data = Data.decode(message.body)
        if data.remaining_s <= 0:
            self.drop("expired", message, peer=sender)
            return
        if data.mode is Mode.DIRECT:
            # Final-stage exact matching: a Bloom-filter match that no subscription
            # confirms is the filter's cost, reported and never delivered.
            if not any(sub.matches(data.event) for sub in self.subscriptions.values()):
                self.drop("false_positive_forward", message, peer=sender)
                return
            self._note_received(message.id, self.now + data.remaining_s)
            if not self.deliver_local(data.event, message.id, hop=1,
                                      published_at=data.published_at):
                self.drop("duplicate", message, peer=sender)
            return
        if self.deliver_local(data.event, message.id, hop=1, published_at=data.published_at):
            self._note_received(message.id, self.now + data.remaining_s)
        if message.id in self.buffer:
            self.drop("duplicate", message, peer=sender)  # a lost ACK left two copies
            return
        item = Carried(Kind.RELAY, data.event, data.published_at, told=list(data.told))
        item.tell(sender, self.params.max_told)
        item.tell(self.node, self.params.max_told)
        if self._store(message.id, item, self.now + data.remaining_s):
            self._consider_everywhere(message.id, exclude=sender)

    def on_reliable_acked(self, node: NodeId, message: Message) -> None:
        if message.type != DATA:
            return
        mid = message.id
        mode = Mode(message.body[0])
        c = self.contacts.get(node)
        if c is not None:
            c.inflight.discard(mid)
        if mode is Mode.COPY:
            self._release_copy(mid)
        elif mode is Mode.HANDOFF:
            self.leased.pop(mid, None)
        self._transferred(mid, node, mode)
        if c is not None:
            self._pump(c)

    def _transferred(self, mid: MessageId, node: NodeId, mode: Mode) -> None:
        """``node`` now holds ``mid`` because we sent it in ``mode``: do the bookkeeping."""
        self.unconfirmed.pop(mid, None)
        self.buffer.handed_on(mid)  # a copy exists elsewhere: evictable now
        entry = self.buffer.entry(mid)
        if entry is None:
            return
        item = self._item(mid, entry.message)
        if mode is Mode.DIRECT:
            self.stats["direct"] += 1
            item.tell(node, self.params.max_told)
            self._update(mid, item, entry.expires_at)
        elif mode is Mode.COPY:
            self.stats["copies"] += 1
            item.copies_given += 1
            if node not in item.given_to:
                item.given_to.append(node)
            if item.copies_given >= self.params.C:
                self._discard(mid)  # the copy limit reached: the producer is done
            else:
                self._update(mid, item, entry.expires_at)
        else:
            self.stats["handoffs"] += 1
            self._discard(mid)  # custody passed on with the ACK

    def on_reliable_failed(self, node: NodeId, message: Message) -> None:
        # Custody stays here: the message is offered again at a later contact.
        if message.type == OFFER:
            c = self.contacts.get(node)
            if c is not None:
                for mid, _ in c.offers.pop(Offer.decode(message.body).offer, []):
                    c.sent.discard(mid)
                self._pump(c)
            return
        if message.type != DATA:
            return
        mid = message.id
        mode = Mode(message.body[0])
        if mode is Mode.COPY:
            self._release_copy(mid)
        elif mode is Mode.HANDOFF and self.leased.get(mid) == node:
            del self.leased[mid]
        if mode is not Mode.DIRECT:
            # The DATA may have arrived and only its ACK been lost: if ``node``
            # later says it holds the message, custody did move (see _peer_holds).
            self.unconfirmed[mid] = (node, mode)
        c = self.contacts.get(node)
        if c is not None:
            c.inflight.discard(mid)
            c.sent.discard(mid)
            self._pump(c)

    def _release_copy(self, mid: MessageId) -> None:
        left = self.pending_copies.get(mid, 0) - 1
        if left > 0:
            self.pending_copies[mid] = left
        else:
            self.pending_copies.pop(mid, None)

    # ------------------------------------------------------------------ buffer

    def _store(self, mid: MessageId, item: Carried, expires_at: float) -> bool:
        stored = self.carry(item.to_message(mid), expires_at)
        if stored:
            self._items[mid] = item
        return stored

    def _update(self, mid: MessageId, item: Carried, expires_at: float) -> None:
        """Rewrite an entry's bookkeeping (write-through to the store)."""
        self.buffer.discard(mid)
        self._items[mid] = item
        self.carry(item.to_message(mid), expires_at)

    def _discard(self, mid: MessageId) -> None:
        self.buffer.discard(mid)
        self._items.pop(mid, None)
        self.unconfirmed.pop(mid, None)

    def on_buffer_drop(self, entry: BufferEntry, reason: str) -> None:
        self._items.pop(entry.message.id, None)
        self.unconfirmed.pop(entry.message.id, None)

    def status(self) -> dict[str, Any]:
        self.relay_filter.apply_decay(self.now)
        # Keys and the decoded-item cache only: iterating the buffer would read every
        # carried body back from the SQLite store on each status (a scrape a second).
        own = sum(1 for mid in self.buffer.summary_vector() if self._kind(mid) is Kind.OWN)
        return {**super().status(), "role": "broker" if self.broker else "user",
                "DF_per_s": self.df, "relay_fill_ratio": self.relay_filter.fill_ratio(),
                "relay_keys_estimate": self.relay_filter.estimated_keys(),
                "own": own, "relay": len(self.buffer) - own, "contacts": len(self.contacts),
                **self.stats}
