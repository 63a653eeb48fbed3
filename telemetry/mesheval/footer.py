"""What a Parquet file's footer proves about its rows: the checks no row can fail.

The census (``mesheval.load``) evaluates every check of ``mesheval.schema.checks`` on
every row, which makes its scan decode nearly every column of the file, strings
included: at 10^7 records the largest single cost of the job after the pairs
(docs/benchmarks.md, "The evaluation"). A Parquet writer stores, per row group and
column, the minimum, the maximum and the null count; from these some checks can be shown
never to fire (``ts_ns`` at least 0 in every row group, no null ``event_id`` in a row
group holding only ``publish`` records...). Those are left out of the file's checks, so
its census reads only the columns of the checks that remain; a row that breaks a rule is
still counted, by the statistics that then fail to prove it (a file the user edited gets
new statistics from whatever wrote it; a truncated file has no footer and is refused
before, ``mesheval.load.parquet_files``).

Nothing is assumed where the statistics are absent: a row group or column without them
proves nothing, and a column the file lacks is null in every row.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mesheval.schema import Check, checks


@dataclass(frozen=True)
class _Column:
    """One column of one row group: null count and the non-null values' bounds (None
    where the statistics do not say)."""

    rows: int
    nulls: int | None
    low: Any = None
    high: Any = None

    @property
    def all_null(self) -> bool:
        return self.nulls is not None and self.nulls == self.rows

    @property
    def no_null(self) -> bool:
        return self.nulls == 0

    @property
    def bounded(self) -> bool:
        return self.low is not None and self.high is not None


def _row_groups(meta: Any) -> list[tuple[int, dict[str, _Column]]]:
    """(rows, statistics per column name) of each row group."""
    names = meta.schema.names
    groups = []
    for i in range(meta.num_row_groups):
        rg = meta.row_group(i)
        columns: dict[str, _Column] = {}
        for j, name in enumerate(names):
            stats = rg.column(j).statistics
            if stats is None:
                columns[name] = _Column(rg.num_rows, None)
                continue
            nulls = stats.null_count if stats.has_null_count else None
            low, high = (stats.min, stats.max) if stats.has_min_max else (None, None)
            columns[name] = _Column(rg.num_rows, nulls, low, high)
        groups.append((rg.num_rows, columns))
    return groups


def _key(value: Any) -> Any:
    """Strings compared as Parquet orders them (unsigned bytes), numbers as numbers."""
    return value.encode("utf-8") if isinstance(value, str) else value


def _holds(check: Check, rows: int, group: dict[str, _Column]) -> bool:
    """True if no row of this row group (``rows`` rows) can fail ``check``."""
    absent = _Column(rows, rows)  # a column the file lacks is null in every row
    col = group.get(check.field, absent)
    if check.kind == "corrupt":
        return True  # a columnar file has no unreadable line (a null column in read_columnar)
    if check.kind == "missing":
        return col.no_null
    if check.kind == "enum":
        if col.all_null:  # a null msg_kind is allowed; a null event fails "missing" instead
            return True
        return col.bounded and col.low == col.high and col.low in check.allowed
    if check.kind in ("below", "range"):
        if col.all_null:
            return True
        if not col.bounded:
            return False
        return col.low >= check.low and (check.kind == "below" or col.high <= check.high)
    # required: no row of this event in the group, or none without the field
    if col.no_null:
        return True
    event = group.get("event", absent)
    if event.all_null:
        return True
    if not event.bounded:
        return False
    value = _key(check.value)
    return bool(value < _key(event.low) or value > _key(event.high))


def proven_checks(path: Path) -> frozenset[str]:
    """Texts of the checks that no row of the Parquet file at ``path`` can fail, by its
    row groups' statistics; empty if the footer cannot be read (the file is then
    checked row by row, or refused by ``mesheval.load.parquet_files``)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        groups = _row_groups(pq.read_metadata(path))
    except (OSError, pa.ArrowException):
        return frozenset()
    return frozenset(c.text for c in checks() if all(_holds(c, rows, g) for rows, g in groups))


CONSTANT_COLUMNS = ("run", "protocol")
"""String columns that a simulated run's file holds one value of in every row: read as a
literal where the footer proves it (``constant_strings``)."""


def constant_strings(path: Path, names: tuple[str, ...] = CONSTANT_COLUMNS) -> dict[str, str]:
    """The columns of ``names`` that hold one string in every row of the Parquet file at
    ``path``, with that string: no null and minimum = maximum in every row group, the same
    value in all. Nothing for a column without statistics, with a null, or absent, and
    nothing if the footer cannot be read.

    Such a column can be read as a literal, the value of every row, so that no scan
    reads and decodes it (``mesheval.load._constants``; docs/benchmarks.md, "Seventh
    session")."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        groups = _row_groups(pq.read_metadata(path))
    except (OSError, pa.ArrowException):
        return {}
    found: dict[str, str] = {}
    for name in names:
        values = {(col.low, col.high) if (col := g.get(name)) is not None and col.no_null
                  and col.bounded else None for _, g in groups}
        if len(values) == 1 and (pair := values.pop()) is not None:
            low, high = pair
            if isinstance(low, str) and low == high:
                found[name] = low
    return found
