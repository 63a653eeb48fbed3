"""The daemon's status as Prometheus metrics (the text exposition format, version 0.0.4).

Every value comes from the same two calls ``meshsubctl status`` and
``meshsubctl neighbors`` answer from (``Node.status``, ``Node.neighbors``):
this module only says which status field is which metric, so the two views
cannot drift apart. ``FAMILIES`` is the whole list; docs/operations.md
describes each one (a test compares the two).

Naming follows Prometheus' conventions: the ``meshsub_`` prefix, ``_total``
for counters, base units in the name (``_seconds``, ``_bytes``, ``_meters``,
``_ratio``). Labels name reasons, states and kinds the code defines, never
anything the mesh chooses (no node ids, no addresses): an insider must not be
able to grow a scraper's series by inventing identities. As a second guard,
every labelled family keeps at most ``MAX_LABEL_VALUES`` distinct values per
scrape and folds the rest into ``other``; a value that is not a plain
identifier is folded there too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

CONTENT_TYPE: Final = "text/plain; version=0.0.4; charset=utf-8"
MAX_LABEL_VALUES: Final = 32
"""Distinct label values per family and scrape; the rest is summed under ``other``."""
OTHER: Final = "other"
_LABEL_VALUE: Final = re.compile(r"[A-Za-z0-9_.:-]{1,64}")
LINK_STATES: Final = ("stopped", "waiting", "down", "up", "error")
"""``meshsub.runtime.link.LinkState`` values (kept here: a stateset shows every state)."""
MQTT_STATES: Final = ("stopped", "connecting", "connected", "disconnected")
"""``MqttBridge.state`` values."""

Status = Mapping[str, Any]
Neighbors = Sequence[Mapping[str, Any]]
Sample = tuple[dict[str, str], float]


@dataclass(frozen=True, slots=True)
class Family:
    """One metric: its name, type, help text and how to read it from the status."""

    name: str
    kind: str
    """``counter`` or ``gauge``."""
    help: str
    samples: Callable[[Status, Neighbors], Iterable[Sample]]
    label: str = ""
    """The one label of a labelled family ("" for none)."""


# --------------------------------------------------------------------- readers


def lookup(status: Status, path: str) -> Any:
    """The value at dotted ``path`` in nested mappings, or ``None`` where it is missing."""
    value: Any = status
    for key in path.split("."):
        if not isinstance(value, Mapping):
            return None
        value = value.get(key)
    return value


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float):
        return float(value)
    return None


def _value(path: str, scale: float = 1.0) -> Callable[[Status, Neighbors], Iterable[Sample]]:
    def read(status: Status, _neighbors: Neighbors) -> Iterable[Sample]:
        number = _number(lookup(status, path))
        return [] if number is None else [({}, number * scale)]
    return read


def _count(path: str) -> Callable[[Status, Neighbors], Iterable[Sample]]:
    """A counter kept in a ``Counter``: absent means 0 while its mapping exists (a series
    that starts at 0 lets ``rate()`` see the first increment)."""
    parent, _, key = path.rpartition(".")

    def read(status: Status, _neighbors: Neighbors) -> Iterable[Sample]:
        found = lookup(status, parent)
        if not isinstance(found, Mapping):
            return []
        number = _number(found.get(key, 0))
        return [] if number is None else [({}, number)]
    return read


def _sum(*paths: str) -> Callable[[Status, Neighbors], Iterable[Sample]]:
    """The sum of the ``Counter`` values at ``paths`` (no sample if none of them exists)."""
    parts = [_count(p) for p in paths]

    def read(status: Status, neighbors: Neighbors) -> Iterable[Sample]:
        found = [n for part in parts for _, n in part(status, neighbors)]
        return [({}, sum(found))] if found else []
    return read


def _mapping(path: str, label: str, *, prefix: str = "", exclude: Iterable[str] = ()
             ) -> Callable[[Status, Neighbors], Iterable[Sample]]:
    """One sample per key of the mapping at ``path`` (keys starting with ``prefix``,
    the prefix removed), the key as the value of ``label``."""
    skip = frozenset(exclude)

    def read(status: Status, _neighbors: Neighbors) -> Iterable[Sample]:
        found = lookup(status, path)
        if not isinstance(found, Mapping):
            return []
        pairs = [(str(k)[len(prefix):], n) for k, v in found.items()
                 if str(k).startswith(prefix) and str(k) not in skip
                 and (n := _number(v)) is not None]
        return bounded(label, pairs)
    return read


def _stateset(path: str, label: str, states: Sequence[str]
              ) -> Callable[[Status, Neighbors], Iterable[Sample]]:
    """1 for the current state, 0 for every other known one (``other`` if unknown)."""
    def read(status: Status, _neighbors: Neighbors) -> Iterable[Sample]:
        current = lookup(status, path)
        if current is None:
            return []
        known = str(current) in states
        out = [({label: s}, 1.0 if s == current else 0.0) for s in states]
        return out if known else [*out, ({label: OTHER}, 1.0)]
    return read


def _equals(path: str, wanted: str) -> Callable[[Status, Neighbors], Iterable[Sample]]:
    def read(status: Status, _neighbors: Neighbors) -> Iterable[Sample]:
        current = lookup(status, path)
        return [] if current is None else [({}, 1.0 if current == wanted else 0.0)]
    return read


def _neighbor_count(_status: Status, neighbors: Neighbors) -> Iterable[Sample]:
    return [({}, float(len(neighbors)))]


def _link_quality(pick: Callable[[list[float]], float]
                  ) -> Callable[[Status, Neighbors], Iterable[Sample]]:
    def read(_status: Status, neighbors: Neighbors) -> Iterable[Sample]:
        values = [n for row in neighbors if (n := _number(row.get("lq"))) is not None]
        return [({}, pick(values))] if values else []
    return read


def _length(path: str) -> Callable[[Status, Neighbors], Iterable[Sample]]:
    def read(status: Status, _neighbors: Neighbors) -> Iterable[Sample]:
        found = lookup(status, path)
        return [({}, float(len(found)))] if isinstance(found, list) else []
    return read


def _info(status: Status, _neighbors: Neighbors) -> Iterable[Sample]:
    labels = {"node": str(status.get("node", "")), "name": str(status.get("name", "")),
              "version": str(status.get("version", "")),
              "protocol": str(lookup(status, "protocol.protocol") or "")}
    return [(labels, 1.0)]


def bounded(label: str, pairs: Iterable[tuple[str, float]]) -> list[Sample]:
    """Samples for ``label`` = each key: at most ``MAX_LABEL_VALUES`` values (the largest
    kept), the rest and every key that is not a plain identifier summed as ``other``."""
    plain: dict[str, float] = {}
    other = 0.0
    has_other = False
    for key, number in pairs:
        if key != OTHER and _LABEL_VALUE.fullmatch(key):
            plain[key] = plain.get(key, 0.0) + number
        else:
            other += number
            has_other = True
    if len(plain) > MAX_LABEL_VALUES:
        ranked = sorted(plain.items(), key=lambda kv: (-kv[1], kv[0]))
        plain = dict(ranked[:MAX_LABEL_VALUES - 1])
        other += sum(v for _, v in ranked[MAX_LABEL_VALUES - 1:])
        has_other = True
    out = [({label: key}, number) for key, number in sorted(plain.items())]
    if has_other:
        out.append(({label: OTHER}, other))
    return out


# --------------------------------------------------------------------- families


def _c(name: str, help: str, read: Callable[[Status, Neighbors], Iterable[Sample]],
       label: str = "") -> Family:
    return Family(name, "counter", help, read, label)


def _g(name: str, help: str, read: Callable[[Status, Neighbors], Iterable[Sample]],
       label: str = "") -> Family:
    return Family(name, "gauge", help, read, label)


FAMILIES: Final[tuple[Family, ...]] = (
    # the daemon
    _g("meshsub_info", "The daemon: node id, name, version and protocol (always 1).", _info),
    _g("meshsub_uptime_seconds", "Seconds since the daemon started.", _value("uptime_s")),
    _g("meshsub_epoch", "The daemon's epoch (new at every start; message ids carry it).",
       _value("epoch")),
    # neighbours and the link
    _g("meshsub_neighbors", "Neighbours in the table now (beacons heard recently).",
       _neighbor_count),
    _g("meshsub_neighbor_link_quality_min_ratio",
       "The worst neighbour's link quality (0..1, beacons received of those expected).",
       _link_quality(min)),
    _g("meshsub_neighbor_link_quality_mean_ratio",
       "The mean link quality over all neighbours (0..1).",
       _link_quality(lambda v: sum(v) / len(v))),
    _c("meshsub_neighbor_events_total",
       "Neighbour table events (up, changed, down) since start.",
       _mapping("discovery.counters", "event", prefix="neighbor_"), "event"),
    _c("meshsub_beacons_sent_total", "Beacon rounds sent.", _count("discovery.counters.rounds")),
    _c("meshsub_beacons_received_total", "Beacons received from neighbours.",
       _count("discovery.counters.received")),
    _c("meshsub_discovery_drops_total", "Beacons and discovery peers dropped, by reason.",
       _mapping("discovery.drops", "reason"), "reason"),
    _c("meshsub_neighbors_refused_total",
       "New neighbour ids refused because the neighbour table was full.",
       _value("discovery.neighbors_refused")),
    _c("meshsub_beacons_stale_total", "Beacons older than one already seen from that node.",
       _value("discovery.stale_beacons")),
    _g("meshsub_batman_candidates", "One-hop originators batman-adv reports (batman mode).",
       _length("batman.one_hop")),
    _g("meshsub_link_up", "1 if the link can carry frames now, else 0.",
       _equals("link.state", "up")),
    _g("meshsub_link_state", "The link's state: 1 for the current one, 0 for the others.",
       _stateset("link.state", "state", LINK_STATES), "state"),
    _c("meshsub_link_sent_datagrams_total", "Datagrams the link sent.",
       _count("link.counters.tx")),
    _c("meshsub_link_sent_bytes_total", "Bytes the link sent (UDP payload).",
       _count("link.counters.tx_bytes")),
    _c("meshsub_link_received_datagrams_total", "Datagrams the link received.",
       _count("link.counters.rx")),
    _c("meshsub_link_received_bytes_total", "Bytes the link received (UDP payload).",
       _count("link.counters.rx_bytes")),
    _c("meshsub_link_drops_total", "Datagrams the link could not send or take, by reason.",
       _mapping("link.drops", "reason"), "reason"),
    _g("meshsub_link_receive_queue_bytes", "Bytes waiting in the socket's receive queue.",
       _value("link.counters.rx_queue_bytes")),
    _g("meshsub_link_receive_buffer_bytes", "The socket receive buffer the kernel granted.",
       _value("link.receive_buffer.granted")),
    _c("meshsub_kernel_drops_total",
       "Datagrams the kernel dropped for the daemon's socket (admission filter or full "
       "receive buffer).", _value("drops.kernel")),
    # frames and drops
    _c("meshsub_frames_sent_total", "Frames sent (a message may take several fragments).",
       _count("frames.counters.frames_out")),
    _c("meshsub_frames_received_total", "Frames received before authentication.",
       _count("frames.counters.frames_in")),
    _c("meshsub_messages_sent_total", "Messages sent (beacons and protocol messages).",
       _count("frames.counters.messages_out")),
    _c("meshsub_messages_received_total", "Messages received and authenticated.",
       _count("frames.counters.messages_in")),
    _c("meshsub_frame_drops_total", "Frames the codec refused, by reason.",
       _mapping("drops.frame", "reason"), "reason"),
    _c("meshsub_node_drops_total", "Messages the daemon dropped around the protocol, by reason.",
       _mapping("drops.node", "reason"), "reason"),
    _c("meshsub_protocol_drops_total", "Messages the protocol dropped, by reason.",
       _mapping("drops.protocol", "reason"), "reason"),
    _c("meshsub_admission_refusals_total",
       "Frames refused before or by authentication, by reason.",
       _mapping("admission.refused", "reason"), "reason"),
    _g("meshsub_admission_sources_throttled",
       "Sources whose authentication failures exhausted their budget now.",
       _value("admission.sources_throttled")),
    _g("meshsub_replay_transmitters", "Transmitters the replay window tracks.",
       _value("frames.transmitters")),
    _c("meshsub_replay_transmitters_evicted_total",
       "Transmitters evicted from the full replay table.", _value("frames.transmitters_evicted")),
    _c("meshsub_replay_refused_transmitters_total",
       "New transmitters refused because the replay table was full.",
       _value("replay.refused_transmitters")),
    _c("meshsub_replay_save_errors_total", "Failed saves of the replay state.",
       _value("replay.save_errors")),
    _c("meshsub_transmissions_total",
       "Protocol transmissions the kernel accepted, by kind (tx_broadcast, tx_unicast).",
       _mapping("transmissions", "kind"), "kind"),
    _g("meshsub_reassembly_bytes", "Bytes of fragments waiting for reassembly.",
       _value("frames.reassembly_bytes")),
    # queues
    _g("meshsub_outbox_events", "Local publications accepted and not yet handed to the "
       "protocol.", _value("outbox")),
    _g("meshsub_held_publications", "Publications waiting in the outbox for the link.",
       _value("held_publications")),
    _c("meshsub_publications_held_total", "Publications that had to wait for the link.",
       _value("held_publications_total")),
    _g("meshsub_timers", "Protocol timers pending.", _value("timers")),
    _g("meshsub_subscriptions", "Subscriptions the protocol holds (MQTT, control and local).",
       _value("protocol.subscriptions")),
    _g("meshsub_reliable_pending", "Reliable messages waiting for an acknowledgement.",
       _value("protocol.reliable.pending")),
    _c("meshsub_reliable_messages_total",
       "Reliable unicast messages, by outcome (sent, retransmitted, acked, given_up, "
       "ack_unknown).", _mapping("protocol.reliable", "outcome", exclude=("pending",)),
       "outcome"),
    # store-carry-forward buffer (store-carry-forward protocols only)
    _g("meshsub_buffer_messages", "Messages in the store-carry-forward buffer.",
       _value("protocol.buffer.messages")),
    _g("meshsub_buffer_capacity_messages", "The buffer's capacity in messages.",
       _value("protocol.buffer.capacity")),
    _g("meshsub_buffer_bytes", "Bytes the buffered messages cost (their stored form).",
       _value("protocol.buffer.bytes")),
    _g("meshsub_buffer_capacity_bytes", "The buffer's capacity in bytes.",
       _value("protocol.buffer.max_bytes")),
    # position
    _g("meshsub_position_fix", "1 if the daemon has a usable position fix, else 0.",
       _value("location.fix")),
    _g("meshsub_position_fix_age_seconds", "Age of the last accepted fix.",
       _value("location.age_s")),
    _g("meshsub_position_error_meters", "Estimated horizontal error of the position.",
       _value("location.error_m")),
    _c("meshsub_position_fixes_accepted_total", "Fixes the quality gate accepted.",
       _value("location.accepted")),
    _c("meshsub_position_fixes_rejected_total", "Fixes the quality gate rejected, by reason.",
       _mapping("location.rejected", "reason"), "reason"),
    _g("meshsub_position_satellites", "Satellites used in the last fix (gpsd, NMEA).",
       _value("location.sats")),
    _g("meshsub_position_source_connected",
       "1 if the position source (gpsd, the NMEA device) is connected, else 0.",
       _value("location.provider.connected")),
    # MQTT
    _g("meshsub_mqtt_connected", "1 if the bridge is connected to the broker, else 0.",
       _equals("mqtt.state", "connected")),
    _g("meshsub_mqtt_state", "The MQTT bridge's state: 1 for the current one.",
       _stateset("mqtt.state", "state", MQTT_STATES), "state"),
    _g("meshsub_mqtt_queued_deliveries", "Deliveries waiting for the broker.",
       _value("mqtt.queued")),
    _g("meshsub_mqtt_subscriptions", "Subscriptions applications made over MQTT.",
       _value("mqtt.subscriptions")),
    _c("meshsub_mqtt_events_accepted_total", "Events applications published over MQTT.",
       _count("mqtt.counters.events_accepted")),
    _c("meshsub_mqtt_deliveries_published_total", "Deliveries published to the broker.",
       _count("mqtt.counters.published")),
    _c("meshsub_mqtt_connects_total", "Connections to the broker.",
       _count("mqtt.counters.connects")),
    _c("meshsub_mqtt_disconnects_total", "Losses of the broker connection.",
       _count("mqtt.counters.disconnects")),
    _c("meshsub_mqtt_redelivered_total", "Deliveries published again after a reconnect.",
       _count("mqtt.counters.redelivered")),
    _c("meshsub_mqtt_broker_dropped_total",
       "Messages the broker reports it dropped (its queues were full).",
       _count("mqtt.counters.broker_dropped")),
    _c("meshsub_mqtt_errors_total", "Errors of the MQTT connection.",
       _count("mqtt.counters.errors")),
    _c("meshsub_mqtt_drops_total", "MQTT messages the bridge dropped, by reason.",
       _mapping("mqtt.counters", "reason", prefix="dropped:"), "reason"),
    _c("meshsub_mqtt_rejected_total", "MQTT messages the bridge refused, by reason.",
       _mapping("mqtt.counters", "reason", prefix="rejected:"), "reason"),
    # telemetry
    _c("meshsub_telemetry_records_total", "Telemetry records written to the spool.",
       _count("telemetry.records")),
    _c("meshsub_telemetry_dropped_records_total",
       "Telemetry records the spool dropped (full, or deleted to keep its byte cap).",
       _sum("telemetry.dropped", "telemetry.deleted_records")),
    _g("meshsub_telemetry_buffered_records", "Records waiting for the spool's next write.",
       _value("telemetry.buffered")),
    _g("meshsub_telemetry_feed_backlog_bytes",
       "Spooled telemetry the live feed has not shipped yet.",
       _value("telemetry.live.backlog_bytes")),
    _g("meshsub_telemetry_feed_connected",
       "1 if the live telemetry feed is connected to its broker, else 0.",
       _equals("telemetry.live.state", "connected")),
    _c("meshsub_telemetry_feed_lost_records_total",
       "Records the spool deleted before the live feed shipped them.",
       _value("telemetry.live.lost")),
    # energy
    _g("meshsub_energy_ratio", "Battery charge (0..1) where the device reports one.",
       _value("energy.fraction")),
    _g("meshsub_on_mains", "1 on mains power, 0 on battery (where the device reports it).",
       _value("energy.on_mains")),
    _c("meshsub_daemon_events_total",
       "The daemon's own events (deliveries by destination, reloads, errors), by event.",
       _mapping("counters", "event"), "event"),
    # the operator's interfaces
    _c("meshsub_control_requests_total", "Requests on the control socket.",
       _count("control.requests")),
    _c("meshsub_control_rejected_total", "Control requests refused, by reason.",
       _mapping("control", "reason", prefix="rejected:"), "reason"),
    _c("meshsub_metrics_scrapes_total", "Scrapes this endpoint answered.",
       _count("metrics.scrapes")),
    _c("meshsub_metrics_refused_total", "Requests this endpoint refused, by reason.",
       _mapping("metrics", "reason", prefix="refused:"), "reason"),
)


# --------------------------------------------------------------------- rendering


def _escape_help(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def _escape_label(text: str) -> str:
    return text.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _format(number: float) -> str:
    if math.isnan(number):
        return "NaN"
    if math.isinf(number):
        return "+Inf" if number > 0 else "-Inf"
    if number.is_integer() and abs(number) < 1e15:
        return str(int(number))
    return repr(number)


def _lines(family: Family, status: Status, neighbors: Neighbors) -> Iterator[str]:
    yield f"# HELP {family.name} {_escape_help(family.help)}"
    yield f"# TYPE {family.name} {family.kind}"
    for labels, number in family.samples(status, neighbors):
        if labels:
            inner = ",".join(f'{k}="{_escape_label(v)}"' for k, v in labels.items())
            yield f"{family.name}{{{inner}}} {_format(number)}"
        else:
            yield f"{family.name} {_format(number)}"


def render(status: Status, neighbors: Neighbors,
           families: Sequence[Family] = FAMILIES) -> str:
    """The exposition text of every family (a family without a value has no sample)."""
    out: list[str] = []
    for family in families:
        out.extend(_lines(family, status, neighbors))
    return "\n".join(out) + "\n"
