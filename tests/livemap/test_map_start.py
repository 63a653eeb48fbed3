"""The live map's start line and the tests' bounded reading of it.

Stop 31's suite once hung 600 s in test_map_live.py: the map printed its start line after
starting the MQTT source, the source's thread logged "connected ..." first, and the test
helper (stderr merged into stdout) read that log line, then read the rest of the output
to EOF for its failure message: from a server that never exits. The map now prints its
start line before its source starts, and the helper reads only stdout, with a deadline.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from maphelpers import _start_url
from mosquitto import Mosquitto, have_mosquitto

#: mesheval map whose source waits until it is connected before returning, as a
#: preempted main thread does under load: the source's "connected" log line is then
#: written before anything printed after ``source.start()``
CONNECTED_FIRST = """
import sys
import mesheval.livemap.sources as sources
from mesheval.livemap.server import map_main
start = sources.MqttSource.start
def start_and_connect(self):
    start(self)
    if not self.connected.wait(30):
        sys.exit("never connected")
sources.MqttSource.start = start_and_connect
sys.exit(map_main(sys.argv[1:]))
"""


@pytest.mark.skipif(not have_mosquitto(), reason="mosquitto is not installed")
def test_start_line_is_the_first_line_even_when_the_broker_answers_first(
        tmp_path: Path) -> None:
    broker = Mosquitto(tmp_path)
    broker.start()
    proc = subprocess.Popen([sys.executable, "-c", CONNECTED_FIRST, "--broker",
                             f"127.0.0.1:{broker.port}", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        assert proc.stdout is not None
        first: list[str] = []
        reader = threading.Thread(target=lambda: first.append(proc.stdout.readline()),
                                  daemon=True)
        reader.start()
        reader.join(60)  # a hang guard
        assert first, "mesheval map printed nothing in 60 s"
        assert "open http://127.0.0.1:" in first[0], first[0]
    finally:
        proc.terminate()
        proc.wait(10)
        broker.stop()


def test_a_map_that_never_starts_fails_the_test_with_its_log_not_a_hang() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import sys, time; "
                             "print('connecting to the broker', file=sys.stderr, flush=True); "
                             "print('not a start line', flush=True); time.sleep(60)"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with tempfile.TemporaryFile("w+") as log:
            log.write("connecting to the broker\n")  # what the map's stderr file holds
            began = time.monotonic()
            with pytest.raises(pytest.fail.Exception) as failed:
                _start_url(proc, log, 1.0)
            assert time.monotonic() - began < 30  # a hang guard: the deadline was 1 s
        message = str(failed.value)
        assert "no start line in 1 s" in message
        assert "not a start line" in message and "connecting to the broker" in message
    finally:
        proc.kill()
        proc.wait()


def test_a_map_that_exits_fails_the_test_with_its_exit_status(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "mesheval.cli", "map", str(tmp_path / "none"),
                             "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with tempfile.TemporaryFile("w+") as log, pytest.raises(pytest.fail.Exception) as failed:
        _start_url(proc, log, 60.0)
    assert "exited 2" in str(failed.value) and "no such run directory" in str(failed.value)
