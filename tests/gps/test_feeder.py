"""The feeder: what it composes and logs, its errors, and real runs into several gpsd."""

from __future__ import annotations

import asyncio
import json
import math
import time
from pathlib import Path
from typing import Any

import pynmea2
import pytest
from gpsdproc import Gpsd, GpsdWatch, iso, needs_gpsd

from meshsim.gps.feeder import FeederError, GpsFeeder, PositionFn
from meshsim.gps.nmea import KNOTS_PER_MPS
from meshsim.gps.settings import GpsSettings, Outage
from meshsub.core.geo import LocalFrame

FRAME = LocalFrame(45.0, 7.0)
PRECISION_M = 0.014
UTC0 = 1_795_000_000.0


def walker(node: int, t: float) -> tuple[float, float]:
    """Node n walks east at n m/s from (100 n, 0)."""
    return 100.0 * node + node * t, 0.0


def feeder_for(nodes: int = 2, settings: GpsSettings | None = None,
               position: PositionFn = walker, **kw: Any) -> GpsFeeder:
    targets = {n: ("127.0.0.1", 29470) for n in range(1, nodes + 1)}
    return GpsFeeder(targets, FRAME, position, settings or GpsSettings(noise_m=0.0), 5, **kw)


def lines(data: bytes) -> list[pynmea2.NMEASentence]:
    return [pynmea2.parse(ln, check=True) for ln in data.decode("ascii").split("\r\n") if ln]


def test_compose_reports_the_truth_without_noise() -> None:
    feeder = feeder_for()
    for t in (0.0, 1.0, 2.0):
        batch = feeder.compose(t, UTC0 + t)
    assert [d.node for d in batch] == [1, 2]
    for d in batch:
        rec = d.record
        assert (rec["x"], rec["y"], rec["t"], rec["fix"]) == (*walker(d.node, 2.0), 2.0, True)
        assert rec["ts_ns"] == int((UTC0 + 2.0) * 1e9) and rec["err_m"] == 0.0
        gga, _gsa, *_gsv, rmc = lines(d.data)
        x, y, _ = FRAME.to_local(gga.latitude, gga.longitude)
        assert math.hypot(x - rec["x"], y - rec["y"]) <= PRECISION_M
        assert float(rmc.spd_over_grnd) == pytest.approx(d.node * KNOTS_PER_MPS, abs=1e-3)
        assert float(rmc.true_course) == pytest.approx(90.0)  # east


def test_first_epoch_and_a_still_node_have_no_course() -> None:
    feeder = feeder_for(position=lambda n, t: (5.0, 5.0))
    for t in (0.0, 1.0):
        rmc = lines(feeder.compose(t, UTC0 + t)[0].data)[-1]
        assert float(rmc.spd_over_grnd) == 0.0 and not rmc.true_course


def test_records_carry_the_reported_fix_and_its_error() -> None:
    feeder = feeder_for(settings=GpsSettings(noise_m=3.0))
    rec = feeder.compose(0.0, UTC0)[0].record
    assert rec["err_m"] == pytest.approx(math.hypot(rec["rx"] - rec["x"], rec["ry"] - rec["y"]),
                                         abs=2e-3)
    lat, lon, _ = FRAME.to_geodetic(rec["rx"], rec["ry"])
    assert (rec["lat"], rec["lon"]) == (pytest.approx(lat, abs=1e-8), pytest.approx(lon, abs=1e-8))
    assert rec["hdop"] == round(math.sqrt(2) * 3.0 / 5.0, 2) and rec["sats"] == 8
    assert rec["sigma_m"] == 3.0


def test_no_fix_record_and_sentences() -> None:
    feeder = feeder_for(settings=GpsSettings(outages=(Outage(0.0, 1.0, (2,)),)))
    one, two = feeder.compose(0.0, UTC0)
    assert one.record["fix"] is True
    assert two.record["fix"] is False and "rx" not in two.record and "lat" not in two.record
    gga, gsa, gsv, rmc = lines(two.data)
    assert (gga.gps_qual, gsa.mode_fix_type, gsv.num_sv_in_view, rmc.status) == (0, "1", "00", "V")
    assert (feeder.stats.fixes, feeder.stats.no_fixes) == (1, 1)


