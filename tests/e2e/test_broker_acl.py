"""The broker as the role ``mosquitto`` configures it, without root: who may do what.

Issue 25 item 5: the role rendered ``allow_anonymous true`` and no ACL, so any local
user could publish into the mesh, read every delivery, forge deliveries and delete
another application's subscription. Here a real mosquitto runs the role's rendered
configuration on a free loopback port and real clients try each of those.
(test_hostile_root.py does the same with daemons in network namespaces.)
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator

import pytest
from rolebroker import DAEMON_USER, RoleBroker, render

pytestmark = pytest.mark.skipif(
    not all(shutil.which(t) for t in ("mosquitto_pub", "mosquitto_sub", "mosquitto_passwd")),
    reason="needs the mosquitto clients")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RoleBroker]:
    directory = tmp_path_factory.mktemp("rolebroker")
    rb = render(directory, free_port(), [{"name": "alice"}, {"name": "bob"},
                                         {"name": "collector", "read": ["meshsub/telemetry/#"]}])
    proc = subprocess.Popen(["mosquitto", "-c", str(rb.conf)], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", rb.port), 0.5).close()
            break
        except OSError:
            assert time.monotonic() < deadline and proc.poll() is None, "mosquitto did not start"
            time.sleep(0.05)
    yield rb
    proc.terminate()
    proc.wait(10)


def login(rb: RoleBroker, user: str | None, password: str | None = None) -> list[str]:
    if user is None:
        return []
    return ["-u", user, "-P", password if password is not None else rb.passwords[user]]


def pub(rb: RoleBroker, user: str | None, topic: str, payload: str = "{}", *,
        password: str | None = None, retain: bool = False) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["mosquitto_pub", "-V", "5", "-q", "1", "-p", str(rb.port),
                           "-t", topic, *(["-r"] if retain else []),
                           *(["-n"] if payload == "" else ["-m", payload]),
                           *login(rb, user, password)],
                          capture_output=True, text=True, timeout=30, check=False)


def seen(rb: RoleBroker, user: str | None, topic: str, publish: list[tuple[str, str, str]],
         *, retained: bool = False) -> list[str]:
    """What ``user`` receives on ``topic`` while ``publish`` (user, topic, payload) happens."""
    sub = subprocess.Popen(["mosquitto_sub", "-V", "5", "-q", "1", "-p", str(rb.port),
                            "-t", topic, "-F", "%t %p", "-W", "3", *login(rb, user)],
                           stdout=subprocess.PIPE, text=True)
    time.sleep(0.5)
    for who, t, payload in publish:
        pub(rb, who, t, payload)
    out, _ = sub.communicate(timeout=30)
    return [line for line in out.splitlines() if line]


def test_no_anonymous_client_and_no_wrong_password(broker: RoleBroker) -> None:
    assert pub(broker, None, "meshsub/pub/t").returncode != 0
    assert pub(broker, "alice", "meshsub/pub/t", password="guess").returncode != 0
    assert pub(broker, "mallory", "meshsub/pub/t", password="x").returncode != 0
    assert pub(broker, "alice", "meshsub/pub/t").returncode == 0


def test_events_reach_the_daemon(broker: RoleBroker) -> None:
    got = seen(broker, DAEMON_USER, "meshsub/pub/#", [("alice", "meshsub/pub/a/b", '{"n":1}')])
    assert got == ['meshsub/pub/a/b {"n":1}']


def test_only_the_daemon_delivers_and_each_app_reads_its_own(broker: RoleBroker) -> None:
    publishes = [("bob", "meshsub/deliver/alice/s/t", '{"forged":1}'),  # a forged delivery
                 (DAEMON_USER, "meshsub/deliver/alice/s/t", '{"real":1}'),
                 (DAEMON_USER, "meshsub/deliver/bob/s/t", '{"bobs":1}')]
    assert seen(broker, "alice", "meshsub/deliver/#", publishes) == [
        'meshsub/deliver/alice/s/t {"real":1}']


def test_an_app_writes_only_its_own_subscriptions(broker: RoleBroker) -> None:
    assert pub(broker, "alice", "meshsub/sub/alice/hot", "t/#", retain=True).returncode == 0
    pub(broker, "bob", "meshsub/sub/alice/hot", "", retain=True)  # delete alice's: refused
    pub(broker, "bob", "meshsub/sub/hot", "x/#", retain=True)  # the shared level: refused
    got = seen(broker, DAEMON_USER, "meshsub/sub/#", [])
    assert got == ["meshsub/sub/alice/hot t/#"]


def test_telemetry_is_for_the_daemon_and_its_reader(broker: RoleBroker) -> None:
    publishes = [(DAEMON_USER, "meshsub/telemetry/1", "r1"), ("bob", "meshsub/telemetry/1", "r2")]
    assert seen(broker, "collector", "meshsub/telemetry/#", publishes) == [
        "meshsub/telemetry/1 r1"]
    assert seen(broker, "bob", "meshsub/telemetry/#", publishes) == []
