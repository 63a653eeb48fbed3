"""The daemon's energy input: the power-supply class read, and fed to the protocol.

The supplies are fake sysfs trees laid out as the kernel lays them out
(Documentation/ABI/testing/sysfs-class-power); the daemon is the real ``Node``
with an unbound loopback link, so its protocol gets the ``EnergyChanged`` input
through ``handle`` like every other input.
"""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from meshsub.runtime.config import ConfigError, parse_config
from meshsub.runtime.node import Node
from meshsub.runtime.power import EnergyReading, read_power_supply
from meshsub.runtime.sdnotify import SystemdNotifier


def supply(root: Path, name: str, **attrs: str) -> None:
    d = root / name
    d.mkdir(parents=True)
    for key, value in attrs.items():
        (d / key).write_text(value + "\n")


def test_a_laptop_battery_on_its_charger(tmp_path: Path) -> None:
    supply(tmp_path, "BAT0", type="Battery", present="1", energy_now="30000000",
           energy_full="40000000", capacity="74", status="Charging")
    supply(tmp_path, "AC", type="Mains", online="1")
    assert read_power_supply(tmp_path) == EnergyReading(0.75, True)


def test_charge_then_capacity_then_several_batteries(tmp_path: Path) -> None:
    supply(tmp_path, "BAT0", type="Battery", charge_now="1000", charge_full="4000")
    supply(tmp_path, "BAT1", type="Battery", capacity="50")
    supply(tmp_path, "BAT2", type="Battery", present="0", capacity="100")  # not inserted
    supply(tmp_path, "usb", type="USB", online="0")
    assert read_power_supply(tmp_path) == EnergyReading((0.25 + 0.5) / 2, False)


def test_no_supply_means_nothing_to_report(tmp_path: Path) -> None:
    assert read_power_supply(tmp_path / "missing") is None
    assert read_power_supply(tmp_path) is None  # a Pi on a wall plug: an empty class
    supply(tmp_path, "hid-battery", type="Battery", status="Unknown")  # no level at all
    assert read_power_supply(tmp_path) is None
    supply(tmp_path, "AC", type="Mains", online="1")
    assert read_power_supply(tmp_path) == EnergyReading(None, True)


def test_unreadable_values_are_ignored(tmp_path: Path) -> None:
    supply(tmp_path, "BAT0", type="Battery", energy_now="garbage", energy_full="0",
           capacity="250")
    assert read_power_supply(tmp_path) == EnergyReading(1.0, False)  # clamped


def _config(tmp: Path, **energy: object) -> object:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        mqtt_port = s.getsockname()[1]  # nothing listens: the bridge retries, harmless
    return parse_config({
        "node": {"id": 7, "name": "n7", "roles": ["base_station"]},
        "link": {"interface": "", "port": port},
        "discovery": {"zeroconf": False},
        "protocol": {"name": "flooding"},
        "security": {"current_key": 1, "keys": {"1": "e07b3c95a1d4f6280c9b7e13d5a2f48c"}},
        "mqtt": {"host": "127.0.0.1", "port": mqtt_port},
        "storage": {"state_dir": str(tmp / "state"), "spool_dir": str(tmp / "spool")},
        "energy": energy,
        "log": {"level": "warning"},
    })


async def test_the_daemon_feeds_battery_and_mains_to_its_protocol(tmp_path: Path) -> None:
    sysfs = tmp_path / "sys"
    supply(sysfs, "BAT0", type="Battery", capacity="40")
    node = Node(_config(tmp_path, power_supply_dir=str(sysfs)),  # type: ignore[arg-type]
                notifier=SystemdNotifier({}))
    await node.start()
    try:
        assert node.protocol.energy_fraction == pytest.approx(0.4)
        assert node.protocol.on_mains is False
        assert node.status()["energy"] == {"source": "auto", "fraction": pytest.approx(0.4),
                                           "on_mains": False}
        assert node.protocol.capabilities == ("base_station",)  # node.roles, as beacons say
        supply(sysfs, "AC", type="Mains", online="1")
        (sysfs / "BAT0" / "capacity").write_text("35\n")
        node._energy_due = 0.0  # the next housekeeping tick reads again
        node._poll_energy()
        assert node.protocol.energy_fraction == pytest.approx(0.35)
        assert node.protocol.on_mains is True
    finally:
        await node.stop()


async def test_energy_source_none_sends_nothing(tmp_path: Path) -> None:
    sysfs = tmp_path / "sys"
    supply(sysfs, "BAT0", type="Battery", capacity="40")
    node = Node(_config(tmp_path, source="none", power_supply_dir=str(sysfs)),  # type: ignore[arg-type]
                notifier=SystemdNotifier({}))
    await node.start()
    try:
        assert node.protocol.energy_fraction is None
    finally:
        await node.stop()


def test_bad_energy_and_role_keys_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"energy\.source: must be one of auto, none"):
        _config(tmp_path, source="battery")
    with pytest.raises(ConfigError, match=r"energy\.poll_s"):
        _config(tmp_path, poll_s=0.1)
    with pytest.raises(ConfigError, match=r"node\.roles: role 'Base' must match"):
        parse_config({"node": {"id": 1, "roles": ["Base"]}, "protocol": {"name": "flooding"}})
