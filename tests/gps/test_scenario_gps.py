"""The ``[gps]`` scenario section: defaults, every key, one-line errors naming the key."""

from __future__ import annotations

import pytest

from meshsim.gps.settings import GpsSettings, Outage
from meshsim.scenario import ScenarioError, loads_scenario

BASE = """
[scenario]
name = "gps"
duration_s = 100
drain_s = 10
[area]
width_m = 500
height_m = 500
origin_lat = 45.07
origin_lon = 7.69
[nodes]
count = 4
placement = "grid"
[protocol]
name = "flooding"
"""


def test_absent_section_is_off_with_defaults() -> None:
    gps = loads_scenario(BASE).gps
    assert gps == GpsSettings() and gps.enabled is False
    assert gps.noise_m == 3.0 and gps.rate_hz == 1.0


def test_every_key() -> None:
    gps = loads_scenario(BASE + """
[gps]
enabled = true
rate_hz = 2
noise_m = 5.0
correlation_s = 30
white_fraction = 0.5
hdop = 1.4
hdop_spread = 0.2
satellites = 6
satellites_in_view = 9
fix_loss_per_s = 0.01
outage_mean_s = 5
[[gps.outages]]
start_s = 10
end_s = 20
nodes = [2, 3]
[[gps.outages]]
start_s = 50
end_s = 200
""").gps
    assert gps == GpsSettings(True, 2.0, 5.0, 30.0, 0.5, 1.4, 0.2, 6, 9, 0.01, 5.0,
                              (Outage(10.0, 20.0, (2, 3)), Outage(50.0, 200.0, None)))


def test_overrides_reach_the_section() -> None:
    gps = loads_scenario(BASE, ["gps.enabled=true", "gps.noise_m=1.5"]).gps
    assert gps.enabled and gps.noise_m == 1.5


@pytest.mark.parametrize(("section", "message"), [
    ("[gps]\nenabled = 1", "gps.enabled: expected true or false, got integer"),
    ("[gps]\nnoise_m = -1", "gps.noise_m: must be >= 0 (got -1)"),
    ("[gps]\nnoise_m = 400", "gps.noise_m: 400 m gives HDOP 113.1, above 99.99; set hdop"),
    ("[gps]\nrate_hz = 0", "gps.rate_hz: must be > 0 (got 0)"),
    ("[gps]\nrate_hz = 20", "gps.rate_hz: must be <= 10 (got 20)"),
    ("[gps]\nhdop = 0", "gps.hdop: must be > 0 (got 0)"),
    ("[gps]\nhdop = 120", "gps.hdop: must be <= 99.99 (got 120)"),
    ("[gps]\nsatellites = 13", "gps.satellites: must be <= 12 (got 13)"),
    ("[gps]\nsatellites = 10\nsatellites_in_view = 9",
     "gps.satellites_in_view: must be within satellites (10)..32, got 9"),
    ("[gps]\nfix_loss_per_s = 2", "gps.fix_loss_per_s: must be <= 1 (got 2)"),
    ("[gps]\noutage_mean_s = 0", "gps.outage_mean_s: must be > 0 (got 0)"),
    ("[gps]\nnoise = 3", "gps.noise: unknown key"),
    ("[gps]\ncorrelation_s = \"60\"", "gps.correlation_s: expected a number, got string"),
    ("[[gps.outages]]\nstart_s = 5\nend_s = 5",
     "gps.outages[0].end_s: must be greater than start_s (5)"),
    ("[[gps.outages]]\nstart_s = 110\nend_s = 120",
     "gps.outages[0].start_s: must be before the end of the run (110 s)"),
    ("[[gps.outages]]\nstart_s = 1\nend_s = 2\nnodes = [9]",
     "gps.outages[0].nodes[0]: unknown node 9"),
    ("[[gps.outages]]\nstart_s = 1\nend_s = 2\nnode = 1", "gps.outages[0].node: unknown key"),
    ("[[gps.outages]]\nend_s = 2", "gps.outages[0].start_s: required key is missing"),
    ("gps = 3", "gps: expected a table, got integer"),
])
def test_bad_values_name_the_key(section: str, message: str) -> None:
    text = BASE + section if section.startswith("[") else section + BASE  # top-level key
    with pytest.raises(ScenarioError) as info:
        loads_scenario(text)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)
