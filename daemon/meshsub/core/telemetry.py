"""The telemetry record schema, shared by every driver and by the evaluation.

One record is one flat JSON object (one line of a JSON Lines file). The fields
map one to one onto the OpenTelemetry log model: ``ts_ns`` is the timestamp,
``event`` the event name, ``run``/``protocol``/``node`` the resource, the rest
attributes. ``docs/telemetry.md`` is the prose version of this module.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from meshsub.core.api import Message, MsgKind, NodeId, TelemetryValue

EVENTS: Final = frozenset(
    {
        "publish",  # an application published an event (carries topic + content)
        "subscribe",  # an application subscribed (carries sub_id + content)
        "unsubscribe",
        "tx",  # one transmission (peer = destination, None for a broadcast)
        "rx",  # one frame accepted from a neighbour (peer = sender)
        "deliver",  # an event handed to a local subscription
        "drop",  # anything discarded, with a reason
        "neighbor_up",
        "neighbor_down",
        "position",
        "broker",  # a protocol-specific role change (e.g. a B-SUB/HESPER broker)
        "counter",  # a periodic counter snapshot (name in reason, value in bytes)
        "state",  # a gauge of state a node holds: store, entries, bytes
        "member",  # the node joined or left a group (group; reason "join" or "leave")
    }
)

# field name -> accepted JSON types. ``None`` is always accepted for attributes.
RESOURCE_FIELDS: Final[Mapping[str, tuple[type, ...]]] = {
    "run": (str,),
    "node": (int,),
    "protocol": (str,),
    "ts_ns": (int,),
    "event": (str,),
}
ATTRIBUTE_FIELDS: Final[Mapping[str, tuple[type, ...]]] = {
    "rec": (int,),  # per-(node, epoch) record sequence: detects loss and duplication
    "epoch": (int,),  # the node's boot epoch
    "event_id": (str,),  # MessageId text of the message concerned
    "msg_kind": (str,),  # MsgKind value
    "msg_type": (int,),
    "bytes": (int,),
    "hop": (int,),
    "peer": (int,),
    "sub_id": (str,),
    "reason": (str,),
    "topic": (str,),
    "content": (str,),  # text syntax of the event (publish) or subscription (subscribe)
    "latency_s": (float, int),
    "x": (float, int),
    "y": (float, int),
    "role": (str,),
    "store": (str,),  # state: which table or buffer (e.g. "buffer", "subscriptions")
    "entries": (int,),  # state: how many entries it holds
    "group": (str,),  # member: the group's name (a protocol's own, e.g. "tg:17")
    "count": (int,),  # drop: how many drops this summary record stands for (absent: one)
}
FIELDS: Final = {**RESOURCE_FIELDS, **ATTRIBUTE_FIELDS}
MSG_KINDS: Final = frozenset(k.value for k in MsgKind)


class TelemetryError(ValueError):
    """A record that does not follow the schema; the message says which field."""


def make_record(
    *,
    run: str,
    node: int,
    protocol: str,
    ts_ns: int,
    event: str,
    attrs: Mapping[str, TelemetryValue],
) -> dict[str, Any]:
    """Build a record, dropping unset attributes (so lines stay short)."""
    record: dict[str, Any] = {
        "run": run,
        "node": node,
        "protocol": protocol,
        "ts_ns": ts_ns,
        "event": event,
    }
    for key, value in attrs.items():
        if value is not None:
            record[key] = value
    return record


def frame_attrs(
    message: Message, kind: str, nbytes: int, peer: NodeId | None = None
) -> dict[str, TelemetryValue]:
    """Attributes of a ``tx`` or ``rx`` record, the same in every driver.

    ``peer`` is the destination of a unicast ``tx``, the transmitter of an
    ``rx``, and absent for a broadcast ``tx``; ``bytes`` counts every frame
    of the transmission (all fragments of a segmented message).
    """
    attrs: dict[str, TelemetryValue] = {
        "bytes": nbytes,
        "msg_kind": kind,
        "msg_type": message.type,
        "event_id": str(message.id),
        "hop": message.hop,
    }
    if peer is not None:
        attrs["peer"] = peer
    return attrs


def validate_record(record: Any) -> dict[str, Any]:
    """Check ``record`` against the schema; return it or raise ``TelemetryError``.

    Unknown fields are rejected, so that a typo in a driver cannot silently
    produce a column the evaluation never reads.
    """
    if not isinstance(record, dict):
        raise TelemetryError("record is not a JSON object")
    for name in RESOURCE_FIELDS:
        if name not in record:
            raise TelemetryError(f"missing field {name!r}")
    for name, value in record.items():
        types = FIELDS.get(name)
        if types is None:
            raise TelemetryError(f"unknown field {name!r}")
        if value is None and name in ATTRIBUTE_FIELDS:
            continue
        if isinstance(value, bool) or not isinstance(value, types):
            raise TelemetryError(f"field {name!r} has type {type(value).__name__}")
    if record["event"] not in EVENTS:
        raise TelemetryError(f"unknown event {record['event']!r}")
    kind = record.get("msg_kind")
    if kind is not None and kind not in MSG_KINDS:
        raise TelemetryError(f"unknown msg_kind {kind!r}")
    if record["ts_ns"] < 0:
        raise TelemetryError("field 'ts_ns' is negative")
    count = record.get("count")
    if count is not None and count < 1:
        raise TelemetryError("field 'count' is not positive")
    return record


def parse_line(line: str) -> dict[str, Any]:
    """Parse and validate one JSON Lines line; raise ``TelemetryError`` if bad."""
    try:
        record = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise TelemetryError(f"not JSON: {exc.msg if hasattr(exc, 'msg') else exc}") from None
    return validate_record(record)


def dump_line(record: Mapping[str, Any]) -> str:
    """One compact JSON line (no trailing newline)."""
    return json.dumps(record, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
