"""meshsubd on three network namespaces: A - B - C, with A and C out of each other's range.

Each namespace runs its own mosquitto and a meshsubd (``flooding``); A takes
its position from the real gpsd fed by gpsfake, C from NMEA on a
pseudo-terminal. The tests share one mesh (bringing it up is the slow part)
and run in file order; the SIGKILL test comes last because it restarts A.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from mesh import IFACE, KEY, Mesh, NodeProc, metres_north, nmea_epoch, sh, wait_for

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, nftables)"),
    pytest.mark.skipif(not all(shutil.which(t) for t in ("mosquitto_pub", "mosquitto_sub",
                                                          "gpsfake", "nft")),
                       reason="needs mosquitto clients, gpsfake and nft"),
]
HERE = Path(__file__).parent
A_NORTH, C_NORTH = 100.0, 200.0


class NmeaFeeder:
    """Writes a fixed position as NMEA to a pseudo-terminal twice a second."""

    def __init__(self, lat: float, lon: float) -> None:
        self.master, self.slave = os.openpty()
        os.set_blocking(self.master, False)
        self.path = os.ttyname(self.slave)
        self.lat, self.lon = lat, lon
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        second = 0
        while not self._stop.wait(0.5):
            second += 1
            # nobody reading (the daemon restarting): the next epoch will do
            with contextlib.suppress(OSError):
                os.write(self.master, nmea_epoch(self.lat, self.lon, second).encode())

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        os.close(self.master)
        os.close(self.slave)


@pytest.fixture(scope="module")
def mesh(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    workdir = tmp_path_factory.mktemp("mesh")
    m = Mesh(workdir)
    feeder: NmeaFeeder | None = None
    try:
        m.up()
        a, c = m.nodes["a"], m.nodes["c"]
        gpsd_port = a.mqtt_port + 1 if a.mqtt_port < 65000 else a.mqtt_port - 1
        log = workdir / "a.nmea"
        log.write_text("".join(nmea_epoch(metres_north(A_NORTH), 13.405, s) for s in range(20)))
        a.extra.append(subprocess.Popen(
            ["ip", "netns", "exec", a.ns, "gpsfake", "-P", str(gpsd_port), "-q", "-c", "0.05",
             str(log)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            env={**os.environ, "PATH": os.environ.get("PATH", "") + ":/usr/sbin:/sbin"}))
        a.location = {"source": "gpsd", "port": gpsd_port}
        feeder = NmeaFeeder(metres_north(C_NORTH), 13.405)
        c.location = {"source": "nmea", "device": feeder.path}
        m.start()
        m.wait_neighbors()
        yield m
    finally:
        for node in m.nodes.values():
            if node.daemon is not None and node.daemon.poll() is not None:
                print(f"--- meshsubd {node.name} exited {node.daemon.returncode}:\n"
                      f"{node.log_tail()}")
        m.down()
        if feeder is not None:
            feeder.close()


def test_event_from_a_reaches_c_through_b_once(mesh: Mesh) -> None:
    a, b, c = mesh.nodes["a"], mesh.nodes["b"], mesh.nodes["c"]
    sub = c.mqtt_sub("meshsub/deliver/e2e-once/#")
    sub.wait_ready(c, "meshsub/deliver/e2e-once/probe")
    c.mqtt_pub("meshsub/sub/e2e-once", "sensors/# v>1", retain=True)
    wait_for(lambda: any(r["sub_id"] == "e2e-once" for r in c.ctl("subscriptions")),
             "subscription on C")
    relayed_before = b.ctl("status")["frames"]["counters"].get("messages_out", 0)

    a.mqtt_pub("meshsub/pub/sensors/temp", '{"v": 5, "room": "lab"}')
    (first,) = wait_for(lambda: sub.events(v=5), "event on C")
    assert first["hop"] == 2 and first["origin"] == 1 and first["node"] == 3
    assert first["topic"] == "sensors/temp" and first["attrs"] == {"v": 5, "room": "lab"}
    assert first["latency_s"] >= 0
    assert b.ctl("status")["frames"]["counters"]["messages_out"] > relayed_before

    a.mqtt_pub("meshsub/pub/sensors/temp", '{"v": 1}')  # does not match: never delivered
    a.mqtt_pub("meshsub/pub/sensors/temp", '{"v": 6}')  # a later event as a sentinel
    wait_for(lambda: sub.events(v=6), "sentinel on C")
    assert len(sub.events(v=5)) == 1 and sub.events(v=1) == []
    assert sorted(r["node"] for r in c.ctl("neighbors")) == [2]  # C never hears A


def test_dnssd_finds_the_reachable_peers(mesh: Mesh) -> None:
    a, b = mesh.nodes["a"], mesh.nodes["b"]

    def dnssd(node: NodeProc) -> list[str]:
        return sorted(node.ctl("status")["discovery"]["probe_peers"].get("dnssd", []))

    port = b.udp_port
    wait_for(lambda: dnssd(b) == [f"10.99.0.1:{port}", f"10.99.0.3:{port}"],
             "B browsed A and C")
    assert dnssd(a) == [f"10.99.0.2:{port}"]  # A's mDNS never reaches C either


def test_positions_from_gpsd_and_nmea(mesh: Mesh) -> None:
    a, b, c = mesh.nodes["a"], mesh.nodes["b"], mesh.nodes["c"]
    sa = wait_for(lambda: (s := a.try_status()) and s["position"] and s, "A's gpsd fix")
    assert sa["location"]["source"] == "gpsd" and sa["location"]["fix"] is True
    assert sa["position"]["y"] == pytest.approx(A_NORTH, abs=1.0)
    assert sa["position"]["x"] == pytest.approx(0.0, abs=1.0)
    sc = wait_for(lambda: (s := c.try_status()) and s["position"] and s, "C's NMEA fix")
    assert sc["location"]["source"] == "nmea" and sc["location"]["provider"]["connected"]
    assert sc["position"]["y"] == pytest.approx(C_NORTH, abs=1.0)

    def rows() -> dict[int, dict[str, object]] | None:
        found = {r["node"]: r for r in b.ctl("neighbors")}
        return found if all(found.get(n, {}).get("y") is not None for n in (1, 3)) else None

    table = wait_for(rows, "positions in B's neighbour table")
    assert table[1]["y"] == pytest.approx(A_NORTH, abs=1.0)
    assert table[3]["y"] == pytest.approx(C_NORTH, abs=1.0)


def test_injected_bad_frames_are_counted_and_delivery_continues(mesh: Mesh) -> None:
    a, b, c = mesh.nodes["a"], mesh.nodes["b"], mesh.nodes["c"]
    status = c.ctl("status")
    assert status["admission"]["kernel_filter"]
    before, kernel_before = status["drops"]["frame"], status["drops"]["kernel"]
    out = json.loads(sh(sys.executable, str(HERE / "inject.py"), c.address, str(c.udp_port),
                        KEY, ns=b.ns).stdout)
    expected = {reason: before.get(reason, 0) + n for reason, n in out["frame"].items()}

    def counted() -> bool:
        status = c.ctl("status")
        drops = status["drops"]["frame"]
        return (all(drops.get(r, 0) >= n for r, n in expected.items())
                and status["drops"]["kernel"] >= kernel_before + out["kernel"])

    wait_for(counted, "bad frames counted by reason on C, and in the kernel")
    drops = c.ctl("status")["drops"]["frame"]
    assert {r: drops[r] for r in expected} == expected  # each counted once, by its reason
    assert c.daemon is not None and c.daemon.poll() is None

    sub = c.mqtt_sub("meshsub/deliver/e2e-after/#")
    sub.wait_ready(c, "meshsub/deliver/e2e-after/probe")
    c.mqtt_pub("meshsub/sub/e2e-after", "after/#", retain=True)
    wait_for(lambda: any(r["sub_id"] == "e2e-after" for r in c.ctl("subscriptions")),
             "subscription on C")
    a.mqtt_pub("meshsub/pub/after/x", '{"ok": true}')
    wait_for(lambda: sub.events(ok=True), "delivery after the bad frames")


def test_sighup_reloads_protocol_parameters(mesh: Mesh) -> None:
    b = mesh.nodes["b"]
    assert b.daemon is not None
    text = b.config_path.read_text()
    b.config_path.write_text(text.replace("ttl = 8", "ttl = 6").replace(
        'name = "e2e-b"', 'name = "e2e-b2"'))  # the name needs a restart: logged, kept
    b.daemon.send_signal(signal.SIGHUP)
    wait_for(lambda: b.ctl("status")["protocol"]["params"]["ttl"] == 6, "ttl reloaded on B")
    status = b.ctl("status")
    assert status["name"] == "e2e-b" and status["counters"]["reloads"] == 1
    assert b.daemon.poll() is None
    b.config_path.write_text(text)


def test_publication_held_while_the_interface_is_gone(mesh: Mesh) -> None:
    """The mesh interface loses its address (a Pi's Wi-Fi going down): accepted events wait
    in the outbox and go out when it is back, without a restart."""
    a, c = mesh.nodes["a"], mesh.nodes["c"]
    sub = c.mqtt_sub("meshsub/deliver/e2e-held/#")
    sub.wait_ready(c, "meshsub/deliver/e2e-held/probe")
    c.mqtt_pub("meshsub/sub/e2e-held", "held/#", retain=True)
    wait_for(lambda: any(r["sub_id"] == "e2e-held" for r in c.ctl("subscriptions")),
             "subscription on C")
    sh("ip", "-n", a.ns, "addr", "flush", "dev", IFACE)
    wait_for(lambda: a.ctl("status")["link"]["state"] == "waiting", "A's link waiting")
    a.mqtt_pub("meshsub/pub/held/x", '{"n": 1}')
    wait_for(lambda: a.ctl("status")["outbox"] == 1, "event held in A's outbox")
    assert sub.events(n=1) == []
    sh("ip", "-n", a.ns, "addr", "add", f"{a.address}/24", "brd", "+", "dev", IFACE)
    (got,) = wait_for(lambda: sub.events(n=1), "held event on C once A's link is back")
    assert got["hop"] == 2
    assert a.ctl("status")["outbox"] == 0


def test_sigkill_after_ack_then_restart_still_delivers(mesh: Mesh) -> None:
    a, c = mesh.nodes["a"], mesh.nodes["c"]
    sub = c.mqtt_sub("meshsub/deliver/e2e-kill/#")
    sub.wait_ready(c, "meshsub/deliver/e2e-kill/probe")
    c.mqtt_pub("meshsub/sub/e2e-kill", "kill/#", retain=True)
    wait_for(lambda: any(r["sub_id"] == "e2e-kill" for r in c.ctl("subscriptions")),
             "subscription on C")
    epoch = a.ctl("status")["epoch"]

    # A cannot send: its mesh interface loses its address, the link waits for it
    sh("ip", "-n", a.ns, "addr", "flush", "dev", IFACE)
    wait_for(lambda: a.ctl("status")["link"]["state"] == "waiting", "A's link waiting")
    a.mqtt_pub("meshsub/pub/kill/x", '{"n": 7}')  # returns once mosquitto acknowledged it
    wait_for(lambda: a.ctl("status")["outbox"] == 1, "event committed to A's outbox")
    assert a.kill_daemon(signal.SIGKILL) == -signal.SIGKILL

    sh("ip", "-n", a.ns, "addr", "add", f"{a.address}/24", "brd", "+", "dev", IFACE)
    a.start_daemon()
    (got,) = wait_for(lambda: sub.events(n=7), "the acknowledged event on C after restart")
    assert got["origin"] == 1 and got["hop"] == 2
    status = a.ctl("status")
    # a new boot epoch: above the last one, seeded from the clock (docs/security.md)
    assert status["epoch"] > epoch and status["outbox"] == 0
    a.mqtt_pub("meshsub/pub/kill/x", '{"n": 8}')
    wait_for(lambda: sub.events(n=8), "sentinel after restart")
    assert len(sub.events(n=7)) == 1
    # SIGTERM drains and exits 0
    assert a.kill_daemon(signal.SIGTERM) == 0
    assert any(p.name.startswith("1-") for p in a.spool_dir.glob("*.jsonl"))
