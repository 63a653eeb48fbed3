"""Config loading: every problem is one line naming the key; the example loads."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from examplecfg import install_example

from meshsub.core.params import ParameterError, ProtocolParams
from meshsub.core.protocol import Protocol
from meshsub.core.registry import UnknownProtocolError
from meshsub.runtime.config import (
    Config,
    ConfigError,
    StaticPeer,
    diff_configs,
    load_config,
    parse_peer,
)

REPO = Path(__file__).resolve().parents[2]
KEY = "3f8a6c1d9e2b7045a1c4e8f26d0b9a73"
LONG_KEY = "071634b1e493c4a893be58547237e9cb25ee65c9c0a3a2db3f22fae24988d055"


@dataclasses.dataclass(frozen=True, slots=True)
class FakeParams(ProtocolParams):
    ttl: int = 8
    rate: float = 1.0

    def validate(self) -> None:
        if self.ttl < 1:
            raise ParameterError("ttl", "must be at least 1")


class FakeProtocol(Protocol):
    name = "fake"
    Params = FakeParams


def lookup(name: str) -> type[Protocol]:
    if name == "fake":
        return FakeProtocol
    if name == "broken":
        raise ImportError("No module named 'meshsub.protocols.broken'")
    raise UnknownProtocolError(name, ["fake"])


MINIMAL = f"""
[node]
id = 7
name = "n7"

[protocol]
name = "fake"

