"""The Spark view of the telemetry schema, derived from ``meshsub.core.telemetry``.

The record schema has one definition (the core module); this module only maps
it onto Spark types and into column checks, so that a field added there is read
here without a second list to keep in step.
"""

from __future__ import annotations

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


def error_column() -> Column:
    """The first schema violation of a row as text, or null for a valid row.

    Spark's JSON reader already rejects lines that are not JSON and numbers of
    the wrong kind (into ``_corrupt_record``); this adds required fields, the
    enumerations and ranges of ``meshsub.core.telemetry.validate_record`` and the
    attributes each event needs (``REQUIRED_BY_EVENT``).
    """
    checks: list[tuple[Column, str]] = [
        (F.col(CORRUPT).isNotNull(), "malformed JSON or wrong field type"),
    ]
    for name in RESOURCE_FIELDS:
        checks.append((F.col(name).isNull(), f"missing field {name}"))
    checks += [
        (~F.col("event").isin(*sorted(EVENTS)), "unknown event"),
        (F.col("msg_kind").isNotNull() & ~F.col("msg_kind").isin(*sorted(MSG_KINDS)),
         "unknown msg_kind"),
        (F.col("ts_ns") < 0, "negative ts_ns"),
        ((F.col("node") < 0) | (F.col("node") > NODE_MAX), "node out of range"),
        (F.col("peer").isNotNull() & ((F.col("peer") < 0) | (F.col("peer") > NODE_MAX)),
         "peer out of range"),
        (F.col("bytes") < 0, "negative bytes"),
        (F.col("count") < 1, "count not positive"),
    ]
    for event, names in REQUIRED_BY_EVENT.items():
        for name in names:
            checks.append(((F.col("event") == event) & F.col(name).isNull(),
                           f"{event} without {name}"))
    expr = F.when(checks[0][0], F.lit(checks[0][1]))
    for cond, text in checks[1:]:
        expr = expr.when(cond, F.lit(text))
    return expr
