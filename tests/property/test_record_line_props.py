"""The spool's one-pass record encoder is the generic validate + dump, byte for byte."""

from __future__ import annotations

import enum
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from meshsub.core.telemetry import ATTRIBUTE_FIELDS, EVENTS, dump_line, make_record
from meshsub.core.telemetry import validate_record as generic_validate
from meshsub.runtime.spool import RecordLine


class Kind(enum.IntEnum):
    BEACON = 2


values = st.one_of(st.none(), st.booleans(), st.integers(-10, 2**70), st.floats(),
                   st.text(max_size=12), st.sampled_from(["data", "control", "beacon", "x"]),
                   st.just(Kind.BEACON), st.binary(max_size=3))
names = st.one_of(st.sampled_from(sorted(ATTRIBUTE_FIELDS)), st.text(max_size=6))


def generic(run: str, node: int, protocol: str, event: str, ts_ns: int,
            attrs: dict[str, Any], epoch: int, rec: int) -> str:
    record = make_record(run=run, node=node, protocol=protocol, ts_ns=ts_ns, event=event,
                         attrs={**attrs, "epoch": epoch, "rec": rec})
    return dump_line(generic_validate(record))


@settings(max_examples=400, deadline=None)
@given(run=st.text(max_size=8), node=st.integers(0, 2**32 - 1), protocol=st.text(max_size=8),
       event=st.one_of(st.sampled_from(sorted(EVENTS)), st.text(max_size=5)),
       ts_ns=st.integers(-5, 2**63), attrs=st.dictionaries(names, values, max_size=6),
       epoch=st.integers(0, 2**40), rec=st.integers(0, 2**40))
def test_same_line_or_same_refusal(run: str, node: int, protocol: str, event: str,
                                   ts_ns: int, attrs: dict[str, Any], epoch: int,
                                   rec: int) -> None:
    attrs.pop("epoch", None)
    attrs.pop("rec", None)
    try:
        expected = generic(run, node, protocol, event, ts_ns, attrs, epoch, rec)
    except (ValueError, TypeError):  # TelemetryError is a ValueError
        with pytest.raises((ValueError, TypeError)):
            RecordLine(run, node, protocol).encode(event, ts_ns, attrs, epoch, rec)
        return
    assert RecordLine(run, node, protocol).encode(event, ts_ns, attrs, epoch, rec) == expected
