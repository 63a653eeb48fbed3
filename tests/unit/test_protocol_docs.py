"""docs/protocols/NAME.md: one page per protocol whose parameter table is the code's."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from meshsub.core.paramdocs import BEGIN, END, ParamDocError, params_table, replace_block
from meshsub.core.params import ParamDoc, ProtocolParams
from meshsub.core.registry import available, get_protocol

DOCS = Path(__file__).resolve().parents[2] / "docs" / "protocols"
TABLED = ("bsub", "df", "epidemic", "flooding", "giant", "hesper", "paging", "pull", "puma", "st",
          "tg")
"""Protocols whose page must carry the generated table (the others once documented)."""


def with_table() -> list[str]:
    pages = {p.stem for p in DOCS.glob("*.md") if BEGIN in p.read_text()}
    return sorted(set(TABLED) | (pages & set(available())))


def documented(name: str) -> None:
    """Skip (visibly) a protocol outside ``TABLED`` whose params lack ``param_docs``."""
    if name in TABLED:
        return
    try:
        params_table(get_protocol(name).Params)
    except ParamDocError as exc:
        pytest.skip(f"{name}: parameters not documented yet ({exc})")


def test_the_protocols_with_tables_are_registered() -> None:
    assert set(TABLED) <= set(available())


@pytest.mark.parametrize("name", with_table())
def test_page_table_is_generated_from_the_code(name: str) -> None:
    documented(name)
    page = DOCS / f"{name}.md"
    assert page.exists(), f"{page} missing: run scripts/protocol_params.py"
    text = page.read_text()
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    assert replace_block(text, get_protocol(name).Params) == text, \
        f"{page} differs from the code: run scripts/protocol_params.py"


@pytest.mark.parametrize("name", with_table())
def test_every_parameter_has_a_unit_and_a_source(name: str) -> None:
    documented(name)
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