def test_deterministic_per_seed() -> None:
    settings = GpsSettings(noise_m=3.0, fix_loss_per_s=0.2)

    def datagrams(seed: int) -> list[bytes]:
        f = GpsFeeder({1: ("127.0.0.1", 1), 2: ("127.0.0.1", 2)}, FRAME, walker, settings, seed)
        return [d.data for t in range(20) for d in f.compose(float(t), UTC0 + t)]

    assert datagrams(1) == datagrams(1)
    assert datagrams(1) != datagrams(2)


@pytest.mark.parametrize(("targets", "problem"), [
    ({}, "no nodes"),
    ({1: ("gpsd.example", 29470)}, "not an IP address"),
    ({1: ("10.0.0.1", 0)}, "port 0"),
    ({1: ("10.0.0.1", "29470")}, "port '29470'"),
    ({-1: ("10.0.0.1", 29470)}, "node id -1"),
    ({1: "10.0.0.1:29470"}, "expected \\(address, port\\)"),
])
def test_bad_targets(targets: Any, problem: str) -> None:
    with pytest.raises(FeederError, match=problem) as info:
        GpsFeeder(targets, FRAME, walker, GpsSettings(), 1)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("kw", "problem"), [
    ({"settings": {"noise_m": 3}}, "settings: expected GpsSettings, got dict"),
    ({"frame": (45.0, 7.0)}, "frame: expected LocalFrame, got tuple"),
    ({"position": {1: (0, 0)}}, "position: expected a function"),
    ({"seed": "1"}, "seed: expected an integer"),
    ({"t0": math.nan}, "t0: expected a finite UNIX time"),
])
def test_bad_arguments(kw: dict[str, Any], problem: str) -> None:
    args: dict[str, Any] = {"targets": {1: ("127.0.0.1", 29470)}, "frame": FRAME,
                            "position": walker, "settings": GpsSettings(), "seed": 1}
    with pytest.raises(FeederError, match=problem):
        GpsFeeder(**{**args, **kw})


def test_position_function_failures_are_one_line_errors() -> None:
    def broken(node: int, t: float) -> tuple[float, float]:
        raise KeyError(node)

    with pytest.raises(FeederError, match=r"position\(node 1, t=0\) failed: KeyError"):
        feeder_for(position=broken).compose(0.0, UTC0)
    with pytest.raises(FeederError, match="not finite"):
        feeder_for(position=lambda n, t: (math.nan, 0.0)).compose(0.0, UTC0)
    with pytest.raises(FeederError, match=r"position\(node 1, t=0\) failed: ValueError"):
        feeder_for(position=lambda n, t: (1.0,)).compose(0.0, UTC0)  # type: ignore[arg-type,return-value]


def test_epoch_time_must_increase() -> None:
    feeder = feeder_for()
    feeder.compose(3.0, UTC0)
    with pytest.raises(FeederError, match="must increase"):
        feeder.compose(3.0, UTC0)


async def test_unwritable_log_stops_the_run(tmp_path: Path) -> None:
    feeder = feeder_for(log_path=tmp_path / "missing" / "gps.jsonl")
    with pytest.raises(FeederError, match="cannot open gps log"):
        await feeder.run(until=1.0)


async def test_failing_position_ends_the_run_with_the_error(tmp_path: Path) -> None:
    feeder = feeder_for(position=lambda n, t: (math.inf, 0.0), log_path=tmp_path / "g.jsonl",
                        settings=GpsSettings(noise_m=0.0, rate_hz=10.0))
    with pytest.raises(FeederError, match="not finite"):
        await feeder.run(until=5.0)
    assert not feeder._sockets  # closed on the way out


async def test_stop_before_run_returns_at_once() -> None:
    feeder = feeder_for()
    feeder.stop()
    stats = await feeder.run()
    assert stats.epochs == 0
    with pytest.raises(FeederError, match="runs once"):
        await feeder.run()


