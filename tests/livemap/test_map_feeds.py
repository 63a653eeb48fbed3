"""The live map on the feeds of several devices: records arrive out of time order.

Each daemon ships its spool a batch a second (and a collector broker forwards each
device's bridge on its own), so the map sees device 1's records of the last second,
then device 2's of the same second, some of them older. The page must still draw the
mesh at a time from every record up to that time: here device 2's records are
published after device 1's newer ones, and both devices and their link must be drawn.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from maphelpers import chromium_page, map_server
from mosquitto import Mosquitto, have_mosquitto
from test_live_path import wait_for

from meshsub.core.telemetry import dump_line, make_record

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not have_mosquitto(), reason="mosquitto is not installed")]
T0 = 1_800_000_000_000_000_000


def _line(node: int, t_s: float, event: str, **attrs: object) -> str:
    return dump_line(make_record(run="r", node=node, protocol="flooding",
                                 ts_ns=T0 + round(t_s * 1e9), event=event, attrs=attrs))


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Mosquitto]:
    broker = Mosquitto(tmp_path, persistent=False)
    broker.start()
    try:
        yield broker
    finally:
        with contextlib.suppress(Exception):
            broker.stop()


def test_records_of_several_feeds_are_drawn_in_time_order(broker: Mosquitto) -> None:
    import paho.mqtt.client as mqtt
    from paho.mqtt.enums import CallbackAPIVersion

    feed_1 = [_line(1, 0.0, "position", x=0.0, y=0.0), _line(1, 1.0, "neighbor_up", peer=2),
              _line(1, 2.0, "position", x=5.0, y=0.0)]
    feed_2 = [_line(2, 0.5, "position", x=60.0, y=10.0), _line(2, 1.2, "neighbor_up", peer=1)]
    with map_server("--broker", f"127.0.0.1:{broker.port}") as url, chromium_page() as page:
        page.goto(url)
        wait_for(lambda: page.inner_text("#mode") == "live", "the page in live mode")
        client = mqtt.Client(CallbackAPIVersion.VERSION2)
        client.connect("127.0.0.1", broker.port)
        client.loop_start()
        try:
            for feed, node in ((feed_1, 1), (feed_2, 2)):  # device 2's batch comes second
                client.publish(f"meshsub/telemetry/{node}", "\n".join(feed), qos=1) \
                    .wait_for_publish(10)
                wait_for(lambda n=node: page.query_selector(  # type: ignore[misc]
                    f"#devices .device[data-node='{n}']") is not None,
                    f"device {node} drawn", timeout=30)
        finally:
            client.loop_stop()
            client.disconnect()
        devices = page.eval_on_selector_all(
            "#devices .device", "gs => gs.map(g => [+g.dataset.node, +g.dataset.x, +g.dataset.y])")
        assert sorted(devices) == [[1, 5.0, 0.0], [2, 60.0, 10.0]]
        links = page.eval_on_selector_all(
            "#links line", "ls => ls.map(l => [+l.dataset.a, +l.dataset.b])")
        assert links == [[1, 2]]
        assert page.eval_on_selector("#slider", "s => s.max") == "2.0"  # the newest record's time
        assert page.errors == []
