"""The daemon's configuration: one TOML file, validated completely at start.

A bad file stops the daemon with ONE line naming the key
(``location.gpsd.port: expected an integer, got string``); the CLI prints it
and exits 2, so systemd does not restart-loop on a typo. ``docs/config.md``
documents every key; ``deploy/meshsub.toml.example`` is a complete example.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import math
import re
import socket
import stat
import tomllib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from meshsub.core.params import ParameterError, ProtocolParams, parse_params
from meshsub.core.roles import RoleError, check_roles
from meshsub.wire.keys import key_problem, key_warning

if TYPE_CHECKING:
    from meshsub.core.protocol import Protocol

DEFAULT_PATH: Final = Path("/etc/meshsub/meshsub.toml")
DEFAULT_PORT: Final = 4790
DEFAULT_MULTICAST_GROUP: Final = "ff02::4d53"
MIN_KEY_BYTES: Final = 16
KEY_ID_MAX: Final = 0xFF
"""The frame header carries the key id in one byte (meshsub.wire.keys)."""
BAUD_RATES: Final = frozenset({1200, 2400, 4800, 9600, 19200, 38400, 57600, 115200, 230400,
                               460800, 921600})
RUN_ID: Final = re.compile(r"[A-Za-z0-9_.-]{1,128}")
"""A telemetry run id: safe in file names, Parquet partitions and report tables."""
LOG_LEVELS: Final = ("debug", "info", "warning", "error", "critical")
RELOADABLE_PATHS: Final = ("log.level", "discovery.static_peers", "protocol.params")
"""Key paths (and their sub-keys) that SIGHUP applies without a restart."""


class ConfigError(ValueError):
    """A configuration problem; ``str()`` is one line starting with the key path."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}" if path else problem)
        self.path = path
        self.problem = problem


# --------------------------------------------------------------------- sections


@dataclass(frozen=True, slots=True)
class NodeConfig:
    id: int
    name: str
    roles: tuple[str, ...] = ()
    """What this node is for the protocol (``meshsub.core.roles``): its capabilities,
    advertised in beacons."""


@dataclass(frozen=True, slots=True)
class LinkConfig:
    interface: str
    """Mesh interface (``wlan0``, ``bat0``); empty = unbound (tests only)."""
    mode: str = "adhoc"
    payload_size: int = 1200
    port: int = DEFAULT_PORT
    family: str = "ipv4"
    multicast_group: str = DEFAULT_MULTICAST_GROUP
    batman_poll_interval: float = 5.0
    receive_buffer: int = 1 << 20
    """Socket receive buffer asked from the kernel (bytes) for bursts; 0 = the kernel's."""


@dataclass(frozen=True, slots=True)
class StaticPeer:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class DiscoveryConfig:
    beacon_interval: float = 5.0
    beacon_jitter: float = 0.25
    min_interval: float = 1.0
    neighbor_timeout: int = 3
    control_budget: float = 2000.0
    static_peers: tuple[StaticPeer, ...] = ()
    zeroconf: bool = True


@dataclass(frozen=True, slots=True)
class Origin:
    lat: float
    lon: float
    alt: float = 0.0


@dataclass(frozen=True, slots=True)
class StaticLocation:
    """Either WGS84 (``lat``/``lon``/``alt``) or local metres (``x``/``y``/``z``)."""

    lat: float | None = None
    lon: float | None = None
    alt: float = 0.0
    x: float | None = None
    y: float | None = None
    z: float = 0.0


@dataclass(frozen=True, slots=True)
class GpsdConfig:
    host: str = "127.0.0.1"
    port: int = 2947


@dataclass(frozen=True, slots=True)
class NmeaConfig:
    device: str = "/dev/ttyACM0"
    baud: int = 9600


@dataclass(frozen=True, slots=True)
class LocationConfig:
    source: str = "none"
    """``none`` (no position: fine for protocols that do not use it), ``static``,
    ``gpsd`` or ``nmea``."""
    static: StaticLocation | None = None
    gpsd: GpsdConfig = field(default_factory=GpsdConfig)
    nmea: NmeaConfig = field(default_factory=NmeaConfig)
    origin: Origin | None = None
    min_mode: int = 2
    max_hdop: float = 5.0
    min_satellites: int = 4
    movement_threshold: float = 10.0
    max_age: float = 60.0
    stale_after: float = 10.0
    max_error_m: float = 100.0
    require_quality: bool = True


