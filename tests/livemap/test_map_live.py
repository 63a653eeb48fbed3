"""The live map on live telemetry: two real daemons ship their records to mosquitto.

Two ``meshsubd`` processes (flooding over loopback UDP, no root; the live path of
tests/telemetry/test_live_path.py) with configured positions publish their telemetry
live over MQTT; ``mesheval map --broker`` follows the topic and a headless Chromium
watches the page: both devices appear at their configured positions with their fix,
the link between them comes up, and an event published on device 1 is drawn as a
delivery along the path 1 -> 2 with device 2's status panel counting it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from maphelpers import STATUS_ROWS, artefact_dir, chromium_page, map_server
from mosquitto import Mosquitto, have_mosquitto
from test_live_path import Daemon, free_udp_port, subscribe_retained, wait_for

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not have_mosquitto(), reason="mosquitto is not installed")]

POSITIONS = {1: (10.0, 20.0), 2: (60.0, -15.0)}


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[tuple[Mosquitto, list[Daemon]]]:
    broker = Mosquitto(tmp_path)
    p1, p2 = free_udp_port(), free_udp_port()
    daemons = [Daemon(tmp_path, 1, p1, p2, broker.port), Daemon(tmp_path, 2, p2, p1, broker.port)]
    for daemon in daemons:
        x, y = POSITIONS[daemon.node]
        daemon.config.write_text(daemon.config.read_text() + f"""
[location]
source = "static"
[location.static]
x = {x}
y = {y}
""")
    try:
        yield broker, daemons
    finally:
        for daemon in daemons:
            daemon.kill()
        with contextlib.suppress(Exception):
            broker.stop()


def test_live_map_follows_two_daemons(fleet: tuple[Mosquitto, list[Daemon]],
                                      tmp_path: Path) -> None:
    broker, (d1, d2) = fleet
    broker.start()
    shots = artefact_dir(tmp_path, "livemap-live")
    with map_server("--broker", f"127.0.0.1:{broker.port}",
                    "--topic", "meshsub/telemetry/#") as url, chromium_page() as page:
        d1.start()
        d2.start()
        subscribe_retained(broker.port, "n2", "sensors/#")
        page.goto(url)
        wait_for(lambda: page.inner_text("#mode") == "live", "the page in live mode")

        def delivered_on_2() -> bool:
            d1.request({"cmd": "pub", "event": "sensors/t1 v=1"})
            return page.query_selector(
                "#paths .delivery[data-node='2'][data-path='1 2']") is not None

        wait_for(delivered_on_2, "a delivery 1 -> 2 drawn on the live map", timeout=60)
        devices = page.eval_on_selector_all(
            "#devices .device",
            "gs => gs.map(g => [+g.dataset.node, +g.dataset.x, +g.dataset.y,"
            "                   g.classList.contains('fix')])")
        assert sorted(devices) == [[1, 10.0, 20.0, True], [2, 60.0, -15.0, True]]
        links = page.eval_on_selector_all(
            "#links line", "ls => ls.map(l => [+l.dataset.a, +l.dataset.b, +l.dataset.frames])")
        assert [link[:2] for link in links] == [[1, 2]]
        assert links[0][2] > 0  # beacons and data received over it in the last 10 s
        page.click("#devices .device[data-node='2'] circle")
        page.wait_for_selector("#status-table")
        status = dict(page.eval_on_selector_all(
            "#status-table tr", STATUS_ROWS))
        assert status["fix"].startswith("position (60.0, -15.0) m")
        assert status["neighbours"] == "1"
        assert int(status["delivered"]) >= 1
        page.screenshot(path=str(shots / "live.png"))
        assert page.errors == []
