"""The batch job on the hand-built run of ``evaldata.py``: every figure worked out by hand."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import evaldata
import pytest

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def result(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from mesheval.batch import run_batch

    base = tmp_path_factory.mktemp("batch")
    rundir = evaldata.write_run(base / "run1")
    return run_batch(spark, [rundir], base / "out")


@pytest.fixture(scope="module")
def m(result: Any) -> dict[str, Any]:
    return dict(result.evaluation.runs[evaldata.RUN])


def test_ground_truth_and_delivery_ratio(m: dict[str, Any]) -> None:
    # E0 is in the warm-up; E1 {n2,n3}, E2 {n3,n4,n6} (n5 unsubscribed, n2 published it),
    # E3 {n1} through the wildcard news/#
    assert (m["events"], m["events_warmup"]) == (3, 1)
    assert m["interested_pairs"] == 6
    assert m["first_deliveries"] == 5
    assert m["delivery_ratio"] == pytest.approx(5 / 6)
    assert m["event_delivery_ratio_mean"] == pytest.approx((1 + 2 / 3 + 1) / 3)
    assert m["events_fully_delivered"] == 2


def test_latency(m: dict[str, Any], result: Any) -> None:
    # first deliveries: 0.5 (n2, E1; not its 1.0 duplicate), 2.0, 0.2, 4.0 (late n4), 0.5
    assert m["latency_mean_s"] == pytest.approx(7.2 / 5)
    assert m["latency_median_s"] == pytest.approx(0.5)
    assert m["latency_median_upper_s"] == pytest.approx(0.5)
    assert m["latency_p95_s"] == pytest.approx(2.0 + 0.8 * 2.0)  # rank 3.8 of 0..4
    assert m["latency_p99_s"] == pytest.approx(2.0 + 0.96 * 2.0)
    assert (m["latency_min_s"], m["latency_max_s"]) == (pytest.approx(0.2), pytest.approx(4.0))
    cdf = result.evaluation.run_cdf[evaldata.RUN]
    assert len(cdf) == 101 and cdf[0] == pytest.approx(0.2) and cdf[-1] == pytest.approx(4.0)


def test_false_positives_duplicates_and_local(m: dict[str, Any]) -> None:
    assert m["fp_deliveries"] == 2  # n4 (t<5 does not match t=20) and n6 (joined late)
    assert m["fp_late_subscriber"] == 1  # n6
    assert m["local_deliveries"] == 1  # n2 delivered its own E2
    # E1: n2 twice (s2), n3 twice (s3, s3b), n4, n6; E2: n3 twice (s3, s3b), n4; E3: n1
    assert m["deliver_records"] == 10


def test_duplicates_per_subscription_not_per_node(m: dict[str, Any], result: Any) -> None:
    """A duplicate is a subscription receiving an event again: n2's second E1 on s2.
    Per node, n3's two subscriptions (s3, s3b) would add one record each for E1 and E2."""
    assert m["duplicates"] == 1
    assert m["duplicates_per_node"] == 1 + 2
    assert m["duplicates_per_delivery"] == pytest.approx(1 / 5)
    per_event = {r["event_id"]: (r["duplicates"], r["duplicates_per_node"])
                 for r in result.evaluation.per_event.collect()}
    assert per_event == {evaldata.E1: (1, 2), evaldata.E2: (0, 1), evaldata.E3: (0, 0)}
    assert m["fp_forward"] == 1  # the E0 one is in the warm-up
    assert m["orphan_deliveries"] == 0


def test_drops_by_reason(m: dict[str, Any]) -> None:
    # two false_positive_forward drop records (n4 at 3.3 s and 10.9 s), none summarised
    assert m["drops"] == {"false_positive_forward": 2} and m["drops_total"] == 2


def test_overhead(m: dict[str, Any]) -> None:
    assert (m["tx_data_count"], m["tx_data_bytes"]) == (6, 520)
    assert (m["tx_beacon_count"], m["tx_control_count"], m["tx_subscription_count"]) == (1, 1, 1)
    assert m["tx_count"] == 9 and m["tx_bytes"] == 610
    assert m["overhead_ratio"] == pytest.approx((6 - 5) / 5)
    assert m["overhead_ratio_rx"] == pytest.approx(0.0)  # 5 data receptions
    assert m["tx_per_delivery"] == pytest.approx(9 / 5)
    assert m["bytes_per_delivery"] == pytest.approx(610 / 5)
    assert m["control_share_bytes"] == pytest.approx(90 / 610)


