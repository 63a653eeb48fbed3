"""Scrape a running ``meshsubd`` over HTTP and read it with Prometheus' own text parser.

Two daemons (processes started from the installed ``meshsubd`` entry point, as
systemd starts it) are neighbours over loopback UDP; A has a real mosquitto, a
static position, the epidemic protocol (so a store-carry-forward buffer) and
``[metrics] listen`` on a free loopback port. The scrape must hold every metric
family the daemon defines, with the values ``meshsubctl status`` reports,
and the endpoint must count a hostile request and keep serving. Configuration
mistakes (a remote address without ``allow_remote``, an address in use) end
the daemon with one line.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mosquitto import Mosquitto, have_mosquitto
from prometheus_client.parser import text_string_to_metric_families

from meshsub.runtime.metrics import CONTENT_TYPE, FAMILIES

pytestmark = pytest.mark.skipif(not have_mosquitto(), reason="mosquitto is not installed")

KEY = "071634b1e493c4a893be58547237e9cb25ee65c9c0a3a2db3f22fae24988d055"  # a test key
MESHSUBD = Path(sys.executable).parent / "meshsubd"


def free_port(kind: int = socket.SOCK_STREAM) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(cond: Callable[[], Any], what: str, guard_s: float = 20.0) -> Any:
    deadline = time.monotonic() + guard_s  # a hang guard, not a timing assertion
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"not reached: {what}")
        time.sleep(0.05)


class Daemon:
    """One ``meshsubd`` process with its own state directory and configuration file."""

    def __init__(self, tmp: Path, node: int, port: int, peer: int, broker: int,
                 extra: str = "") -> None:
        self.port = port
        self.state = tmp / f"n{node}"
        self.state.mkdir()
        self.config = self.state / "meshsub.toml"
        self.config.write_text(f"""
[node]
id = {node}
name = "n{node}"
[link]
interface = ""
port = {port}
[discovery]
beacon_interval = 0.3
min_interval = 0.1
zeroconf = false
static_peers = ["127.0.0.1:{peer}"]
[protocol]
name = "epidemic"
[security]
current_key = 1
[security.keys]
1 = "{KEY}"
[mqtt]
host = "127.0.0.1"
port = {broker}
topic_prefix = "n{node}"
[storage]
state_dir = "{self.state}"
[energy]
source = "none"
[log]
level = "info"
{extra}
""", encoding="utf-8")
        self.log = self.state / "meshsubd.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen([str(MESHSUBD), "--config", str(self.config)],
                                         stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)

    def ctl(self, request: dict[str, Any]) -> Any:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(str(self.state / "meshsubd.sock"))
            s.sendall(json.dumps(request).encode() + b"\n")
            reply = json.loads(s.makefile("rb").readline())
        assert reply["ok"], reply
        return reply["result"]


def scrape(port: int) -> tuple[str, dict[str, Any]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
        assert reply.status == 200
        content_type = reply.headers["Content-Type"]
        text = reply.read().decode()
    return content_type, {f.name: f for f in text_string_to_metric_families(text)}


def value(families: dict[str, Any], name: str, **labels: str) -> float | None:
    family = families.get(name.removesuffix("_total"))
    if family is None:
        return None
    for sample in family.samples:
        if sample.labels == labels:
            return float(sample.value)
    return None


def try_scrape(port: int) -> dict[str, Any] | None:
    try:
        return scrape(port)[1]
    except OSError:
        return None


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[tuple[Daemon, Daemon, int]]:
    broker = Mosquitto(tmp_path, persistent=False)
    broker.start()
    pa, pb, metrics = free_port(socket.SOCK_DGRAM), free_port(socket.SOCK_DGRAM), free_port()
    a = Daemon(tmp_path, 1, pa, pb, broker.port, extra=f"""
