"""Reading a claims file (TOML): the page, its tables and plots, and the claims.

```toml
[page]
title = "HESPER: the thesis's claims on our runs"
out = "../docs/results/hesper.md"      # the page (relative to this file)
assets = "hesper"                      # plots go here (relative to the page's folder)
paper = "Zheng 2008, Ph.D. thesis, chapter 4"
command = "meshsim sweep ... && mesheval ... --claims ..."   # how to make the page again
intro = "Markdown; {{ metric | axis=value, ... | .2f }} inserts a computed figure."

[[figures]]                  # figures of a paper-specific script, by name
file = "hesper_theorem.json"

[[table]]
title = "Delivery cost"
where = { TR = 70 }
metrics = [["tx_data_per_event", "delivery msgs/event"], ["optimum_ratio", "tx / optimum"]]

[[plot]]
metric = "tx_data_per_event"
x = "subscribers"
series = "protocol"
where = { nodes = 4000, TR = 70 }

[[claim]]
id = "delivery-order"
paper = "the paper's words"
section = "§4.7.3, Fig. 4.9"
kind = "order"               # order | trend | ratio | bound | agree
metric = "tx_data_per_event"
where = { TR = 70 }
...                          # the kind's fields (docs/experiments.md)
note = "why ours differ, in words; figures only through {{ }}"
```
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mesheval.claims.rules import STATS, Expect

KINDS = ("order", "trend", "ratio", "bound", "agree")
DIRECTIONS = ("falls", "rises", "flat")
USES = ("mean", "max_run", "min_run")


class ClaimsError(ValueError):
    """A bad claims file; the message names the key."""


Where = Mapping[str, Any]


@dataclass(frozen=True)
class Claim:
    id: str
    paper: str
    section: str
    kind: str
    where: Where
    metric: str | None = None
    figure: str | None = None
    scale: float = 1.0
    note: str = ""
    # order
    by: str = ""
    levels: tuple[Any, ...] = ()
    over: tuple[str, ...] = ()
    """Axes at every combination of whose levels an order is checked."""
    descending: bool = True
    # trend
    along: tuple[str, ...] = ()
    """Trend: one axis; ratio: one ratio per combination of these axes' levels."""
    direction: str = "falls"
    series: tuple[str, ...] = ()
    """Trend: one trend per combination of these axes' levels."""
    min_change: float = 0.0
    # ratio
    num: Where = field(default_factory=dict)
    den: Where = field(default_factory=dict)
    baseline: Where = field(default_factory=dict)
    """If given, the ratio is divided by the same ratio at this selection (a ratio of
    ratios: e.g. HESPER's cost relative to DF's on a void field over the same on a full one)."""
    form: str = "ratio"
    # ratio, bound, order, trend
    tolerance: float = 0.0
    stat: str = "each"
    use: str = "mean"
    expect: Expect = field(default_factory=Expect)
    # agree
    value: float | None = None


@dataclass(frozen=True)
class Table:
    title: str
    where: Where
    metrics: tuple[tuple[str, str, float, str], ...]
    """(metric, column title, scale, number format)."""
    caption: str = ""


@dataclass(frozen=True)
class Plot:
    metric: str
    x: str
    where: Where
    series: str | None
    label: str
    scale: float = 1.0
    log: bool = False
    title: str = ""
    caption: str = ""


@dataclass(frozen=True)
class ClaimsSpec:
    path: Path
    title: str
    out: Path
    assets: str
    paper: str
    command: str
    intro: str
    outro: str
    figures: tuple[tuple[Path, str], ...]
    tables: tuple[Table, ...]
    plots: tuple[Plot, ...]
    claims: tuple[Claim, ...]


def _table(doc: Mapping[str, Any], key: str, where: str) -> Mapping[str, Any]:
    value = doc.get(key, {})
    if not isinstance(value, Mapping):
        raise ClaimsError(f"{where}.{key}: expected a table")
    return value


