"""Deliveries queued when meshsubd stops or is killed arrive after its restart, once
each (root).

Two network namespaces A - B, each with its own mosquitto and a meshsubd
(``flooding``). B's application subscribes; then B's broker stops, so B's
daemon queues the deliveries of the events A publishes, and B's daemon is
stopped (SIGTERM, as systemd stops it for an upgrade) or killed (SIGKILL, as
the OOM killer or a crash ends it: no stop runs) with them still queued.
The events are marked seen in B's state and A never sends them again: only
what B's daemon kept in its store can bring them. After the broker and then
the daemon start again, B's application receives every one of them exactly
once, in order, ahead of a later event (docs/mqtt.md, "Deliveries"). Exactly
once because the kill lands while no delivery can be acknowledged (the broker
is down); a kill between a PUBACK and the commit that records it would publish
that delivery a second time (at least once, docs/mqtt.md).
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from mesh import ProtocolNode, protocol_mesh, wait_for
from rootmarks import namespace_marks

from meshsub.runtime.mqttwindow import INFLIGHT_MAX

pytestmark = namespace_marks()
PREFIX = "msub-drain"
EVENTS = 20


@pytest.fixture
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ProtocolNode]]:
    params = {"ttl": 4, "jitter": 0.005}
    with protocol_mesh(tmp_path_factory.mktemp("drain"), PREFIX, "10.96.0", "flooding",
                       {"a": ((), params), "b": ((), params)}, (("a", "b"),)) as nodes:
        yield nodes


def mqtt_status(node: ProtocolNode) -> dict[str, Any]:
    status = node.try_status()
    return {} if status is None else dict(status["mqtt"])


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["stop", "kill"])
def test_deliveries_queued_at_stop_or_kill_arrive_once_after_restart(
        pair: dict[str, ProtocolNode], sig: signal.Signals) -> None:
    a, b = pair["a"], pair["b"]
    wait_for(lambda: a.neighbours() == [b.node_id] and b.neighbours() == [a.node_id],
             "A and B neighbours")
    b.mqtt_pub("meshsub/sub/e2e-held", "held/#", retain=True)
    wait_for(lambda: any(r["sub_id"] == "e2e-held" for r in b.ctl("subscriptions")),
             "subscription on B")

    assert b.mosquitto is not None  # B's broker goes away: deliveries queue in the daemon
    b.mosquitto.send_signal(signal.SIGTERM)
    b.mosquitto.wait(15)
    b.mosquitto = None
    wait_for(lambda: mqtt_status(b).get("state") not in (None, "connected"),
             "B's bridge disconnected")
    for n in range(1, EVENTS + 1):  # each acknowledged by A's broker (mosquitto_pub -q 1)
        a.mqtt_pub("meshsub/pub/held/x", f'{{"n": {n}}}')
    wait_for(lambda: mqtt_status(b).get("queued") == EVENTS, "B's deliveries queued")
    assert mqtt_status(b)["kept"] == EVENTS  # in the store already, before any stop
    # SIGTERM: the 2 s drain cannot reach a broker; SIGKILL: no stop runs at all
    assert b.kill_daemon(sig) == (0 if sig == signal.SIGTERM else -signal.SIGKILL)

    b.start_broker()
    sub = b.mqtt_sub("meshsub/deliver/e2e-held/#")
    sub.wait_ready(b, "meshsub/deliver/e2e-held/probe")
    b.start_daemon()
    wait_for(lambda: len(sub.events()) >= EVENTS, "the kept deliveries on B")
    a.mqtt_pub("meshsub/pub/held/x", f'{{"n": {EVENTS + 1}}}')  # a later event as sentinel
    wait_for(lambda: sub.events(n=EVENTS + 1), "the sentinel on B")
    wait_for(lambda: mqtt_status(b).get("kept") == 0, "B's kept deliveries forgotten")
    got = [d["attrs"]["n"] for d in sub.events()]
    assert got == list(range(1, EVENTS + 2))  # each once, in order, the sentinel last
    counters = mqtt_status(b)["counters"]
    assert counters["restored"] == EVENTS
    assert counters.get("dropped:shutdown", 0) == 0
    assert counters.get("dropped:queue_full", 0) == 0


STREAM = 150
"""Events of the mid-stream kill: A publishes them one by one while B is killed."""


@pytest.fixture
def epidemic_pair(tmp_path_factory: pytest.TempPathFactory
                  ) -> Iterator[dict[str, ProtocolNode]]:
    params = {"request_timeout": 2.0}
    with protocol_mesh(tmp_path_factory.mktemp("stream"), "msub-strm", "10.96.1", "epidemic",
                       {"a": ((), params), "b": ((), params)}, (("a", "b"),)) as nodes:
        yield nodes


def test_a_kill_mid_stream_loses_no_delivery(epidemic_pair: dict[str, ProtocolNode]) -> None:
    """B's broker up and its application reading while A publishes: B's daemon is
    SIGKILLed mid-stream and started again after the last publication. Every event
    reaches B's application (store-carry-forward: what B never got, A hands over at the
    next contact; what B had marked seen, B's kept deliveries bring). A duplicate is
    possible only for a delivery the broker acknowledged in the instant before the kill
    (at least once there, docs/mqtt.md): at most the deliveries recorded together plus
    one in-flight window. With the broker up the queue is mostly empty when the kill
    lands (the printed line says how many kept deliveries were restored): the kept rows
    themselves are what the test above proves."""
    a, b = epidemic_pair["a"], epidemic_pair["b"]
    wait_for(lambda: a.neighbours() == [b.node_id] and b.neighbours() == [a.node_id],
             "A and B neighbours")
    sub = b.mqtt_sub("meshsub/deliver/e2e-stream/#")
    sub.wait_ready(b, "meshsub/deliver/e2e-stream/probe")
    b.mqtt_pub("meshsub/sub/e2e-stream", "stream/#", retain=True)
    wait_for(lambda: any(r["sub_id"] == "e2e-stream" for r in b.ctl("subscriptions")),
             "subscription on B")

    def publish() -> None:
        for n in range(1, STREAM + 1):  # each acknowledged by A's broker (-q 1)
            a.mqtt_pub("meshsub/pub/stream/x", f'{{"n": {n}}}')

    publisher = threading.Thread(target=publish)
    publisher.start()
    try:
        wait_for(lambda: len(sub.events()) >= STREAM // 4, "B delivering")
        assert b.kill_daemon(signal.SIGKILL) == -signal.SIGKILL
        killed_at = len(sub.events())
    finally:
        publisher.join(120)
    assert killed_at < STREAM  # the kill landed mid-stream
    b.start_daemon()
    wait_for(lambda: {d["attrs"]["n"] for d in sub.events()} >= set(range(1, STREAM + 1)),
             "every event on B", guard=90)
    got = [d["attrs"]["n"] for d in sub.events()]
    duplicates = len(got) - len(set(got))
    print(f"kill after {killed_at} deliveries; {duplicates} duplicates; "
          f"restored {mqtt_status(b)['counters'].get('restored', 0)}")
    assert duplicates <= 64 + INFLIGHT_MAX
