"""The simulator's columnar telemetry: one Parquet file per run, written in batches.

``meshsim simulate --telemetry-format parquet`` writes ``RUNDIR/telemetry.parquet``
instead of ``node-<id>.jsonl``: the same records (``ParquetRunWriter`` builds the very
lines ``RunWriter`` writes and parses each batch of them with pyarrow's JSON reader),
stored as one column per field of ``meshsub.core.telemetry.FIELDS`` (an unset
attribute is null), one row group per flushed batch. mesheval reads such a file with
no JSON parsing at all (docs/telemetry.md, "Columnar runs"); the daemon and the
virtual mesh keep writing JSON Lines.
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from meshsim.telemetry_files import MANIFEST, RunDirError, RunWriter, atomic_write_text
from meshsub.core.telemetry import FIELDS

PARQUET_FILE = "telemetry.parquet"
FORMATS = ("jsonl", "parquet")
"""What ``--telemetry-format`` accepts; JSON Lines stays the default."""


def arrow_schema() -> Any:
    """The record schema as Arrow types: int64, float64 or string per field, all nullable."""
    import pyarrow as pa

    def kind(types: tuple[type, ...]) -> Any:
        if float in types:
            return pa.float64()
        if int in types:
            return pa.int64()
        return pa.string()

    return pa.schema([pa.field(name, kind(types), nullable=True)
                      for name, types in FIELDS.items()])


def lines_to_table(data: bytes, schema: Any) -> Any:
    """JSON Lines text (records of the telemetry schema) -> an Arrow table of ``schema``.

    A field outside the schema is an error (``validate_record`` rejects it too), so no
    attribute is ever dropped on the way into the columns.
    """
    import pyarrow.json as pj

    return pj.read_json(io.BytesIO(data), read_options=pj.ReadOptions(
        use_threads=False, block_size=max(1 << 20, len(data) + 1)),
        parse_options=pj.ParseOptions(explicit_schema=schema,
                                      unexpected_field_behavior="error"))


class ParquetRunWriter(RunWriter):
    """``RunWriter`` with its batches appended to ``telemetry.parquet`` as row groups.

    Rows of one batch are grouped by node, in each node's order (``rec`` ascending), as
    the node files hold them; the file is written under a ``.tmp`` name and renamed when
    the run closes, like the node files.
    """

    def __init__(self, run_dir: Path, run: str, protocol: str, **kwargs: Any) -> None:
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise RunDirError("--telemetry-format parquet needs pyarrow "
                              "(pip install 'meshsub-tools[eval]')") from None
        super().__init__(run_dir, run, protocol, **kwargs)
        self._schema = arrow_schema()
        self._tmp_path = self.run_dir / (PARQUET_FILE + ".tmp")
        self._writer: Any = pq.ParquetWriter(self._tmp_path, self._schema,
                                             compression="snappy")

    def flush(self) -> None:
        parts = [line for node in sorted(self._pending) for line in self._pending[node]]
        self._pending = {}
        self._pending_count = 0
        if not parts:
            return
        self._writer.write_table(lines_to_table(("\n".join(parts) + "\n").encode("utf-8"),
                                                self._schema))

    def close(self, manifest: Mapping[str, Any]) -> None:
        """Flush, close and rename the Parquet file, then write the manifest last."""
        if self.closed:
            return
        self.flush()
        self._writer.close()
        os.replace(self._tmp_path, self.run_dir / PARQUET_FILE)
        data = dict(manifest)
        data["files"] = [PARQUET_FILE]
        data["records"] = self.records
        data["telemetry_format"] = "parquet"
        atomic_write_text(self.run_dir / MANIFEST,
                          json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n")
        self.closed = True


def writer_class(fmt: str) -> type[RunWriter]:
    """The writer of ``fmt`` (one of ``FORMATS``)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown telemetry format {fmt!r} (choose from {', '.join(FORMATS)})")
    return ParquetRunWriter if fmt == "parquet" else RunWriter
