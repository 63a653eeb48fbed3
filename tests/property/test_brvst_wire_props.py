"""BRVST's message codecs: every message round-trips, and every decoder answers malformed
input (random values, mutated valid messages, truncated or padded lists) with ValueError only,
which the protocol turns into a counted drop; fed to a node, no body raises."""

from __future__ import annotations

import contextlib
import math
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
from meshsub.core.grid import Cell
from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.protocols.brvst import Brvst, BrvstParams
from meshsub.protocols.brvst import messages as m
from meshsub.protocols.brvst.grid_manager import GridManager
from meshsub.protocols.brvst.schema import Schema
from meshsub.protocols.brvst.zone_manager import Cached, Relation, ZoneManager, ZoneSummary
from meshsub.protocols.brvst.zones import Zone

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


# ------------------------------------------------------------------ hand-over state

SCHEMA = Schema.from_params(BrvstParams())


def grid_manager() -> GridManager:
    return GridManager(Cell(0, 0), 1, SCHEMA, max_subs=16, max_bytes=1 << 20, dedupe=64)


def zone_manager() -> ZoneManager:
    return ZoneManager(Zone(0, 0), 1, SCHEMA, sof_max=16, zones_max=8, zones_bytes=1 << 16,
                       cache_max=16, cache_bytes=1 << 20, advert_max=8, dedupe=64)


def handed_over() -> tuple[list[Any], list[Any]]:
    """A grid manager's and a zone manager's STATE_XFER blobs, every kind of item in them."""
    g = grid_manager()
    g.upsert((5, "s"), SUB, (1.0, 2.0), 50.0)
    g.upsert((6, "t"), parse_subscription("t a2_lo>=10"), (3.0, 4.0), 40.0)
    rsv = tuple(g.representative())
    z = zone_manager()
    z.apply_grsv(Cell(0, 1), m.SummaryUpdate(0, 1, SENDER, 3, 0, rsv, b""), 1.0)
    z.store_summary((Zone(1, 0), 5), ZoneSummary(5, (1.0, 2.0), 1, 4, rsv, Relation.NEIGHBOR,
                                                 2.0, 3.0))
    z.learn_publication_zone(Zone(1, 1), 4.0)
    z.mark_advertised((7, b"k"), [1, 2], 5.0)
    z.cache_insert(Cached(PUB, SCHEMA.view(PUB.event.attrs), Zone(0, 0), Cell(0, 0), 6.0,
                          106.0, 2, {(Cell(1, 1), 4)}, {(Zone(1, 0), 5)}))
    return g.blob(10.0, 1 << 16)[0], z.blob(10.0, 1 << 16)[0]


GM_BLOB, ZM_BLOB = handed_over()


def test_hand_over_blobs_load_whole() -> None:
    g, z = grid_manager(), zone_manager()
    assert g.load(packed(GM_BLOB), 10.0) == 0 and len(g.table) == 2
    assert z.load(packed(ZM_BLOB), 10.0) == 0
    assert len(z.sof) == len(z.summaries) == len(z.push) == len(z.adverts) == len(z.cache) == 1


def finite_state(g: GridManager, z: ZoneManager) -> bool:
    """Every time and position a loaded manager holds is a finite number."""
    numbers: list[float] = []
    for rec in g.table.values():
        numbers += [rec.expiry, *rec.pos]
    for sof in z.sof.values():
        numbers += [sof.rx, sof.last_match, *sof.pos]
    for s in z.summaries.values():
        numbers += [s.rx, s.last_match, *s.pos]
    numbers += [t for _zone, t in z.push.items()]
    numbers += [t for _key, bands in z.adverts.items() for t in bands.values()]
    numbers += [t for c in z.cache.values() for t in (c.t_insert, c.t_expire)]
    return all(math.isfinite(x) for x in numbers)


EDGES: st.SearchStrategy[Any] = st.sampled_from(
    [math.inf, -math.inf, math.nan, 2**64 - 1, -(2**63), -1, 0, True, None, "x", b"x", [], {},
     1e300]) | anything


def _replace_a_field(blob: list[Any], data: st.DataObject) -> list[Any]:
    """One field of one item of one part replaced by an edge value (the places a blind
    mutation of the nested blob seldom reaches)."""
    out: list[Any] = packed(blob)
    parts = [i for i in range(1, len(out)) if out[i]]
    i = data.draw(st.sampled_from(parts))
    j = data.draw(st.integers(0, len(out[i]) - 1))
    k = data.draw(st.integers(0, len(out[i][j]) - 1))
    out[i][j][k] = data.draw(EDGES)
    return out


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_mutated_hand_over_blobs_are_bad_items_never_exceptions(data: st.DataObject) -> None:
    """A STATE_XFER's state is read item by item off the wire: whatever an item holds
    (infinities and NaN included, which ``int()`` raises on or which would make a lease
    that never runs out), loading counts it as bad or installs finite state."""
    g, z = grid_manager(), zone_manager()
    for manager, blob in ((g, GM_BLOB), (z, ZM_BLOB)):
        wire = _replace_a_field(blob, data) if data.draw(st.booleans()) \
            else _mutate(packed(blob), data)
        if isinstance(wire, list | tuple):
            assert manager.load(wire, 10.0) >= 0
    assert finite_state(g, z)


def test_a_manager_counts_bad_hand_over_items_from_a_conflict_loser() -> None:
    """The loser of a manager conflict sends its state to the winner, which merges it:
    infinite and NaN fields are counted drops (``xfer_bad_item``), not exceptions."""
    bad_gm = [0, [[float("inf"), "s", SUB.to_wire(), 1.0, 2.0, 3.0],
                  [7, "s", SUB.to_wire(), 1.0, 2.0, float("nan")]]]
    bad_zm = [1, [[float("inf"), 0, 9, 1.0, 1.0, 1, 1, [], 0.0, 0.0]], [],
              [[0, 1, float("-inf")]], [[7, b"k", [[1, float("nan")]]]], []]
    for level, blob in ((1, bad_gm), (2, bad_zm)):
        node = manager_node()
        kind = m.Dest.GRID if level == 1 else m.Dest.ZONE
        body = addressed_here(m.STATE_XFER, m.StateXfer(level, 0, 0, 7, 2, blob).to_wire())
        body[0] = int(kind)
        node.handle(FrameReceived(2.0, 2, Message(m.STATE_XFER, MessageId(2, 0, 7), body, ttl=8)))
        assert node.drops["xfer_bad_item"] == (2 if level == 1 else 3)
