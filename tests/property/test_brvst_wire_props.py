"""BRVST's message codecs: every message round-trips, and every decoder answers malformed
input (random values, mutated valid messages, truncated or padded lists) with ValueError only,
which the protocol turns into a counted drop; fed to a node, no body raises."""

from __future__ import annotations

import contextlib
from typing import Any

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsub.core.api import (
    FrameReceived,
    Message,
    MessageId,
    NeighborInfo,
    NeighborUp,
    Position,
    PositionChanged,
    TimerFired,
)
from meshsub.core.arv import ARV
from meshsub.core.georouting import GeoHeader
from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.protocols.brvst import Brvst, BrvstParams
from meshsub.protocols.brvst import messages as m

ENTRY = ((1, ARV.parse("0110")), (4, ARV.parse("1")))
PUB = m.Pub(MessageId(7, 1, 3), parse_event("t a1_lo=1 a1_hi=2 note=\"x\""), 12.5)
SENDER = m.Sender(9, (10.0, 20.0), 3)
SUB = parse_subscription("t a1_lo>=0 a1_hi<=50")

PAYLOADS: list[Any] = [
    m.SubscribeMsg("s1", SUB, 7, (1.0, 2.0), False, True),
    m.UnsubscribeMsg("s1", 7),
    m.Locate(7, (3.0, 4.0)),
    m.SummaryUpdate(1, 0, SENDER, 4, int(m.GrsvReason.CHANGE), (ENTRY,), b"abcd"),
    m.SummaryUpdate(1, 0, SENDER, 5, int(m.GrsvReason.RESYNC), (), b"abcd", 7),
    m.PubUp(PUB, (0, 1)),
    m.PubDown(PUB, (0, 0), (1, 1), True, (7, "s1"), SENDER),
    m.PubDown(PUB, (0, 0), (1, 1), False, None, SENDER),
    m.DeliverMsg(PUB, ("s1", "s2")),
    m.Advert((1, 0), SENDER, MessageId(7, 1, 3), (("a1_hi", 2), ("a1_lo", 1))),
    m.SubHistory((0, 1), SENDER, (7, "s1"), SUB),
    m.SubQuery((1, 1), SENDER, (ENTRY, ENTRY[:1])),
    m.StateXfer(1, 0, 1, 5, 9, [0, []]),
]
FLOODS: list[Any] = [
    m.Announce(1, 0, 1, 9, 2, (5.0, 6.0), 3.5, True, b"abcd"),
    m.Resign(2, 1, 1, 9, 2, None),
    m.Resign(2, 1, 1, 9, 2, 11),
]
ENVELOPE = m.Envelope(m.Dest.ZONE, 1, 0, 9, (1.0, 2.0), 3, 1,
                      GeoHeader(), PAYLOADS[3].to_wire())

anything = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats()
    | st.text(max_size=6) | st.binary(max_size=9),
    lambda inner: st.lists(inner, max_size=11),
    max_leaves=30,
)


def packed(obj: Any) -> Any:
    """Through msgpack and back, as the wire layer does (tuples become lists)."""
    return msgpack.unpackb(msgpack.packb(obj, use_bin_type=True), raw=False)


def test_every_message_round_trips() -> None:
    for obj in [*PAYLOADS, *FLOODS, ENVELOPE]:
        assert type(obj).from_wire(packed(obj.to_wire())) == obj
    assert m.rsv_from_wire(packed(m.rsv_to_wire([ENTRY]))) == (ENTRY,)


def _mutate(obj: Any, data: st.DataObject) -> Any:
    if isinstance(obj, list) and obj:
        how = data.draw(st.sampled_from(["dive", "replace", "drop", "add"]))
        i = data.draw(st.integers(0, len(obj) - 1))
        if how == "dive":
            return [*obj[:i], _mutate(obj[i], data), *obj[i + 1:]]
        if how == "drop":
            return obj[:i] + obj[i + 1:]
        if how == "add":
            return [*obj, data.draw(anything)]
    return data.draw(anything)


DECODERS = [type(o).from_wire for o in [*PAYLOADS, *FLOODS]] + [
    m.Envelope.from_wire, m.Pub.from_wire, m.Sender.from_wire, m.entry_from_wire,
    m.rsv_from_wire]


@settings(max_examples=300, deadline=None)
@given(anything)
def test_random_values_raise_only_value_error(obj: Any) -> None:
    for decode in DECODERS:
        with contextlib.suppress(ValueError):
            decode(obj)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from([*PAYLOADS, *FLOODS, ENVELOPE]), st.data())
def test_mutated_messages_raise_only_value_error(obj: Any, data: st.DataObject) -> None:
    wire = _mutate(packed(obj.to_wire()), data)
    with contextlib.suppress(ValueError):
        type(obj).from_wire(wire)


