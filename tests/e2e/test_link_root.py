"""The field issues of a real link, on the namespace line A - B - C (root, real mosquitto).

For flooding and for a store-carry-forward protocol (epidemic):

* ``ip link set IF down`` on A while its daemon runs: A says so (``link.state
  "down"``), holds what an application publishes meanwhile (persisted), and
  sends it once the interface is up again; C receives it exactly once.
* the same with A's daemon SIGKILLed during the outage and restarted while the
  interface is still down.
* B's kernel drops datagrams when its receive buffer overflows (B stopped
  with SIGSTOP while A publishes a burst, the buffer shrunk to the minimum):
  the drops are in B's ``status`` and in its telemetry (a ``counter`` record),
  and the configured receive buffer is what the socket got.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from mesh import IFACE, Mesh, NodeProc, Subscriber, sh, wait_for

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (network namespaces, nftables)"),
    pytest.mark.skipif(not all(shutil.which(t) for t in ("mosquitto_pub", "mosquitto_sub",
                                                          "nft")),
                       reason="needs mosquitto clients and nft"),
]

PROTOCOLS = {
    "flooding": {"ttl": 8, "jitter": 0.005},
    "epidemic": {"request_timeout": 2.0},
}
SMALL_BUFFER = 4096
"""B's receive buffer in the drop test (the kernel grants at least about 4.6 KiB)."""


@pytest.fixture(scope="module", params=sorted(PROTOCOLS))
def mesh(request: pytest.FixtureRequest,
         tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mesh]:
    protocol = str(request.param)
    m = Mesh(tmp_path_factory.mktemp(f"link-{protocol}"), protocol, PROTOCOLS[protocol])
    try:
        m.up()
        m.start()
        m.wait_neighbors()
        yield m
    finally:
        for node in m.nodes.values():
            if node.daemon is not None and node.daemon.poll() is not None:
                print(f"--- meshsubd {node.name} exited {node.daemon.returncode}:\n"
                      f"{node.log_tail()}")
        m.down()


def subscribe_on_c(mesh: Mesh, name: str) -> Subscriber:
    c = mesh.nodes["c"]
    sub = c.mqtt_sub(f"meshsub/deliver/{name}/#")
    sub.wait_ready(c, f"meshsub/deliver/{name}/probe")
    c.mqtt_pub(f"meshsub/sub/{name}", f"{name}/#", retain=True)
    wait_for(lambda: any(r["sub_id"] == name for r in c.ctl("subscriptions")),
             "subscription on C")
    if mesh.protocol != "flooding":  # interest travels with the contacts: let B learn it
        wait_for(lambda: mesh.nodes["b"].ctl("status")["protocol"]["neighbors"] == 2,
                 "B's contacts")
    return sub


def link_state(node: NodeProc) -> str | None:
    status = node.try_status()
    return None if status is None else str(status["link"]["state"])


def interface(node: NodeProc, state: str) -> None:
    sh("ip", "-n", node.ns, "link", "set", IFACE, state)


def test_interface_down_holds_the_publication_until_it_is_up(mesh: Mesh) -> None:
    a = mesh.nodes["a"]
    sub = subscribe_on_c(mesh, "down")
    interface(a, "down")
    try:
        wait_for(lambda: link_state(a) == "down", "A's link reported down", guard=15)
        sent = a.ctl("status")["transmissions"]
        a.mqtt_pub("meshsub/pub/down/x", '{"n": 1}')  # returns once mosquitto has the PUBACK
        wait_for(lambda: a.ctl("status")["outbox"] == 1, "the event persisted in A's outbox")
        status = a.ctl("status")
        assert status["held_publications"] == 1
        assert status["transmissions"] == sent  # nothing counted as sent into a dead link
    finally:
        interface(a, "up")
    (got,) = wait_for(lambda: sub.events(n=1), "the held event on C once A's link is back")
    assert got["origin"] == 1 and got["hop"] == 2
    wait_for(lambda: a.ctl("status")["outbox"] == 0, "A's outbox empty")
    assert a.ctl("status")["held_publications"] == 0
    a.mqtt_pub("meshsub/pub/down/x", '{"n": 2}')  # a sentinel: nothing else arrives late
    wait_for(lambda: sub.events(n=2), "sentinel on C")
    assert len(sub.events(n=1)) == 1


