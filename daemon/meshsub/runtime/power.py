"""The device's energy, from the Linux power-supply class (``/sys/class/power_supply``).

Protocols that rotate duties by remaining energy (HESPER's brokers, a TG leader
"with enough power") get it as an ``EnergyChanged`` input. The kernel describes
every supply in a directory with a ``type``: a ``Battery`` reports
``energy_now``/``energy_full`` (µWh), ``charge_now``/``charge_full`` (µAh) or
``capacity`` (percent); ``Mains``, ``USB`` and ``UPS`` supplies report
``online`` (Documentation/ABI/testing/sysfs-class-power). A laptop has a battery
and an AC adapter; a Raspberry Pi on a wall plug usually has neither, and then
the daemon sends nothing (the protocol keeps its configured energy).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

SYSFS_POWER_SUPPLY = Path("/sys/class/power_supply")
EXTERNAL_TYPES = frozenset({"Mains", "USB", "UPS", "Wireless"})


@dataclass(frozen=True, slots=True)
class EnergyReading:
    """What ``EnergyChanged`` carries: battery fraction (None: no battery) and mains."""

    fraction: float | None
    on_mains: bool


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="ascii", errors="replace").strip()
    except OSError:  # a supply that vanished, or an attribute it does not have
        return None


def _number(path: Path) -> float | None:
    text = _read(path)
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def _battery(supply: Path) -> float | None:
    """One battery's remaining fraction, or None if absent or it reports nothing usable."""
    if _read(supply / "present") == "0":
        return None
    for now_name, full_name in (("energy_now", "energy_full"), ("charge_now", "charge_full")):
        now, full = _number(supply / now_name), _number(supply / full_name)
        if now is not None and full is not None and full > 0:
            return max(0.0, min(now / full, 1.0))
    capacity = _number(supply / "capacity")
    if capacity is not None:
        return max(0.0, min(capacity / 100.0, 1.0))
    return None


def read_power_supply(root: Path = SYSFS_POWER_SUPPLY) -> EnergyReading | None:
    """The device's energy now; ``None`` if it has no battery and no external supply.

    Several batteries give the mean of their fractions; any external supply
    that is online means mains power.
    """
    try:
        supplies = sorted(p for p in root.iterdir() if p.is_dir())
    except OSError:
        return None
    batteries: list[float] = []
    on_mains = False
    external = False
    for supply in supplies:
        kind = _read(supply / "type")
        if kind == "Battery":
            level = _battery(supply)
            if level is not None:
                batteries.append(level)
        elif kind in EXTERNAL_TYPES:
            external = True
            on_mains = on_mains or _read(supply / "online") == "1"
    if not batteries and not external:
        return None
    fraction = sum(batteries) / len(batteries) if batteries else None
    return EnergyReading(fraction, on_mains)