def _take(t: Mapping[str, Any], where: str, known: set[str]) -> None:
    unknown = sorted(set(t) - known)
    if unknown:
        raise ClaimsError(f"{where}.{unknown[0]}: unknown key (known here: "
                          f"{', '.join(sorted(known))})")


def _str(t: Mapping[str, Any], key: str, where: str, default: str | None = None) -> str:
    value = t.get(key, default)
    if not isinstance(value, str):
        raise ClaimsError(f"{where}.{key}: " + ("required key is missing" if value is None
                                                 else "expected a string"))
    return value


def _num(t: Mapping[str, Any], key: str, where: str, default: float | None = None
         ) -> float | None:
    value = t.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ClaimsError(f"{where}.{key}: expected a number")
    return float(value)


CLAIM_KEYS = {"id", "paper", "section", "kind", "where", "metric", "figure", "scale", "note",
              "by", "levels", "over", "direction", "along", "series", "min_change", "num",
              "den", "form", "tolerance", "stat", "use", "at_most", "at_least", "near",
              "value", "baseline"}


def _claim(t: Mapping[str, Any], where: str) -> Claim:
    _take(t, where, CLAIM_KEYS)
    kind = _str(t, "kind", where)
    if kind not in KINDS:
        raise ClaimsError(f"{where}.kind: must be one of {', '.join(KINDS)} (got {kind!r})")
    cid = _str(t, "id", where)
    where = f"claim {cid!r}"
    metric, figure = t.get("metric"), t.get("figure")
    if (metric is None) == (figure is None) and kind != "agree":
        raise ClaimsError(f"{where}: give metric (figure only with kind = \"agree\")")
    if kind == "agree" and (metric is None) == (figure is None):
        raise ClaimsError(f"{where}: give exactly one of metric and figure")
    direction = _str(t, "direction", where, "falls" if kind == "trend" else "desc")
    stat = _str(t, "stat", where, "each")
    if stat not in STATS:
        raise ClaimsError(f"{where}.stat: must be one of {', '.join(STATS)}")
    use = _str(t, "use", where, "mean")
    if use not in USES:
        raise ClaimsError(f"{where}.use: must be one of {', '.join(USES)}")
    expect = Expect(at_most=_num(t, "at_most", where), at_least=_num(t, "at_least", where),
                    near=_num(t, "near", where),
                    tolerance=_num(t, "tolerance", where, 0.0) or 0.0)
    claim = Claim(
        id=cid, paper=_str(t, "paper", where), section=_str(t, "section", where),
        kind=kind, where=dict(_table(t, "where", where)), metric=metric, figure=figure,
        scale=_num(t, "scale", where, 1.0) or 1.0, note=_str(t, "note", where, ""),
        by=_str(t, "by", where, ""), levels=tuple(t.get("levels", ())),
        over=_axes(t.get("over"), f"{where}.over"), descending=direction != "asc",
        along=_axes(t.get("along"), f"{where}.along"),
        direction=direction if kind == "trend" else "falls",
        series=_axes(t.get("series"), f"{where}.series"),
        min_change=_num(t, "min_change", where, 0.0) or 0.0,
        num=dict(_table(t, "num", where)), den=dict(_table(t, "den", where)),
        baseline=dict(_table(t, "baseline", where)),
        form=_str(t, "form", where, "ratio"), tolerance=expect.tolerance, stat=stat, use=use,
        expect=expect, value=_num(t, "value", where),
    )
    _check_kind(claim, where)
    return claim


def _axes(raw: Any, where: str) -> tuple[str, ...]:
    if raw is None:
        return ()
    if isinstance(raw, str):
        return (raw,)
    if isinstance(raw, list) and all(isinstance(x, str) for x in raw):
        return tuple(raw)
    raise ClaimsError(f"{where}: expected an axis or a list of axes")