@dataclass(frozen=True, slots=True)
class ProtocolConfig:
    name: str
    params: ProtocolParams


@dataclass(frozen=True, slots=True)
class SecurityConfig:
    current_key: int
    keys: Mapping[int, bytes] = field(repr=False, compare=True)
    key_file: str = ""
    warnings: tuple[str, ...] = field(default=(), compare=False)
    """Accepted, but weaker than recommended (logged at start, printed by --check)."""


@dataclass(frozen=True, slots=True)
class MqttConfig:
    host: str = "127.0.0.1"
    port: int = 1883
    client_id: str = ""
    topic_prefix: str = "meshsub"
    keepalive: int = 60
    username: str = ""
    password_file: str = ""
    password: str = field(default="", repr=False)
    """Read from ``password_file`` (never written in the configuration itself)."""
    tls_ca_file: str = ""
    tls_cert_file: str = ""
    tls_key_file: str = ""
    max_subscriptions: int = 1000
    broker_config: str = "/etc/mosquitto/mosquitto.conf"
    """The broker's configuration, read (if readable) to warn about short queues."""


@dataclass(frozen=True, slots=True)
class StorageConfig:
    state_dir: str = "/var/lib/meshsub"
    spool_dir: str = "/var/lib/meshsub/spool"
    runtime_dir: str = ""
    """Where the control socket lives; "" = ``state_dir``. The unit uses /run/meshsub,
    which the operators' group may enter without reaching the state."""

    @property
    def control_dir(self) -> str:
        return self.runtime_dir or self.state_dir


@dataclass(frozen=True, slots=True)
class TelemetryConfig:
    enabled: bool = True
    run: str = "field"
    max_spool_bytes: int = 100_000_000
    roll_bytes: int = 1_000_000
    roll_seconds: float = 60.0
    mqtt_topic: str = ""
    state_every_s: float = 60.0
    """How often the protocol reports the state it holds (``state`` records); 0: never."""


@dataclass(frozen=True, slots=True)
class EnergyConfig:
    source: str = "auto"
    """``auto``: the power-supply class, where the device has one; ``none``: never."""
    poll_s: float = 30.0
    power_supply_dir: str = "/sys/class/power_supply"


@dataclass(frozen=True, slots=True)
class MetricsConfig:
    """The Prometheus endpoint (``meshsub.runtime.metricsserver``); off by default."""

    listen: str = ""
    """``IP:PORT`` (``[IPv6]:PORT``) to serve ``/metrics`` on; "" = off."""
    allow_remote: bool = False
    """A non-loopback ``listen`` address is refused unless this is true (docs/security.md)."""

    @property
    def host(self) -> str:
        return self.listen.rsplit(":", 1)[0].strip("[]")

    @property
    def port(self) -> int:
        return int(self.listen.rsplit(":", 1)[1])


@dataclass(frozen=True, slots=True)
class LogConfig:
    level: str = "info"

    @property
    def level_number(self) -> int:
        return int(logging.getLevelName(self.level.upper()))


@dataclass(frozen=True, slots=True)
class Reloadable:
    """What SIGHUP may change in a running daemon."""

    log_level: str
    static_peers: tuple[StaticPeer, ...]
    protocol_params: ProtocolParams


@dataclass(frozen=True, slots=True)
class Config:
    node: NodeConfig
    link: LinkConfig
    discovery: DiscoveryConfig
    location: LocationConfig
    protocol: ProtocolConfig
    security: SecurityConfig
    mqtt: MqttConfig
    storage: StorageConfig
    telemetry: TelemetryConfig
    log: LogConfig
    energy: EnergyConfig = field(default_factory=EnergyConfig)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    source: str = field(default="", compare=False)

    @property
    def reloadable(self) -> Reloadable:
        return Reloadable(self.log.level, self.discovery.static_peers, self.protocol.params)


