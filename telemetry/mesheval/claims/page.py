"""The results page: claims judged on a sweep's figures, with tables and plots.

``write_page(claims_file, metrics_document, report_dir)`` computes every verdict from its
rule (``claims.rules``), renders the page's prose templates (``{{ metric | axis=value |
fmt }}`` and ``{{ figure:NAME | fmt }}`` insert computed figures; no figure is typed),
draws the plots into the page's assets folder and writes the page where the claims file
says. Also writes ``claims.json`` (every verdict) into the report directory.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mesheval.claims import rules
from mesheval.claims.rules import NA, Figure, Verdict
from mesheval.claims.select import Group, figure, label, levels, pick, script_figures, value_of
from mesheval.claims.spec import Claim, ClaimsError, ClaimsSpec, Plot, Table, load_claims

TEMPLATE = re.compile(r"\{\{\s*(.+?)\s*\}\}")


def judge(c: Claim, groups: Sequence[Group], figures: Mapping[str, Mapping[str, Any]]
          ) -> Verdict:
    """The verdict of one claim on these configurations."""
    metric = c.metric or ""
    if c.kind == "agree":
        if c.figure is not None:
            f = figures.get(c.figure)
            fig = Figure(c.figure, None) if f is None else Figure(
                f.get("label", c.figure), float(f["value"]) * c.scale,
                float(f.get("half_width") or 0.0) * c.scale, int(f.get("n") or 1))
        else:
            fig = figure(groups, metric, c.where, c.scale)
        return rules.agree(fig, float(c.value or 0.0), c.tolerance)
    if c.kind == "order":
        points = []
        for at in combinations(groups, c.over, c.where):
            sel = {**c.where, **at}
            points.append([figure(groups, metric, {**sel, c.by: lv}, c.scale,
                                  name=label({c.by: lv, **at})) for lv in c.levels])
        return rules.order(points, descending=c.descending, tolerance=c.tolerance,
                           names=[str(x) for x in c.levels])
    if c.kind == "trend":
        (along,) = c.along
        verdicts = []
        for at in combinations(groups, c.series, c.where):
            sel = {**c.where, **at}
            xs = list(c.levels) or [x for x in levels(groups, along, sel)
                                    if isinstance(x, int | float)]
            figs = [figure(groups, metric, {**sel, along: x}, c.scale,
                           name=label({along: x})) for x in xs]
            v = rules.trend(figs, direction=c.direction, tolerance=c.tolerance,
                            min_change=c.min_change)
            verdicts.append((label(at), v))
        return combine(verdicts, ", ".join(c.series))
    if c.kind == "ratio":
        pairs = []
        for at in combinations(groups, c.along, {**c.where, **c.num}):
            num = figure(groups, metric, {**c.where, **c.num, **at}, c.scale,
                         name=label(at) if at else label(c.num))
            den = figure(groups, metric, {**c.where, **c.den, **at}, c.scale)
            if c.baseline:
                base = {**c.where, **at, **c.baseline}
                num, den = _over_baseline(num, den, figure(groups, metric, {**base, **c.num}),
                                          figure(groups, metric, {**base, **c.den}))
            pairs.append((num, den))
        what = (f"1 - {label(c.num)} / {label(c.den)}" if c.form == "saving"
                else f"{label(c.num)} / {label(c.den)}")
        if c.baseline:
            what = f"({what}) over the same at {label(c.baseline)}"
        return rules.ratio(pairs, c.expect, stat=c.stat, what=what, saving=c.form == "saving")
    # bound
    figs = []
    for g in pick(groups, c.where):
        name = label({k: v for k, v in (g.get("varied") or {}).items()
                      if k not in c.where or isinstance(c.where[k], list)})
        figs.append(figure([g], metric, {}, c.scale, name=name))
    return rules.bound(figs, c.expect, stat=c.stat, use=c.use)


def _over_baseline(num: Figure, den: Figure, bnum: Figure, bden: Figure
                   ) -> tuple[Figure, Figure]:
    """(num/den) / (bnum/bden) as a pair whose ratio is that: (num * bden, den * bnum)."""
    if None in (num.mean, den.mean, bnum.mean, bden.mean):
        missing = next(f for f in (num, den, bnum, bden) if f.mean is None)
        return Figure(missing.label, None), den
    return (Figure(num.label, float(num.mean) * float(bden.mean)),  # type: ignore[arg-type]
            Figure(den.label, float(den.mean) * float(bnum.mean)))  # type: ignore[arg-type]


def combinations(groups: Sequence[Group], axes: Sequence[str], where: Mapping[str, Any]
                 ) -> list[dict[str, Any]]:
    """Every combination of the listed axes' levels that some selected group has."""
    out: list[dict[str, Any]] = [{}]
    for axis in axes:
        out = [{**at, axis: v} for at in out for v in levels(groups, axis, {**where, **at})]
    return out


