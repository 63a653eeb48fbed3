"""Arithmetic over a point's axis values: ``"= TTL_h * 3600"`` in a sweep's ``set``.

Numbers, the point's axis values (and ``seed``) by name, ``+ - * / // % **``, unary
minus and ``min``, ``max``, ``round``, ``abs``. Nothing else parses, so a sweep file can
compute a derived value without running arbitrary code.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Mapping
from typing import Any

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCTIONS: dict[str, Callable[..., Any]] = {"min": min, "max": max, "round": round, "abs": abs}


class ExpressionError(ValueError):
    pass


def check(text: str, names: set[str]) -> None:
    """Parse ``text`` and check every name is known (at load time, before any run)."""
    tree = _parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in names and node.id not in _FUNCTIONS:
            raise ExpressionError(f"unknown name {node.id!r} in {text!r} (known: "
                                  f"{', '.join(sorted(names))})")


def evaluate(text: str, values: Mapping[str, Any]) -> int | float:
    result = _eval(_parse(text).body, values, text)
    if isinstance(result, bool) or not isinstance(result, int | float):
        raise ExpressionError(f"{text!r} is not a number")
    if isinstance(result, float) and not math.isfinite(result):
        raise ExpressionError(f"{text!r} is not finite")
    return result


def _parse(text: str) -> ast.Expression:
    try:
        return ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        raise ExpressionError(f"cannot parse {text!r}") from None


def _eval(node: ast.AST, values: Mapping[str, Any], text: str) -> Any:
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float) \
            and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in values:
            raise ExpressionError(f"unknown name {node.id!r} in {text!r}")
        return values[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        try:
            return _BINARY[type(node.op)](_eval(node.left, values, text),
                                          _eval(node.right, values, text))
        except (ArithmeticError, TypeError) as exc:
            raise ExpressionError(f"{text!r}: {exc}") from None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _eval(node.operand, values, text)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
            and node.func.id in _FUNCTIONS and not node.keywords:
        return _FUNCTIONS[node.func.id](*(_eval(a, values, text) for a in node.args))
    raise ExpressionError(f"{text!r}: only numbers, axis names, + - * / // % ** and "
                          "min/max/round/abs are allowed")
