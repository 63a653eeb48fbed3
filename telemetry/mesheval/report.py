"""report.md and a self-contained report.html from the metrics document.

Both are rendered from ``metrics.json`` alone (plus the PNGs), so a report can be
rebuilt without Spark. The HTML embeds the PNGs as data URIs so it can be mailed
or archived as one file.
"""

from __future__ import annotations

import base64
import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from mesheval.plots import draw_all

HEADLINE_COLUMNS: tuple[tuple[str, str, float], ...] = (
    ("delivery_ratio", "delivery", 1.0),
    ("latency_mean_s", "lat mean s", 1.0),
    ("latency_median_s", "lat median s", 1.0),
    ("latency_p95_s", "lat p95 s", 1.0),
    ("overhead_ratio", "overhead", 1.0),
    ("bytes_per_delivery", "B/deliv", 1.0),
    ("control_share_bytes", "ctrl share", 1.0),
    ("fp_deliveries", "FP", 1.0),
    ("fp_forward", "FP fwd", 1.0),
    ("duplicates", "dup", 1.0),
    ("energy_per_event_j", "uJ/event", 1e6),
    ("optimum_ratio", "tx/opt", 1.0),
)
"""(metric, column title, display scale)."""

CAPTIONS = {
    "delivery_ratio": "Delivery ratio against the varied parameter (mean, 95% CI over seeds).",
    "overhead": "ONE overhead ratio and bytes sent per first delivery.",
    "latency_cdf": "CDF of first-delivery latency, pooled over seeds.",
    "load_map": "Transmissions per node over the area (marker size and colour).",
    "protocols": "Per-configuration comparison of four headline metrics.",
    "timeline": "Delivery ratio per window of publish time.",
    "state_size": "State a node holds (state records, summed over its stores): mean per node "
                  "over time by run and role, and the mean per configuration (95% CI).",
}


def _num(value: float | None, scale: float = 1.0) -> str:
    """Three significant digits, no exponent below a million."""
    if value is None:
        return "n/a"
    v = value * scale
    if v == int(v) and abs(v) < 1e6:
        return str(int(v))
    if abs(v) >= 1e6:
        return f"{v:.3g}"
    if abs(v) >= 100:
        return f"{v:.0f}"
    return f"{v:.3g}"


def cell(stat: Mapping[str, Any], scale: float = 1.0) -> str:
    """'mean ± half-width' (or just the mean for a single seed)."""
    mean = stat.get("mean")
    if mean is None:
        return "n/a"
    hw = stat.get("half_width")
    return _num(mean, scale) if hw is None else f"{_num(mean, scale)} ± {_num(hw, scale)}"


def varied_axes(items: Sequence[Mapping[str, Any]]) -> list[str]:
    """The axes a sweep varied (in first-seen order): one column each in the tables."""
    names: list[str] = []
    for item in items:
        names += [k for k in (item.get("varied") or {}) if k not in names]
    return names


def _value(v: Any) -> str:
    return str(int(v)) if isinstance(v, float) and v.is_integer() else str(v)


def _parameter(item: Mapping[str, Any], axes: Sequence[str]) -> list[str]:
    if axes:
        varied = item.get("varied") or {}
        return [_value(varied[a]) if a in varied else "-" for a in axes]
    return [f"{item['param_name']}={item['param_value']}"]


def headline(doc: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    """Header and rows of the per-configuration table (CLI, markdown, HTML); a sweep's
    varied values are columns of their own."""
    groups = doc.get("groups", [])
    axes = varied_axes(groups)
    header = ["protocol", "scenario", "tier", *(axes or ["parameter"]), "runs"] + [
        t for _, t, _ in HEADLINE_COLUMNS]
    rows = []
    for g in groups:
        rows.append([
            str(g["protocol"]), str(g["scenario"]), str(g.get("tier", "unknown")),
            *_parameter(g, axes),
            str(len(g["runs"])),
        ] + [cell(g["metrics"].get(m, {}), s) for m, _, s in HEADLINE_COLUMNS])
    return header, rows


def text_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(str(h).ljust(w) for h, w in zip(header, widths, strict=True))]
    lines.append("  ".join("-" * w for w in widths))
    lines += ["  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def esc(text: str) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    out = ["| " + " | ".join(esc(h) for h in header) + " |",
           "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(esc(c) for c in r) + " |" for r in rows]
    return "\n".join(out)


def _html_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in r) + "</tr>" for r in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


RUN_COLUMNS: tuple[tuple[str, str, float], ...] = (
    ("events", "events", 1.0),
    ("interested_pairs", "interested", 1.0),
    ("first_deliveries", "delivered", 1.0),
    ("delivery_ratio", "ratio", 1.0),
    ("latency_median_s", "median s", 1.0),
    ("latency_median_upper_s", "upper median s", 1.0),
    ("latency_p99_s", "p99 s", 1.0),
    ("tx_count", "tx", 1.0),
    ("overhead_ratio", "overhead", 1.0),
    ("fp_deliveries", "FP", 1.0),
    ("fp_late_subscriber", "FP late sub", 1.0),
    ("duplicates", "dup", 1.0),
    ("energy_per_subscriber_j", "uJ/subscriber", 1e6),
    ("optimum_ratio", "tx/opt", 1.0),
)


