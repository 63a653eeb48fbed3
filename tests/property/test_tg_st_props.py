"""TG, ST and the group-tree machine against arbitrary input: a counted drop, never an exception.

Every body decoder raises only ``BodyError``; every frame a node receives,
whatever its body, is handled or counted as a drop; well-formed messages
round-trip.
"""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshsub.core.api import FrameReceived, Message, MessageId, NeighborInfo, NeighborUp
from meshsub.core.bodies import BodyError
from meshsub.core.cluster import messages as cm
from meshsub.core.cluster.ids import (
    DetachKind,
    GatewayRecord,
    GroupId,
    MergeRole,
    Purpose,
    Status,
)
from meshsub.core.protocol import Protocol
from meshsub.core.tags import Scope, conjunction, tag_event
from meshsub.protocols.st import ST
from meshsub.protocols.st import messages as sm
from meshsub.protocols.tg import TG
from meshsub.protocols.tg import messages as tm

SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

G1 = GroupId(7, 1, 2)
G2 = GroupId(9, 0, 1)
REC = GatewayRecord(5, G1, 2, G2, 1, True)
EVENT = tag_event("t", ["a", "b"])
SUB = conjunction("t", ["a"])

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**64), 2**64),
                    st.floats(allow_nan=True), st.text(max_size=8), st.binary(max_size=16))
bodies = st.recursive(scalars, lambda c: st.one_of(st.lists(c, max_size=10),
                                                   st.dictionaries(st.text(max_size=4), c,
                                                                   max_size=3)),
                      max_leaves=40)
small = st.integers(0, 12)
gid_wire = st.lists(small, min_size=3, max_size=3)
record_wire = st.just(REC.wire())
# Bodies close to valid ones, so that the decoders are exercised past their first field.
near_valid = st.one_of(
    st.lists(st.one_of(small, gid_wire, record_wire, st.lists(small, max_size=4),
                       st.lists(gid_wire, max_size=3), st.lists(record_wire, max_size=2),
                       st.just(EVENT.to_wire()), st.just(SUB.to_wire()),
                       st.lists(st.just(SUB.to_wire()), max_size=2),
                       st.sampled_from(["local", "global", "x"]), st.booleans(),
                       st.binary(max_size=300), st.none(), st.floats(0, 10)),
             min_size=1, max_size=10),
    bodies,
)

DECODERS = [*cm.DECODERS.values(), cm.HelloGroup.decode, tm.Publish.decode, sm.Subs.decode,
            sm.Publish.decode, lambda v: GatewayRecord.decode(v, 9), GroupId.decode,
            lambda v: sm.Subs.decode(v, CACHE)]
CACHE = sm.SubscriptionCache(limit=8)
"""Shared across examples: a cached decode must refuse and accept exactly what a fresh one does."""


def test_cached_subscription_decoding_is_exact() -> None:
    cache = sm.SubscriptionCache(limit=2)
    subs = [conjunction("t", [n]) for n in "abc"]
    for _ in range(2):
        for s in subs:
            assert cache.decode(s.to_wire(), "s") == s
    with contextlib.suppress(BodyError):
        cache.decode(["t", ["no such predicate form"]], "s")
        raise AssertionError("a malformed subscription was accepted")
    with contextlib.suppress(BodyError):
        cache.decode([{1, 2}], "s")  # not even packable
        raise AssertionError("an unpackable subscription was accepted")


@SETTINGS
@given(near_valid)
def test_decoders_raise_only_body_errors(body: Any) -> None:
    for decode in DECODERS:
        with contextlib.suppress(BodyError):
            decode(body)


TYPES = [*range(cm.HELLO, cm.LEAVE + 1), cm.FIRST_OWN_TYPE, cm.FIRST_OWN_TYPE + 1, 60]
OWN_DECODERS: dict[type, dict[int, Any]] = {
    TG: {tm.PUBLISH: tm.Publish.decode},
    ST: {sm.SUBS: sm.Subs.decode, sm.PUBLISH: sm.Publish.decode},
}


def refused(cls: type, mtype: int, body: Any) -> bool:
    """True if ``cls`` has no decoder for ``mtype`` or its decoder refuses ``body``."""
    decode = cm.DECODERS.get(mtype) or OWN_DECODERS[cls].get(mtype)
    if decode is None:
        return True
    try:
        decode(body)
    except BodyError:
        return True
    return False


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(near_valid)
def test_any_frame_is_handled_or_a_counted_drop(body: Any) -> None:
    """A frame of a type the node does not know, or whose body its decoder refuses (lists
    of the wrong fields included, not only non-lists), is a counted drop."""
    for cls in (TG, ST):
        proto: Protocol = cls(1)
        proto.handle(NeighborUp(0.0, NeighborInfo(2)))
        for mtype in TYPES:
            before = sum(proto.drops.values())
            proto.handle(FrameReceived(1.0, 2, Message(mtype, MessageId(2, 0, mtype), body)))
            if refused(cls, mtype, body):
                assert sum(proto.drops.values()) > before, (cls.__name__, mtype)


