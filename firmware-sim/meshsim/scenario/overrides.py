"""``--set key.path=value`` overrides, applied to the TOML document before validation.

Values use TOML value syntax (``3``, ``0.5``, ``true``, ``"text"``, ``[1, 2]``);
a value that is not valid TOML is taken as a plain string, so
``--set protocol.name=epidemic`` works without shell-quoting quotes. Because
overrides are applied before validation, a bad override gets the same error,
naming the same key path, as a bad value in the file.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

from meshsim.scenario.reader import ScenarioError

_SEGMENT = re.compile(r"([A-Za-z0-9_-]+)((?:\[\d+\])*)")


def parse_value(text: str) -> Any:
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def split_path(path: str) -> list[str | int]:
    """``workload.subscriptions[2].expr`` -> ["workload", "subscriptions", 2, "expr"]."""
    keys: list[str | int] = []
    for part in path.split("."):
        match = _SEGMENT.fullmatch(part)
        if match is None:
            raise ScenarioError(f"--set {path}", "bad key path")
        keys.append(match.group(1))
        keys.extend(int(i) for i in re.findall(r"\[(\d+)\]", match.group(2)))
    return keys


def apply_override(doc: dict[str, Any], assignment: str) -> None:
    """Apply one ``key.path=value`` to ``doc`` in place."""
    if "=" not in assignment:
        raise ScenarioError(f"--set {assignment}", "expected key.path=value")
    path, _, text = assignment.partition("=")
    path = path.strip()
    keys = split_path(path)
    node: Any = doc
    for i, key in enumerate(keys[:-1]):
        nxt = keys[i + 1]
        if isinstance(key, int):
            if not isinstance(node, list) or key >= len(node):
                raise ScenarioError(f"--set {path}", f"no array element [{key}]")
            node = node[key]
            continue
        if not isinstance(node, dict):
            raise ScenarioError(f"--set {path}", f"{key!r} is inside a non-table value")
        if key not in node:
            node[key] = [] if isinstance(nxt, int) else {}
        node = node[key]
    last = keys[-1]
    value = parse_value(text.strip())
    if isinstance(last, int):
        if not isinstance(node, list) or last >= len(node):
            raise ScenarioError(f"--set {path}", f"no array element [{last}]")
        node[last] = value
    elif isinstance(node, dict):
        node[last] = value
    else:
        raise ScenarioError(f"--set {path}", f"{last!r} is inside a non-table value")
