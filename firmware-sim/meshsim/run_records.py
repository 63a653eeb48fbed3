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


def run_records(rundir: Path, events: Iterable[str]) -> Iterator[dict[str, Any]]:
    """The records of ``events`` in ``rundir``, as the node files' lines decode: fields
    a record does not set are absent (Parquet's nulls are left out). Order: node files
    by name and line, or the Parquet file's rows."""
    wanted = set(events)
    parquet = rundir / PARQUET_FILE
    if parquet.is_file():
        import pyarrow.parquet as pq  # the eval extra; only runs written as Parquet need it

        table = pq.read_table(parquet, filters=[("event", "in", sorted(wanted))])
        for row in table.to_pylist():
            yield {k: v for k, v in row.items() if v is not None}
        return
    marks = tuple(f'"event":{sep}"{e}"' for e in wanted for sep in ("", " "))
    for path in sorted(rundir.glob("node-*.jsonl")):
        with path.open(encoding="utf-8") as f:
            for line in f:
                if any(m in line for m in marks):
                    record = json.loads(line)
                    if record.get("event") in wanted:
                        yield record