[security]
current_key = 1
[security.keys]
1 = "{KEY}"
"""


def write(tmp_path: Path, text: str, name: str = "meshsub.toml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def load(tmp_path: Path, text: str) -> Config:
    return load_config(write(tmp_path, text), protocol_lookup=lookup)


def error(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as info:
        load(tmp_path, text)
    message = str(info.value)
    assert "\n" not in message
    return message


def test_minimal_defaults(tmp_path: Path) -> None:
    cfg = load(tmp_path, MINIMAL)
    assert cfg.node.id == 7 and cfg.node.name == "n7"
    assert cfg.link.payload_size == 1200 and cfg.link.port == 4790
    assert cfg.link.mode == "adhoc" and cfg.link.family == "ipv4" and cfg.link.interface == ""
    assert cfg.discovery.neighbor_timeout == 3 and cfg.discovery.zeroconf is True
    assert cfg.mqtt.topic_prefix == "meshsub" and cfg.mqtt.client_id == "meshsubd-00000007"
    assert cfg.storage.state_dir == "/var/lib/meshsub"
    assert cfg.storage.spool_dir == "/var/lib/meshsub/spool"
    assert cfg.protocol.params == FakeParams()
    assert cfg.security.keys == {1: bytes.fromhex(KEY)}
    assert cfg.log.level == "info"
    assert "3f8a" not in repr(cfg)  # keys never end up in logs via repr


def test_example_config_is_complete_and_valid(tmp_path: Path) -> None:
    cfg = load_config(install_example(tmp_path))  # the real registry
    assert cfg.protocol.name == "flooding"
    assert cfg.location.source == "gpsd" and cfg.location.origin is not None
    assert cfg.discovery.static_peers == (StaticPeer("10.42.0.1", 4790),
                                         StaticPeer("10.42.0.2", 4790))


def test_every_documented_key_is_in_the_example() -> None:
    doc = (REPO / "docs" / "config.md").read_text()
    example = (REPO / "deploy" / "meshsub.toml.example").read_text()
    import re
    keys = set(re.findall(r"^\| `([a-z_.]+)` \|", doc, flags=re.M))
    assert len(keys) > 40
    for key in keys:
        leaf = key.rsplit(".", 1)[-1]
        assert leaf in example, key


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ('[location.gpsd]\nport = "2947"\n[location.origin]\nlat=1\nlon=2\n'
         '[location]\nsource="gpsd"',
         "location.gpsd.port: expected an integer, got string"),
        ("[link]\npayload_size = 100", "link.payload_size: must be at least 256, got 100"),
        ("[link]\npayload_size = 70000", "link.payload_size: must be at most 65000"),
        ('[link]\nmode = "mesh"', "link.mode: must be one of adhoc, batman, got 'mesh'"),
        ('[link]\nfamily = "ipx"', "link.family: must be one of ipv4, ipv6"),
        ("[link]\nport = 0", "link.port: must be at least 1"),
        ('[link]\nmulticast_group = "ff05::1"', "link.multicast_group: must be a link-local"),
        ('[link]\ninterface = "a-very-long-interface-name"', "link.interface: not a valid"),
        ("[link]\nspeed = 3", "link.speed: unknown key"),
        ("[discovery]\nbeacon_interval = -1", "discovery.beacon_interval: must be at least 0.1"),
        ("[discovery]\nbeacon_interval = 2.0\nmin_interval = 3.0",
         "discovery.min_interval: must not exceed discovery.beacon_interval"),
        ("[discovery]\nbeacon_jitter = 0.9", "discovery.beacon_jitter: must be at most 0.5"),
        ('[discovery]\nstatic_peers = ["10.0.0.1", "host.example"]',
         "discovery.static_peers[1]: not an IP address: 'host.example'"),
        ('[discovery]\nstatic_peers = ["10.0.0.1:99999"]', "discovery.static_peers[0]: bad port"),
        ("[discovery]\nstatic_peers = [1]", "discovery.static_peers[0]: expected a string"),
        ('[discovery]\nzeroconf = "yes"', "discovery.zeroconf: expected true or false"),
        ("[discovery]\ncontrol_budget = 0", "discovery.control_budget: must be greater than 0"),
        ('[location]\nsource = "gpsd"', "location.origin: required for location.source = 'gpsd'"),
        ('[location]\nsource = "glonass"',
         "location.source: must be one of none, static, gpsd, nmea"),
        ('[location]\nsource = "static"', "location.static: required key is missing"),
        ("[location.static]\nlat = 91\nlon = 0\n[location.origin]\nlat = 0\nlon = 0",
         "location.static.lat: must be at most 90"),
        ("[location.static]\nlat = 1\nlon = 2", "location.origin: required to convert"),
        ("[location.static]\nlat = 1\nlon = 2\nx = 3\ny = 4",
         "location.static: give either lat/lon/alt or x/y/z, not both"),
        ("[location.static]\nx = 1\ny = 2\n[location]\nmax_hdop = -1",
         "location.max_hdop: must be at least 0.0"),
        ("[location.static]\nx = 1\ny = 2\n[location]\nmax_error_m = -1",
         "location.max_error_m: must be at least 0.0"),
        ("[location.static]\nx = 1\ny = 2\n[location]\nrequire_quality = 1",
         "location.require_quality: expected true or false, got integer"),
        ("[link]\nreceive_buffer = -5", "link.receive_buffer: must be at least 0"),
        ("[location.static]\nx = 1\ny = 2\n[location]\nmin_mode = 1",
         "location.min_mode: must be at least 2"),
        ("[location.static]\nx = 1\ny = 2\n[location.nmea]\nbaud = 1234",
         "location.nmea.baud: unsupported baud rate 1234"),
        ("[location.static]\nx = 1\ny = nan", "location.static.y: must be a finite number"),
        ('[protocol.params]\nttl = "x"', "protocol.params.ttl: expected an integer, got str"),
        ("[protocol.params]\nttl = 0", "protocol.params.ttl: must be at least 1"),
        ("[protocol.params]\nwidth = 3", "protocol.params.width: unknown parameter"),
        ("[mqtt]\nport = 65536", "mqtt.port: must be at most 65535"),
        ('[mqtt]\ntopic_prefix = "a/#"', "mqtt.topic_prefix: must be a plain topic"),
        ("[mqtt]\nkeepalive = 1", "mqtt.keepalive: must be at least 5"),
        ("[telemetry]\nroll_bytes = 10", "telemetry.roll_bytes: must be at least 4096"),
        ("[telemetry]\nmax_spool_bytes = 2000000\nroll_bytes = 3000000",
         "telemetry.roll_bytes: must not exceed telemetry.max_spool_bytes"),
        ('[telemetry]\nmqtt_topic = "t/+"', "telemetry.mqtt_topic: must not contain wildcards"),
        ('[telemetry]\nrun = "a b"', "telemetry.run: must be 1-128 of [A-Za-z0-9_.-]"),
        ('[telemetry]\nrun = ""', "telemetry.run: must not be empty"),
        ('[log]\nlevel = "loud"', "log.level: must be one of debug, info"),
        ('[storage]\nstate_dir = ""', "storage.state_dir: must not be empty"),
        ("[extra]\na = 1", "extra: unknown key"),
    ],
)
def test_bad_values_name_the_key(tmp_path: Path, patch: str, expected: str) -> None:
    # appended tables may re-open [location] etc.; TOML forbids defining a table twice,
    # so the patches above only use tables MINIMAL does not define
    assert expected in error(tmp_path, MINIMAL + "\n" + patch)


def test_wrong_table_type(tmp_path: Path) -> None:
    assert error(tmp_path, "link = 3\n" + MINIMAL) == "link: expected a table, got integer"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[protocol]\nname = \"nope\"", "protocol.name: unknown protocol 'nope' (known: fake)"),
        ("[protocol]\nname = \"broken\"", "protocol.name: cannot load protocol 'broken'"),
        ("[protocol]\nname = 5", "protocol.name: expected a string, got integer"),
    ],
)
def test_protocol_errors(tmp_path: Path, text: str, expected: str) -> None:
    base = MINIMAL.replace('[protocol]\nname = "fake"\n', "")
    assert expected in error(tmp_path, base + text)


def test_missing_required(tmp_path: Path) -> None:
    assert error(tmp_path, MINIMAL.replace("id = 7\n", "")) == "node.id: required key is missing"
    assert "protocol: required key is missing" in error(
        tmp_path, MINIMAL.replace('[protocol]\nname = "fake"\n', ""))
    assert error(tmp_path, MINIMAL.replace("id = 7", "id = -1")) == \
        "node.id: must be at least 0, got -1"
    assert error(tmp_path, MINIMAL.replace("id = 7", "id = 4294967296")).startswith(
        "node.id: must be at most 4294967295")


def test_keys(tmp_path: Path) -> None:
    short = MINIMAL.replace(KEY, "0011223344")
    assert error(tmp_path, short) == \
        "security.keys.1: key is 5 bytes; at least 16 required"
    assert "security.keys.1: not a hexadecimal key" in error(tmp_path, MINIMAL.replace(KEY, "zz"))
    assert "security.current_key: key 2 is not among the keys" in error(
        tmp_path, MINIMAL.replace("current_key = 1", "current_key = 2"))
    assert "security.keys.x: key id must be an integer in 0..255" in error(
        tmp_path, MINIMAL.replace(f'1 = "{KEY}"', f'x = "{KEY}"'))
    assert "security: no fleet keys" in error(tmp_path, MINIMAL.replace(f'1 = "{KEY}"', ""))


def write_private(path: Path, text: str, mode: int = 0o600) -> None:
    path.write_text(text)
    path.chmod(mode)


def test_key_file(tmp_path: Path) -> None:
    other = LONG_KEY
    write_private(tmp_path / "fleet.keys", f"# fleet keys\n2 {other}\n\n3 {KEY}  # old\n")
    text = MINIMAL.replace("current_key = 1", 'current_key = 2\nkey_file = "fleet.keys"')
    cfg = load(tmp_path, text)
    assert cfg.security.keys == {1: bytes.fromhex(KEY), 2: bytes.fromhex(other),
                                 3: bytes.fromhex(KEY)}
    write_private(tmp_path / "fleet.keys", "2 abcd\n")
    assert "fleet.keys: line 1: key is 2 bytes" in error(tmp_path, text)
    write_private(tmp_path / "fleet.keys", "2\n")
    assert "line 1: expected '<key id> <hex key>'" in error(tmp_path, text)
    (tmp_path / "fleet.keys").unlink()
    assert error(tmp_path, text).startswith("security.key_file: cannot read key file")


@pytest.mark.parametrize(("key", "problem"), [
    ("00" * 32, "repeats one byte"),
    ("5a" * 32, "repeats one byte"),
    ("8f0c2a9d4be1736055a1c7e2d94f3b6a1e5c7d9f20b4a6c8e0f1a3b5c7d9e1f3",
     "is an example key published with meshsub"),
    ("00112233445566778899aabbccddeeff", "is an example key published with meshsub"),
    (b"password12345678".hex(), "is printable text"),
    ("0102" * 16, "has only 2 distinct byte values"),
    ("9e1c47b2d05a83f6" * 4, "repeats a 8-byte pattern"),
])
def test_weak_keys_are_refused(tmp_path: Path, key: str, problem: str) -> None:
    """Issue 25 item 7: the daemon started without a word with all of these."""
    message = error(tmp_path, MINIMAL.replace(KEY, key))
    assert message.startswith("security.keys.1: key ") and problem in message
    assert "meshsubctl genkey" in message


def test_a_short_key_is_accepted_with_a_warning(tmp_path: Path) -> None:
    assert load(tmp_path, MINIMAL).security.warnings == (
        "security: key 1 is 16 bytes; 32 random bytes are recommended (meshsubctl genkey)",)
    assert load(tmp_path, MINIMAL.replace(KEY, LONG_KEY)).security.warnings == ()


@pytest.mark.parametrize(("mode", "ok"), [(0o400, True), (0o600, True), (0o440, True),
                                          (0o640, True), (0o644, False), (0o604, False),
                                          (0o660, False), (0o602, False), (0o666, False)])
def test_key_file_must_be_private(tmp_path: Path, mode: int, ok: bool) -> None:
    write_private(tmp_path / "fleet.keys", f"2 {LONG_KEY}\n", mode)
    text = MINIMAL.replace("current_key = 1", 'current_key = 2\nkey_file = "fleet.keys"')
    if ok:
        assert load(tmp_path, text).security.current_key == 2
    else:
        message = error(tmp_path, text)
        assert message.startswith("security.key_file: key file ") and "chmod 0400" in message


def test_unreadable_and_invalid_toml(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.toml", protocol_lookup=lookup)
    message = error(tmp_path, MINIMAL + "\n[link\nport = 1\n")
    assert "invalid TOML" in message and "line 14" in message
    path = tmp_path / "bin.toml"
    path.write_bytes(b"\xff\xfe[node]")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(path, protocol_lookup=lookup)


def test_ipv6_link_and_peers(tmp_path: Path) -> None:
    cfg = load(tmp_path, MINIMAL + """
