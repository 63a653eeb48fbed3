"""``Protocol.update_params``: SIGHUP may change only the parameters a protocol declares."""

from __future__ import annotations

import dataclasses

import pytest

from meshsub.core.params import ProtocolParams
from meshsub.protocols.epidemic import Epidemic
from meshsub.protocols.flooding import Flooding, FloodingParams


def test_reloadable_fields_are_applied() -> None:
    p = Flooding(1)
    assert p.update_params(FloodingParams(ttl=3, jitter=0.5)) == ()
    assert p.params == FloodingParams(ttl=3, jitter=0.5)


def test_fixed_fields_refuse_the_whole_change() -> None:
    p = Epidemic(1)
    old = p.params
    changed = dataclasses.replace(old, **{dataclasses.fields(old)[0].name:
                                          _other(getattr(old, dataclasses.fields(old)[0].name))})
    fixed = p.update_params(changed)
    assert fixed == (dataclasses.fields(old)[0].name,)
    assert p.params is old


def test_unchanged_params_are_a_no_op_and_other_types_are_refused() -> None:
    p = Epidemic(1)
    assert p.update_params(p.params) == ()
    with pytest.raises(TypeError):
        p.update_params(ProtocolParams())


def _other(value: object) -> object:
    if isinstance(value, bool):
        return not value
    if isinstance(value, int | float):
        return value + 1
    raise AssertionError(f"unexpected parameter type {type(value)}")
