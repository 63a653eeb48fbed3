"""The batch evaluation: RUNDIRs in, metrics.json, tables and the report out."""

from __future__ import annotations

import csv
import json
import math
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mesheval.aggregate import aggregate
from mesheval.load import FileQuality, InputError, load_rundirs
from mesheval.metrics import CDF_POINTS, Evaluation, evaluate
from mesheval.optimum.job import optimum_by_run
from mesheval.roles import broker_share
from mesheval.settings import RunSettings, run_settings, settings_frame


@dataclass
class BatchResult:
    settings: list[RunSettings]
    evaluation: Evaluation
    groups: list[dict[str, Any]]
    quality: list[FileQuality]
    cache_hits: list[bool]
    document: dict[str, Any]


def clean(value: Any) -> Any:
    """JSON-safe numbers: NaN and infinities become null, tuples lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean(v) for v in value]
    return value


def run_batch(
    spark: SparkSession,
    rundirs: Sequence[Path],
    out: Path,
    *,
    warmup_s: float | None = None,
    window_s: float = 10.0,
    range_m: float = 100.0,
    message_bits: int | None = None,
    deadline_s: float | None = None,
    optimum: bool = True,
    cache_window_s: float = 0.0,
) -> BatchResult:
    """Evaluate ``rundirs`` and write ``out/metrics.json`` and ``out/tables/``.

    ``message_bits``: charge every transmission's energy as a message of that many bits
    (the thesis's fixed message size) instead of its frame's bytes.
    """
    out.mkdir(parents=True, exist_ok=True)
    loaded = load_rundirs(spark, rundirs, out)
    settings = run_settings(loaded.records, loaded.manifests, warmup_override=warmup_s,
                            default_range_m=range_m, deadline_override=deadline_s,
                            census=loaded.census)
    if not settings:
        bad = sum(q.invalid for q in loaded.quality)
        raise InputError(f"no valid records: {bad} invalid lines in {len(loaded.quality)} files "
                         f"(first reason: {_first_reason(loaded.quality)})")
    members = spark.createDataFrame(
        [(s.run, int(node), name, group.get("role"))
         for s in settings if (info := loaded.manifests.get(s.rundir)) is not None
         for name, group in (info.raw.get("groups") or {}).items()
         for node in group.get("nodes", [])],
        "run string, node long, group string, role string")
    evaluation = evaluate(loaded.records, settings_frame(spark, settings), window_s=window_s,
                          message_bits=message_bits, cache_window_s=cache_window_s,
                          groups=members, names=spark.createDataFrame(
                              sorted({(r["run"], r["node"]) for r in loaded.census}),
                              "run string, node long"),
                          positions_per_node=loaded.positions_per_node)
    for run, share in broker_share(loaded.records, settings).items():
        evaluation.runs.setdefault(run, {})["broker_share"] = share
    optimum_events: list[dict[str, Any]] = []
    if optimum and evaluation.event_detail is not None:
        # the optimum needs a run's manifest (its topology): the events of runs without
        # one are not collected (optimum_by_run marks those runs "no manifest.json")
        solvable = sorted({s.run for s in settings if loaded.manifests.get(s.rundir)})
        detail = (evaluation.event_detail.filter(F.col("run").isin(solvable)).collect()
                  if solvable else [])
        by_run, optimum_events = optimum_by_run(detail, settings, loaded.rundirs,
                                                loaded.manifests)
        for run, values in by_run.items():
            evaluation.runs.setdefault(run, {}).update(values)
    groups = aggregate(settings, evaluation.runs)
    node_listing, node_rows = _node_listing(evaluation.nodes, settings)
    document = {
        "tool": "mesheval",
        "window_s": window_s,
        "message_bits": message_bits,
        "optimum": optimum,
        "cache_window_s": cache_window_s,
        "cdf_points": CDF_POINTS,
        "runs": [
            {**s.as_dict(), "metrics": evaluation.runs.get(s.run, {}),
             "latency_cdf": evaluation.run_cdf.get(s.run, [])}
            for s in settings
        ],
        "groups": groups,
        "windows": evaluation.windows,
        **node_listing,
        "state_timeline": evaluation.state_timeline,
        "latency_cdf_groups": evaluation.group_cdf,
        "quality": {
            "files": [
                {"path": q.path, "lines": q.lines, "valid": q.valid, "invalid": q.invalid,
                 "errors": q.errors}
                for q in loaded.quality
            ],
            "invalid_total": sum(q.invalid for q in loaded.quality),
            "lines_total": sum(q.lines for q in loaded.quality),
        },
        "inputs": [str(p) for p in loaded.rundirs],
        "parquet_cache_reused": loaded.cache_hits,
    }
    document = clean(document)
    write_json(out / "metrics.json", document)
    tables = out / "tables"
    tables.mkdir(exist_ok=True)
    write_csv(tables / "optimum.csv", optimum_events)
    write_csv(tables / "windows.csv", evaluation.windows)
    if node_rows is not None:
        write_csv(tables / "nodes.csv", node_rows)
    else:
        write_spark_csv(evaluation.nodes, tables / "nodes.csv")
    write_csv(tables / "runs.csv", [{**s.as_dict(), **evaluation.runs.get(s.run, {})}
                                    for s in settings])
    (evaluation.per_event.orderBy("run", "pub_time_s").coalesce(1).write.mode("overwrite")
     .option("header", True).csv(str(tables / "per_event")))
    evaluation.release()
    return BatchResult(settings, evaluation, groups, loaded.quality, loaded.cache_hits, document)


NODES_IN_DOCUMENT = 100_000
"""metrics.json lists every (run, node) row up to this many. A sweep of hundreds of runs
has millions (2.2 million for HESPER's 440 runs of 4000 nodes: about a gigabyte of JSON,
and a dict per row in the driver), so above it the document lists the nodes of each
protocol's first run only (what the report's load map draws) and says so; the whole
table is tables/nodes.csv either way."""


def _node_listing(nodes: DataFrame, settings: Sequence[RunSettings]
                  ) -> tuple[dict[str, Any], list[dict[str, Any]] | None]:
    """The document's node entries, and every node row if they are all listed."""
    total = nodes.count()
    if total <= NODES_IN_DOCUMENT:
        rows = [row.asDict() for row in nodes.collect()]
        return {"nodes": rows, "nodes_total": total, "nodes_listed": "all"}, rows
    first: dict[str, str] = {}
    for s in sorted(settings, key=lambda s: s.run):
        first.setdefault(s.protocol, s.run)
    listed = [row.asDict() for row in
              nodes.filter(F.col("run").isin(sorted(first.values()))).collect()]
    return {"nodes": listed, "nodes_total": total,
            "nodes_listed": "the first run of each protocol (tables/nodes.csv has all)"}, None


def _first_reason(quality: Sequence[FileQuality]) -> str:
    for q in quality:
        for reason in q.errors:
            return f"{q.path}: {reason}"
    return "none"


def write_json(path: Path, document: Any) -> None:
    """Write atomically (temp file + rename) so a reader never sees half a file."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(document, indent=1, allow_nan=False) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def write_spark_csv(frame: DataFrame, path: Path) -> None:
    """One CSV file with a header, written by Spark (its rows never reach the driver):
    the single part Spark writes into a directory beside ``path``, renamed to it."""
    staging = path.with_name(f".{path.name}.spark")
    frame.coalesce(1).write.mode("overwrite").option("header", True).csv(str(staging))
    parts = sorted(staging.glob("part-*.csv"))
    if len(parts) != 1:
        raise RuntimeError(f"{staging}: Spark wrote {len(parts)} CSV parts, expected 1")
    os.replace(parts[0], path)
    shutil.rmtree(staging)


def write_csv(path: Path, rows: Sequence[dict[str, Any]]) -> None:
    names: list[str] = []
    for row in rows:
        names += [k for k in row if k not in names]
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=names)
        writer.writeheader()
        writer.writerows(rows)