@dataclass(frozen=True, slots=True)
class ConfigDiff:
    """Key paths that differ between two configs, split by whether SIGHUP can apply them."""

    reloadable: tuple[str, ...]
    restart_required: tuple[str, ...]

    @property
    def changed(self) -> bool:
        return bool(self.reloadable or self.restart_required)


# --------------------------------------------------------------------- reading


def _type_name(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "table"
    return type(value).__name__


_MISSING: Final = object()


class _Table:
    """Typed accessors over one TOML table that remember which keys were read."""

    def __init__(self, data: Mapping[str, Any], path: str) -> None:
        self.data = data
        self.path = path
        self.seen: set[str] = set()

    def key(self, name: str) -> str:
        return f"{self.path}.{name}" if self.path else name

    def _get(self, name: str, default: Any) -> Any:
        self.seen.add(name)
        value = self.data.get(name, _MISSING)
        if value is _MISSING:
            if default is _MISSING:
                raise ConfigError(self.key(name), "required key is missing")
            return default
        return value

    def has(self, name: str) -> bool:
        return name in self.data

    def table(self, name: str, *, required: bool = False) -> _Table:
        value = self._get(name, _MISSING if required else {})
        if not isinstance(value, dict):
            raise ConfigError(self.key(name), f"expected a table, got {_type_name(value)}")
        return _Table(value, self.key(name))

    def get_int(self, name: str, default: Any = _MISSING, *, lo: int | None = None,
            hi: int | None = None) -> int:
        value = self._get(name, default)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(self.key(name), f"expected an integer, got {_type_name(value)}")
        self._range(name, value, lo, hi)
        return value

    def get_float(self, name: str, default: Any = _MISSING, *, lo: float | None = None,
              hi: float | None = None, positive: bool = False) -> float:
        value = self._get(name, default)
        if value is None:
            raise ConfigError(self.key(name), "expected a number, got nothing")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(self.key(name), f"expected a number, got {_type_name(value)}")
        if not math.isfinite(value):
            raise ConfigError(self.key(name), "must be a finite number")
        if positive and value <= 0:
            raise ConfigError(self.key(name), f"must be greater than 0, got {value}")
        self._range(name, value, lo, hi)
        return float(value)

    def _range(self, name: str, value: float, lo: float | None, hi: float | None) -> None:
        if lo is not None and value < lo:
            raise ConfigError(self.key(name), f"must be at least {lo}, got {value}")
        if hi is not None and value > hi:
            raise ConfigError(self.key(name), f"must be at most {hi}, got {value}")

    def get_str(self, name: str, default: Any = _MISSING, *, nonempty: bool = False) -> str:
        value = self._get(name, default)
        if not isinstance(value, str):
            raise ConfigError(self.key(name), f"expected a string, got {_type_name(value)}")
        if nonempty and not value.strip():
            raise ConfigError(self.key(name), "must not be empty")
        return value

    def get_bool(self, name: str, default: Any = _MISSING) -> bool:
        value = self._get(name, default)
        if not isinstance(value, bool):
            raise ConfigError(self.key(name), f"expected true or false, got {_type_name(value)}")
        return value

    def choice(self, name: str, choices: tuple[str, ...], default: Any = _MISSING) -> str:
        value = self.get_str(name, default)
        if value not in choices:
            raise ConfigError(self.key(name),
                              f"must be one of {', '.join(choices)}, got {value!r}")
        return value

    def str_list(self, name: str, default: Any = _MISSING) -> list[str]:
        value = self._get(name, default)
        if not isinstance(value, list):
            raise ConfigError(self.key(name), f"expected an array, got {_type_name(value)}")
        for i, item in enumerate(value):
            if not isinstance(item, str):
                raise ConfigError(f"{self.key(name)}[{i}]",
                                  f"expected a string, got {_type_name(item)}")
        return list(value)

    def finish(self) -> None:
        """Unknown keys are errors: a typo must not silently fall back to a default."""
        unknown = sorted(set(self.data) - self.seen)
        if unknown:
            known = ", ".join(sorted(self.seen)) or "none"
            raise ConfigError(self.key(unknown[0]), f"unknown key (known here: {known})")


# --------------------------------------------------------------------- sections


def _node(root: _Table) -> NodeConfig:
    t = root.table("node", required=True)
    node_id = t.get_int("id", lo=0, hi=0xFFFF_FFFF)
    name = t.get_str("name", socket.gethostname() or f"node-{node_id:x}", nonempty=True)
    if len(name.encode()) > 63:
        raise ConfigError(t.key("name"), "must be at most 63 bytes (a DNS-SD label)")
    try:
        roles = check_roles(t.str_list("roles", []))
    except RoleError as exc:
        raise ConfigError(t.key("roles"), str(exc)) from None
    t.finish()
    return NodeConfig(node_id, name, roles)


def _link(root: _Table) -> LinkConfig:
    t = root.table("link")
    interface = t.get_str("interface", "")
    if len(interface) > 15 or "/" in interface or " " in interface:
        raise ConfigError(t.key("interface"), f"not a valid interface name: {interface!r}")
    mode = t.choice("mode", ("adhoc", "batman"), "adhoc")
    family = t.choice("family", ("ipv4", "ipv6"), "ipv4")
    group = t.get_str("multicast_group", DEFAULT_MULTICAST_GROUP)
    try:
        addr = ipaddress.IPv6Address(group)
    except ValueError:
        raise ConfigError(t.key("multicast_group"), f"not an IPv6 address: {group!r}") from None
    if not (addr.is_multicast and (addr.packed[1] & 0x0F) == 2):
        raise ConfigError(t.key("multicast_group"),
                          f"must be a link-local multicast group (ff02::/16), got {group}")
    cfg = LinkConfig(
        interface=interface,
        mode=mode,
        payload_size=t.get_int("payload_size", 1200, lo=256, hi=65000),
        port=t.get_int("port", DEFAULT_PORT, lo=1, hi=65535),
        family=family,
        multicast_group=group,
        batman_poll_interval=t.get_float("batman_poll_interval", 5.0, lo=0.5, hi=3600),
        receive_buffer=t.get_int("receive_buffer", 1 << 20, lo=0, hi=1 << 30),
    )
    t.finish()
    return cfg


def parse_peer(text: str, default_port: int) -> StaticPeer:
    """``10.0.0.2``, ``10.0.0.2:4790``, ``fe80::1%bat0`` or ``[fe80::1%bat0]:4790``."""
    host, port = text.strip(), default_port
    if host.startswith("["):
        close = host.find("]")
        if close < 0:
            raise ValueError(f"unbalanced '[' in {text!r}")
        rest = host[close + 1:]
        host = host[1:close]
        if rest:
            if not rest.startswith(":"):
                raise ValueError(f"expected ':port' after ']' in {text!r}")
            port = _port(rest[1:], text)
    elif host.count(":") == 1:
        host, port_text = host.split(":")
        port = _port(port_text, text)
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"not an IP address: {host!r}") from None
    return StaticPeer(host, port)


