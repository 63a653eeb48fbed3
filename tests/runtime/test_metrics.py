"""The status-to-Prometheus mapping (meshsub.runtime.metrics), parsed by the reference parser.

prometheus_client's text parser is the one Prometheus' Python tooling uses;
a line it cannot read fails these tests. The daemon itself does not import it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from meshsub.runtime.metrics import (
    FAMILIES,
    LINK_STATES,
    MAX_LABEL_VALUES,
    MQTT_STATES,
    OTHER,
    render,
)

ROOT = Path(__file__).resolve().parents[2]
NAME = re.compile(r"meshsub_[a-z][a-z0-9_]*")


def status(**over: Any) -> dict[str, Any]:
    """A status shaped like ``Node.status()`` (the parts the metrics read)."""
    base: dict[str, Any] = {
        "node": 7, "name": "pi-7", "version": "0.1.0", "epoch": 1795729840, "uptime_s": 12.5,
        "protocol": {"protocol": "epidemic", "subscriptions": 2, "drops": {},
                     "reliable": {"sent": 3, "retransmitted": 1, "acked": 2, "given_up": 0,
                                  "ack_unknown": 0, "pending": 1},
                     "buffer": {"messages": 4, "capacity": 1000, "bytes": 900,
                                "max_bytes": 16_000_000}},
        "location": {"fix": True, "age_s": 0.8, "error_m": 3.5, "accepted": 9,
                     "rejected": {"hdop": 2}, "provider": {"connected": True}},
        "energy": {"fraction": 0.5, "on_mains": False},
        "link": {"state": "up", "counters": {"tx": 5, "tx_bytes": 500, "rx": 6,
                                             "rx_bytes": 600, "rx_queue_bytes": 0},
                 "drops": {"send_buffer_full": 1}, "receive_buffer": {"granted": 2097152}},
        "discovery": {"counters": {"rounds": 3, "received": 6, "neighbor_up": 2,
                                   "neighbor_down": 1}, "drops": {}},
        "mqtt": {"state": "connected", "queued": 0, "subscriptions": 1,
                 "counters": {"connects": 1, "published": 4, "dropped:queue_full": 2,
                              "rejected:bad_event": 1}},
        "outbox": 0, "held_publications": 0, "timers": 2,
        "frames": {"counters": {"frames_out": 5, "frames_in": 6, "messages_out": 5,
                                "messages_in": 6}, "transmitters": 1, "reassembly_bytes": 0},
        "admission": {"refused": {"bad_tag": 3}, "sources_throttled": 0},
        "drops": {"frame": {"bad_tag": 3}, "node": {}, "protocol": {"expired": 1},
                  "kernel": 4},
        "telemetry": {"records": 20, "buffered": 1, "dropped": 1, "deleted_records": 2,
                      "live": {"backlog_bytes": 100}},
        "control": {"requests": 2, "rejected:bad_json": 1},
        "metrics": {"scrapes": 3, "refused:timeout": 1},
    }
    base.update(over)
    return base


NEIGHBORS = [{"node": 2, "lq": 1.0}, {"node": 3, "lq": 0.5}]


def parse(text: str) -> dict[str, Any]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def samples(families: dict[str, Any], name: str) -> dict[tuple[tuple[str, str], ...], float]:
    family = families[name.removesuffix("_total")]
    return {tuple(sorted(s.labels.items())): s.value for s in family.samples}


def test_every_family_follows_the_naming_conventions() -> None:
    names = [f.name for f in FAMILIES]
    assert len(names) == len(set(names))
    for family in FAMILIES:
        assert NAME.fullmatch(family.name), family.name
        assert family.kind in ("counter", "gauge")
        assert family.name.endswith("_total") == (family.kind == "counter"), family.name
        assert family.help and "\n" not in family.help
        # no label an outsider could grow: only code-defined reasons, states, kinds
        assert family.label in ("", "reason", "state", "event", "outcome", "kind"), family.name
    assert not [n for n in names if "milli" in n or n.endswith(("_ms", "_kb", "_mb"))]


def test_a_full_status_parses_with_the_reference_parser() -> None:
    text = render(status(), NEIGHBORS)
    families = parse(text)
    assert set(families) == {f.name.removesuffix("_total") for f in FAMILIES}
    assert samples(families, "meshsub_info") == {
        (("name", "pi-7"), ("node", "7"), ("protocol", "epidemic"), ("version", "0.1.0")): 1.0}
    assert samples(families, "meshsub_neighbors") == {(): 2.0}
    assert samples(families, "meshsub_neighbor_link_quality_min_ratio") == {(): 0.5}
    assert samples(families, "meshsub_neighbor_link_quality_mean_ratio") == {(): 0.75}
    assert samples(families, "meshsub_link_state") == {
        (("state", s),): 1.0 if s == "up" else 0.0 for s in LINK_STATES}
    assert samples(families, "meshsub_mqtt_state")[(("state", "connected"),)] == 1.0
    assert samples(families, "meshsub_mqtt_connected") == {(): 1.0}
    assert samples(families, "meshsub_mqtt_drops_total") == {(("reason", "queue_full"),): 2.0}
    assert samples(families, "meshsub_kernel_drops_total") == {(): 4.0}
    assert samples(families, "meshsub_protocol_drops_total") == {(("reason", "expired"),): 1.0}
    assert samples(families, "meshsub_position_fix_age_seconds") == {(): 0.8}
    assert samples(families, "meshsub_buffer_bytes") == {(): 900.0}
    assert samples(families, "meshsub_telemetry_dropped_records_total") == {(): 3.0}
    assert samples(families, "meshsub_neighbor_events_total") == {
        (("event", "down"),): 1.0, (("event", "up"),): 2.0}
    assert samples(families, "meshsub_reliable_messages_total")[(("outcome", "acked"),)] == 2.0
    assert (("outcome", "pending"),) not in samples(families, "meshsub_reliable_messages_total")
    assert samples(families, "meshsub_metrics_refused_total") == {(("reason", "timeout"),): 1.0}
    for family in FAMILIES:  # types survive the round trip
        assert families[family.name.removesuffix("_total")].type == family.kind


def test_counters_start_at_zero_while_their_component_exists() -> None:
    fresh = status(mqtt={"state": "connecting", "queued": 0, "subscriptions": 0,
                         "counters": {}}, control={})
    families = parse(render(fresh, []))
    assert samples(families, "meshsub_mqtt_connects_total") == {(): 0.0}
    assert samples(families, "meshsub_control_requests_total") == {(): 0.0}
    assert samples(families, "meshsub_mqtt_connected") == {(): 0.0}


def test_a_partly_started_daemon_renders_what_it_knows() -> None:
    """Sections a daemon does not have (no link yet, no location, no SCF buffer) give
    families without samples, never an error or an invented value."""
    bare = {"node": 1, "name": "n1", "version": "0.1.0", "protocol": {"protocol": "flooding"},
            "link": None, "mqtt": None, "location": {"source": "none", "fix": False},
            "telemetry": {"enabled": False}, "metrics": None}
    families = parse(render(bare, []))
    assert samples(families, "meshsub_link_up") == {}
    assert samples(families, "meshsub_buffer_messages") == {}
    assert samples(families, "meshsub_position_fix") == {(): 0.0}
    assert samples(families, "meshsub_position_fix_age_seconds") == {}
    assert samples(families, "meshsub_neighbors") == {(): 0.0}
    assert samples(families, "meshsub_neighbor_link_quality_min_ratio") == {}


def test_label_values_stay_bounded_and_escaped() -> None:
    """Reasons are code-defined, but a bug or a future reason built from input must not
    give a scraper an unbounded or unparsable label set: the excess folds into other."""
    reasons = {f"reason_{i:04d}": i + 1 for i in range(1000)}
    hostile = {'a"b': 5, "new\nline": 6, "é": 7, "x" * 100: 8, OTHER: 9}
    text = render(status(drops={"frame": {**reasons, **hostile}, "node": {}, "protocol": {},
                                "kernel": 0}), NEIGHBORS)
    got = samples(parse(text), "meshsub_frame_drops_total")
    assert len(got) == MAX_LABEL_VALUES
    total = sum(reasons.values()) + sum(hostile.values())
    assert sum(got.values()) == total  # nothing lost, only folded
    assert (("reason", "reason_0999"),) in got  # the largest are kept by name
    assert (("reason", "reason_0000"),) not in got
    assert got[(("reason", OTHER),)] == total - sum(range(1000 - MAX_LABEL_VALUES + 2, 1001))


def test_an_unknown_state_shows_as_other() -> None:
    families = parse(render(status(mqtt={"state": "reticulating", "counters": {}}), []))
    got = samples(families, "meshsub_mqtt_state")
    assert got[(("state", OTHER),)] == 1.0
    assert all(got[(("state", s),)] == 0.0 for s in MQTT_STATES)


def test_the_operations_page_describes_every_metric() -> None:
    """The table in docs/operations.md is the metrics' reference: name, type, label and
    meaning exactly as the code defines them."""
    page = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(meshsub_[a-z0-9_]+)` \| (\w+) \| `?(\w*)`? \| (.+) \|$", page,
                      flags=re.M)
    assert rows == [(f.name, f.kind, f.label, f.help) for f in FAMILIES]


def test_the_grafana_dashboard_uses_only_exposed_metrics() -> None:
    dashboard = ROOT / "deploy" / "grafana" / "meshsub-dashboard.json"
    doc = json.loads(dashboard.read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in doc["panels"] for t in p.get("targets", [])]
    assert exprs
    used = {n for e in exprs for n in NAME.findall(e)}
    assert used, "the dashboard queries no meshsub metric"
    assert used <= {f.name for f in FAMILIES}, used - {f.name for f in FAMILIES}


@pytest.mark.parametrize("value,text", [(3.0, "3"), (0.25, "0.25"), (float("nan"), "NaN")])
def test_values_are_written_as_prometheus_reads_them(value: float, text: str) -> None:
    out = render({"uptime_s": value}, [], [f for f in FAMILIES
                                           if f.name == "meshsub_uptime_seconds"])
    assert out.splitlines()[-1] == f"meshsub_uptime_seconds {text}"
