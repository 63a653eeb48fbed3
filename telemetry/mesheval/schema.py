"""The Spark view of the telemetry schema, derived from ``meshsub.core.telemetry``.

The record schema has one definition (the core module); this module only maps
it onto Spark types and into column checks, so that a field added there is read
here without a second list to keep in step.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import DataType, DoubleType, LongType, StringType, StructField, StructType

from meshsub.core.telemetry import EVENTS, FIELDS, MSG_KINDS, RESOURCE_FIELDS

CORRUPT: Final = "_corrupt_record"
"""Spark PERMISSIVE mode puts the raw text of an unreadable line here."""
FILE: Final = "_file"
ERROR: Final = "_error"

NODE_MAX: Final = 0xFFFF_FFFF

# Attributes each event needs before a metric can use it (beyond the resource fields).
REQUIRED_BY_EVENT: Final[dict[str, tuple[str, ...]]] = {
    "publish": ("event_id", "topic", "content"),
    "subscribe": ("sub_id", "topic", "content"),
    "unsubscribe": ("sub_id",),
    "deliver": ("event_id",),
    "tx": ("msg_kind", "bytes"),
    "rx": ("msg_kind", "bytes"),
    "drop": ("reason",),
    "position": ("x", "y"),
    "state": ("store", "entries", "bytes"),
    "member": ("group", "reason"),
}


def _spark_type(types: tuple[type, ...]) -> DataType:
    if float in types:
        return DoubleType()
    if int in types:
        return LongType()
    return StringType()


def record_schema(with_corrupt: bool = True) -> StructType:
    """The StructType of a record; every field nullable so PERMISSIVE can keep the row."""
    fields = [StructField(name, _spark_type(types), True) for name, types in FIELDS.items()]
    if with_corrupt:
        fields.append(StructField(CORRUPT, StringType(), True))
    return StructType(fields)


@dataclass(frozen=True)
class Check:
    """One rule of ``error_column``: what it tests, so that both the Spark expression
    (``Check.fails``) and a proof from a Parquet file's statistics that no row can fail
    it (``mesheval.footer``) come from one list.

    ``kind``: ``corrupt`` (an unreadable line), ``missing`` (``field`` null), ``enum``
    (``field`` set but not in ``allowed``), ``below`` (``field`` < ``low``), ``range``
    (``field`` outside [``low``, ``high``]), ``required`` (``event`` equals ``value`` and
    ``field`` is null)."""

    text: str
    kind: str
    field: str = ""
    allowed: tuple[str, ...] = ()
    low: int = 0
    high: int = 0
    value: str = ""

    def fails(self) -> Column:
        col = F.col(self.field) if self.field else None
        if self.kind == "corrupt":
            return F.col(CORRUPT).isNotNull()
        assert col is not None
        if self.kind == "missing":
            return col.isNull()
        if self.kind == "enum":  # a null event is "missing"; a null msg_kind is allowed
            return (~col.isin(*self.allowed) if self.field == "event"
                    else col.isNotNull() & ~col.isin(*self.allowed))
        if self.kind == "below":
            return col < self.low
        if self.kind == "range":
            return (col < self.low) | (col > self.high)
        return (F.col("event") == self.value) & col.isNull()  # required


def checks() -> list[Check]:
    """The checks of ``error_column`` in their order (the first that fails names the row):
    Spark's JSON reader already rejects lines that are not JSON and numbers of the wrong
    kind (into ``_corrupt_record``); these add required fields, the enumerations and
    ranges of ``meshsub.core.telemetry.validate_record`` and the attributes each event
    needs (``REQUIRED_BY_EVENT``)."""
    out = [Check("malformed JSON or wrong field type", "corrupt")]
    out += [Check(f"missing field {name}", "missing", name) for name in RESOURCE_FIELDS]
    out += [
        Check("unknown event", "enum", "event", allowed=tuple(sorted(EVENTS))),
        Check("unknown msg_kind", "enum", "msg_kind", allowed=tuple(sorted(MSG_KINDS))),
        Check("negative ts_ns", "below", "ts_ns", low=0),
        Check("node out of range", "range", "node", low=0, high=NODE_MAX),
        Check("peer out of range", "range", "peer", low=0, high=NODE_MAX),
        Check("negative bytes", "below", "bytes", low=0),
        Check("count not positive", "below", "count", low=1),
    ]
    out += [Check(f"{event} without {name}", "required", name, value=event)
            for event, names in REQUIRED_BY_EVENT.items() for name in names]
    return out


def error_column(proven: Collection[str] = ()) -> Column:
    """The first schema violation of a row as text (``checks``), or null for a valid row.

    ``proven``: texts of checks no row can fail (``mesheval.footer`` proves them from a
    Parquet file's statistics); they are left out, so the scan need not read their
    columns. Leaving out a check that cannot fail changes no row's verdict.
    """
    kept = [c for c in checks() if c.kind == "corrupt" or c.text not in proven]
    expr = F.when(kept[0].fails(), F.lit(kept[0].text))
    for check in kept[1:]:
        expr = expr.when(check.fails(), F.lit(check.text))
    return expr