def _port(text: str, whole: str) -> int:
    if not text.isdigit() or not 1 <= int(text) <= 65535:
        raise ValueError(f"bad port in {whole!r}")
    return int(text)


def _discovery(root: _Table, port: int) -> DiscoveryConfig:
    t = root.table("discovery")
    interval = t.get_float("beacon_interval", 5.0, lo=0.1, hi=3600)
    min_interval = t.get_float("min_interval", min(1.0, interval), lo=0.05, hi=3600)
    if min_interval > interval:
        raise ConfigError(t.key("min_interval"),
                          f"must not exceed discovery.beacon_interval ({interval})")
    peers = []
    for i, text in enumerate(t.str_list("static_peers", [])):
        try:
            peers.append(parse_peer(text, port))
        except ValueError as exc:
            raise ConfigError(f"{t.key('static_peers')}[{i}]", str(exc)) from None
    cfg = DiscoveryConfig(
        beacon_interval=interval,
        beacon_jitter=t.get_float("beacon_jitter", 0.25, lo=0.0, hi=0.5),
        min_interval=min_interval,
        neighbor_timeout=t.get_int("neighbor_timeout", 3, lo=1, hi=100),
        control_budget=t.get_float("control_budget", 2000.0, positive=True),
        static_peers=tuple(peers),
        zeroconf=t.get_bool("zeroconf", True),
    )
    t.finish()
    return cfg