def _check_kind(c: Claim, where: str) -> None:
    if c.kind == "order":
        if not c.by or len(c.levels) < 2:
            raise ClaimsError(f"{where}: an order needs by (an axis) and two or more levels")
        if c.direction not in ("falls",):  # direction parsed as desc/asc for orders
            pass
    elif c.kind == "trend":
        if len(c.along) != 1:
            raise ClaimsError(f"{where}: a trend needs along (one axis)")
        if c.direction not in DIRECTIONS:
            raise ClaimsError(f"{where}.direction: must be one of {', '.join(DIRECTIONS)}")
    elif c.kind == "ratio":
        if not c.num or not c.den:
            raise ClaimsError(f"{where}: a ratio needs num and den (selections)")
        if c.form not in ("ratio", "saving"):
            raise ClaimsError(f"{where}.form: must be ratio or saving")
        if c.expect.at_most is None and c.expect.at_least is None and c.expect.near is None:
            raise ClaimsError(f"{where}: a ratio needs at_most, at_least and/or near")
    elif c.kind == "bound":
        if c.expect.at_most is None and c.expect.at_least is None:
            raise ClaimsError(f"{where}: a bound needs at_most and/or at_least")
    elif c.kind == "agree" and c.value is None:
        raise ClaimsError(f"{where}: agree needs value (the paper's figure)")


def _tables(doc: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    """An array of tables (``[[key]]``); anything else is one clear error."""
    value = doc.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, Mapping) for v in value):
        raise ClaimsError(f"{key}: expected [[{key}]] tables")
    return value


def load_claims(path: Path) -> ClaimsSpec:
    try:
        doc = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ClaimsError(f"{path}: cannot read: {exc.strerror}") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ClaimsError(f"{path}: invalid TOML: {exc}") from None
    _take(doc, "claims file", {"page", "figures", "table", "plot", "claim"})
    page = _table(doc, "page", "")
    _take(page, "page", {"title", "out", "assets", "paper", "command", "intro", "outro"})
    base = path.parent
    out = base / _str(page, "out", "page", "results.md")
    figures = []
    for i, f in enumerate(_tables(doc, "figures")):
        _take(f, f"figures[{i}]", {"file", "title"})
        figures.append((base / _str(f, "file", f"figures[{i}]"), _str(f, "title", "", "")))
    tables = []
    for i, t in enumerate(_tables(doc, "table")):
        w = f"table[{i}]"
        _take(t, w, {"title", "where", "metrics", "caption"})
        metrics = []
        for j, m in enumerate(t.get("metrics", [])):
            if not isinstance(m, list) or not 2 <= len(m) <= 4:
                raise ClaimsError(f"{w}.metrics[{j}]: expected [metric, title, scale?, format?]")
            metrics.append((str(m[0]), str(m[1]), float(m[2]) if len(m) > 2 else 1.0,
                            str(m[3]) if len(m) > 3 else ".3g"))
        tables.append(Table(_str(t, "title", w), dict(_table(t, "where", w)), tuple(metrics),
                            _str(t, "caption", w, "")))
    plots = []
    for i, p in enumerate(_tables(doc, "plot")):
        w = f"plot[{i}]"
        _take(p, w, {"metric", "x", "where", "series", "label", "scale", "log", "title",
                     "caption"})
        plots.append(Plot(_str(p, "metric", w), _str(p, "x", w), dict(_table(p, "where", w)),
                          p.get("series"), _str(p, "label", w, _str(p, "metric", w)),
                          _num(p, "scale", w, 1.0) or 1.0, bool(p.get("log", False)),
                          _str(p, "title", w, ""), _str(p, "caption", w, "")))
    claims = [_claim(c, f"claim[{i}]") for i, c in enumerate(_tables(doc, "claim"))]
    ids = [c.id for c in claims]
    dup = next((x for x in ids if ids.count(x) > 1), None)
    if dup is not None:
        raise ClaimsError(f"claim {dup!r}: id used twice")
    return ClaimsSpec(path, _str(page, "title", "page"), out,
                      _str(page, "assets", "page", "assets"),
                      _str(page, "paper", "page", ""), _str(page, "command", "page", ""),
                      _str(page, "intro", "page", ""), _str(page, "outro", "page", ""),
                      tuple(figures), tuple(tables), tuple(plots), tuple(claims))