PAYLOAD_OF = {
    m.SUBSCRIBE: m.SubscribeMsg, m.UNSUBSCRIBE: m.UnsubscribeMsg, m.LOCATE: m.Locate,
    m.GRSV_UPDATE: m.SummaryUpdate, m.ZRSV_UPDATE: m.SummaryUpdate, m.PUBLISH: m.PubUp,
    m.PUB_UP: m.PubUp, m.PUB_GRID: m.PubDown, m.PUB_ZONE: m.PubDown, m.DELIVER: m.DeliverMsg,
    m.PUB_ADVERT: m.Advert, m.SUB_HISTORY: m.SubHistory, m.SUB_QUERY: m.SubQuery,
    m.STATE_XFER: m.StateXfer,
}
GRID_TYPES = {m.SUBSCRIBE, m.UNSUBSCRIBE, m.LOCATE, m.PUBLISH, m.PUB_GRID}


def manager_node() -> Brvst:
    """Node 1, alone: grid manager of (0, 0) and zone manager of (0, 0), a neighbour east."""
    node = Brvst(1, params=BrvstParams(area_width_m=500, area_height_m=500))
    node.handle(PositionChanged(0.0, Position(100.0, 100.0)))
    node.handle(NeighborUp(0.0, NeighborInfo(2, Position(150.0, 100.0))))
    for name in ("elect:1", "elect:2"):
        node.handle(TimerFired(1.0, name))  # listened: back off
        node.handle(TimerFired(1.5, name))  # backed off: announce
    assert node.gm is not None and node.zm is not None
    return node


def addressed_here(mtype: int, payload: Any) -> Any:
    if mtype == m.DELIVER:
        kind, dest = m.Dest.NODE, 1
    else:
        kind, dest = (m.Dest.GRID if mtype in GRID_TYPES else m.Dest.ZONE), None
    return packed(m.Envelope(kind, 0, 0, dest, (100.0, 100.0), 0, 0, GeoHeader(),
                             payload).to_wire())


def undecodable(mtype: int, body: Any) -> bool:
    """True if the body is malformed where this node reads it (so a drop is due)."""
    try:
        if mtype == m.ANNOUNCE:
            m.Announce.from_wire(body)
        elif mtype == m.RESIGN:
            m.Resign.from_wire(body)
        else:
            env = m.Envelope.from_wire(body)
            here = (env.kind is m.Dest.NODE and env.dest == 1) or \
                (env.kind is not m.Dest.NODE and (env.ax, env.ay) == (0, 0))
            if here:
                PAYLOAD_OF[mtype].from_wire(env.payload)
    except ValueError:
        return True
    return False


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(sorted(m.KINDS)), st.data())
def test_a_manager_fed_malformed_bodies_counts_drops_and_never_raises(
        mtype: int, data: st.DataObject) -> None:
    node = manager_node()
    if mtype in (m.ANNOUNCE, m.RESIGN):
        valid = FLOODS[0] if mtype == m.ANNOUNCE else FLOODS[1]
        base = packed(valid.to_wire())
    else:
        sample = next(p for p in PAYLOADS if isinstance(p, PAYLOAD_OF[mtype]))
        base = addressed_here(mtype, sample.to_wire())
    body = _mutate(base, data) if data.draw(st.booleans()) else data.draw(anything)
    before = node.drops["malformed"]
    node.handle(FrameReceived(2.0, 2, Message(mtype, MessageId(2, 0, 7), body, ttl=8)))
    if undecodable(mtype, body):
        assert node.drops["malformed"] == before + 1


FIELD_VALUES = st.one_of(st.integers(-(2**40), 2**40), st.floats(allow_nan=True),
                         st.booleans(), st.none(), st.sampled_from([m.Dest.ZONE, 1.0, -0.0]),
                         st.text(max_size=3), st.binary(max_size=3))


@given(FIELD_VALUES, st.integers(-10, 10), st.integers(-10, 10))
@settings(max_examples=400)
def test_field_fast_paths_accept_exactly_what_bodies_accepts(value: Any, lo: int,
                                                              hi: int) -> None:
    """``Fields.integer``/``node``/``number`` take a plain int or float without a detour
    through ``meshsub.core.bodies``: the same value is returned and the same inputs are
    refused (booleans, NaN, out of range, other types) as by the checker itself."""
    from meshsub.core import bodies

    for read, check in ((lambda f: f.integer(lo, hi), lambda v: bodies.integer(v, "x", lo, hi)),
                        (lambda f: f.node(), lambda v: bodies.node(v, "x")),
                        (lambda f: f.number(), lambda v: bodies.number(v, "x"))):
        try:
            want: Any = check(value)
        except ValueError:
            want = ValueError
        try:
            got: Any = read(m.Fields([value], 1, "t"))
        except ValueError:
            got = ValueError
        assert got == want and type(got) is type(want)
