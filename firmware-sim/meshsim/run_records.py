"""A finished run's records of some event types, from either telemetry layout.

Bench scripts that compute a figure mesheval does not (HESPER's cells per radio hop,
TG's groups per window) read a run directory themselves. A simulated run holds node
files (``node-<id>.jsonl``) or, when written with ``--telemetry-format parquet`` or a
sweep's ``telemetry_format = "parquet"`` (docs/experiments.md), one
``telemetry.parquet``; this is the one reader of both, so such a script works on every
run a sweep can write. Large runs are mostly ``rx`` records no such figure reads: node
files' lines are skipped by a text test before they are decoded, the Parquet file is
read with a filter on its ``event`` column.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from meshsim.telemetry_parquet import PARQUET_FILE


class NoTelemetryError(FileNotFoundError):
    """The run directory holds neither layout (its node files archived or removed): read
    as empty, it would give figures of a run without one record."""


def run_records(rundir: Path, events: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The records of ``events`` in ``rundir``, as the node files' lines decode: fields
    a record does not set are absent (Parquet's nulls are left out). Order: node files
    by name and line, or the Parquet file's rows. ``NoTelemetryError`` at once (not at
    the first record) if the directory has no telemetry."""
    wanted = set(events)
    parquet = rundir / PARQUET_FILE
    if parquet.is_file():
        return _parquet_records(parquet, wanted)
    nodes = sorted(rundir.glob("node-*.jsonl"))
    if not nodes:
        raise NoTelemetryError(f"{rundir}: no telemetry (neither {PARQUET_FILE} nor "
                               "node-*.jsonl)")
    return _node_file_records(nodes, wanted)


def _parquet_records(path: Path, wanted: set[str]) -> Iterator[dict[str, Any]]:
    """Batch by batch, so a run of tens of millions of records is never one list."""
    import pyarrow.dataset as ds  # the eval extra; only runs written as Parquet need it

    scan = ds.dataset(path).to_batches(filter=ds.field("event").isin(sorted(wanted)))
    for batch in scan:
        for row in batch.to_pylist():
            yield {k: v for k, v in row.items() if v is not None}


def _node_file_records(paths: list[Path], wanted: set[str]) -> Iterator[dict[str, Any]]:
    marks = tuple(f'"event":{sep}"{e}"' for e in wanted for sep in ("", " "))
    for path in paths:
        with path.open(encoding="utf-8") as f:
            for line in f:
                if any(m in line for m in marks):
                    record = json.loads(line)
                    if record.get("event") in wanted:
                        yield record
