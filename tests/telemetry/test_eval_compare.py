"""Today's mesheval against the job before its rework (issue 16): every figure unchanged.

``data/compare/metrics-before.json`` is the old job's metrics.json of the three small
runs in ``data/compare/runs.tgz`` (data/compare/README.md says how both were made).
Floats may differ in the last bits (a sum's order); everything else is equal.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalcompare import DATA, differences, unpack_runs, without_node_count


def test_metrics_json_equals_the_job_before_the_rework(spark: Any, tmp_path: Path) -> None:
    from mesheval.batch import run_batch

    run_batch(spark, unpack_runs(tmp_path / "runs"), tmp_path / "out")
    now = without_node_count(json.loads((tmp_path / "out" / "metrics.json").read_text(
        encoding="utf-8")))
    before = json.loads((DATA / "metrics-before.json").read_text(encoding="utf-8").replace(
        "@RUNS@", str(tmp_path / "runs")))
    found = differences(before, now)
    assert not found, "\n".join(found[:20])
    assert now["runs"] and now["quality"]["invalid_total"] > 0  # the fixture is not empty


def test_the_comparison_sees_a_changed_figure() -> None:
    before = {"runs": [{"metrics": {"delivery_ratio": 0.5, "events": 3}}]}
    assert not differences(before, json.loads(json.dumps(before)))
    nearly = {"runs": [{"metrics": {"delivery_ratio": 0.5 + 1e-6, "events": 3}}]}
    assert differences(before, nearly) == [
        ".runs[0].metrics.delivery_ratio: 0.5 before, 0.500001 now"]
    assert differences(before, {"runs": [{"metrics": {"delivery_ratio": 0.5, "events": 4}}]})
    assert differences(before, {"runs": []}) == [".runs: 1 items before, 0 now"]


def test_parquet_runs_give_the_figures_of_their_json_lines(spark: Any, tmp_path: Path) -> None:
    """The simulated runs as the simulator's Parquet (meshsim.telemetry_parquet): every
    figure as from their JSON Lines; a file that is not Parquet, or whose columns have
    other types, counts its rows invalid instead of stopping the job."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from mesheval.batch import run_batch
    from meshsim.telemetry_parquet import PARQUET_FILE, arrow_schema, lines_to_table

    runs = unpack_runs(tmp_path / "runs")
    for rundir in runs[:2]:  # demo and tg: simulated; hand stays JSON Lines (a spool)
        files = sorted(rundir.glob("node-*.jsonl"))
        data = b"".join(f.read_bytes() for f in files)
        pq.write_table(lines_to_table(data, arrow_schema()), rundir / PARQUET_FILE)
        for f in files:
            f.unlink()
    (runs[0] / "junk.parquet").write_bytes(b"not parquet at all")
    pq.write_table(pa.table({"run": ["demo"], "node": ["one"]}), runs[1] / "typed.parquet")
    run_batch(spark, runs, tmp_path / "out")
    now = without_node_count(json.loads((tmp_path / "out" / "metrics.json").read_text(
        encoding="utf-8")))
    before = json.loads((DATA / "metrics-before.json").read_text(encoding="utf-8").replace(
        "@RUNS@", str(tmp_path / "runs")))
    for key in ("runs", "groups", "windows", "nodes", "state_timeline", "latency_cdf_groups"):
        found = differences(before[key], now[key], f".{key}")
        assert not found, "\n".join(found[:20])
    bad = {Path(q["path"]).name: q["errors"] for q in now["quality"]["files"] if q["invalid"]}
    (reason,) = bad["junk.parquet"]
    assert reason.startswith("not a Parquet file") and bad["junk.parquet"][reason] == 1
    assert bad["typed.parquet"] == {"column node is string, not bigint": 1}


def test_a_parquet_files_invalid_rows_stay_out_and_its_valid_rows_count(
        spark: Any, tmp_path: Path) -> None:
    """Columnar files the census found valid are read without the row checks
    (``mesheval.load``): a file with invalid rows must keep them, so its bad rows are
    counted and left out, its good rows kept, and a clean file beside it read whole."""
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F

    from mesheval.load import load_rundirs
    from meshsim.telemetry_parquet import arrow_schema, lines_to_table

    def rec(node: int, ts: int, event: str, extra: str = "") -> str:
        return f'{{"run":"r","protocol":"p","node":{node},"ts_ns":{ts},"event":"{event}"{extra}}}'

    clean = [rec(1, 10, "publish", ',"event_id":"e1","topic":"t","content":"t"'),
             rec(2, 20, "deliver", ',"event_id":"e1","sub_id":"s"')]
    dirty = [rec(3, 30, "publish", ',"event_id":"e2","topic":"t","content":"t"'),
             rec(3, -5, "tx", ',"msg_kind":"data","bytes":10'),      # negative ts_ns
             rec(4, 40, "publish", ',"topic":"t","content":"t"')]     # no event_id
    rundir = tmp_path / "run"
    rundir.mkdir()
    for name, lines in (("a.parquet", clean), ("b.parquet", dirty)):
        pq.write_table(lines_to_table(("\n".join(lines) + "\n").encode(), arrow_schema()),
                       rundir / name)
    loaded = load_rundirs(spark, [rundir], tmp_path / "out")
    got = sorted((r["node"], r["ts_ns"], r["event"]) for r in
                 loaded.records.select("node", "ts_ns", "event").collect())
    assert got == [(1, 10, "publish"), (2, 20, "deliver"), (3, 30, "publish")]
    quality = {Path(q.path).name: (q.lines, q.valid, q.errors) for q in loaded.quality}
    assert quality == {"a.parquet": (2, 2, {}),
                       "b.parquet": (3, 1, {"negative ts_ns": 1, "publish without event_id": 1})}
    assert loaded.records.filter(F.col("rundir") != 0).count() == 0
