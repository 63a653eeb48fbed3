"""Reading run directories: JSON Lines in, validated records out, Parquet cached.

JSON Lines of each RUNDIR are converted once into ``REPORTDIR/parquet/<dir>-<hash>/`` (partitioned
by run, protocol and event, invalid rows kept with their error so the per-file counts can
be recomputed); the cache is reused while the set of input files, their sizes and
modification times are unchanged. Parquet telemetry (the simulator's columnar
format, ``meshsim.telemetry_parquet``) is read as it is, with the same checks. Malformed
lines never stop the job: they are counted per file and reported.
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

from pyspark.sql import DataFrame, Row, SparkSession
from pyspark.sql import functions as F

from mesheval.footer import constant_strings, proven_checks
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
    census: list[Row] = field(default_factory=list)
    """Valid records per (run, node, rundir, protocol): count, first and last ``ts_ns``
    (``mesheval.settings.run_settings`` takes it instead of scanning the records again);
    a node may have a row per protocol its records name."""

    @property
    def positions_per_node(self) -> int:
        """The most ``position`` records of one (run, node): at most one means static
        nodes (``mesheval.metrics.traffic`` then joins positions without a sort)."""
        per_node: dict[tuple[str, int], int] = {}
        for r in self.census:
            key = (r["run"], r["node"])
            per_node[key] = per_node.get(key, 0) + r["positions"]
        return max(per_node.values(), default=0)


def telemetry_files(rundir: Path, exclude: Path | None = None,
                    suffixes: tuple[str, ...] = (".jsonl",)) -> list[Path]:
    """Files with one of ``suffixes`` under ``rundir``, recursively; hidden temp files
    are skipped."""
    files = []
    for path in sorted(p for p in rundir.rglob("*") if p.suffix in suffixes):
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


def _census(data: DataFrame, index: int) -> DataFrame:
    """Rows per (file, error, run, node, protocol): the file counts, the runs' extents and
    the nodes' position records (``Loaded.positions_per_node``) in one pass.

    The protocol is a grouping key, not a ``min`` aggregate: a string buffer cannot live
    in Spark's hash map, and ``min("protocol")`` made Spark plan the whole census (every
    record) as a sort-based aggregation (docs/benchmarks.md). A node whose records name
    two protocols gets two rows; every reader of the census sums its rows per node or
    per run, and ``mesheval.settings`` takes a run's least protocol, as the ``min`` did."""
    return (data.groupBy(FILE, ERROR, "run", "node", "protocol")
            .agg(F.count(F.lit(1)).alias("records"), F.min("ts_ns").alias("t0"),
                 F.max("ts_ns").alias("t1"),
                 F.count(F.when(F.col("event") == "position", 1)).alias("positions"))
            .withColumn("rundir", F.lit(index)))


def _quality(rows: Sequence[Row]) -> list[FileQuality]:
    by_file: dict[str, FileQuality] = {}
    for row in rows:
        path = _display_path(row[FILE] or "?")
        q = by_file.setdefault(path, FileQuality(path))
        q.lines += row["records"]
        if row[ERROR] is None:
            q.valid += row["records"]
        else:
            q.errors[row[ERROR]] = q.errors.get(row[ERROR], 0) + row["records"]
    return sorted(by_file.values(), key=lambda q: q.path)


def load_rundirs(spark: SparkSession, rundirs: Sequence[Path], out: Path) -> Loaded:
    """Read every RUNDIR (through the Parquet cache) into one DataFrame of valid records."""
    parts: list[_Part] = []
    unread: list[tuple[int, FileQuality]] = []
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
        columnar = telemetry_files(rundir, exclude=out_abs, suffixes=(".parquet",))
        if not files and not columnar:
            raise InputError(f"{rundir}: no *.jsonl or *.parquet telemetry files")
        hit = False
        if files:
            cache = cache_dir(out_abs, rundir)
            fingerprint = _fingerprint(rundir, files)
            hit = _cache_valid(cache, fingerprint)
            if not hit:
                _convert(spark, files, cache)
                (cache / STAMP).write_text(json.dumps(fingerprint), encoding="utf-8")
            parts.append(_Part(index, spark.read.parquet(str(cache / "data"))))
        if columnar:
            readable, unreadable = parquet_files(columnar)
            unread += [(index, q) for q in unreadable]
            if readable:
                parts.append(_Part(index, read_columnar(spark, readable, literals=True),
                                   readable))
        hits.append(hit)
    census: list[Row] = []
    if parts:  # one Spark job for every file's counts and every run's extent
        union = _census(parts[0].checked, parts[0].index)
        for part in parts[1:]:
            union = union.unionByName(_census(part.checked, part.index))
        census = union.collect()
    # the census split by RUNDIR once: a sweep has hundreds of RUNDIRs and the census a
    # row per node of each, so a scan of the whole census per RUNDIR was quadratic (the
    # HESPER sweep's 440 runs: about 2 million rows scanned 880 times, most of an hour)
    by_rundir: dict[int, list[Row]] = {}
    for row in census:
        by_rundir.setdefault(row["rundir"], []).append(row)
    quality = [q for index in range(len(resolved)) for q in sorted(  # by RUNDIR, then path
        [q for i, q in unread if i == index]
        + _quality(by_rundir.get(index, [])), key=lambda q: q.path)]
    frames = [part.valid(spark, by_rundir.get(part.index, [])) for part in parts]
    records = frames[0] if frames else spark.createDataFrame(
        [], record_schema(with_corrupt=False)).withColumn("rundir", F.lit(0))
    for frame in frames[1:]:
        records = records.unionByName(frame)
    valid = [r for r in census if r[ERROR] is None]
    return Loaded(records, quality, manifests, resolved, hits, valid)


