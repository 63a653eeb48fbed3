"""Reading run directories: JSON Lines in, validated records out, Parquet cached.

Each RUNDIR is converted once into ``REPORTDIR/parquet/<dir>-<hash>/`` (partitioned
by run, protocol and event, invalid rows kept with their error so the per-file counts can
be recomputed); the cache is reused while the set of input files, their sizes and
modification times are unchanged. Malformed lines never stop the job: they are
counted per file and reported.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from mesheval.manifest import ManifestError, RunInfo, read_manifest
from mesheval.schema import CORRUPT, ERROR, FILE, error_column, record_schema

STAMP = "_mesheval_inputs.json"
CACHE_VERSION = 2


class InputError(ValueError):
    """A RUNDIR that cannot be used at all (missing, no telemetry files)."""


@dataclass
class FileQuality:
    """Line counts of one input file; ``errors`` maps a reason to its count."""

    path: str
    lines: int = 0
    valid: int = 0
    errors: dict[str, int] = field(default_factory=dict)

    @property
    def invalid(self) -> int:
        return sum(self.errors.values())


@dataclass
class Loaded:
    """Valid records of all RUNDIRs (column ``rundir`` = index) and what was learnt on the way."""

    records: DataFrame
    quality: list[FileQuality]
    manifests: dict[int, RunInfo | None]
    rundirs: list[Path]
    cache_hits: list[bool]


def telemetry_files(rundir: Path, exclude: Path | None = None) -> list[Path]:
    """``*.jsonl`` files under ``rundir``, recursively; hidden temp files are skipped."""
    files = []
    for path in sorted(rundir.rglob("*.jsonl")):
        rel = path.relative_to(rundir)
        if any(part.startswith((".", "_")) for part in rel.parts):
            continue
        if exclude is not None and exclude in path.parents:
            continue
        if path.is_file():
            files.append(path)
    return files


def _fingerprint(rundir: Path, files: Sequence[Path]) -> dict[str, object]:
    inputs = {}
    for path in files:
        st = path.stat()
        inputs[str(path.relative_to(rundir))] = [st.st_size, st.st_mtime_ns]
    # the record schema is part of the stamp: a cache written before a field was added
    # (e.g. the member records' group) would lack that column and fail the job later
    return {"version": CACHE_VERSION, "schema": record_schema().simpleString(),
            "rundir": str(rundir), "inputs": inputs}


def cache_dir(out: Path, rundir: Path) -> Path:
    digest = hashlib.sha1(str(rundir).encode()).hexdigest()[:8]
    return out / "parquet" / f"{rundir.name or 'run'}-{digest}"


def _cache_valid(cache: Path, fingerprint: dict[str, object]) -> bool:
    stamp = cache / STAMP
    try:
        saved = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    if saved != fingerprint:
        return False
    inputs: dict[str, list[int]] = fingerprint["inputs"]  # type: ignore[assignment]
    newest = max((v[1] for v in inputs.values()), default=0)
    return stamp.stat().st_mtime_ns >= newest


def _convert(spark: SparkSession, files: Sequence[Path], cache: Path) -> None:
    """JSON Lines -> Parquet with an ``_error`` column (PERMISSIVE: nothing is fatal)."""
    raw = (
        spark.read.schema(record_schema())
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
        .json([str(p) for p in files])
        .withColumn(FILE, F.col("_metadata.file_path"))
    )
    checked = raw.withColumn(ERROR, error_column())
    if cache.exists():
        shutil.rmtree(cache)
    # partitioned by event too: each metric reads only the event types it needs
    checked.write.mode("overwrite").partitionBy("run", "protocol", "event").parquet(
        str(cache / "data"))


def _display_path(uri: str) -> str:
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme in ("file", "") else uri


def _quality(data: DataFrame) -> list[FileQuality]:
    rows = data.groupBy(FILE, ERROR).count().collect()
    by_file: dict[str, FileQuality] = {}
    for row in rows:
        path = _display_path(row[FILE] or "?")
        q = by_file.setdefault(path, FileQuality(path))
        q.lines += row["count"]
        if row[ERROR] is None:
            q.valid += row["count"]
        else:
            q.errors[row[ERROR]] = q.errors.get(row[ERROR], 0) + row["count"]
    return sorted(by_file.values(), key=lambda q: q.path)


def load_rundirs(spark: SparkSession, rundirs: Sequence[Path], out: Path) -> Loaded:
    """Read every RUNDIR (through the Parquet cache) into one DataFrame of valid records."""
    frames: list[DataFrame] = []
    quality: list[FileQuality] = []
    manifests: dict[int, RunInfo | None] = {}
    hits: list[bool] = []
    resolved = [Path(os.path.abspath(r)) for r in rundirs]
    out_abs = Path(os.path.abspath(out))
    for index, rundir in enumerate(resolved):
        if not rundir.is_dir():
            raise InputError(f"{rundir}: not a directory")
        try:
            manifests[index] = read_manifest(rundir)
        except ManifestError:
            raise
        files = telemetry_files(rundir, exclude=out_abs)
        if not files:
            raise InputError(f"{rundir}: no *.jsonl telemetry files")
        cache = cache_dir(out_abs, rundir)
        fingerprint = _fingerprint(rundir, files)
        hit = _cache_valid(cache, fingerprint)
        if not hit:
            _convert(spark, files, cache)
            (cache / STAMP).write_text(json.dumps(fingerprint), encoding="utf-8")
        hits.append(hit)
        data = spark.read.parquet(str(cache / "data"))
        quality += _quality(data)
        frames.append(data.filter(F.col(ERROR).isNull()).withColumn("rundir", F.lit(index)))
    records = frames[0]
    for frame in frames[1:]:
        records = records.unionByName(frame)
    records = records.drop(CORRUPT, ERROR)
    return Loaded(records, quality, manifests, resolved, hits)