def run_table(doc: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    runs = doc.get("runs", [])
    axes = varied_axes(runs)
    header = ["run", "protocol", "seed", *(axes or ["parameter"]), "warm-up s"] + [
        t for _, t, _ in RUN_COLUMNS]
    rows = []
    for r in runs:
        m = r.get("metrics", {})
        rows.append([str(r["run"]), str(r["protocol"]), str(r.get("seed")),
                     *_parameter(r, axes), _num(r["warmup_s"])]
                    + [_num(m.get(k), s) for k, _, s in RUN_COLUMNS])
    return header, rows


def quality_table(doc: Mapping[str, Any]) -> tuple[list[str], list[list[str]]]:
    header = ["file", "lines", "invalid", "reasons"]
    rows = [
        [f["path"], str(f["lines"]), str(f["invalid"]),
         "; ".join(f"{k}: {v}" for k, v in sorted(f["errors"].items()))]
        for f in doc.get("quality", {}).get("files", []) if f["invalid"]
    ]
    return header, rows


DEFINITIONS = [
    "Interested set: nodes with an active subscription matching the event at its publish time "
    "(ground truth replayed from subscribe/unsubscribe records; the publisher is excluded).",
    "Delivery ratio: first deliveries to interested nodes / interested (event, node) pairs.",
    "Latency: first deliver.ts - publish.ts per interested pair; median interpolates between "
    "the two middle values; the upper median (ONE's) is in metrics.json.",
    "Overhead ratio (ONE MessageStatsReport, (relayed - delivered)/delivered): "
    "(data transmissions - first deliveries) / first deliveries.",
    "FP: deliveries to nodes outside the interested set; FP fwd: forwarding false positives "
    "reported by the protocol (n/a when it does not report them).",
    "Duplicates: deliver records beyond the first per (event, node, subscription), i.e. a "
    "subscription that received the event more than once (a node with two matching "
    "subscriptions gets two records: not a duplicate; duplicates_per_node in metrics.json "
    "counts per node).",
    "Cache window (--cache-window S): subscriptions starting up to S after a publication "
    "count as interested; their latency runs from the subscription. Scoped events (_scope): "
    "only members of the scope at publish time are interested.",
    "State: entries and bytes (msgpack-encoded) a node holds, from the protocols' state "
    "records; mean over nodes of each node's mean over the measurement.",
    "Energy: first-order radio model, HESPER Table 4.1 constants; data energy of measured "
    "events per event.",
    "tx/opt (optimum_ratio): data transmissions / the fewest broadcast transmissions that "
    "could have delivered the same events (a Steiner tree at publish time counted in "
    "broadcasts; over the contact history for contact traces); exact for small instances, "
    "else against a proven approximation (metrics.json: optimum_ratio_high against its lower "
    "bound, optimum_ratio_unicast against the fewest unicasts).",
    "Cells: mean ± half-width of the 95% Student-t interval over seeds; events published in "
    "the warm-up are excluded.",
]


def write_report(doc: Mapping[str, Any], out: Path) -> dict[str, Path]:
    """Draw the plots and write report.md and report.html into ``out``; return the files."""
    plots = draw_all(doc, out)
    head, rows = headline(doc)
    rhead, rrows = run_table(doc)
    qhead, qrows = quality_table(doc)
    quality = doc.get("quality", {})
    summary = (f"{len(doc.get('runs', []))} runs, {quality.get('lines_total', 0)} records read, "
               f"{quality.get('invalid_total', 0)} invalid lines skipped")

    md = ["# mesheval report", "", summary, "", "## Per configuration", "",
          _md_table(head, rows), "", "## Definitions", ""]
    md += [f"- {d}" for d in DEFINITIONS]
    md += ["", "## Plots", ""]
    for name, path in plots.items():
        md += [f"![{name}]({path.name})", "", f"*{CAPTIONS[name]}*", ""]
    md += ["## Runs", "", _md_table(rhead, rrows), ""]
    md += ["## Input quality", ""]
    md += [_md_table(qhead, qrows) if qrows else "Every line was a valid record.", ""]
    md_path = out / "report.md"
    md_path.write_text("\n".join(md), encoding="utf-8")

    figures = []
    for name, path in plots.items():
        data = base64.b64encode(path.read_bytes()).decode("ascii")
        figures.append(f'<figure><img alt="{name}" src="data:image/png;base64,{data}">'
                       f"<figcaption>{html.escape(CAPTIONS[name])}</figcaption></figure>")
    page = f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>mesheval report</title>
<style>
body {{ font-family: sans-serif; margin: 2em; color: #222; }}
table {{ border-collapse: collapse; margin: 1em 0; font-size: 0.85em; }}
th, td {{ border: 1px solid #bbb; padding: 0.25em 0.5em; text-align: right; }}
th {{ background: #eee; }}
td:first-child, th:first-child {{ text-align: left; }}
figure {{ margin: 1.5em 0; }} img {{ max-width: 100%; }}
figcaption {{ font-style: italic; font-size: 0.9em; }}
</style></head><body>
<h1>mesheval report</h1><p>{html.escape(summary)}</p>
<h2>Per configuration</h2>{_html_table(head, rows)}
<h2>Definitions</h2><ul>{''.join(f'<li>{html.escape(d)}</li>' for d in DEFINITIONS)}</ul>
<h2>Plots</h2>{''.join(figures)}
<h2>Runs</h2>{_html_table(rhead, rrows)}
<h2>Input quality</h2>{_html_table(qhead, qrows) if qrows else
                       '<p>Every line was a valid record.</p>'}
</body></html>
"""
    html_path = out / "report.html"
    html_path.write_text(page, encoding="utf-8")
    return {"report.md": md_path, "report.html": html_path, **{p.name: p for p in plots.values()}}
