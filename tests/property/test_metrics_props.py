"""Fuzzing the metrics boundaries: the HTTP request head a client sends, the
``metrics.listen`` an operator writes, and whatever shape a status takes.

Each must answer with its own refusal (``(None, None)``, one ``ConfigError`` line) or
an exposition the reference parser reads, never another exception.
"""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from meshsub.protocols.flooding import Flooding
from meshsub.runtime.config import ConfigError, parse_config
from meshsub.runtime.metrics import FAMILIES, MAX_LABEL_VALUES, render
from meshsub.runtime.metricsserver import _request_line

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
KEY = "3f8a2c71d94be05a6f1e8d7c2b9a4e3f"

scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(),
                    st.text(max_size=20))
values = st.recursive(scalars, lambda kids: st.one_of(
    st.lists(kids, max_size=4), st.dictionaries(st.text(max_size=70), kids, max_size=6)),
    max_leaves=30)
SECTIONS = ["admission", "batman", "control", "counters", "discovery", "drops", "energy",
            "epoch", "frames", "link", "location", "metrics", "mqtt", "name", "node",
            "protocol", "replay", "telemetry", "transmissions", "uptime_s"]


@SETTINGS
@given(st.binary(max_size=300))
def test_any_request_head_is_a_request_line_or_none(head: bytes) -> None:
    method, target = _request_line(head)
    assert (method is None) == (target is None)


@settings(SETTINGS, max_examples=25)  # a render and a parse cost ~40 ms here
@given(st.dictionaries(st.sampled_from(SECTIONS), values, max_size=12),
       st.lists(st.dictionaries(st.sampled_from(["node", "lq"]), scalars), max_size=5))
def test_any_status_renders_an_exposition_the_parser_reads(
        status: dict[str, Any], neighbors: list[dict[str, Any]]) -> None:
    text = render(status, neighbors)
    families = list(text_string_to_metric_families(text))
    assert {f.name for f in families} == {f.name.removesuffix("_total") for f in FAMILIES}
    for family in families:
        assert len(family.samples) <= max(MAX_LABEL_VALUES, 6)


@SETTINGS
@given(st.text(max_size=60), st.booleans())
def test_any_listen_value_is_an_address_or_one_line(listen: str, allow_remote: bool) -> None:
    doc = {"node": {"id": 1, "name": "n1"}, "protocol": {"name": "flooding"},
           "security": {"current_key": 1, "keys": {"1": KEY}},
           "metrics": {"listen": listen, "allow_remote": allow_remote}}
    try:
        cfg = parse_config(doc, protocol_lookup=lambda _name: Flooding)
    except ConfigError as exc:
        assert str(exc).startswith("metrics.listen: ") and "\n" not in str(exc)
        return
    if cfg.metrics.listen:
        assert 1 <= cfg.metrics.port <= 65535 and cfg.metrics.host
