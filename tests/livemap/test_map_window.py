"""The live map's server side: the bounded window, the replay source and the command line."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from maphelpers import map_server

from mesheval.livemap.sources import SourceError, load_replay
from mesheval.livemap.window import EventWindow
from meshsub.core.telemetry import dump_line, make_record


def _position(node: int, ts: int) -> str:
    return dump_line(make_record(run="r", node=node, protocol="flooding", ts_ns=ts,
                                 event="position", attrs={"x": 1.0, "y": 2.0}))


def test_window_is_bounded_in_entries_and_counts_what_it_drops() -> None:
    window = EventWindow(max_entries=3, max_bytes=10**6)
    for ts in range(5):
        assert window.add_line(_position(1, ts))
    assert not window.add_line("{not json")
    assert not window.add_line(dump_line(make_record(run="r", node=1, protocol="flooding", ts_ns=9,
                                                  event="tx", attrs={"bytes": 3})))
    stats = window.stats()
    assert (stats["entries"], stats["evicted"], stats["malformed"], stats["ignored"]) == \
        (3, 2, 1, 1)
    lines, first, last = window.since(0, 100)
    assert [json.loads(x)["ts_ns"] for x in lines] == [2, 3, 4] and (first, last) == (3, 5)
    assert window.since(5, 100) == ([], 3, 5)
    lines, _, last = window.since(3, 1)
    assert [json.loads(x)["ts_ns"] for x in lines] == [3] and last == 4


def test_window_is_bounded_in_bytes() -> None:
    probe = EventWindow()
    probe.add_line(_position(1, 0))
    size = probe.stats()["bytes"]  # what the window keeps of one record
    window = EventWindow(max_entries=100, max_bytes=2 * size + 1)
    for ts in range(4):
        window.add_line(_position(1, ts))
    stats = window.stats()
    assert stats["entries"] == 2 and stats["evicted"] == 2 and stats["bytes"] <= 2 * size + 1


def test_replay_orders_records_by_time_and_skips_tmp_files(tmp_path: Path) -> None:
    (tmp_path / "node-1.jsonl").write_text(_position(1, 20) + "\n" + _position(1, 40) + "\n")
    (tmp_path / "node-2.jsonl").write_text(_position(2, 30) + "\n")
    (tmp_path / "node-3.jsonl.tmp").write_text(_position(3, 10) + "\n")
    window = EventWindow()
    assert load_replay(tmp_path, window) == 3
    lines, _, _ = window.since(0, 10)
    assert [json.loads(x)["ts_ns"] for x in lines] == [20, 30, 40]
    with pytest.raises(SourceError, match="no telemetry files"):
        load_replay(_empty(tmp_path), window)


def _empty(tmp_path: Path) -> Path:
    path = tmp_path / "empty"
    path.mkdir()
    return path


@pytest.mark.parametrize(("args", "message"), [
    ([], "give a RUNDIR to replay or --broker"),
    (["/nonexistent-run"], "no such run directory"),
    (["RUN", "--broker", "localhost:1883"], "not both"),
    (["--broker", "localhost"], "expected HOST:PORT"),
    (["RUN", "--tiles", "http://tiles.local/tile.png"], "needs {z}, {x} and {y}"),
    (["RUN", "--origin", "91,0"], "out of range"),
    (["RUN", "--max-entries", "0"], "must be at least 1"),
    (["EMPTY", "--tiles", "http://t.local/{z}/{x}/{y}.png"], "needs --origin"),
    (["--broker", "10.0.0.1:1883", "--username", "u", "--password-file", "PW"], "needs --tls-ca"),
])
def test_cli_refuses_bad_input_with_one_line(tmp_path: Path, args: list[str],
                                             message: str) -> None:
    run = tmp_path / "run"
    run.mkdir()
    (run / "node-1.jsonl").write_text(_position(1, 0) + "\n")
    (tmp_path / "pw").write_text("secret\n")
    names = {"RUN": str(run), "EMPTY": str(run), "PW": str(tmp_path / "pw")}
    args = [names.get(a, a) for a in args]
    proc = subprocess.run([sys.executable, "-m", "mesheval.cli", "map", *args, "--port", "0"],
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_server_binds_loopback_and_refuses_bad_requests(tmp_path: Path) -> None:
    (tmp_path / "node-1.jsonl").write_text(_position(1, 0) + "\n")
    with map_server(str(tmp_path)) as url:
        assert url.startswith("http://127.0.0.1:")
        info = json.load(urllib.request.urlopen(url + "api/info", timeout=10))
        assert info["mode"] == "replay" and info["window"]["entries"] == 1
        doc = json.load(urllib.request.urlopen(url + "api/events?after=0", timeout=10))
        assert doc["last"] == 1 and doc["events"][0]["event"] == "position"
        for path, status in (("api/events?after=-1", 400), ("api/events?after=x", 400),
                             ("../etc/passwd", 404), ("tiles/1/2/3.png", 404)):
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(url + path, timeout=10)
            assert err.value.code == status
        request = urllib.request.Request(url + "api/events", data=b"x", method="POST")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(request, timeout=10)
        assert err.value.code == 405
