"""The simulator's columnar telemetry: one Parquet file per run, written in batches.

``meshsim simulate --telemetry-format parquet`` writes ``RUNDIR/telemetry.parquet``
instead of ``node-<id>.jsonl``: the same records, built as columns without a line of
text (``ParquetRunWriter``), stored as one column per field of
``meshsub.core.telemetry.FIELDS`` (an unset attribute is null), one row group per
event type of each flushed batch (``write_by_event``: a reader filtering on ``event``
skips the other events' row groups by their statistics). mesheval reads such a file with
no JSON parsing at all (docs/telemetry.md, "Columnar runs"); the daemon and the
virtual mesh keep writing JSON Lines.
"""

from __future__ import annotations

import io
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meshsim.telemetry_files import (
    MANIFEST,
    WRITER_FIELDS,
    RunDirError,
    RunWriter,
    atomic_write_text,
)
from meshsub.core.api import TelemetryValue
from meshsub.core.telemetry import ATTRIBUTE_FIELDS, FIELDS, TelemetryError

PARQUET_FILE = "telemetry.parquet"
FORMATS = ("jsonl", "parquet")
"""What ``--telemetry-format`` accepts; JSON Lines stays the default."""
PARQUET_FLUSH_ROWS = 200_000
"""Records per batch (split into a row group per event type): a batch holds node ids and
the calls' attributes, not lines; the node files' batch (``telemetry_files.FLUSH_LINES``)
is as large since the fourth round (docs/benchmarks.md), to open each node file fewer
times."""


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


@dataclass(slots=True)
class _Batch:
    """The record calls since the last flush, one entry per call in each list except
    ``nodes``, which holds every call's nodes one after another (``sizes`` of them)."""

    nodes: list[int] = field(default_factory=list)
    sizes: list[int] = field(default_factory=list)
    ts_ns: list[int] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    attrs: list[Mapping[str, TelemetryValue]] = field(default_factory=list)
    """Kept as given until the flush: a caller never changes a mapping it recorded
    (the engine and ``Protocol.emit`` make a new one per record call)."""


def _attrs_struct(schema: Any) -> Any:
    """The schema's attribute columns (those a record's ``attrs`` may set) as one struct
    type: a batch's attribute dicts become columns in one conversion."""
    import pyarrow as pa

    return pa.struct([schema.field(name) for name in schema.names
                      if name not in WRITER_FIELDS])