RECORD_COLUMNS = tuple(record_schema(with_corrupt=False).fieldNames())


@dataclass
class _Part:
    """One source of a RUNDIR's records: its Parquet cache of JSON Lines, or its columnar
    files (``columnar``) read as they are."""

    index: int
    checked: DataFrame
    """Every row with its ``_file`` and ``_error`` (the census counts these)."""
    columnar: list[Path] | None = None

    def valid(self, spark: SparkSession, mine: Sequence[Row]) -> DataFrame:
        """The valid rows (``RECORD_COLUMNS`` and ``rundir``); ``mine``: the census rows of
        this part's RUNDIR.

        Columnar files the census found free of invalid rows are read plainly: every
        later scan then reads only the columns its metric needs, instead of all the
        columns ``error_column`` checks (at 10^6 records each scan cost 2-3 CPU-seconds
        more with the checks). The Parquet cache stores ``_error``, so its filter is cheap.
        """
        frames = []
        checked: DataFrame | None = self.checked
        if self.columnar is not None:
            seen = {_display_path(r[FILE] or "?") for r in mine}
            dirty = {_display_path(r[FILE] or "?") for r in mine if r[ERROR] is not None}
            # only a file the census names, with no invalid row, is clean: a path spelt
            # differently stays with the checks
            clean = [p for p in self.columnar if str(p) in seen and str(p) not in dirty]
            if clean:
                frames.append(spark.read.schema(record_schema(with_corrupt=False))
                              .parquet(*[str(p) for p in clean]))
            rest = [p for p in self.columnar if p not in clean]
            checked = read_columnar(spark, rest) if rest else None
        if checked is not None:
            frames.append(checked.filter(F.col(ERROR).isNull()).select(*RECORD_COLUMNS))
        valid = frames[0]
        for frame in frames[1:]:
            valid = valid.unionByName(frame)
        return valid.withColumn("rundir", F.lit(self.index))


def parquet_files(paths: Sequence[Path]) -> tuple[list[Path], list[FileQuality]]:
    """Parquet files whose columns fit the record schema, and the others counted invalid.

    Checked from each file's footer (no data read): a column of the schema with another
    type, or a file that is not Parquet, makes all its rows invalid with that reason; a
    column the file lacks is null (an attribute never set), one the schema lacks ignored.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    wanted = {f.name: f.dataType.simpleString() for f in record_schema(with_corrupt=False)}
    spark_name = {pa.int64(): "bigint", pa.float64(): "double", pa.string(): "string",
                  pa.large_string(): "string"}
    good: list[Path] = []
    bad: list[FileQuality] = []
    for path in paths:
        try:
            meta = pq.read_metadata(path)
            schema = meta.schema.to_arrow_schema()
        except (OSError, pa.ArrowException) as exc:
            bad.append(FileQuality(str(path), lines=1, errors={
                f"not a Parquet file: {str(exc).splitlines()[0][:120]}": 1}))
            continue
        wrong = [f"column {f.name} is {f.type}, not {wanted[f.name]}" for f in schema
                 if f.name in wanted and spark_name.get(f.type) != wanted[f.name]]
        if wrong:
            bad.append(FileQuality(str(path), lines=meta.num_rows,
                                   errors={wrong[0]: meta.num_rows} if meta.num_rows else {}))
        else:
            good.append(path)
    return good, bad


def read_columnar(spark: SparkSession, files: Sequence[Path], *, literals: bool = False
                  ) -> DataFrame:
    """Parquet telemetry (``meshsim simulate --telemetry-format parquet``) with the checks
    of the JSON Lines path (``error_column``); no cache: the file is columnar already.

    Each file gets the checks its footer's statistics cannot rule out
    (``mesheval.footer.proven_checks``): the others cannot fail, and leaving them out
    spares the scan their columns. Each file is its own frame, so its path is a literal
    (the URI Spark's ``_metadata.file_path`` would give), not a string read with every
    row: the census (``_census``) then groups a clean file's rows by run and node alone
    (Spark drops a literal grouping key), where reading and hashing the path in every
    row cost about 5 CPU-seconds of 27 on a 10^7-record file (docs/benchmarks.md).

    ``literals``: the run and protocol too, where the footer proves them constant
    (``_constants``): for the census only. The records the metrics read keep the
    columns: a literal run made Spark plan each join with the runs' settings as a
    cartesian product (the join key folded away), and the traffic's pass took 23 CPU-s
    instead of 14 at 10^7 records (docs/benchmarks.md, "Seventh session")."""
    frames = [
        _constants(spark.read.schema(record_schema(with_corrupt=False)).parquet(str(path)),
                   path if literals else None)
        .withColumn(CORRUPT, F.lit(None).cast("string"))
        .withColumn(FILE, F.lit(path.absolute().as_uri()))
        .withColumn(ERROR, error_column(proven_checks(path)))
        for path in files
    ]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    return union


def _constants(frame: DataFrame, path: Path | None) -> DataFrame:
    """``frame`` (the records of the file at ``path``) with each column that holds the
    same string in every row (``mesheval.footer.constant_strings``: a simulated run's run
    and protocol) replaced by that string as a literal: the same values, but the scan
    neither reads nor decodes the column. At 10^7 records, in a side measurement, the
    census's pass took 3.6 CPU-s with the columns read and 2.2 with literals
    (docs/benchmarks.md, "Seventh session"). No ``path``: ``frame`` unchanged."""
    for name, value in (constant_strings(path) if path is not None else {}).items():
        frame = frame.withColumn(name, F.lit(value))
    return frame
