"""``mesheval collect`` against a broker that refuses anonymous clients and speaks TLS
(issue 25 item 5: the collector had neither, and the docs suggested a plaintext bridge).

A private mosquitto with a TLS listener (a CA and server certificate made here with
openssl), a password file and an ACL; the collector logs in, verifies the broker's
certificate and spools what a daemon-side publisher sends. Anonymous and wrongly
configured collectors get nothing, and bad option combinations are refused in one line.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from mosquitto import Mosquitto, have_mosquitto

mqtt = pytest.importorskip("paho.mqtt.client")
pytestmark = pytest.mark.skipif(
    not have_mosquitto() or shutil.which("openssl") is None
    or shutil.which("mosquitto_passwd") is None,
    reason="needs mosquitto, mosquitto_passwd and openssl")
TOPIC = "meshsub/telemetry"


def wait_for(cond: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def run(*args: str) -> None:
    subprocess.run(args, check=True, capture_output=True, timeout=60)


def make_pki(d: Path) -> None:
    """A CA, and a server certificate for 127.0.0.1 signed by it."""
    run("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        "-subj", "/CN=msub-test-ca", "-keyout", str(d / "ca.key"), "-out", str(d / "ca.crt"))
    run("openssl", "req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=127.0.0.1",
        "-keyout", str(d / "server.key"), "-out", str(d / "server.csr"))
    (d / "ext").write_text("subjectAltName=IP:127.0.0.1\n")
    run("openssl", "x509", "-req", "-in", str(d / "server.csr"), "-CA", str(d / "ca.crt"),
        "-CAkey", str(d / "ca.key"), "-CAcreateserial", "-days", "2", "-extfile", str(d / "ext"),
        "-out", str(d / "server.crt"))


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[Mosquitto]:
    make_pki(tmp_path)
    passwd = tmp_path / "passwd"
    passwd.write_text("meshsubd:daemon-secret\ncollector:collector-secret\n")
    run("mosquitto_passwd", "-U", str(passwd))
    acl = tmp_path / "acl"
    acl.write_text(f"user meshsubd\ntopic write {TOPIC}/#\n\n"
                   f"user collector\ntopic read {TOPIC}/#\n")
    b = Mosquitto(tmp_path, max_queued=1000, extra=(
        f"per_listener_settings false\nallow_anonymous false\npassword_file {passwd}\n"
        f"acl_file {acl}\ncafile {tmp_path / 'ca.crt'}\ncertfile {tmp_path / 'server.crt'}\n"
        f"keyfile {tmp_path / 'server.key'}\n"))
    b.start()
    yield b
    b.stop()


def publish(port: int, ca: Path, records: list[str]) -> None:
    client = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id="msub-test-daemon",
                         protocol=mqtt.MQTTv5)
    client.username_pw_set("meshsubd", "daemon-secret")
    client.tls_set(ca_certs=str(ca))
    client.connect("127.0.0.1", port)
    client.loop_start()
    try:
        wait_for(client.is_connected, "the daemon's connection")
        client.publish(f"{TOPIC}/1", "\n".join(records), qos=1).wait_for_publish(timeout=10)
    finally:
        client.disconnect()
        client.loop_stop()


def record(rec: int) -> str:
    return json.dumps({"run": "secure", "node": 1, "protocol": "flooding", "ts_ns": 1000 + rec,
                       "event": "tx", "msg_kind": "beacon", "bytes": 40, "epoch": 3,
                       "rec": rec})


def collector(port: int, spool: Path, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "mesheval.cli", "collect", "--broker", f"127.0.0.1:{port}",
             "--topic", f"{TOPIC}/#", "--spool", str(spool), "--client-id", spool.name,
             "--roll-seconds", "0.2", "--reconnect-max", "1", *extra],
            stdout=out, stderr=subprocess.STDOUT)


def spooled(spool: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(spool.glob("*.jsonl"))
            for line in path.read_text().splitlines()]


def test_collector_logs_in_over_tls_and_anonymous_gets_nothing(broker: Mosquitto,
                                                              tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("collector-secret\n")
    ca = tmp_path / "ca.crt"
    good = collector(broker.port, tmp_path / "good", tmp_path / "good.log", "--username",
                     "collector", "--password-file", str(tmp_path / "pw"), "--tls-ca", str(ca))
    anonymous = collector(broker.port, tmp_path / "anon", tmp_path / "anon.log",
                          "--tls-ca", str(ca))
    plaintext = collector(broker.port, tmp_path / "plain", tmp_path / "plain.log",
                          "--username", "collector", "--password-file", str(tmp_path / "pw"))
    try:
        wait_for(lambda: "connected to" in (tmp_path / "good.log").read_text(), "the login")
        publish(broker.port, ca, [record(r) for r in range(5)])
        wait_for(lambda: len(spooled(tmp_path / "good")) == 5, "the records spooled")
    finally:
        for proc in (good, anonymous, plaintext):
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=20)
    assert [r["rec"] for r in spooled(tmp_path / "good")] == list(range(5))
    assert spooled(tmp_path / "anon") == [] and spooled(tmp_path / "plain") == []
    assert "refused" in (tmp_path / "anon.log").read_text()  # not authorised


@pytest.mark.parametrize(("args", "message"), [
    (["--broker", "10.9.8.7:8883", "--username", "c", "--password-file", "PW"],
     "needs --tls-ca"),
    (["--broker", "127.0.0.1:1", "--password-file", "PW"], "needs --username"),
    (["--broker", "127.0.0.1:1", "--tls-ca", "PW", "--tls-cert", "PW"], "go together"),
    (["--broker", "127.0.0.1:1", "--tls-ca", "/nonexistent/ca.crt"], "no such file"),
])
def test_bad_options_are_one_line_and_exit_2(tmp_path: Path, args: list[str],
                                             message: str) -> None:
    (tmp_path / "pw").write_text("x\n")
    args = [a.replace("PW", str(tmp_path / "pw")) for a in args]
    res = subprocess.run([sys.executable, "-m", "mesheval.cli", "collect", "--topic", "t/#",
                          "--spool", str(tmp_path / "s"), *args], capture_output=True,
                         text=True, timeout=60, check=False)
    assert res.returncode == 2
    assert res.stderr.strip().count("\n") == 0 and message in res.stderr, res.stderr