[link]
interface = "bat0"
mode = "batman"
family = "ipv6"
port = 5000
[discovery]
static_peers = ["fe80::1%bat0", "[fe80::2]:6000", "10.1.1.1:7000"]
""")
    assert cfg.link.mode == "batman" and cfg.link.family == "ipv6"
    assert cfg.discovery.static_peers == (StaticPeer("fe80::1%bat0", 5000),
                                         StaticPeer("fe80::2", 6000),
                                         StaticPeer("10.1.1.1", 7000))
    assert str(cfg.discovery.static_peers[1]) == "[fe80::2]:6000"


def test_parse_peer_errors() -> None:
    with pytest.raises(ValueError, match="unbalanced"):
        parse_peer("[fe80::1", 1)
    with pytest.raises(ValueError, match="expected ':port'"):
        parse_peer("[fe80::1]x", 1)


def test_static_local_metres(tmp_path: Path) -> None:
    cfg = load(tmp_path, MINIMAL + "[location.static]\nx = 10\ny = -4.5\n")
    assert cfg.location.static is not None
    assert (cfg.location.static.x, cfg.location.static.y) == (10.0, -4.5)
    assert cfg.location.origin is None


def test_reloadable_and_diff(tmp_path: Path) -> None:
    old = load(tmp_path, MINIMAL)
    new = load(tmp_path, MINIMAL + """
[protocol.params]
ttl = 4
[discovery]
static_peers = ["10.0.0.9"]
[log]
level = "DEBUG"
""")
    assert new.reloadable.log_level == "debug" and new.log.level_number == 10
    diff = diff_configs(old, new)
    assert diff.reloadable == ("discovery.static_peers", "log.level", "protocol.params")
    assert diff.restart_required == ()
    moved = load(tmp_path, MINIMAL + "[link]\nport = 5000\n[log]\nlevel = \"error\"\n")
    diff = diff_configs(old, moved)
    assert diff.reloadable == ("log.level",)
    assert diff.restart_required == ("link.port",)
    assert not diff_configs(old, load(tmp_path, MINIMAL)).changed
