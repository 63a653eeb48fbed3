"""Per-run settings: the manifest joined with what the records themselves say.

The ``run`` field of the records names a run; the manifest of the RUNDIR it came
from supplies scenario, seed, varied parameter, warm-up and radio range. The
measurement starts ``warmup_s`` after ``t0``: the manifest's ``t0_ns`` where the
writer gives one (the virtual mesh), else the run's first record.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    DoubleType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from mesheval.manifest import RunInfo

GROUP_KEYS = ("protocol", "scenario", "tier", "param_name", "param_value")
"""Runs with equal group keys are seeds of one configuration (averaged with a CI); a
scenario run in the simulator and on the virtual mesh are two configurations."""


@dataclass(frozen=True)
class RunSettings:
    run: str
    rundir: int
    protocol: str
    scenario: str
    seed: int | None
    param_name: str
    param_value: str
    param_number: float | None
    tier: str
    warmup_s: float
    range_m: float
    t0_ns: int
    cutoff_ns: int
    end_ns: int
    nodes: int
    records: int
    deadline_ns: int | None = None
    """An event's lifetime: later deliveries do not count (None: no deadline)."""
    horizon_ns: int | None = None
    """When the run ends (t0 + duration + drain; else the last record): events whose
    deadline falls later are not judged."""
    varied: dict[str, Any] = field(default_factory=dict)
    """Every value a sweep varied for this run, by axis (the report's columns)."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    def varied_label(self) -> str:
        return json.dumps(self.varied, sort_keys=True, default=str)


SETTINGS_SCHEMA = StructType(
    [
        StructField("run", StringType()),
        StructField("protocol", StringType()),
        StructField("scenario", StringType()),
        StructField("tier", StringType()),
        StructField("param_name", StringType()),
        StructField("param_value", StringType()),
        StructField("range_m", DoubleType()),
        StructField("t0_ns", LongType()),
        StructField("cutoff_ns", LongType()),
        StructField("deadline_ns", LongType()),
        StructField("horizon_ns", LongType()),
    ]
)


def run_settings(
    records: DataFrame,
    manifests: dict[int, RunInfo | None],
    *,
    warmup_override: float | None,
    default_range_m: float,
    deadline_override: float | None = None,
    census: Sequence[Row] | None = None,
) -> list[RunSettings]:
    """One ``RunSettings`` per run id found in the records.

    ``census``: the records' counts per (run, rundir, node) (``node_census``; the loader
    collects it with the file counts, so the records are not scanned again here)."""
    rows = _per_run(census if census is not None else node_census(records))
    out: list[RunSettings] = []
    seen: set[str] = set()
    for row in rows:
        if row["run"] in seen:  # the same run id in two RUNDIRs: first one wins
            continue
        seen.add(row["run"])
        info = manifests.get(row["rundir"])
        warmup = warmup_override if warmup_override is not None else (
            info.warmup_s if info else 0.0)
        t0 = info.t0_ns if info and info.t0_ns is not None else int(row["t0"])
        out.append(
            RunSettings(
                run=row["run"],
                rundir=row["rundir"],
                protocol=row["protocol"],
                scenario=info.scenario if info else "unknown",
                seed=info.seed if info else None,
                param_name=info.param_name if info else "params",
                param_value=info.param_value if info else "default",
                param_number=info.param_number if info else None,
                tier=info.tier if info else "unknown",
                warmup_s=float(warmup),
                range_m=float(info.range_m) if info and info.range_m else default_range_m,
                t0_ns=t0,
                cutoff_ns=t0 + round(warmup * 1e9),
                end_ns=int(row["t1"]),
                nodes=int(row["nodes"]),
                records=int(row["records"]),
                deadline_ns=_deadline_ns(deadline_override, info),
                horizon_ns=(t0 + round(info.horizon_s * 1e9)
                            if info and info.horizon_s is not None else int(row["t1"])),
                varied=dict(info.varied) if info else {},
            )
        )
    return out


def node_census(records: DataFrame) -> list[Row]:
    """(run, rundir, node, protocol, records, t0, t1) per node of each run and protocol
    its records name (a grouping key, hash-aggregated, where a ``min`` of the string made
    Spark sort every record: ``mesheval.load``'s census does the same)."""
    return (records.groupBy("run", "rundir", "node", "protocol")
            .agg(F.count(F.lit(1)).alias("records"), F.min("ts_ns").alias("t0"),
                 F.max("ts_ns").alias("t1"))
            .collect())


def _per_run(census: Sequence[Row]) -> list[dict[str, Any]]:
    """The census summed per (run, rundir), sorted: extent, protocol, nodes, records
    (rows of one node from several files or protocols count it once; a run's protocol is
    the least its records name)."""
    runs: dict[tuple[str, int], dict[str, Any]] = {}
    for r in census:
        key = (r["run"], r["rundir"])
        run = runs.get(key)
        if run is None:
            runs[key] = {"run": r["run"], "rundir": r["rundir"], "t0": r["t0"], "t1": r["t1"],
                         "protocol": r["protocol"], "nodes": {r["node"]},
                         "records": r["records"]}
            continue
        run["t0"], run["t1"] = min(run["t0"], r["t0"]), max(run["t1"], r["t1"])
        if r["protocol"] is not None and (run["protocol"] is None
                                          or r["protocol"] < run["protocol"]):
            run["protocol"] = r["protocol"]
        run["nodes"].add(r["node"])  # a node's records may span several files
        run["records"] += r["records"]
    return [{**runs[k], "nodes": len(runs[k]["nodes"])} for k in sorted(runs)]


def _deadline_ns(override: float | None, info: RunInfo | None) -> int | None:
    seconds = override if override is not None else (info.deadline_s if info else None)
    return round(seconds * 1e9) if seconds is not None else None


def settings_frame(spark: SparkSession, settings: list[RunSettings]) -> DataFrame:
    """The settings as a small DataFrame to join on ``run``."""
    data = [
        (s.run, s.protocol, s.scenario, s.tier, s.param_name, s.param_value, s.range_m, s.t0_ns,
         s.cutoff_ns, s.deadline_ns, s.horizon_ns)
        for s in settings
    ]
    return spark.createDataFrame(data, schema=SETTINGS_SCHEMA)
