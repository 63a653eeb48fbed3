"""The live map in a real headless browser (Debian's Chromium) on a simulated run replayed.

The run is the packaged demo scenario, shortened: ten walking devices with flooding. The
test checks what the page draws against the run's own records: every device at its
last position, one line per link that is up, a delivery drawn along the path its
``rx`` records trace from the publisher, and the status panel of a clicked device.
Screenshots are kept (the directory is printed; set MESHSUB_ARTEFACTS to keep them).
"""

from __future__ import annotations

import json
import math
import re
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from maphelpers import STATUS_ROWS, artefact_dir, chromium_page, map_server, set_time

from meshsim.des.run import run_scenario
from meshsim.scenario import load_scenario

DEMO = Path(__file__).parents[2] / "firmware-sim" / "meshsim" / "scenarios" / "demo.toml"


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    scenario = load_scenario(DEMO, ["scenario.duration_s=20", "scenario.drain_s=2"])
    out = tmp_path_factory.mktemp("map") / "run"
    run_scenario(scenario, out)
    return out


def _records(run: Path) -> list[dict[str, Any]]:
    out = []
    for path in sorted(run.glob("node-*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines()]
    return sorted(out, key=lambda r: r["ts_ns"])


def _expected_at(records: list[dict[str, Any]], t_ns: int) -> tuple[dict[int, tuple[float, float]],
                                                                       set[tuple[int, int]]]:
    positions: dict[int, tuple[float, float]] = {}
    links: dict[tuple[int, int], bool] = {}
    for r in records:
        if r["ts_ns"] > t_ns:
            break
        if r["event"] == "position":
            positions[r["node"]] = (r["x"], r["y"])
        elif r["event"] in ("neighbor_up", "neighbor_down"):
            links[(min(r["node"], r["peer"]), max(r["node"], r["peer"]))] = \
                r["event"] == "neighbor_up"
    return positions, {k for k, up in links.items() if up}


def _path(records: list[dict[str, Any]], deliver: dict[str, Any]) -> list[int]:
    """The publisher-to-subscriber path from the run's rx records (independent of the page)."""
    first: dict[int, int] = {}
    origin = None
    for r in records:
        if r.get("event_id") != deliver["event_id"] or r["ts_ns"] > deliver["ts_ns"]:
            continue
        if r["event"] == "rx" and r["node"] not in first:
            first[r["node"]] = r["peer"]
        if r["event"] == "publish":
            origin = r["node"]
    path = [deliver["node"]]
    while path[-1] != origin:
        path.append(first[path[-1]])
    return path[::-1]


def _check_tiles(page: Any, url: str, tiles: Path) -> None:
    """The tile layer asks this server (never elsewhere) for the tiles around the origin."""
    hrefs = page.eval_on_selector_all("#tiles image", "is => is.map(i => i.getAttribute('href'))")
    assert hrefs and all(re.fullmatch(r"/tiles/\d+/\d+/\d+\.png", h) for h in hrefs)
    # the demo's origin (48.2082 N, 16.3738 E) lies in the tile the 400 m area starts from
    z = int(hrefs[0].split("/")[2])
    n = 2 ** z
    x = int((16.3738 + 180) / 360 * n)
    lat = math.radians(48.2082)
    y = int((1 - math.log(math.tan(lat) + 1 / math.cos(lat)) / math.pi) / 2 * n)
    assert f"/tiles/{z}/{x}/{y}.png" in hrefs
    png = b"\x89PNG\r\n\x1a\n" + bytes(64)
    (tiles / str(z) / str(x)).mkdir(parents=True)
    (tiles / str(z) / str(x) / f"{y}.png").write_bytes(png)
    with urllib.request.urlopen(f"{url}tiles/{z}/{x}/{y}.png", timeout=10) as resp:
        assert resp.headers["Content-Type"] == "image/png" and resp.read() == png


def test_replayed_simulation_in_chromium(demo_run: Path, tmp_path: Path) -> None:
    records = _records(demo_run)
    deliveries = [r for r in records if r["event"] == "deliver" and r["hop"] >= 2]
    assert deliveries, "the shortened demo should deliver over two hops or more"
    deliver = deliveries[0]
    t_s = math.ceil(deliver["ts_ns"] / 1e8) / 10  # the slider's 0.1 s step, not before it
    positions, links = _expected_at(records, int(t_s * 1e9))
    expected_path = _path(records, deliver)
    shots = artefact_dir(tmp_path, "livemap-replay")
    tiles = tmp_path / "tiles"
    tiles.mkdir()
    with map_server(str(demo_run), "--tiles-dir", str(tiles)) as url, \
            chromium_page() as page:
        page.goto(url)
        page.wait_for_selector("#devices .device")
        _check_tiles(page, url, tiles)
        page.screenshot(path=str(shots / "replay-end.png"))
        set_time(page, t_s)
        page.wait_for_function("document.getElementById('clock').textContent"
                               f" === 't = {t_s:.1f} s'")
        devices = page.eval_on_selector_all(
            "#devices .device",
            "gs => gs.map(g => [+g.dataset.node, +g.dataset.x, +g.dataset.y])")
        assert {d[0] for d in devices} == set(positions)
        for node, x, y in devices:
            assert (x, y) == pytest.approx(positions[node])
        drawn = page.eval_on_selector_all(
            "#links line", "ls => ls.map(l => [+l.dataset.a, +l.dataset.b])")
        assert {tuple(pair) for pair in drawn} == links and len(drawn) == len(links)
        selector = (f"#paths .delivery[data-event='{deliver['event_id']}']"
                    f"[data-node='{deliver['node']}']")
        anim = page.query_selector(selector)
        assert anim is not None, "the delivery is not drawn"
        assert [int(n) for n in anim.get_attribute("data-path").split()] == expected_path
        assert len(expected_path) == deliver["hop"] + 1
        assert page.query_selector(f"{selector} circle.delivery-dot animateMotion") is not None
        summary = page.inner_text("#summary")
        assert summary.startswith(f"{len(positions)} devices, {len(links)} links")
        node = deliver["node"]
        page.click(f"#devices .device[data-node='{node}'] circle")
        page.wait_for_selector("#status-table")
        status = dict(page.eval_on_selector_all(
            "#status-table tr", STATUS_ROWS))
        x, y = positions[node]
        assert status["device"] == str(node)
        assert status["fix"].startswith(f"position ({x:.1f}, {y:.1f}) m")
        mine = {b if a == node else a for a, b in links if node in (a, b)}
        assert status["neighbours"] == ", ".join(map(str, sorted(mine)))
        delivered = sum(1 for r in records if r["event"] == "deliver" and r["node"] == node
                        and r["ts_ns"] <= t_s * 1e9)
        assert status["delivered"] == str(delivered)
        page.screenshot(path=str(shots / "replay-delivery.png"))
        assert page.errors == []
    assert (shots / "replay-delivery.png").stat().st_size > 10_000
