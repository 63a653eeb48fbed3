"""Fuzzing every boundary where another party's bytes enter the node (issue 25: "no bad
input stops a path").

Each boundary must answer anything with its own documented refusal (a counted drop
or a one-line error), never another exception: MQTT event payloads, control-socket
lines, batctl's JSON, beacon bodies, and the bodies of authenticated frames handed to
every installed protocol (an insider holds the key, so those bodies are hostile too).
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meshsub.core.api import (
    CoreType,
    FrameReceived,
    Message,
    MessageId,
    NeighborInfo,
    NeighborUp,
    Position,
)
from meshsub.core.registry import available, get_protocol
from meshsub.runtime import boundedjson
from meshsub.runtime.batman import (
    BatctlError,
    parse_dat_cache,
    parse_neighbors,
    parse_originators,
    parse_translation_global,
)
from meshsub.runtime.discovery import BeaconError, decode_beacon
from meshsub.runtime.mqtt import PayloadError, event_from_payload

SETTINGS = settings(max_examples=120, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                         st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=30))
json_values = st.recursive(json_scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=5), st.dictionaries(st.text(max_size=8), kids, max_size=5)),
    max_leaves=40)
msgpack_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**64 - 1),
                            st.floats(), st.text(max_size=30), st.binary(max_size=60))
bodies = st.recursive(msgpack_scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=6),
    st.dictionaries(st.one_of(st.text(max_size=6), st.integers(-5, 5)), kids, max_size=6)),
    max_leaves=40)


def nested(depth: int) -> bytes:
    return b'{"a":' + b"[" * depth + b"]" * depth + b"}"


# ------------------------------------------------------------------ MQTT payloads


@SETTINGS
@given(st.one_of(st.binary(max_size=300), json_values.map(lambda v: json.dumps(v).encode()),
                 st.integers(1, 50_000).map(nested)))
def test_mqtt_payloads_only_ever_payload_errors(payload: bytes) -> None:
    try:
        event = event_from_payload("app/t", payload)
    except PayloadError as err:
        assert err.reason in {"bad_json", "bad_attr", "too_large"}
        return
    assert event.topic == "app/t"


@SETTINGS
@given(st.binary(max_size=200), st.integers(0, 20))
def test_bounded_json_only_ever_value_errors(data: bytes, depth: int) -> None:
    for raw in (data, b"[" * (depth * 1000) + data):
        with contextlib.suppress(ValueError, UnicodeDecodeError):
            boundedjson.loads(raw, max_depth=8)


@SETTINGS
@given(json_values)
def test_bounded_json_agrees_with_json_below_the_bound(value: Any) -> None:
    text = json.dumps(value)
    if boundedjson.nesting(text.encode()) <= 16:
        assert boundedjson.loads(text) == json.loads(text)


# ------------------------------------------------------------------ batctl output

PARSERS = [parse_neighbors, parse_originators, parse_translation_global, parse_dat_cache]


@SETTINGS
@given(st.sampled_from(PARSERS), st.one_of(
    st.text(max_size=200), json_values.map(json.dumps),
    st.lists(st.dictionaries(st.sampled_from(
        ["neigh_address", "hard_ifname", "last_seen_msecs", "throughput", "orig_address",
         "best", "tq", "router", "client", "flags", "mac_address", "ip_address", "x"]),
        json_scalars, max_size=6), max_size=5).map(json.dumps),
    st.integers(1, 30_000).map(lambda d: "[" * d + "]" * d)))
def test_batctl_output_only_ever_batctl_errors(parser: Any, text: str) -> None:
    with contextlib.suppress(BatctlError):
        parser(text)


# ------------------------------------------------------------------ beacons


@SETTINGS
@given(bodies)
def test_beacon_bodies_only_ever_beacon_errors(body: Any) -> None:
    message = Message(CoreType.BEACON, MessageId(7, 1, 1), body, ttl=1)
    with contextlib.suppress(BeaconError):
        decode_beacon(message, 7, 0.0)


# ------------------------------------------------------------------ authenticated bodies


def _protocol(name: str) -> Any:
    cls = get_protocol(name)
    proto = cls(1, seed=1)
    proto.handle(NeighborUp(0.0, NeighborInfo(2, Position(10.0, 0.0), 1.0, name, ())))
    return proto


@pytest.mark.parametrize("name", available())
@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_every_protocol_answers_any_body_with_a_drop(name: str, data: st.DataObject) -> None:
    """An insider's frames are authenticated: the protocol is the last line. Whatever the
    type and body, ``handle`` returns actions (drops counted), it never raises."""
    proto = _protocol(name)
    types = [*sorted(proto.message_kinds), 0, 1, 15, 999]
    for i in range(data.draw(st.integers(1, 4))):
        mtype = data.draw(st.sampled_from(types))
        body = data.draw(bodies)
        message = Message(mtype, MessageId(2, data.draw(st.integers(0, 2**64 - 1)), i + 1),
                          body, hop=data.draw(st.integers(0, 255)),
                          ttl=data.draw(st.integers(0, 255)))
        proto.handle(FrameReceived(1.0 + i, 2, message))
