"""The parameter tables of docs/protocols/NAME.md, generated from the params classes.

Each protocol's ``Params`` dataclass is the one source: name, type and default
from its fields, unit and source from ``param_docs`` (of the class that
declares the field), the meaning from the field's docstring. The table sits
between ``<!-- params:begin -->`` and ``<!-- params:end -->``; the rest of a
page is prose. ``scripts/protocol_params.py`` rewrites the tables; a test
fails when a page and the code differ or a field has no ``param_docs`` entry.
"""

from __future__ import annotations

import ast
import dataclasses
import enum
import inspect
import itertools
import textwrap
import typing
from typing import Any, Final

from meshsub.core.params import ParamDoc, ProtocolParams

BEGIN: Final = "<!-- params:begin -->"
END: Final = "<!-- params:end -->"


class ParamDocError(ValueError):
    """A parameter without ``param_docs``, or a page without the markers."""


def field_docstrings(cls: type) -> dict[str, str]:
    """Attribute docstrings (the string literal after a field) of ``cls`` itself."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    body = ast.parse(source).body[0]
    if not isinstance(body, ast.ClassDef):
        return {}
    found: dict[str, str] = {}
    statements = body.body
    for stmt, after in itertools.pairwise(statements):
        if (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)):
            found[stmt.target.id] = " ".join(after.value.value.split())
    return found


def _declaring_class(cls: type[ProtocolParams], name: str) -> type:
    for klass in cls.__mro__:
        if name in getattr(klass, "__annotations__", {}):
            return klass
    return cls


def _type_text(annotation: Any) -> str:
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " \\| ".join(f"`{member.value}`" for member in annotation)
    text = annotation.__name__ if isinstance(annotation, type) else str(annotation)
    return text.replace("typing.", "").replace("NoneType", "None").replace("|", "\\|")


def _default_text(value: Any) -> str:
    if isinstance(value, enum.Enum):
        return f"`{value.value}`"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, str):
        return f'`"{value}"`'
    if isinstance(value, float):
        return f"`{value:g}`"
    return f"`{value}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def params_table(cls: type[ProtocolParams]) -> str:
    """The markdown table of every field of ``cls``, inherited ones included."""
    hints = typing.get_type_hints(cls)
    rows = ["| parameter | type | default | unit | source | meaning |",
            "|---|---|---|---|---|---|"]
    docstrings: dict[type, dict[str, str]] = {}
    missing = []
    for f in dataclasses.fields(cls):
        owner = _declaring_class(cls, f.name)
        docs: typing.Mapping[str, ParamDoc] = vars(owner).get("param_docs", {})
        doc = docs.get(f.name)
        if doc is None:
            missing.append(f"{owner.__name__}.{f.name}")
            continue
        if owner not in docstrings:
            docstrings[owner] = field_docstrings(owner)
        meaning = docstrings[owner].get(f.name, "") or doc.meaning
        default = f.default if f.default is not dataclasses.MISSING else None
        unit = doc.unit or "-"
        rows.append(f"| `{f.name}` | {_type_text(hints[f.name])} | {_default_text(default)} "
                    f"| {_cell(unit)} | {_cell(doc.source)} | {_cell(meaning)} |")
    if missing:
        raise ParamDocError(f"no param_docs entry for {', '.join(missing)}")
    return "\n".join(rows)


def render_block(cls: type[ProtocolParams]) -> str:
    """The generated part of a page, markers included."""
    note = (f"<!-- generated from {cls.__module__}.{cls.__name__} by "
            "scripts/protocol_params.py: edit the code, not this table -->")
    return f"{BEGIN}\n{note}\n\n{params_table(cls)}\n\n{END}"


def replace_block(page: str, cls: type[ProtocolParams]) -> str:
    """``page`` with its table regenerated; ``ParamDocError`` without the markers."""
    start, end = page.find(BEGIN), page.find(END)
    if start < 0 or end < start:
        raise ParamDocError(f"page has no {BEGIN} ... {END} section")
    return page[:start] + render_block(cls) + page[end + len(END):]
