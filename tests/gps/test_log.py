"""Reading gps.jsonl back: what the feeder wrote, looked up by node and time; bad lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from meshsim.gps.feeder import GpsFeeder
from meshsim.gps.log import GpsLog, GpsLogError, parse_record
from meshsim.gps.settings import GpsSettings, Outage
from meshsub.core.geo import LocalFrame

UTC0 = 1_795_000_000.0


def write_log(path: Path) -> None:
    settings = GpsSettings(noise_m=2.0, outages=(Outage(1.0, 2.0, (2,)),))
    feeder = GpsFeeder({1: ("127.0.0.1", 29470), 2: ("127.0.0.1", 29470)},
                       LocalFrame(45.0, 7.0), lambda n, t: (10.0 * n + t, 0.0), settings, 3)
    with path.open("w") as fh:
        for t in range(3):
            for d in feeder.compose(float(t), UTC0 + t):
                fh.write(json.dumps(d.record) + "\n")


def test_reads_what_the_feeder_writes(tmp_path: Path) -> None:
    path = tmp_path / "gps.jsonl"
    write_log(path)
    log = GpsLog.load(path)
    assert log.nodes == (1, 2)
    one = log.records(1)
    assert [r.t for r in one] == [0.0, 1.0, 2.0] and all(r.fix for r in one)
    assert one[1].x == 11.0 and one[1].err_m is not None and one[1].sats == 8
    lost = log.records(2)[1]
    assert lost.fix is False and lost.rx is None and lost.hdop is None


def test_lookup_by_time(tmp_path: Path) -> None:
    path = tmp_path / "gps.jsonl"
    write_log(path)
    log = GpsLog.load(path)
    second = int((UTC0 + 1) * 1e9)
    assert log.at(1, second - 1) == log.records(1)[0]
    assert log.at(1, second) == log.records(1)[1]
    assert log.at(1, second + 10**12) == log.records(1)[2]
    assert log.at(1, int(UTC0 * 1e9) - 1) is None
    assert log.at(9, second) is None


@pytest.mark.parametrize(("line", "problem"), [
    ("not json", "not JSON"),
    ("[1]", "expected an object, got list"),
    ('{"ts_ns": 1.5, "node": 1}', "ts_ns is not an integer"),
    ('{"ts_ns": 1, "node": 1, "fix": "yes"}', "fix is not true or false"),
    ('{"ts_ns": 1, "node": 1, "fix": false, "t": 0, "x": 0}', "y is not a finite number"),
    ('{"ts_ns": 1, "node": 1, "fix": true, "t": 0, "x": 0, "y": 0}', "rx is not a finite"),
])
def test_bad_lines_name_the_line(line: str, problem: str) -> None:
    with pytest.raises(GpsLogError, match=f"where: {problem}"):
        parse_record(line, "where")


def test_bad_file(tmp_path: Path) -> None:
    path = tmp_path / "gps.jsonl"
    write_log(path)
    with path.open("a") as fh:
        fh.write('{"truncated": \n')
    with pytest.raises(GpsLogError, match=r"gps\.jsonl line 7: not JSON"):
        GpsLog.load(path)
    with pytest.raises(GpsLogError, match="cannot read"):
        GpsLog.load(tmp_path / "missing.jsonl")