def test_energy(m: dict[str, Any]) -> None:
    # TR 70 m < TD 75 m: free space, 50 nJ/bit + 10 pJ/bit/m^2 * d^2
    # d = 30 (n1->n2), TR, 50 (n2->n3 after n2 moved), TR, 72.1 (n3->n4), 60 (n3->n1)
    data_tx_uj = 47.2 + 79.2 + 60.0 + 63.36 + 65.28 + 41.28
    data_rx_uj = 440 * 8 * 0.05
    assert m["tx_data_energy_j"] * 1e6 == pytest.approx(data_tx_uj)
    assert m["energy_data_j"] * 1e6 == pytest.approx(data_tx_uj + data_rx_uj)
    assert m["energy_per_event_j"] * 1e6 == pytest.approx((data_tx_uj + data_rx_uj) / 3)
    assert m["energy_per_subscriber_j"] * 1e6 == pytest.approx((data_tx_uj + data_rx_uj) / 6)
    # beacon (TR), control n3->n2 at d = 50 (n2 has moved), subscription broadcast (TR)
    assert m["energy_j"] * 1e6 == pytest.approx(data_tx_uj + data_rx_uj + 15.84 + 18.0 + 31.68)


def test_thesis_cost_metrics(m: dict[str, Any]) -> None:
    """HESPER's metrics (Zheng, §4.4.1) as general ones: cost per event, per subscriber, hops."""
    assert m["tx_data_per_event"] == pytest.approx(6 / 3)  # data tx of E1, E2, E3
    # first deliveries: n2 E1 hop 1 (not its duplicate), n3 E1 hop 2, n3 E2 hop 1,
    # n4 E2 hop 2, n1 E3 hop 1
    assert m["hop_mean"] == pytest.approx(7 / 5) and m["hop_max"] == 2
    assert m["subscribers"] == 6  # n1..n6 subscribed (n5 left again: still a subscriber)
    # the warm-up subscription (t=1) is out; n6's broadcast at t=12 costs 40 bytes at TR
    assert m["energy_subscription_j"] * 1e6 == pytest.approx(40 * 8 * (0.05 + 0.01 * 4.9))
    assert m["energy_subscription_per_subscriber_j"] * 1e6 == pytest.approx(31.68 / 6)


def test_optimum_and_stretch(m: dict[str, Any], result: Any) -> None:
    """Fewest transmissions at each publish time (evaldata's docstring has the links).

    E1 (n1 -> n2, n3): one broadcast, two unicasts; its protocol sent 3 data frames.
    E2 (n2 -> n3, n4; n6 unreachable): 1 and 2; sent 2. E3 (n3 -> n1): 1 and 1; sent 1.
    """
    assert (m["opt_events"], m["opt_exact_share"], m["opt_method"]) == (3, 1.0, "exact")
    assert (m["opt_broadcast_lower"], m["opt_broadcast_upper"]) == (3, 3)
    assert (m["opt_unicast_lower"], m["opt_unicast_upper"]) == (5, 5)
    assert m["opt_unreachable"] == 1
    assert m["optimum_ratio"] == m["optimum_ratio_high"] == pytest.approx(6 / 3)
    assert m["optimum_ratio_unicast"] == pytest.approx(6 / 5)
    # hops over shortest hops: n2 1/1, n3 2/1 (E1), n3 1/1, n4 2/1 (E2), n1 1/1 (E3)
    assert m["hop_stretch_mean"] == pytest.approx(7 / 5) and m["hop_stretch_max"] == 2
    assert m["geo_stretch_n"] == 0  # every subscriber within one range of its publisher
    per_event = {r["event_id"]: r["data_tx"] for r in result.evaluation.per_event.collect()}
    assert per_event == {evaldata.E1: 3, evaldata.E2: 2, evaldata.E3: 1}