class ParquetRunWriter(RunWriter):
    """``RunWriter``'s records as columns, appended to ``telemetry.parquet`` in row groups.

    No line is ever built: a call keeps its nodes, timestamp, event and attributes as
    they came (the receivers of one frame are one call), and a flush turns the batch
    into columns at once (``_batch_table``): the attributes of all calls in one
    conversion, each node's ``rec`` from its running count, every per-call value
    repeated for its nodes by one ``take``. So the cost per record is a few list
    appends, and one file is written instead of one per node (creating a thousand
    files cost more than writing their lines on the development machine;
    docs/benchmarks.md, "Third round").

    Rows of one batch are grouped by node, in each node's order (``rec`` ascending),
    as the node files hold them; the file is written under a ``.tmp`` name and
    renamed when the run closes, like the node files. Attributes are checked as they
    come (``_check``), so a record the JSON Lines writer would refuse, or whose value
    the column would change, stops the run here too.
    """

    def __init__(self, run_dir: Path, run: str, protocol: str, *,
                 flush_lines: int = PARQUET_FLUSH_ROWS, **kwargs: Any) -> None:
        try:
            import numpy  # noqa: F401  (with pyarrow in the eval extra, through pandas)
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise RunDirError("--telemetry-format parquet needs pyarrow and numpy "
                              "(pip install 'meshsub-tools[eval]')") from None
        super().__init__(run_dir, run, protocol, flush_lines=flush_lines, **kwargs)
        self._schema = arrow_schema()
        self._attrs_type = _attrs_struct(self._schema)
        self._tmp_path = self.run_dir / (PARQUET_FILE + ".tmp")
        self._writer: Any = pq.ParquetWriter(self._tmp_path, self._schema,
                                             compression="snappy")
        pa.array((), pa.int64())  # pyarrow loads pandas (if installed) on its first
        # conversion: once per process, here at set-up rather than in the run's first flush
        self._batch = _Batch()
        self._checked: set[tuple[str, type]] = set()
        """(attribute, value type) pairs known to go into their column unchanged."""
        self._shapes: set[tuple[tuple[str, ...], tuple[type, ...]]] = set()
        """Attribute names and value types of whole mappings all of whose pairs are in
        ``_checked``: a frame's ``tx`` and ``rx`` attributes are checked in one lookup
        (docs/benchmarks.md, "Fourth round")."""

    def record_many(self, nodes: Iterable[int], ts_ns: int, event: str,
                    attrs: Mapping[str, TelemetryValue]) -> None:
        """The same record for each of ``nodes``, in order (``RunWriter.record_many``)."""
        shape = (tuple(attrs), tuple(map(type, attrs.values())))
        if shape not in self._shapes:
            checked = self._checked
            for key, value in attrs.items():
                if (key, type(value)) not in checked:
                    self._check(key, value)
            if all(pair in checked for pair in zip(*shape, strict=True)):  # no float nor None
                self._shapes.add(shape)
        batch = self._batch
        before = len(batch.nodes)
        batch.nodes.extend(nodes)
        count = len(batch.nodes) - before
        batch.sizes.append(count)
        batch.ts_ns.append(ts_ns)
        batch.events.append(event)
        batch.attrs.append(attrs)
        self.records += count
        self._pending_count += count
        if self._pending_count >= self.flush_lines:
            self.flush()

    def _check(self, key: str, value: TelemetryValue) -> None:
        """Refuse what the JSON Lines writer refuses (a non-finite float) or what the
        schema's column would not hold as it is (an unknown or writer-set field, a
        value of another type); remember the types that always fit.

        A value is taken by its JSON type, as the JSON Lines writer writes it: an
        ``IntEnum`` member (``CoreType.ACK`` as a ``msg_type``) is an integer, a ``str``
        enum a string, a bool never a number. An integer beyond int64 stops the flush
        (pyarrow's ``OverflowError``)."""
        if value is None:
            return
        if key in WRITER_FIELDS:
            raise TelemetryError(f"attribute {key!r} would replace a field the writer sets")
        types = ATTRIBUTE_FIELDS.get(key)
        if types is None:
            raise TelemetryError(f"unknown field {key!r}")
        kind = type(value)
        base = next((t for t in (bool, int, float, str) if isinstance(value, t)), kind)
        if base not in types:
            raise TelemetryError(f"field {key!r}: {kind.__name__} is not "
                                 f"{' or '.join(t.__name__ for t in types)}")
        if base is float:  # checked each time, as the JSON encoder does
            if not math.isfinite(value):  # type: ignore[arg-type]
                raise ValueError(f"Out of range float values are not JSON compliant: "
                                 f"{value!r}")
            return
        self._checked.add((key, kind))

    def flush(self) -> None:
        batch, self._batch = self._batch, _Batch()
        self._pending_count = 0
        if batch.sizes:
            write_by_event(self._writer, self._batch_table(batch))

    def _batch_table(self, batch: _Batch) -> Any:
        """One batch of calls as a table of the schema, rows by node then ``rec``."""
        import numpy as np
        import pyarrow as pa

        calls = len(batch.sizes)
        sizes = np.array(batch.sizes, dtype=np.int64)
        nodes = np.array(batch.nodes, dtype=np.int64)
        rows = len(nodes)
        order = np.argsort(nodes, kind="stable")  # by node, each node's records in order
        nodes = nodes[order]
        ids, first, counts = np.unique(nodes, return_index=True, return_counts=True)
        recs = self._rec
        base = np.fromiter((recs.get(node, 0) for node in ids.tolist()), dtype=np.int64,
                           count=len(ids))
        for node, start, count in zip(ids.tolist(), base.tolist(), counts.tolist(),
                                      strict=True):
            recs[node] = start + count
        rec = np.arange(rows, dtype=np.int64) + np.repeat(base - first, counts)
        call = _int64(np.repeat(np.arange(calls, dtype=np.int64), sizes)[order])
        attrs = pa.array(batch.attrs, type=self._attrs_type)
        columns = {
            "run": pa.repeat(pa.scalar(self.run, pa.string()), rows),
            "node": _int64(nodes),
            "protocol": pa.repeat(pa.scalar(self.protocol, pa.string()), rows),
            "ts_ns": pa.array(batch.ts_ns, pa.int64()).take(call),
            "event": pa.array(batch.events, pa.string()).take(call),
            "rec": _int64(rec),
            "epoch": pa.repeat(pa.scalar(self.epoch, pa.int64()), rows),
        }
        for index, column in enumerate(self._attrs_type):
            values = attrs.field(index)  # per call: repeated for its nodes, if ever set
            columns[column.name] = (pa.nulls(rows, column.type) if values.null_count == calls
                                    else values.take(call))
        return pa.Table.from_arrays([columns[name] for name in self._schema.names],
                                    schema=self._schema)

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


def write_by_event(writer: Any, table: Any) -> None:
    """Append ``table`` to ``writer`` (a ``pyarrow.parquet.ParquetWriter``) as one row
    group per value of its ``event`` column, events in name order (rows without an event
    last), each group's rows in their order in ``table``.

    Why: every metric of mesheval reads one or a few event types (``publish``,
    ``deliver``, ``subscribe``...), and a row group holding one event type has that
    type as the minimum and maximum of its ``event`` statistics, so the Parquet reader
    skips the row groups of all other events without decoding them (Spark's filter
    push-down); with row groups of mixed events every scan decoded every row of its
    columns (docs/benchmarks.md, "The evaluation"). A file written before this layout
    (one mixed row group per batch) is read the same way, only without the skipping.
    """
    import pyarrow.compute as pc

    events = table.column("event")
    kinds = sorted(k for k in pc.unique(events).to_pylist() if k is not None)
    if len(kinds) <= 1 and events.null_count in (0, len(table)):
        writer.write_table(table)
        return
    for kind in kinds:
        writer.write_table(table.filter(pc.equal(events, kind)))
    if events.null_count:
        writer.write_table(table.filter(pc.is_null(events)))


def _int64(values: Any) -> Any:
    """A numpy int64 vector as an Arrow array over the same memory (``pa.array`` of a
    numpy array imports pandas, which cost a simulation run most of a second)."""
    import numpy as np
    import pyarrow as pa

    values = np.ascontiguousarray(values, dtype=np.int64)
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def writer_class(fmt: str) -> type[RunWriter]:
    """The writer of ``fmt`` (one of ``FORMATS``)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown telemetry format {fmt!r} (choose from {', '.join(FORMATS)})")
    return ParquetRunWriter if fmt == "parquet" else RunWriter