def test_round_trips() -> None:
    hello = cm.Hello(True, (cm.HelloGroup(G1, 2, 4, True, False, 17, 3, (G2,), (8, 9)),))
    items: list[Any] = [
        hello,
        cm.JoinQuery(Purpose.REPAIR, 5, ((G2, 1),), G1, 2, 40),
        cm.JoinQuery(Purpose.INITIAL, 6, (), None, 0, 0),
        cm.JoinReply(5, G1, (7, 3, 4), b"\x01\x03\x07\x00\x00\x00\x0c\x00\x00", 9, 3),
        cm.JoinSelect(5, G1, Purpose.ADDITIONAL, ((G2, 2),), 0),
        cm.JoinConfirm(5, G1, (7, 3), 9, 3),
        cm.JoinReject(5, "max_level"),
        cm.LeaderAnnounce(G1, b""),
        cm.Report(G1, 12, b"", 4, (REC,), False),
        cm.GroupInfo(G2, G1, (7, 3), True, 8, 3, 99),
        cm.GatewayStatus(G1, 5, G2, Status.STANDBY, 3),
        cm.MergeRequest(G2, MergeRole.SMALL, G2, G1, 2, 1, 1, 5, 77, (5, 6)),
        cm.MergeReply(G2, 77, 5, True, (5,)),
        cm.Reroot(G2, G1, (7, 3, 5), 8, 4, 100),
        cm.Detach(G1, DetachKind.UNANCHOR, 3),
        cm.Leave(G1, "standby"),
        tm.Publish(G1, Scope.LOCAL, 0, (G1, G2), EVENT, 2.5),
        sm.Subs(4, 0, 0, 2, (SUB,), ()),
        sm.Subs(4, 3, 0, 0, (SUB,), (SUB,)),
        sm.Publish(EVENT, 1.0),
    ]
    for item in items:
        assert type(item).decode(item.encode()) == item


def test_semantic_errors_are_body_errors() -> None:
    bad = [
        (cm.JoinQuery.decode, [2, 1, [], None, 0, 0]),  # a repair without its group
        (cm.JoinQuery.decode, [0, 1, [], G1.wire(), 0, 0]),  # an initial query naming one
        (cm.JoinReply.decode, [1, G1.wire(), [], b"", 0, 0]),  # an empty path
        (cm.JoinReply.decode, [1, G1.wire(), [3, 4, 3], b"", 0, 0]),  # a node twice
        (cm.JoinReply.decode, [1, G1.wire(), [3], b"x" * 9000, 0, 0]),  # too big a summary
        (cm.Report.decode, [G1.wire(), 1, b"", 1, [REC.wire()] * 65, False]),
        (tm.Publish.decode, [G1.wire(), "nowhere", 0, [], EVENT.to_wire(), 0.0]),
        (cm.GatewayStatus.decode, [G1.wire(), 1, G2.wire(), 7, 0]),
        (sm.Subs.decode, [1, [], []]),
        (sm.Subs.decode, [1, 0, 2, 2, [], []]),  # part beyond parts
        (sm.Subs.decode, [1, 1, 0, 2, [], []]),  # a full table's part with a seq
        (sm.Subs.decode, [1, 0, 0, 0, [], []]),  # a delta numbered 0
        (sm.Subs.decode, [1, 0, 0, 1, [], [SUB.to_wire()]]),  # a full table removing
    ]
    for decode, body in bad:
        try:
            decode(body)
        except BodyError:
            continue
        raise AssertionError(f"{decode} accepted {body!r}")


def test_a_bitmap_of_other_parameters_is_a_counted_drop() -> None:
    from meshsub.core.bloom import BloomFilter, HashScheme

    node = TG(1)
    node.handle(NeighborUp(0.0, NeighborInfo(2)))
    alien = BloomFilter(1024, 7, HashScheme.SHA256_DOUBLE).to_bytes()
    with contextlib.suppress(BodyError):
        node.decode_summary(alien)
        raise AssertionError("a 1024-bit bitmap was accepted by a 2048-bit node")
    mine = node.encode_summary(1 << 2047)
    assert node.decode_summary(mine) == 1 << 2047