def handbuilt_settings(spark: Any) -> Any:
    """The settings row of evaldata's run, as mesheval.settings would derive it."""
    from mesheval.settings import SETTINGS_SCHEMA

    return spark.createDataFrame(
        [(evaldata.RUN, "flooding", "handbuilt", "sim", "p", "v", 70.0, 0, 5 * evaldata.S,
          None, None)],
        schema=SETTINGS_SCHEMA)


def test_energy_per_message_of_fixed_size(spark: Any) -> None:
    """--message-bits 320: every message costs M_b bits whatever its frame's size."""
    from pyspark.sql import functions as F

    from mesheval.metrics import publications, traffic
    from mesheval.schema import record_schema

    rows = [r for recs in evaldata.records().values() for r in recs]
    schema = record_schema(with_corrupt=False)
    records = spark.createDataFrame([tuple(r.get(f) for f in schema.fieldNames()) for r in rows],
                                    schema=schema)
    settings = handbuilt_settings(spark)
    radio = traffic(records, publications(records, settings), settings, message_bits=320)
    data = {row["event"]: row["e"] for row in radio.filter(F.col("msg_kind") == "data")
            .groupBy("event").agg(F.sum("energy_j").alias("e")).collect()}
    # 320 bits * (50 nJ + 10 pJ * d^2): d = 30, TR, 50 (n2 moved), TR, 72.1, 60
    assert data["tx"] * 1e6 == pytest.approx(18.88 + 31.68 + 24.0 + 31.68 + 32.64 + 27.52)
    assert data["rx"] * 1e6 == pytest.approx(5 * 16.0)  # five receptions of 320 bits


def test_windows_and_nodes(result: Any) -> None:
    windows = {w["window_start_s"]: (w["interested"], w["delivered"])
               for w in result.evaluation.windows}
    assert windows == {10.0: (2, 2), 20.0: (4, 3)}
    nodes = {n["node"]: n for n in result.document["nodes"]}
    assert (nodes[6]["interested"], nodes[6]["delivered"], nodes[6]["false_positives"]) == (1, 0, 1)
    assert (nodes[1]["tx"], nodes[1]["tx_bytes"]) == (3, 220)
    assert (nodes[5]["x"], nodes[5]["y"]) == (100.0, 100.0)
    assert (nodes[2]["x"], nodes[2]["y"]) == (45.0, 25.0)  # mean of its two positions


def test_malformed_lines_counted_per_file(result: Any) -> None:
    by_name = {Path(q.path).name: q for q in result.quality}
    bad = by_name["1-0-2.jsonl"]
    assert (bad.lines, bad.valid, bad.invalid) == (6, 0, 6)
    assert bad.errors["malformed JSON or wrong field type"] == 3
    assert bad.errors["unknown event"] == 1
    assert bad.errors["deliver without event_id"] == 1
    assert ".1-0-3.jsonl.tmp" not in by_name  # hidden temp files are not input
    assert all(q.invalid == 0 for name, q in by_name.items() if name != "1-0-2.jsonl")


def test_metrics_json_and_manifest(result: Any, tmp_path_factory: pytest.TempPathFactory) -> None:
    doc = result.document
    (run,) = doc["runs"]
    assert (run["scenario"], run["seed"], run["param_name"], run["param_value"]) == (
        "handbuilt", 1, "radio.range_m", "70")
    assert run["warmup_s"] == 5.0 and run["range_m"] == 70.0
    (group,) = doc["groups"]
    assert group["metrics"]["delivery_ratio"]["mean"] == pytest.approx(5 / 6)
    assert group["metrics"]["delivery_ratio"]["half_width"] is None  # one seed: no interval
    text = json.dumps(doc, allow_nan=False)  # numbers, never NaN
    assert '"delivery_ratio": "' not in text