def combine(verdicts: Sequence[tuple[str, Verdict]], axis: str) -> Verdict:
    """One verdict over several series: differs if any differs, n/a if none could be
    tested, else holds."""
    if len(verdicts) == 1:
        return verdicts[0][1]
    rule = verdicts[0][1].rule + f", for every {axis}"
    ours = "; ".join(f"{sv}: {v.ours}" + ("" if v.status != rules.DIFFERS else " (differs)")
                     for sv, v in verdicts)
    statuses = {v.status for _, v in verdicts}
    if rules.DIFFERS in statuses:
        return Verdict(rules.DIFFERS, rule, ours)
    if statuses == {NA}:
        return Verdict(NA, rule, ours)
    return Verdict(rules.HOLDS, rule, ours)


# ------------------------------------------------------------------ templates


def _parse_where(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, _, raw = part.partition("=")
        out[key.strip()] = _number_or_text(raw.strip())
    return out


def _number_or_text(raw: str) -> Any:
    for kind in (int, float):
        try:
            return kind(raw)
        except ValueError:
            continue
    return raw


def render(text: str, groups: Sequence[Group], figures: Mapping[str, Mapping[str, Any]]
           ) -> str:
    """Replace every ``{{ ... }}`` with a computed figure (``n/a`` if there is none)."""

    def one(match: re.Match[str]) -> str:
        parts = [p.strip() for p in match.group(1).split("|")]
        fmt = parts[2] if len(parts) > 2 else ".3g"
        mean_only = fmt.startswith("=")
        fmt = fmt.lstrip("=")
        if parts[0].startswith("figure:"):
            f = figures.get(parts[0][len("figure:"):])
            if f is None:
                return "n/a"
            fig = Figure("", float(f["value"]), f.get("half_width"), int(f.get("n") or 1))
        else:
            where = _parse_where(parts[1]) if len(parts) > 1 else {}
            metric, _, scale = parts[0].partition("*")
            fig = figure(groups, metric.strip(), where, float(scale) if scale else 1.0)
        if fig.mean is None:
            return "n/a"
        return format(fig.mean, fmt) if mean_only else fig.text(fmt)

    return TEMPLATE.sub(one, text)


# --------------------------------------------------------------------- tables


def _fmt(v: Any) -> str:
    if isinstance(v, float) and v.is_integer():
        return str(int(v))
    return str(v)


def _md(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    def esc(x: str) -> str:
        return str(x).replace("|", "\\|").replace("\n", " ")

    return (["| " + " | ".join(esc(h) for h in header) + " |",
             "|" + "|".join("---" for _ in header) + "|"]
            + ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows])


def axes_of(groups: Sequence[Group]) -> list[str]:
    names: list[str] = []
    for g in groups:
        names += [k for k in (g.get("varied") or {}) if k not in names]
    return names


def table_lines(t: Table, groups: Sequence[Group]) -> list[str]:
    chosen = pick(groups, t.where)
    cols = [a for a in axes_of(chosen) if a not in t.where]
    chosen = sorted(chosen, key=lambda g: tuple(_sort_key(value_of(g, a)) for a in cols))
    header = [*cols, "seeds", *(title for _, title, _, _ in t.metrics)]
    rows = []
    for g in chosen:
        row = [_fmt(value_of(g, a)) for a in cols]
        row.append(str(len(g.get("seeds") or g.get("runs") or [])))
        for metric, _, scale, fmt in t.metrics:
            row.append(figure([g], metric, {}, scale).text(fmt))
        rows.append(row)
    out = [f"### {t.title}", ""]
    if t.where:
        out += [f"Configurations with {label(t.where)}. Cells: mean ± half-width of the 95 % "
                "Student-t interval over seeds.", ""]
    out += _md(header, rows) if rows else ["(no configuration selected)"]
    if t.caption:
        out += ["", t.caption]
    return [*out, ""]


def _sort_key(v: Any) -> tuple[int, float, str]:
    if isinstance(v, int | float) and not isinstance(v, bool):
        return (0, float(v), "")
    return (1, 0.0, str(v))


# ---------------------------------------------------------------------- plots


def draw(p: Plot, groups: Sequence[Group], path: Path) -> Path | None:
    """Mean and 95 % interval of ``p.metric`` against ``p.x``, one line per series."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    chosen = pick(groups, p.where)
    series = levels(chosen, p.series, {}) if p.series else [None]
    fig, ax = plt.subplots(figsize=(6.0, 4.0))
    drawn = False
    for sv in series:
        sel = {p.series: sv} if p.series else {}
        xs = [x for x in levels(chosen, p.x, sel) if isinstance(x, int | float)]
        pts = [(x, figure(chosen, p.metric, {**sel, p.x: x}, p.scale)) for x in xs]
        pts = [(x, f) for x, f in pts if f.mean is not None]
        if not pts:
            continue
        ax.errorbar([x for x, _ in pts], [float(f.mean or 0.0) for _, f in pts],
                    yerr=[f.half_width or 0.0 for _, f in pts], marker="o", capsize=4,
                    label=str(sv) if sv is not None else p.metric)
        drawn = True
    if not drawn:
        plt.close(fig)
        return None
    ax.set_xlabel(p.x)
    ax.set_ylabel(p.label)
    if p.log:
        ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(p.title or f"{p.label} ({label(p.where)})", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------- page


def verdicts(spec: ClaimsSpec, groups: Sequence[Group],
             figures: Mapping[str, Mapping[str, Any]]) -> list[tuple[Claim, Verdict]]:
    return [(c, judge(c, groups, figures)) for c in spec.claims]


def plan_text(sweep: Mapping[str, Any] | None) -> str:
    """What part of the sweep the page stands on: a quick plan (``meshsim sweep --seeds``,
    ``--only``) leaves points pending, and the reader must know the page is not the full
    plan's."""
    if not sweep:
        return ""
    points = [p for p in sweep.get("points") or [] if isinstance(p, dict)]
    finished = [p for p in points if p.get("status") in ("done", "kept")]
    blocks = []
    for b in sweep.get("blocks") or []:
        mine = [p for p in points if p.get("block") == b.get("name")]
        ran = sorted({p.get("seed") for p in mine if p in finished}, key=str)
        blocks.append(f"{b.get('name')} {len(ran)} of {len(b.get('seeds') or [])}")
    if points and len(finished) == len(points):
        return (f"Plan: the whole sweep `{Path(str(sweep.get('file', ''))).name}`, "
                f"{len(points)} points.")
    skipped = sum(1 for p in points if p.get("status") == "not evaluated")
    more = f", {skipped} more finished but not evaluated here" if skipped else ""
    return (f"Plan: **a part of the sweep** `{Path(str(sweep.get('file', ''))).name}`: "
            f"{len(finished)} of its {len(points)} points evaluated{more} (seeds per block: "
            f"{', '.join(blocks)}); the figures and verdicts below are that part's. "
            "Running the page's command without `--seeds`/`--only` completes it.")


def page_text(spec: ClaimsSpec, doc: Mapping[str, Any], judged: Sequence[tuple[Claim, Verdict]],
              figures: Mapping[str, Mapping[str, Any]], plots: Sequence[tuple[Plot, Path]],
              sweep: Mapping[str, Any] | None = None) -> str:
    groups = doc.get("groups", [])
    runs = doc.get("runs", [])
    seeds = sorted({len(g.get("runs") or []) for g in groups})
    lines = [f"# {spec.title}", ""]
    lines += [
        "Generated by `" + (spec.command or f"mesheval SWEEPDIR --claims {spec.path.name}")
        + "` from the claims file `" + spec.path.name + "`. Do not edit by hand: every figure "
        "and every verdict below is computed from the runs (mesheval's metrics, "
        "docs/evaluation.md) by the rule printed beside it.", "",
        f"Paper: {spec.paper}. {len(runs)} runs in {len(groups)} configurations, "
        f"{'/'.join(str(s) for s in seeds)} {'seed' if seeds == [1] else 'seeds'} per "
        "configuration; figures are means over "
        "seeds ± the half-width of the 95 % Student-t interval.", ""]
    if plan := plan_text(sweep):
        lines += [plan, ""]
    if spec.intro:
        lines += [render(spec.intro, groups, figures).strip(), ""]
    counts = {s: sum(1 for _, v in judged if v.status == s)
              for s in (rules.HOLDS, rules.DIFFERS, NA)}
    lines += ["## Claims", "",
              f"{counts[rules.HOLDS]} hold, {counts[rules.DIFFERS]} differ, {counts[NA]} "
              "cannot be tested on these figures (n/a).", ""]
    rows = [[c.id, f"{c.paper} ({c.section})", v.rule, v.ours,
             v.status if v.status == NA else f"**{v.status}**"] for c, v in judged]
    lines += _md(["#", "the paper says (where)", "rule tested", "ours", "verdict"], rows)
    notes = [(c, v) for c, v in judged if c.note]
    if notes:
        lines += ["", "## Why ours differ, and what a verdict rests on", ""]
        for c, v in notes:
            lines += [f"- **{c.id}** ({v.status}): {render(c.note, groups, figures).strip()}"]
    for t in spec.tables:
        lines += ["", *table_lines(t, groups)]
    if plots:
        lines += ["## Plots", ""]
        rel = spec.out.parent
        for p, path in plots:
            lines += [f"![{p.metric}]({path.relative_to(rel).as_posix()})", ""]
            if p.caption:
                lines += [f"*{render(p.caption, groups, figures)}*", ""]
    if figures:
        lines += ["## Figures of the paper-specific scripts", ""]
        lines += _md(["figure", "value", "n", "what", "from"],
                     [[name, Figure(name, float(f["value"]), f.get("half_width")).text(".4g"),
                       str(f.get("n", "")), str(f.get("label", "")), str(f.get("source", ""))]
                      for name, f in sorted(figures.items())])
        lines += [""]
    if spec.outro:
        lines += ["", render(spec.outro, groups, figures).strip(), ""]
    return "\n".join(lines).rstrip() + "\n"


def write_page(claims_file: Path, doc: Mapping[str, Any], report_dir: Path,
               sweep: Mapping[str, Any] | None = None) -> Path:
    """Judge the claims on ``doc`` (mesheval's metrics.json), write the page and
    ``report_dir/claims.json``; return the page's path. ``sweep`` is the sweep's manifest
    (sweep.json), if the runs are a sweep's: the page says how much of it ran."""
    spec = load_claims(claims_file)
    groups = doc.get("groups", [])
    figures = script_figures(spec.figures)
    judged = verdicts(spec, groups, figures)
    assets = spec.out.parent / spec.assets
    plots: list[tuple[Plot, Path]] = []
    for i, p in enumerate(spec.plots):
        slug = re.sub(r"[^A-Za-z0-9]+", "-", f"{p.metric}-{label(p.where)}").strip("-")
        drawn = draw(p, groups, assets / f"{i:02d}-{slug}.png")
        if drawn is not None:
            plots.append((p, drawn))
    spec.out.parent.mkdir(parents=True, exist_ok=True)
    spec.out.write_text(page_text(spec, doc, judged, figures, plots, sweep), encoding="utf-8")
    report_dir.mkdir(parents=True, exist_ok=True)
    (report_dir / "claims.json").write_text(json.dumps(
        [{"id": c.id, "kind": c.kind, "paper": c.paper, "section": c.section,
          "status": v.status, "rule": v.rule, "ours": v.ours} for c, v in judged],
        indent=1) + "\n", encoding="utf-8")
    return spec.out


__all__ = ["ClaimsError", "judge", "render", "write_page"]