def _lat_lon(t: _Table) -> tuple[float, float]:
    return t.get_float("lat", lo=-90, hi=90), t.get_float("lon", lo=-180, hi=180)


def _location(root: _Table) -> LocationConfig:
    t = root.table("location")
    source = t.choice("source", ("none", "static", "gpsd", "nmea"), "none")
    origin = None
    if t.has("origin"):
        o = t.table("origin")
        lat, lon = _lat_lon(o)
        origin = Origin(lat, lon, o.get_float("alt", 0.0))
        o.finish()
    static = None
    if t.has("static") or source == "static":
        s = t.table("static", required=source == "static")
        geo_keys, xy_keys = {"lat", "lon", "alt"} & set(s.data), {"x", "y", "z"} & set(s.data)
        if geo_keys and xy_keys:
            raise ConfigError(s.path, "give either lat/lon/alt or x/y/z, not both")
        if xy_keys:
            static = StaticLocation(x=s.get_float("x"), y=s.get_float("y"), z=s.get_float("z", 0.0))
        else:
            lat, lon = _lat_lon(s)
            static = StaticLocation(lat=lat, lon=lon, alt=s.get_float("alt", 0.0))
            if origin is None:
                raise ConfigError(t.key("origin"),
                                  "required to convert location.static lat/lon to local metres")
        s.finish()
    g = t.table("gpsd")
    gpsd = GpsdConfig(g.get_str("host", "127.0.0.1", nonempty=True), g.get_int("port", 2947, lo=1,
                                                                      hi=65535))
    g.finish()
    n = t.table("nmea")
    nmea = NmeaConfig(n.get_str("device", "/dev/ttyACM0", nonempty=True),
                      n.get_int("baud", 9600, lo=1200, hi=921600))
    if nmea.baud not in BAUD_RATES:
        raise ConfigError(n.key("baud"),
                          f"unsupported baud rate {nmea.baud} (one of "
                          f"{', '.join(map(str, sorted(BAUD_RATES)))})")
    n.finish()
    if source in ("gpsd", "nmea") and origin is None:
        raise ConfigError(t.key("origin"), f"required for location.source = {source!r}")
    cfg = LocationConfig(
        source=source,
        static=static,
        gpsd=gpsd,
        nmea=nmea,
        origin=origin,
        min_mode=t.get_int("min_mode", 2, lo=2, hi=3),
        max_hdop=t.get_float("max_hdop", 5.0, lo=0.0),
        min_satellites=t.get_int("min_satellites", 4, lo=0, hi=64),
        movement_threshold=t.get_float("movement_threshold", 10.0, lo=0.0),
        max_age=t.get_float("max_age", 60.0, positive=True),
        stale_after=t.get_float("stale_after", 10.0, positive=True),
        max_error_m=t.get_float("max_error_m", 100.0, lo=0.0),
        require_quality=t.get_bool("require_quality", True),
    )
    t.finish()
    return cfg


ProtocolLookup = Callable[[str], "type[Protocol]"]


def registry_lookup(name: str) -> type[Protocol]:
    """The installed protocol ``name`` (imported lazily: the registry loads plug-ins; in
    ``meshsubd`` the whole registry is checked in a child, see runtime/protocolcheck.py)."""
    from meshsub.runtime.protocolcheck import lookup

    return lookup(name)


def _protocol(root: _Table, lookup: ProtocolLookup) -> ProtocolConfig:
    t = root.table("protocol", required=True)
    name = t.get_str("name", nonempty=True)
    try:
        cls = lookup(name)
    except LookupError as exc:  # registry.UnknownProtocolError
        raise ConfigError(t.key("name"), str(exc)) from None
    except Exception as exc:  # a broken plug-in must not crash the parser
        raise ConfigError(t.key("name"),
                          f"cannot load protocol {name!r}: {type(exc).__name__}: {exc}") from None
    p = t.table("params")
    p.seen.update(p.data)  # parse_params reports unknown parameters itself
    try:
        params = parse_params(cls.Params, p.data)
    except ParameterError as exc:
        raise ConfigError(p.key(exc.key), exc.problem) from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(p.path, str(exc)) from None
    t.finish()
    return ProtocolConfig(name, params)


