"""docs/protocols/NAME.md: one page per protocol whose parameter table is the code's."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from meshsub.core.paramdocs import BEGIN, END, ParamDocError, params_table, replace_block
from meshsub.core.params import ParamDoc, ProtocolParams
from meshsub.core.registry import available, get_protocol

DOCS = Path(__file__).resolve().parents[2] / "docs" / "protocols"


@pytest.mark.parametrize("name", available())
def test_page_table_is_generated_from_the_code(name: str) -> None:
    page = DOCS / f"{name}.md"
    assert page.exists(), f"{page} missing: run scripts/protocol_params.py"
    text = page.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert replace_block(text, get_protocol(name).Params) == text, \
        f"{page} differs from the code: run scripts/protocol_params.py"


@pytest.mark.parametrize("name", available())
def test_every_parameter_has_a_unit_and_a_source(name: str) -> None:
    cls = get_protocol(name).Params
    table = params_table(cls)
    for f in dataclasses.fields(cls):
        assert f"| `{f.name}` |" in table
    assert "|  |" not in table.split("\n", 2)[2].replace("| - |", "|x|")  # no empty cell


def test_a_field_without_docs_fails_and_a_page_without_markers_too() -> None:
    @dataclasses.dataclass(frozen=True, slots=True)
    class Partial(ProtocolParams):
        documented: int = 1
        forgotten: float = 2.0

        param_docs = {"documented": ParamDoc("s", "our decision")}

    with pytest.raises(ParamDocError, match=r"Partial\.forgotten"):
        params_table(Partial)
    with pytest.raises(ParamDocError, match="params:begin"):
        replace_block("# a page without a table\n", ProtocolParams)