def test_sigkill_during_the_outage_then_restart_still_delivers(mesh: Mesh) -> None:
    a = mesh.nodes["a"]
    sub = subscribe_on_c(mesh, "outage")
    epoch = a.ctl("status")["epoch"]
    interface(a, "down")
    try:
        wait_for(lambda: link_state(a) == "down", "A's link reported down", guard=15)
        a.mqtt_pub("meshsub/pub/outage/x", '{"n": 7}')
        wait_for(lambda: a.ctl("status")["outbox"] == 1, "the event persisted in A's outbox")
        assert a.kill_daemon(signal.SIGKILL) == -signal.SIGKILL
        a.start_daemon()  # the interface is still down: the new daemon must hold it too
        wait_for(lambda: link_state(a) == "down", "restarted A sees the link down", guard=15)
        status = a.ctl("status")
        # a new boot epoch: above the last one, seeded from the clock (docs/security.md)
        assert status["epoch"] > epoch and status["outbox"] == 1
        assert status["held_publications"] == 1
    finally:
        interface(a, "up")
    (got,) = wait_for(lambda: sub.events(n=7), "the acknowledged event on C")
    assert got["origin"] == 1 and got["hop"] == 2
    wait_for(lambda: a.ctl("status")["outbox"] == 0, "A's outbox empty")
    mesh.wait_neighbors()
    a.mqtt_pub("meshsub/pub/outage/x", '{"n": 8}')
    wait_for(lambda: sub.events(n=8), "sentinel on C")
    assert len(sub.events(n=7)) == 1


def counter_records(node: NodeProc, reason: str) -> list[dict[str, object]]:
    """``counter`` records with ``reason`` in the node's spool (closed and current files)."""
    found = []
    for path in sorted(Path(node.spool_dir).glob("*.jsonl")) + \
            sorted(Path(node.spool_dir).glob(".current-*.jsonl")):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            if record.get("event") == "counter" and record.get("reason") == reason:
                found.append(record)
    return found


def test_kernel_receive_drops_are_in_status_and_telemetry(mesh: Mesh) -> None:
    b = mesh.nodes["b"]
    status = b.ctl("status")
    default = status["link"]["receive_buffer"]
    assert default["requested"] == 1 << 20 and default["granted"] >= 1 << 20
    assert status["drops"]["kernel"] == 0

    assert b.kill_daemon(signal.SIGTERM) == 0
    b.link_options = {"receive_buffer": SMALL_BUFFER}
    b.start_daemon()
    mesh.wait_neighbors()
    granted = b.ctl("status")["link"]["receive_buffer"]["granted"]
    assert granted < 4 * SMALL_BUFFER
    assert b.daemon is not None
    pid = b.daemon.pid
    os.kill(pid, signal.SIGSTOP)  # B's loop stands still; its socket queue fills up
    try:
        a = mesh.nodes["a"]
        burst = "".join(f"meshsub/pub/burst/x {{\"n\": {i}}}\n" for i in range(60))
        for line in burst.splitlines():
            topic, payload = line.split(" ", 1)
            sh("mosquitto_pub", "-V", "5", "-q", "1", "-h", "127.0.0.1",
               "-p", str(a.mqtt_port), "-t", topic, "-m", payload, ns=a.ns)
    finally:
        os.kill(pid, signal.SIGCONT)
    wait_for(lambda: b.ctl("status")["drops"]["kernel"], "kernel drops on B")
    status = b.ctl("status")  # one answer: B may still be dropping while it catches up
    assert status["link"]["kernel_drops"] == status["drops"]["kernel"] > 0
    records = wait_for(lambda: counter_records(b, "udp_receive_drops"),
                       "a udp_receive_drops counter record in B's telemetry")
    assert all(isinstance(r["bytes"], int) and r["bytes"] > 0 for r in records)

    assert b.kill_daemon(signal.SIGTERM) == 0  # back to the default for the other tests
    b.link_options = {}
    b.start_daemon()
    mesh.wait_neighbors()