def _hex_key(text: str, where: str) -> bytes:
    cleaned = text.strip().removeprefix("0x")
    try:
        key = bytes.fromhex(cleaned)
    except ValueError:
        raise ConfigError(where, "not a hexadecimal key") from None
    if len(key) < MIN_KEY_BYTES:
        raise ConfigError(where, f"key is {len(key)} bytes; at least {MIN_KEY_BYTES} required")
    problem = key_problem(key)
    if problem is not None:
        raise ConfigError(where, f"key {problem}: make one with 'meshsubctl genkey'")
    return key


def check_secret_file(path: Path, label: str, what: str) -> None:
    """Refuse a secret file others may read, or group or others may change.

    Mode 0400/0600 (the service's user alone) is what the role installs;
    0440/0640 is tolerated for a group that holds the secret anyway.
    """
    try:
        mode = path.stat().st_mode
    except OSError as exc:
        raise ConfigError(label, f"cannot read {what} {str(path)!r}: "
                                 f"{exc.strerror or exc}") from None
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise ConfigError(label, f"{what} {path} is writable by group or others "
                                 f"(mode {stat.S_IMODE(mode):04o}): chmod 0400 it")
    if mode & stat.S_IROTH:
        raise ConfigError(label, f"{what} {path} is readable by others "
                                 f"(mode {stat.S_IMODE(mode):04o}): chmod 0400 it")


def _key_id(text: str, where: str) -> int:
    if not text.isdigit() or int(text) > KEY_ID_MAX:
        raise ConfigError(where, f"key id must be an integer in 0..{KEY_ID_MAX}, got {text!r}")
    return int(text)


def read_key_file(path: Path, label: str) -> dict[int, bytes]:
    """Lines ``<key id> <hex key>``; ``#`` starts a comment. The file must be private."""
    check_secret_file(path, label, "key file")
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(label, f"cannot read key file {str(path)!r}: {exc}") from None
    keys: dict[int, bytes] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.split()
        where = f"{label}: {path}: line {number}"
        if len(parts) != 2:
            raise ConfigError(where, "expected '<key id> <hex key>'")
        keys[_key_id(parts[0], where)] = _hex_key(parts[1], where)
    return keys


def _security(root: _Table, base: Path) -> SecurityConfig:
    t = root.table("security", required=True)
    keys: dict[int, bytes] = {}
    key_file = t.get_str("key_file", "")
    if key_file:
        path = Path(key_file)
        keys.update(read_key_file(path if path.is_absolute() else base / path,
                                  t.key("key_file")))
    k = t.table("keys")
    for name in list(k.data):
        where = k.key(name)
        keys[_key_id(name, where)] = _hex_key(k.get_str(name), where)
    k.finish()
    if not keys:
        raise ConfigError(t.path, "no fleet keys: give security.keys or security.key_file")
    current = t.get_int("current_key", lo=0, hi=KEY_ID_MAX)
    if current not in keys:
        raise ConfigError(t.key("current_key"),
                          f"key {current} is not among the keys ({', '.join(map(str, keys))})")
    t.finish()
    warnings = tuple(f"security: key {key_id} {warning}" for key_id, key in sorted(keys.items())
                     if (warning := key_warning(key)) is not None)
    return SecurityConfig(current, keys, key_file, warnings)


