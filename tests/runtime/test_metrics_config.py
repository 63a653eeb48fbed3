"""``[metrics]``: off by default, loopback unless the operator says otherwise, one-line errors."""

from __future__ import annotations

from typing import Any

import pytest

from meshsub.protocols.flooding import Flooding
from meshsub.runtime.config import Config, ConfigError, diff_configs
from meshsub.runtime.config import parse_config as parse_with_registry

KEY = "3f8a2c71d94be05a6f1e8d7c2b9a4e3f"


def doc(**metrics: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"node": {"id": 1, "name": "n1"},
                           "protocol": {"name": "flooding"},
                           "security": {"current_key": 1, "keys": {"1": KEY}}}
    if metrics:
        out["metrics"] = metrics
    return out


def parse_config(data: dict[str, Any]) -> Config:
    return parse_with_registry(data, protocol_lookup=lambda _name: Flooding)


def test_off_by_default() -> None:
    cfg = parse_config(doc())
    assert cfg.metrics.listen == "" and cfg.metrics.allow_remote is False


@pytest.mark.parametrize("listen,host,port,canonical", [
    ("127.0.0.1:9479", "127.0.0.1", 9479, "127.0.0.1:9479"),
    ("127.0.0.53:80", "127.0.0.53", 80, "127.0.0.53:80"),
    ("[::1]:9479", "::1", 9479, "[::1]:9479"),
    ("[0:0:0:0:0:0:0:1]:9479", "::1", 9479, "[::1]:9479"),
])
def test_loopback_addresses_are_accepted(listen: str, host: str, port: int,
                                         canonical: str) -> None:
    m = parse_config(doc(listen=listen)).metrics
    assert (m.listen, m.host, m.port) == (canonical, host, port)


@pytest.mark.parametrize("listen", ["0.0.0.0:9479", "10.42.0.7:9479", "[::]:9479",
                                    "[fe80::1%eth0]:9479"])
def test_other_addresses_need_allow_remote(listen: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(doc(listen=listen))
    text = str(info.value)
    assert text.startswith("metrics.listen: ") and "not a loopback address" in text
    assert "metrics.allow_remote = true" in text and "\n" not in text
    assert parse_config(doc(listen=listen, allow_remote=True)).metrics.port == 9479


@pytest.mark.parametrize("listen,problem", [
    ("9479", "expected IP:PORT"),
    ("127.0.0.1", "expected IP:PORT"),
    ("127.0.0.1:", "expected IP:PORT"),
    ("127.0.0.1:0", "expected IP:PORT"),
    ("127.0.0.1:70000", "expected IP:PORT"),
    ("127.0.0.1:http", "expected IP:PORT"),
    ("::1:9479", "expected IP:PORT"),
    ("localhost:9479", "not an IP address: 'localhost'"),
    ("127.0.0.256:9479", "not an IP address"),
    ("[127.0.0.1]:9479", "brackets are for IPv6"),
])
def test_bad_listen_addresses_answer_with_one_line(listen: str, problem: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_config(doc(listen=listen))
    text = str(info.value)
    assert text.startswith("metrics.listen: ") and problem in text and "\n" not in text


@pytest.mark.parametrize("bad,expected", [
    ({"listen": 9479}, "metrics.listen: expected a string, got integer"),
    ({"allow_remote": "yes"}, "metrics.allow_remote: expected true or false"),
    ({"port": 9479}, "metrics.port: unknown key"),
])
def test_bad_keys_name_themselves(bad: dict[str, Any], expected: str) -> None:
    with pytest.raises(ConfigError, match="^" + expected):
        parse_config(doc(**bad))


def test_changing_the_endpoint_needs_a_restart() -> None:
    diff = diff_configs(parse_config(doc()), parse_config(doc(listen="127.0.0.1:9479")))
    assert diff.restart_required == ("metrics.listen",) and diff.reloadable == ()
