"""LocationService wiring: config -> source + tracker -> on_position callbacks."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from examplecfg import install_example

from meshsub.core.api import Position
from meshsub.runtime.config import LocationConfig, Origin, StaticLocation, load_config
from meshsub.runtime.location import (
    GpsdSource,
    LocationService,
    NmeaSerialSource,
    StaticSource,
    make_source,
    make_tracker,
)

REPO = Path(__file__).resolve().parents[2]


async def test_static_latlon_source_reports_local_metres() -> None:
    cfg = LocationConfig(source="static", static=StaticLocation(lat=45.001, lon=7.0),
                         origin=Origin(45.0, 7.0))
    source = make_source(cfg, time.monotonic)
    assert isinstance(source, StaticSource)
    got: list[Position | None] = []
    service = LocationService(source, make_tracker(cfg, source.name), got.append,
                              clock=time.monotonic, tick_interval=0.01)
    async with service:
        deadline = time.monotonic() + 20  # hang guard
        while not got:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.1)  # ticks must not retract a static position
    assert len(got) == 1 and got[0] is not None
    assert got[0].y == pytest.approx(111.133, abs=0.01) and got[0].error_m == 0.0
    status = service.status()
    assert status["fix"] is True and status["provider"]["source"] == "static"


def test_make_source_kinds(tmp_path: Path) -> None:
    cfg = load_config(install_example(tmp_path))
    assert isinstance(make_source(cfg.location, time.monotonic), GpsdSource)
    nmea = LocationConfig(source="nmea", origin=Origin(0, 0))
    assert isinstance(make_source(nmea, time.monotonic), NmeaSerialSource)
    assert make_source(LocationConfig(), time.monotonic) is None  # source = "none"
    xy = LocationConfig(source="static", static=StaticLocation(x=1.0, y=2.0))
    src = make_source(xy, time.monotonic)
    assert isinstance(src, StaticSource) and src.fix().local == (1.0, 2.0, 0.0)
    tracker = make_tracker(cfg.location, "gpsd")
    assert tracker.origin is not None and tracker.gating.max_hdop == 5.0