def _mqtt(root: _Table, node_id: int, base: Path) -> MqttConfig:
    t = root.table("mqtt")
    prefix = t.get_str("topic_prefix", "meshsub", nonempty=True)
    if any(c in prefix for c in "+#\0") or prefix.startswith("/") or prefix.endswith("/"):
        raise ConfigError(t.key("topic_prefix"),
                          f"must be a plain topic without wildcards or edge slashes: {prefix!r}")
    password_file = t.get_str("password_file", "")
    password = ""
    if password_file:
        path = Path(password_file) if Path(password_file).is_absolute() else base / password_file
        check_secret_file(path, t.key("password_file"), "password file")
        try:
            password = path.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(t.key("password_file"), f"cannot read {str(path)!r}: {exc}") \
                from None
        if not password or "\n" in password:
            raise ConfigError(t.key("password_file"), "must hold one non-empty line")
    username = t.get_str("username", "")
    if password and not username:
        raise ConfigError(t.key("username"), "required with mqtt.password_file")
    tls = {name: t.get_str(name, "") for name in ("tls_ca_file", "tls_cert_file", "tls_key_file")}
    for name, value in tls.items():
        if value and not Path(value).is_file():
            raise ConfigError(t.key(name), f"no such file: {value!r}")
    if bool(tls["tls_cert_file"]) != bool(tls["tls_key_file"]):
        raise ConfigError(t.key("tls_cert_file"), "tls_cert_file and tls_key_file go together")
    host = t.get_str("host", "127.0.0.1", nonempty=True)
    if password and not tls["tls_ca_file"] and not _loopback(host):
        raise ConfigError(t.key("tls_ca_file"), f"required for a broker at {host}: without "
                          "TLS the password would cross the network in clear")
    cfg = MqttConfig(
        host=host,
        port=t.get_int("port", 1883, lo=1, hi=65535),
        client_id=t.get_str("client_id", f"meshsubd-{node_id:08x}", nonempty=True),
        topic_prefix=prefix,
        keepalive=t.get_int("keepalive", 60, lo=5, hi=65535),
        username=username,
        password_file=password_file,
        password=password,
        max_subscriptions=t.get_int("max_subscriptions", 1000, lo=1, hi=1_000_000),
        broker_config=t.get_str("broker_config", "/etc/mosquitto/mosquitto.conf"),
        **tls,
    )
    t.finish()
    return cfg


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _storage(root: _Table) -> StorageConfig:
    t = root.table("storage")
    state = t.get_str("state_dir", "/var/lib/meshsub", nonempty=True)
    cfg = StorageConfig(state, t.get_str("spool_dir", str(Path(state) / "spool"), nonempty=True),
                        t.get_str("runtime_dir", ""))
    t.finish()
    return cfg


def _telemetry(root: _Table) -> TelemetryConfig:
    t = root.table("telemetry")
    topic = t.get_str("mqtt_topic", "")
    if any(c in topic for c in "+#\0"):
        raise ConfigError(t.key("mqtt_topic"), f"must not contain wildcards: {topic!r}")
    run = t.get_str("run", "field", nonempty=True)
    if not RUN_ID.fullmatch(run):
        raise ConfigError(t.key("run"), f"must be 1-128 of [A-Za-z0-9_.-], got {run!r}")
    cfg = TelemetryConfig(
        enabled=t.get_bool("enabled", True),
        run=run,
        max_spool_bytes=t.get_int("max_spool_bytes", 100_000_000, lo=1_000_000),
        roll_bytes=t.get_int("roll_bytes", 1_000_000, lo=4096),
        roll_seconds=t.get_float("roll_seconds", 60.0, lo=1.0),
        mqtt_topic=topic,
        state_every_s=t.get_float("state_every_s", 60.0, lo=0.0),
    )
    if cfg.roll_bytes > cfg.max_spool_bytes:
        raise ConfigError(t.key("roll_bytes"), "must not exceed telemetry.max_spool_bytes")
    t.finish()
    return cfg


def _log(root: _Table) -> LogConfig:
    t = root.table("log")
    level = t.get_str("level", "info").lower()
    if level not in LOG_LEVELS:
        raise ConfigError(t.key("level"), f"must be one of {', '.join(LOG_LEVELS)}, got {level!r}")
    t.finish()
    return LogConfig(level)


def _energy(root: _Table) -> EnergyConfig:
    t = root.table("energy")
    cfg = EnergyConfig(
        source=t.choice("source", ("auto", "none"), "auto"),
        poll_s=t.get_float("poll_s", 30.0, lo=1.0),
        power_supply_dir=t.get_str("power_supply_dir", "/sys/class/power_supply",
                                   nonempty=True),
    )
    t.finish()
    return cfg


