"""JSON from untrusted local clients, parsed with bounded nesting.

Python's ``json`` recurses once per nesting level: a 60 KB payload of ``[[[[...``
raised ``RecursionError``, which no caller expected, and one such MQTT message
stopped the bridge for good (issue 25 item 1). ``loads`` first measures the
nesting with a linear scan that recurses nowhere, and refuses anything deeper
than asked with a ``ValueError`` like any other malformed document.
"""

from __future__ import annotations

import json
from typing import Any, Final

DEFAULT_MAX_DEPTH: Final = 16

_OPEN: Final = frozenset(b"[{")
_CLOSE: Final = frozenset(b"]}")
_QUOTE: Final = ord('"')
_BACKSLASH: Final = ord("\\")


def nesting(data: bytes) -> int:
    """The deepest array/object nesting of ``data`` (strings skipped; no validation)."""
    depth = deepest = 0
    in_string = escaped = False
    for byte in data:
        if in_string:
            if escaped:
                escaped = False
            elif byte == _BACKSLASH:
                escaped = True
            elif byte == _QUOTE:
                in_string = False
        elif byte == _QUOTE:
            in_string = True
        elif byte in _OPEN:
            depth += 1
            deepest = max(deepest, depth)
        elif byte in _CLOSE:
            depth -= 1
    return deepest


def loads(data: bytes | str, *, max_depth: int = DEFAULT_MAX_DEPTH, **kwargs: Any) -> Any:
    """``json.loads`` that raises ``ValueError`` (never ``RecursionError``) for a document
    nested deeper than ``max_depth`` or otherwise malformed."""
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data
    if raw.count(b"[") + raw.count(b"{") > max_depth:  # else it cannot be too deep
        depth = nesting(raw)
        if depth > max_depth:
            raise ValueError(f"nested {depth} levels deep, at most {max_depth} allowed")
    try:
        return json.loads(data, **kwargs)
    except RecursionError:  # cannot happen below max_depth; never let it escape
        raise ValueError("nested too deeply") from None