async def test_send_errors_are_counted_and_the_others_still_fed(tmp_path: Path) -> None:
    """A broadcast address without SO_BROADCAST fails with EACCES on every send."""
    feeder = GpsFeeder({1: ("255.255.255.255", 29470), 2: ("127.0.0.1", 9)}, FRAME, walker,
                       GpsSettings(noise_m=0.0, rate_hz=10.0), 1, tmp_path / "gps.jsonl")
    stats = await feeder.run(until=0.3)
    assert stats.epochs >= 1
    assert stats.send_errors["EACCES"] == stats.epochs
    assert stats.datagrams == stats.epochs  # node 2's
    records = [json.loads(ln) for ln in (tmp_path / "gps.jsonl").read_text().splitlines()]
    assert len(records) == 2 * stats.epochs  # the log records the truth for both


def check_gpsd_matches_log(watch: GpsdWatch, records: list[dict[str, Any]]) -> int:
    """Every TPV gpsd reported is the logged fix of the epoch with its time stamp."""
    by_time = {iso(r["ts_ns"] / 1e9): r for r in records}
    matched = 0
    for stamp, tpv in watch.tpvs().items():
        rec = by_time[stamp]  # gpsd reports nothing the feeder did not send
        x, y, _ = FRAME.to_local(tpv["lat"], tpv["lon"], tpv["altMSL"])
        assert math.hypot(x - rec["rx"], y - rec["ry"]) <= PRECISION_M
        matched += 1
    return matched


@needs_gpsd
async def test_feeds_several_gpsd_instances(gpsd_factory: Any, tmp_path: Path) -> None:
    daemons: list[Gpsd] = [gpsd_factory() for _ in range(3)]
    watches = [g.watch() for g in daemons]
    log = tmp_path / "gps.jsonl"
    feeder = GpsFeeder({n: ("127.0.0.1", g.udp_port) for n, g in enumerate(daemons, 1)},
                       FRAME, walker, GpsSettings(noise_m=2.0, rate_hz=5.0), 9, log)
    stats = await feeder.run(until=2.0)
    assert stats.epochs >= 2 and not stats.send_errors
    records = [json.loads(ln) for ln in log.read_text().splitlines()]
    assert len(records) == 3 * stats.epochs
    for node, (gpsd, watch) in enumerate(zip(daemons, watches, strict=True), 1):
        mine = [r for r in records if r["node"] == node]
        last: str = iso(mine[-1]["ts_ns"] / 1e9)

        def is_last(report: dict[str, Any], last: str = last) -> bool:
            return report.get("time") == last

        await asyncio.to_thread(watch.wait_for, is_last)
        # the walkers are 100 m apart: each gpsd got its own node's fixes
        assert check_gpsd_matches_log(watch, mine) >= stats.epochs - 2, gpsd.udp_port


@needs_gpsd
def test_thread_start_and_stop(gpsd: Gpsd, tmp_path: Path) -> None:
    watch = gpsd.watch()
    log = tmp_path / "gps.jsonl"
    feeder = GpsFeeder({1: ("127.0.0.1", gpsd.udp_port)}, FRAME, walker,
                       GpsSettings(noise_m=1.0, rate_hz=10.0), 2, log)
    feeder.start()
    try:
        watch.wait_for(lambda r: r.get("class") == "TPV" and "time" in r)
    finally:
        feeder.stop()
    assert feeder._thread is not None and not feeder._thread.is_alive()
    epochs = feeder.stats.epochs
    assert epochs >= 1 and len(log.read_text().splitlines()) == epochs
    time.sleep(0.3)  # nothing more is sent after stop (not a timing assertion on the feeder)
    assert feeder.stats.epochs == epochs


def test_gsv_follows_the_sky() -> None:
    """GSV is reused while no whole degree of the sky changes, and rebuilt when one does."""
    feeder = feeder_for(nodes=1)

    def gsv_part(t: float) -> list[str]:
        text = feeder.compose(t, UTC0 + t)[0].data.decode("ascii")
        return [ln for ln in text.split("\r\n") if ln.startswith("$GPGSV")]

    first, second, later = gsv_part(0.0), gsv_part(1.0), gsv_part(4000.0)
    assert first == second and later != first
    geometry = feeder.sky.at(4000.0)
    listed = [(int(m.data[i]), int(m.data[i + 1]), int(m.data[i + 2]))
              for m in (pynmea2.parse(ln, check=True) for ln in later)
              for i in range(3, len(m.data), 4)]
    assert listed == list(geometry)