def _metrics(root: _Table) -> MetricsConfig:
    t = root.table("metrics")
    listen = t.get_str("listen", "").strip()
    allow_remote = t.get_bool("allow_remote", False)
    t.finish()
    if not listen:
        return MetricsConfig("", allow_remote)
    host, sep, port = listen.rpartition(":")
    bracketed = host.startswith("[") and host.endswith("]")
    if not sep or not port.isdigit() or not 1 <= int(port) <= 65535 or (
            ":" in host and not bracketed):
        raise ConfigError(t.key("listen"), f"expected IP:PORT or [IPv6]:PORT with a port in "
                          f"1..65535, got {listen!r}")
    try:
        addr = ipaddress.ip_address(host[1:-1] if bracketed else host)
    except ValueError:
        raise ConfigError(t.key("listen"), f"not an IP address: {host!r} (in {listen!r})") \
            from None
    if bracketed and addr.version != 6:
        raise ConfigError(t.key("listen"), f"brackets are for IPv6 addresses, got {listen!r}")
    if not addr.is_loopback and not allow_remote:
        raise ConfigError(t.key("listen"), f"{addr} is not a loopback address: set "
                          "metrics.allow_remote = true to serve metrics beyond this host "
                          "(see docs/security.md)")
    canonical = f"[{addr}]:{int(port)}" if addr.version == 6 else f"{addr}:{int(port)}"
    return MetricsConfig(canonical, allow_remote)


def parse_config(data: Mapping[str, Any], *, base_dir: Path = Path("."), source: str = "",
                 protocol_lookup: ProtocolLookup = registry_lookup) -> Config:
    """Validate an already-parsed TOML document."""
    root = _Table(data, "")
    node = _node(root)
    link = _link(root)
    cfg = Config(
        node=node,
        link=link,
        discovery=_discovery(root, link.port),
        location=_location(root),
        protocol=_protocol(root, protocol_lookup),
        security=_security(root, base_dir),
        mqtt=_mqtt(root, node.id, base_dir),
        storage=_storage(root),
        telemetry=_telemetry(root),
        log=_log(root),
        energy=_energy(root),
        metrics=_metrics(root),
        source=source,
    )
    root.finish()
    topic, prefix = cfg.telemetry.mqtt_topic, cfg.mqtt.topic_prefix
    if topic.startswith((f"{prefix}/pub/", f"{prefix}/sub/")):
        # the bridge would take its own telemetry back in as events or subscriptions
        raise ConfigError("telemetry.mqtt_topic",
                          f"must not be under {prefix}/pub/ or {prefix}/sub/: {topic!r}")
    return cfg


def load_config(path: str | Path = DEFAULT_PATH, *,
                protocol_lookup: ProtocolLookup = registry_lookup) -> Config:
    """Read and validate ``path``; every problem is a one-line ``ConfigError``."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(str(path), f"cannot read: {exc.strerror or exc}") from None
    try:
        data = tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(str(path), f"not UTF-8 text: {exc.reason} at byte {exc.start}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(str(path), f"invalid TOML: {exc}") from None
    return parse_config(data, base_dir=path.parent, source=str(path),
                        protocol_lookup=protocol_lookup)


# --------------------------------------------------------------------- SIGHUP


def _flatten(value: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    if isinstance(value, ProtocolParams):
        yield prefix, value  # compared as a whole (a frozen dataclass)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            if f.compare:
                yield from _flatten(getattr(value, f.name), f"{prefix}.{f.name}" if prefix
                                    else f.name)
    else:
        yield prefix, value


def diff_configs(old: Config, new: Config) -> ConfigDiff:
    """Which keys changed, and whether a running daemon can apply them (SIGHUP)."""
    a, b = dict(_flatten(old, "")), dict(_flatten(new, ""))
    changed = sorted(k for k in a.keys() | b.keys() if a.get(k, _MISSING) != b.get(k, _MISSING))

    def live(key: str) -> bool:
        return any(key == p or key.startswith(p + ".") for p in RELOADABLE_PATHS)

    if old.protocol.name != new.protocol.name and "protocol.params" in changed:
        # new parameters of another protocol need the restart the name change needs
        return ConfigDiff((), tuple(changed))
    return ConfigDiff(tuple(k for k in changed if live(k)),
                      tuple(k for k in changed if not live(k)))