[location]
source = "static"
[location.static]
x = 10.0
y = 20.0
[metrics]
listen = "127.0.0.1:{metrics}"
""")
    b = Daemon(tmp_path, 2, pb, pa, broker.port)
    try:
        a.start()
        b.start()
        yield a, b, metrics
    finally:
        a.stop()
        b.stop()
        broker.stop()


def test_a_scrape_holds_every_metric_with_the_status_values(
        pair: tuple[Daemon, Daemon, int]) -> None:
    a, _b, port = pair

    def ready() -> dict[str, Any] | None:
        got = try_scrape(port)
        ok = got is not None and value(got, "meshsub_neighbors") == 1 \
            and value(got, "meshsub_mqtt_connected") == 1
        return got if ok else None

    wait_for(ready, "A sees B and its broker in the scrape", guard_s=30)
    a.ctl({"cmd": "pub", "event": "sensors/t v=1"})
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:  # not frames: the kernel
        for _ in range(3):                                      # filter drops them
            s.sendto(b"\xffnot a meshsub frame", ("127.0.0.1", a.port))
    wait_for(lambda: (got := try_scrape(port)) is not None
             and (value(got, "meshsub_kernel_drops_total") or 0) >= 3
             and (value(got, "meshsub_buffer_messages") or 0) >= 1,
             "kernel drops and the buffered publication in the scrape")
    content_type, families = scrape(port)
    status = a.ctl({"cmd": "status"})

    assert content_type == CONTENT_TYPE
    assert {f.name.removesuffix("_total") for f in FAMILIES} <= set(families)
    assert all(name.startswith("meshsub_") for name in families)
    info = families["meshsub_info"].samples[0].labels
    assert info == {"node": "1", "name": "n1", "version": status["version"],
                    "protocol": "epidemic"}
    assert value(families, "meshsub_epoch") == status["epoch"]
    assert value(families, "meshsub_link_up") == 1
    assert value(families, "meshsub_link_state", state="up") == 1
    assert value(families, "meshsub_link_state", state="down") == 0
    assert value(families, "meshsub_mqtt_state", state="connected") == 1
    assert value(families, "meshsub_position_fix") == 1
    assert 0 <= (value(families, "meshsub_position_fix_age_seconds") or -1) < 600
    assert value(families, "meshsub_buffer_capacity_messages") == \
        status["protocol"]["buffer"]["capacity"]
    assert (value(families, "meshsub_buffer_bytes") or 0) > 0
    assert (value(families, "meshsub_messages_sent_total") or 0) > 0
    assert (value(families, "meshsub_link_sent_bytes_total") or 0) > 0
    assert (value(families, "meshsub_beacons_received_total") or 0) > 0
    assert value(families, "meshsub_neighbor_events_total", event="up") == 1
    assert value(families, "meshsub_neighbor_link_quality_min_ratio") is not None
    assert value(families, "meshsub_control_requests_total") == status["control"]["requests"] - 1
    # the series an insider could grow are not there: no peer ids, no addresses
    for family in families.values():
        for sample in family.samples:
            assert not {"peer", "node_id", "origin", "address"} & set(sample.labels)

    # a hostile request is refused, counted, and the endpoint goes on
    with socket.create_connection(("127.0.0.1", port), timeout=5) as s:
        s.sendall(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20000 + b"\r\n\r\n")
        assert s.recv(64).startswith(b"HTTP/1.1 431 ")
    families = wait_for(  # the text is rendered at most once a second
        lambda: (got := try_scrape(port)) is not None and value(
            got, "meshsub_metrics_refused_total", reason="too_large") == 1 and got,
        "the refusal in the scrape")
    assert (value(families, "meshsub_metrics_scrapes_total") or 0) >= 2


def test_a_remote_address_without_allow_remote_is_one_line(tmp_path: Path) -> None:
    d = Daemon(tmp_path, 3, free_port(socket.SOCK_DGRAM), 1, 1,
               extra='[metrics]\nlisten = "0.0.0.0:9479"\n')
    run = subprocess.run([str(MESHSUBD), "--config", str(d.config), "--check"],
                         capture_output=True, text=True, timeout=30)
    assert run.returncode == 2
    assert run.stderr.count("\n") == 1
    assert run.stderr.startswith("meshsubd: metrics.listen: 0.0.0.0 is not a loopback address")


def test_an_address_in_use_stops_the_start_with_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        d = Daemon(tmp_path, 4, free_port(socket.SOCK_DGRAM), 1, free_port(),
                   extra=f'[metrics]\nlisten = "127.0.0.1:{port}"\n')
        run = subprocess.run([str(MESHSUBD), "--config", str(d.config)],
                             capture_output=True, text=True, timeout=60)
    assert run.returncode == 1
    lines = [ln for ln in (run.stdout + run.stderr).splitlines() if "cannot start" in ln]
    assert len(lines) == 1 and f"metrics.listen 127.0.0.1:{port}" in lines[0], \
        run.stdout + run.stderr
    assert "in use" in lines[0]