def test_cli_reuses_parquet_and_writes_report(result: Any, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    from mesheval.cli import main

    rundir = Path(result.document["inputs"][0])
    out = Path(result.document["inputs"][0]).parent / "out"
    assert main([str(rundir), "--out", str(out), "--warmup", "0"]) == 0
    printed = capsys.readouterr().out
    assert "flooding" in printed and "delivery" in printed
    doc = json.loads((out / "metrics.json").read_text())
    assert doc["parquet_cache_reused"] == [True]
    # without the warm-up E0 counts too: interested {n2, n3, n5 (until t=8)}, delivered to n2
    assert doc["runs"][0]["metrics"]["interested_pairs"] == 9
    assert doc["runs"][0]["metrics"]["first_deliveries"] == 6
    for name in ("report.md", "report.html", "delivery_ratio.png", "latency_cdf.png",
                 "load_map.png", "protocols.png"):
        assert (out / name).stat().st_size > 0, name
    assert "data:image/png;base64," in (out / "report.html").read_text()


def test_energy_with_static_positions(spark: Any) -> None:
    """Without n2's move every node has one position: the broadcast-join path."""
    from pyspark.sql import functions as F

    from mesheval.metrics import publications, traffic
    from mesheval.schema import record_schema

    rows = [r for recs in evaldata.records().values() for r in recs
            if not (r["event"] == "position" and r["ts_ns"] > 0)]
    schema = record_schema(with_corrupt=False)
    records = spark.createDataFrame([tuple(r.get(f) for f in schema.fieldNames()) for r in rows],
                                    schema=schema)
    settings = handbuilt_settings(spark)
    radio = traffic(records, publications(records, settings), settings)
    data_tx = radio.filter((F.col("event") == "tx") & (F.col("msg_kind") == "data")).agg(
        F.sum("energy_j")).first()
    assert data_tx is not None
    # d = 30, TR, 30 (n2 stays at (30, 0)), TR, 72.1, 60
    assert data_tx[0] * 1e6 == pytest.approx(47.2 + 79.2 + 47.2 + 63.36 + 65.28 + 41.28)


def test_run_with_only_bad_lines_is_a_clear_error(spark: Any, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from mesheval.cli import main

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "node-1.jsonl").write_text("\n".join(evaldata.MALFORMED) + "\n")
    assert main([str(tmp_path / "run"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "no valid records: 6 invalid lines in 1 files" in err
    assert "Traceback" not in err


def test_the_manifest_t0_starts_the_warm_up(spark: Any) -> None:
    """The virtual mesh starts its workload after the daemons' first records."""
    from mesheval.manifest import parse_manifest
    from mesheval.settings import run_settings

    records = spark.createDataFrame(
        [("v", 0, "flooding", 1, 100 * evaldata.S), ("v", 0, "flooding", 2, 160 * evaldata.S)],
        "run string, rundir int, protocol string, node long, ts_ns long")
    with_t0 = parse_manifest({"run": "v", "warmup_s": 5.0, "t0_ns": 150 * evaldata.S})
    without = parse_manifest({"run": "v", "warmup_s": 5.0})
    (s,) = run_settings(records, {0: with_t0}, warmup_override=None, default_range_m=100.0)
    assert (s.t0_ns, s.cutoff_ns) == (150 * evaldata.S, 155 * evaldata.S)
    (s,) = run_settings(records, {0: without}, warmup_override=None, default_range_m=100.0)
    assert (s.t0_ns, s.cutoff_ns) == (100 * evaldata.S, 105 * evaldata.S)


def test_a_failure_inside_the_jvm_is_one_line_and_status_1(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A JVM error (here: a driver out of memory) reaches Python as a Py4J error, which
    is no PySparkException: still one line, exit status 1, no traceback."""
    from py4j.protocol import Py4JError

    import mesheval.batch
    from mesheval.cli import main

    def fail(*_a: Any, **_k: Any) -> None:
        raise Py4JError("Could not allocate memory to grow BytesToBytesMap.\n\tat org.x.Y")

    monkeypatch.setattr(mesheval.batch, "run_batch", fail)
    rundir = evaldata.write_run(tmp_path / "run")
    assert main([str(rundir), "--out", str(tmp_path / "out"), "--driver-memory", "3g"]) == 1
    err = capsys.readouterr().err
    assert err.strip() == ("mesheval: error: Spark failed: Could not allocate memory to grow "
                           "BytesToBytesMap.")
    with pytest.raises(SystemExit) as bad:  # argparse's one line and status 2
        main([str(rundir), "--out", str(tmp_path / "out"), "--driver-memory", "lots"])
    assert bad.value.code == 2


def test_orphan_deliveries_count_every_record_of_an_unpublished_event(spark: Any) -> None:
    """Counted from every event's delivery pairs (``delivery_pairs``: an event without a
    publish record has ``measured`` null): each deliver record of such an event counts,
    however many an event has, on one node or several; a warm-up event's do not."""
    from mesheval.metrics import _orphans, delivery_pairs

    records = spark.createDataFrame(
        [("r", "deliver", "e1", 2), ("r", "deliver", "lost", 2), ("r", "deliver", "lost", 2),
         ("r", "deliver", "lost", 3), ("r", "deliver", "gone", 2), ("r", "publish", "e1", 1),
         ("r", "deliver", "warm", 2), ("q", "deliver", "e1", 2)],
        "run string, event string, event_id string, node long").selectExpr(
        "*", "cast(null as string) as sub_id", "cast(1 as long) as ts_ns",
        "cast(null as long) as hop")
    pubs = spark.createDataFrame(
        [("r", "e1", 1, 0, None, 0, True), ("r", "warm", 1, 0, None, 0, False)],
        "run string, event_id string, pub_node long, pub_ts long, deadline_ns long, "
        "t0_ns long, measured boolean")
    interested = spark.createDataFrame([], "run string, event_id string, node long, "
                                           "sub_start long")
    assert _orphans(delivery_pairs(records, pubs, interested)) == {
        "r": {"run": "r", "orphan_deliveries": 4}, "q": {"run": "q", "orphan_deliveries": 1}}


@pytest.mark.parametrize(("input_bytes", "machine_bytes", "memory"), [
    (0, 24 << 30, "2g"),                 # a small run: the old default
    (100_000_000, 24 << 30, "3g"),       # 2 GiB + 0.3 GB, rounded up to whole GiB
    (1_900_000_000, 24 << 30, "8g"),     # B-SUB's whole sweep, which failed at 2g
    (50_000_000_000, 24 << 30, "12g"),   # at most half the machine
    (50_000_000_000, 2 << 30, "2g"),     # never below 2g, even on a small machine
])
def test_the_driver_memory_is_sized_to_the_input(input_bytes: int, machine_bytes: int,
                                                 memory: str) -> None:
    from mesheval.session import sized_driver_memory

    assert sized_driver_memory(input_bytes, machine_bytes) == memory


def test_mesheval_sizes_a_local_driver_unless_told(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The size is the telemetry's, not the report's cache beside it; a given
    --driver-memory or a cluster master is left alone."""
    import mesheval.session
    from mesheval.cli import main

    chosen: list[str | None] = []

    class Stop(Exception):
        pass

    def session(master: str | None = None, driver_memory: str | None = None) -> None:
        chosen.append(driver_memory)
        raise Stop

    monkeypatch.setattr(mesheval.session, "get_session", session)
    rundir = evaldata.write_run(tmp_path / "run")
    (rundir / "eval").mkdir()
    (rundir / "eval" / "cache.parquet").write_bytes(b"\0" * 5_000_000)  # not telemetry
    monkeypatch.setattr(mesheval.session, "sized_driver_memory",
                        lambda size, machine=None: f"{2 + size // 1000}g")
    for extra in ([], ["--driver-memory", "5g"], ["--master", "spark://h:7077"]):
        with pytest.raises(Stop):
            main([str(rundir), "--out", str(rundir / "eval"), *extra])
    size = sum(f.stat().st_size for f in rundir.rglob("*")
               if f.suffix in (".jsonl", ".parquet") and "eval" not in f.parts)
    assert size > 0
    assert chosen == [f"{2 + size // 1000}g", "5g", None]
    assert f"mesheval: driver memory {2 + size // 1000}g" in capsys.readouterr().err


def test_a_local_session_starts_its_jvm_with_the_compiler_thresholds(spark: Any) -> None:
    """``mesheval.session.LOCAL_JVM_OPTIONS`` reach the local JVM that runs the tasks
    (the JIT's and the collector's share of the job: docs/evaluation.md, "Performance"):
    the tiered compiler's thresholds, each raised from its default, and the serial
    collector, which the JVM then runs."""
    from mesheval.session import LOCAL_JVM_OPTIONS

    defaults = {"Tier4InvocationThreshold": 5000, "Tier4MinInvocationThreshold": 600,
                "Tier4CompileThreshold": 15000, "Tier4BackEdgeThreshold": 40000}
    flags = {o for o in LOCAL_JVM_OPTIONS.split() if "=" not in o}
    options = dict(o.removeprefix("-XX:").split("=") for o in LOCAL_JVM_OPTIONS.split()
                   if "=" in o)
    assert options.keys() == defaults.keys()
    assert all(int(options[k]) > v for k, v in defaults.items())
    assert flags == {"-XX:+UseSerialGC"}
    jvm = spark.sparkContext._jvm.java.lang.management
    assert set(LOCAL_JVM_OPTIONS.split()) <= set(
        jvm.ManagementFactory.getRuntimeMXBean().getInputArguments())
    collectors = {b.getName() for b in jvm.ManagementFactory.getGarbageCollectorMXBeans()}
    assert collectors == {"Copy", "MarkSweepCompact"}  # the serial collector's two


def test_a_local_session_caches_uncompressed(spark: Any) -> None:
    """``mesheval.session.LOCAL_SQL_SETTINGS`` hold in a local session, also one that
    was active before ``get_session`` (as under ``spark-submit --master local``)."""
    from mesheval.session import LOCAL_SQL_SETTINGS, get_session

    assert get_session() is spark
    assert LOCAL_SQL_SETTINGS == {"spark.sql.inMemoryColumnarStorage.compressed": "false"}
    for key, value in LOCAL_SQL_SETTINGS.items():
        assert spark.conf.get(key) == value


def _second_run(first: Path, second: Path) -> Path:
    """A copy of ``evaldata``'s run under the run id r2 (same protocol, same figures)."""
    for path in first.rglob("*"):
        target = second / path.relative_to(first)
        if path.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        text = path.read_text(encoding="utf-8")
        target.write_text(text.replace(f'"run": "{evaldata.RUN}"', '"run": "r2"'),
                          encoding="utf-8")
    return second


def _cells(path: Path) -> list[list[float | str | None]]:
    """A CSV's cells as numbers where they are numbers: Spark and Python spell floats
    differently (1.0E-4 against 0.0001), which is not a difference in the table."""
    def cell(text: str) -> float | str | None:
        if text == "":
            return None
        try:
            return float(text)
        except ValueError:
            return text
    with path.open(encoding="utf-8") as fh:
        return [[cell(c) for c in row] for row in csv.reader(fh)]


def test_a_sweep_sized_node_table_is_written_by_spark_and_listed_in_part(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above ``NODES_IN_DOCUMENT`` (run, node) rows, metrics.json lists the nodes of each
    protocol's first run only and tables/nodes.csv, written by Spark, has every row: the
    same table, cell for cell, as the one written from the listed rows below the cap."""
    import mesheval.batch
    from mesheval.batch import run_batch

    runs = [evaldata.write_run(tmp_path / "run1")]
    runs.append(_second_run(runs[0], tmp_path / "run2"))
    small = run_batch(spark, runs, tmp_path / "small", optimum=False)
    monkeypatch.setattr(mesheval.batch, "NODES_IN_DOCUMENT", 1)
    large = run_batch(spark, runs, tmp_path / "large", optimum=False)

    every = small.document["nodes"]
    assert {n["run"] for n in every} == {evaldata.RUN, "r2"}
    assert small.document["nodes_total"] == len(every) and small.document["nodes_listed"] == "all"
    assert large.document["nodes_total"] == len(every)
    assert large.document["nodes"] == [n for n in every if n["run"] == evaldata.RUN]
    assert large.document["nodes_listed"].startswith("the first run of each protocol")
    written = _cells(tmp_path / "large" / "tables" / "nodes.csv")
    assert written == _cells(tmp_path / "small" / "tables" / "nodes.csv")
    assert len(written) == 1 + len(every)
    assert not list((tmp_path / "large" / "tables").glob(".*"))  # no staging left
