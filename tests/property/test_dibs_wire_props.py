"""DIBS's and DR's message decoders: every message round-trips, and random values, mutated
valid messages, truncated or padded lists raise ``BodyError`` (a ValueError) only, which the
protocols count as ``malformed`` drops; fed to a node, no body raises."""

from __future__ import annotations

import contextlib
from typing import Any

import msgpack
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsub.core.api import FrameReceived, Message, MessageId
from meshsub.core.syntax import parse_event, parse_subscription
from meshsub.protocols import dr
from meshsub.protocols.dibs import DIBS, DIBSParams
from meshsub.protocols.dibs import messages as m

K = 64
EVENT = parse_event('t key="00000000000000ff" note="x"')
SUB = parse_subscription('t key>="0000000000000000" key<="00000000000fffff"')
HB = m.Heartbeat(False, "0101", 3, 5, 1, False,
                 (m.DistEntry(3, 2, 5, 77), m.DistEntry(9, 4, None, 1)), ((6, 0), (8, 2)), 1.0)
QUERY = m.Query(4, "s1", 4, 9, 0, 2**20 - 1, 3, "011", 120.0, SUB)
DIBS_MSGS: list[tuple[Any, Any]] = [
    (HB, lambda w: m.Heartbeat.decode(w)),
    (m.Heartbeat(True, "", 3, None, 0, False, (), (), 0.5), lambda w: m.Heartbeat.decode(w)),
    (m.AttachReq(m.Reason.REPAIR, 3, "01"), lambda w: m.AttachReq.decode(w)),
    (m.AttachReq(m.Reason.INITIAL, None, None), lambda w: m.AttachReq.decode(w)),
    (m.AttachAck(2, "0101", 3), lambda w: m.AttachAck.decode(w)),
    (m.Publish(3, 2**63 + 5, EVENT, 1.5), lambda w: m.Publish.decode(w, K)),
    (m.Notify(3, "0101", 4, ("s1", "s2"), EVENT, 1.5, 3, 8), lambda w: m.Notify.decode(w)),
    (dr.LineQuery(4, "s1", 10.0, 20.0, 5, 9, 120.0, SUB), lambda w: dr.LineQuery.decode(w, K)),
    (dr.LinePublish(20.0, 7, EVENT, 1.0), lambda w: dr.LinePublish.decode(w, K)),
    (dr.GeoNotify(4, 1.0, 2.0, ("s1",), EVENT, 1.0), lambda w: dr.GeoNotify.decode(w)),
]

anything = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats()
    | st.text(max_size=6) | st.binary(max_size=9),
    lambda inner: st.lists(inner, max_size=11),
    max_leaves=30,
)


def packed(obj: Any) -> Any:
    return msgpack.unpackb(msgpack.packb(obj, use_bin_type=True), raw=False)


def wire(obj: Any) -> Any:
    try:
        return packed(obj.encode(K))
    except TypeError:
        return packed(obj.encode())


def test_every_message_round_trips() -> None:
    for obj, decode in DIBS_MSGS:
        assert decode(wire(obj)) == obj
    assert m.decode_slot(packed([3]), "DETACH") == 3
    assert m.Query.decode(wire(QUERY), K) == QUERY


@given(st.text(alphabet="01", max_size=70))
def test_vas_round_trip(va: str) -> None:
    assert m.va_decode(packed(m.va_wire(va)), "va") == va


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


@settings(max_examples=300, deadline=None)
@given(anything)
def test_random_values_raise_only_value_error(obj: Any) -> None:
    for _, decode in DIBS_MSGS:
        with contextlib.suppress(ValueError):
            decode(obj)
    with contextlib.suppress(ValueError):
        m.Query.decode(obj, K)


@settings(max_examples=400, deadline=None)
@given(st.sampled_from(range(len(DIBS_MSGS))), st.data())
def test_mutated_messages_raise_only_value_error(i: int, data: st.DataObject) -> None:
    obj, decode = DIBS_MSGS[i]
    with contextlib.suppress(ValueError):
        decode(_mutate(wire(obj), data))


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(sorted(m.DIBS_KINDS)), anything)
def test_a_node_counts_any_body_as_a_drop_or_handles_it(mtype: int, body: Any) -> None:
    node = DIBS(1, params=DIBSParams(), capabilities=("reference",))
    before = sum(node.drops.values())
    node.handle(FrameReceived(0.0, 2, Message(mtype, MessageId(2, 0, 1), body, ttl=1)))
    assert sum(node.drops.values()) >= before
