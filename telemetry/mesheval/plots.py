"""PNG plots of the evaluation (matplotlib, headless Agg backend).

Each function takes the plain ``metrics.json`` document, so plots can be redrawn
from a saved report without Spark, and returns the file it wrote (or None when
the data for that plot is absent, e.g. no position records for the load map).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.figure import Figure

DPI = 110


def _save(fig: Figure, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=DPI)
    plt.close(fig)
    return path


def _series(g: Mapping[str, Any], groups: Sequence[Mapping[str, Any]]) -> str:
    """A plotted series: the protocol; with its scenario when the protocol ran in several
    (e.g. two variants or network sizes, whose points would otherwise mix), and with its
    tier when the document mixes tiers."""
    protocol = str(g["protocol"])
    label = protocol
    if len({str(x.get("scenario")) for x in groups if str(x["protocol"]) == protocol}) > 1:
        label += f" ({g.get('scenario')})"
    if len({x.get("tier") for x in groups}) > 1:
        label += f" [{g.get('tier', 'unknown')}]"
    return label


def _by_series(groups: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    out: dict[str, list[Mapping[str, Any]]] = {}
    for g in groups:
        out.setdefault(_series(g, groups), []).append(g)
    return out


def _x_axis(groups: Sequence[Mapping[str, Any]]) -> tuple[dict[str, float], list[str] | None]:
    """x position per param value: the number itself, or an index for categorical values."""
    values = sorted({str(g["param_value"]) for g in groups})
    numbers = {str(g["param_value"]): g.get("param_number") for g in groups}
    if all(numbers[v] is not None for v in values):
        return {v: float(numbers[v]) for v in values}, None  # type: ignore[arg-type]
    return {v: float(i) for i, v in enumerate(values)}, values


def metric_vs_param(
    doc: Mapping[str, Any], metrics: Sequence[tuple[str, str]], path: Path
) -> Path | None:
    """One panel per (metric, label): mean and 95% CI per protocol against the varied parameter."""
    groups = doc.get("groups", [])
    if not groups:
        return None
    xpos, labels = _x_axis(groups)
    fig, axes = plt.subplots(1, len(metrics), figsize=(5.2 * len(metrics), 4.0), squeeze=False)
    for ax, (metric, label) in zip(axes[0], metrics, strict=True):
        for protocol, members in sorted(_by_series(groups).items()):
            pts = sorted(
                ((xpos[str(g["param_value"])], g["metrics"][metric]) for g in members
                 if g["metrics"].get(metric, {}).get("mean") is not None),
                key=lambda p: p[0],
            )
            if not pts:
                continue
            xs = [p[0] for p in pts]
            ys = [p[1]["mean"] for p in pts]
            err = [p[1]["half_width"] or 0.0 for p in pts]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=4, label=protocol)
        ax.set_xlabel(str(groups[0]["param_name"]))
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        if labels is not None:
            ax.set_xticks(range(len(labels)), labels, rotation=20, ha="right", fontsize=8)
        if metric == "delivery_ratio":
            ax.set_ylim(-0.02, 1.05)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        else:
            ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle("mean and 95% CI over seeds", fontsize=9)
    return _save(fig, path)


def latency_cdf(doc: Mapping[str, Any], path: Path) -> Path | None:
    """Empirical CDF of first-delivery latency per configuration (pooled over seeds)."""
    curves = [c for c in doc.get("latency_cdf_groups", []) if c.get("quantiles")]
    if not curves:
        return None
    points = doc.get("cdf_points", [])
    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for c in sorted(curves, key=lambda c: (c["protocol"], str(c["param_value"]))):
        label = f"{_series(c, curves)} {c['param_name']}={c['param_value']} (n={c['n']})"
        ax.step(c["quantiles"], points, where="post", label=label)
    ax.set_xlabel("latency of first delivery (s)")
    ax.set_ylabel("fraction of deliveries")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    return _save(fig, path)


def load_map(doc: Mapping[str, Any], path: Path) -> Path | None:
    """Transmissions per node over the area, one panel per protocol (its first run)."""
    nodes = [n for n in doc.get("nodes", []) if n.get("x") is not None and n.get("y") is not None]
    if not nodes:
        return None
    runs = {r["run"]: r for r in doc.get("runs", [])}
    first: dict[str, str] = {}
    for run_id in sorted({n["run"] for n in nodes}):
        protocol = runs.get(run_id, {}).get("protocol", "?")
        first.setdefault(protocol, run_id)
    fig, axes = plt.subplots(1, len(first), figsize=(5.0 * len(first), 4.4), squeeze=False)
    top = max((n["tx"] for n in nodes), default=0) or 1
    for ax, (protocol, run_id) in zip(axes[0], sorted(first.items()), strict=True):
        mine = [n for n in nodes if n["run"] == run_id]
        sizes = [20 + 280 * n["tx"] / top for n in mine]
        sc = ax.scatter([n["x"] for n in mine], [n["y"] for n in mine], s=sizes,
                        c=[n["tx"] for n in mine], cmap="viridis", vmin=0, vmax=top,
                        edgecolors="black", linewidths=0.4)
        if len(mine) <= 30:
            for n in mine:
                ax.annotate(str(n["node"]), (n["x"], n["y"]), fontsize=7,
                            xytext=(4, 4), textcoords="offset points")
        ax.set_title(f"{protocol} (run {run_id})", fontsize=9)
        ax.set_xlabel("x (m)")
        ax.set_ylabel("y (m)")
        ax.set_aspect("equal", adjustable="datalim")
        fig.colorbar(sc, ax=ax, label="transmissions")
    return _save(fig, path)


def protocol_comparison(doc: Mapping[str, Any], path: Path) -> Path | None:
    """Grouped bars (one colour per protocol, one group per parameter value), 95% CI whiskers."""
    groups = doc.get("groups", [])
    if not groups:
        return None
    panels = [("delivery_ratio", "delivery ratio"), ("latency_median_s", "median latency (s)"),
              ("bytes_per_delivery", "bytes sent per delivery"),
              ("energy_per_event_j", "data energy per event (J)")]
    series = _by_series(groups)
    protocols = sorted(series)
    xpos, _ = _x_axis(groups)
    values = sorted(xpos, key=lambda v: xpos[v])
    width = 0.8 / len(protocols)
    fig, axes = plt.subplots(2, 2, figsize=(max(7.5, 0.9 * len(values) * len(protocols) + 5),
                                            6.4))
    for ax, (metric, label) in zip(axes.flat, panels, strict=True):
        for i, protocol in enumerate(protocols):
            stats = {str(g["param_value"]): g["metrics"][metric] for g in series[protocol]}
            xs = [j + (i - (len(protocols) - 1) / 2) * width for j in range(len(values))]
            means = [stats.get(v, {}).get("mean") for v in values]
            errs = [stats.get(v, {}).get("half_width") or 0.0 for v in values]
            ax.bar(xs, [m if m is not None else 0.0 for m in means], width=width, yerr=errs,
                   capsize=3, color=f"C{i % 10}", label=protocol)
            for x, m in zip(xs, means, strict=True):
                if m is None:
                    ax.annotate("n/a", (x, 0), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(values)), values, fontsize=8)
        ax.set_xlabel(str(groups[0]["param_name"]), fontsize=8)
        ax.set_title(label, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    axes.flat[0].legend(fontsize=8)
    fig.suptitle("per protocol: mean and 95% CI over seeds", fontsize=9)
    return _save(fig, path)


def timeline(doc: Mapping[str, Any], path: Path) -> Path | None:
    """Delivery ratio per tumbling window of publish time, one line per run."""
    windows = [w for w in doc.get("windows", []) if w.get("delivery_ratio") is not None]
    if not windows:
        return None
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    runs = sorted({w["run"] for w in windows})
    for run_id in runs[:12]:
        mine = [w for w in windows if w["run"] == run_id]
        ax.plot([w["window_start_s"] for w in mine], [w["delivery_ratio"] for w in mine],
                marker=".", label=run_id)
    ax.set_xlabel(f"publish time since run start (s), {doc.get('window_s', 10):g} s windows")
    ax.set_ylabel("delivery ratio")
    ax.set_ylim(-0.02, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    return _save(fig, path)


def sweep_view(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """For a sweep of several axes: plot against the numeric axis with the most values and
    make every combination of the other axes a series of its own."""
    groups = doc.get("groups", [])
    axes: dict[str, set[str]] = {}
    for g in groups:
        for k, v in (g.get("varied") or {}).items():
            axes.setdefault(k, set()).add(repr(v))
    if len(axes) < 2:
        return doc

    def numeric(axis: str) -> bool:
        return all(isinstance((g.get("varied") or {}).get(axis), int | float)
                   and not isinstance((g.get("varied") or {}).get(axis), bool) for g in groups)

    candidates = [a for a in axes if numeric(a)] or list(axes)
    x = max(candidates, key=lambda a: len(axes[a]))
    view = []
    for g in groups:
        varied = g.get("varied") or {}
        rest = " ".join(f"{k}={v}" for k, v in varied.items() if k != x)
        value = varied.get(x)
        view.append({**g, "protocol": rest or g["protocol"], "param_name": x,
                     "param_value": str(value),
                     "param_number": float(value) if isinstance(value, int | float) else None})
    return {**doc, "groups": view}


def state_size(doc: Mapping[str, Any], path: Path) -> Path | None:
    """State a node holds (``state`` records): the mean per node over time, one line per
    (run, role), and the mean per configuration with its 95% CI."""
    rows = doc.get("state_timeline", [])
    if not rows:
        return None
    fig, (left, right) = plt.subplots(1, 2, figsize=(11.0, 4.0))
    for (run_id, role) in sorted({(r["run"], r["role"]) for r in rows})[:12]:
        mine = [r for r in rows if r["run"] == run_id and r["role"] == role]
        left.plot([r["t_s"] for r in mine], [r["bytes_mean"] for r in mine], marker=".",
                  label=f"{run_id} [{role}]")
    left.set_xlabel("time since run start (s)")
    left.set_ylabel("state per node (bytes, mean)")
    left.grid(alpha=0.3)
    left.legend(fontsize=6)
    groups = [g for g in doc.get("groups", [])
              if g["metrics"].get("state_bytes_mean", {}).get("mean") is not None]
    labels = [f"{_series(g, groups)} {g['param_name']}={g['param_value']}" for g in groups]
    means = [g["metrics"]["state_bytes_mean"]["mean"] for g in groups]
    errs = [g["metrics"]["state_bytes_mean"]["half_width"] or 0.0 for g in groups]
    right.bar(range(len(groups)), means, yerr=errs, capsize=3,
              color=[f"C{i % 10}" for i in range(len(groups))])
    right.set_xticks(range(len(groups)), labels, rotation=20, ha="right", fontsize=7)
    right.set_ylabel("state per node (bytes, mean over the run)")
    right.grid(alpha=0.3, axis="y")
    return _save(fig, path)


def draw_all(doc: Mapping[str, Any], out: Path) -> dict[str, Path]:
    """Every plot that has data; name -> file."""
    doc = sweep_view(doc)
    plots = {
        "delivery_ratio": metric_vs_param(doc, [("delivery_ratio", "delivery ratio")],
                                          out / "delivery_ratio.png"),
        "overhead": metric_vs_param(doc, [("overhead_ratio", "overhead ratio (ONE)"),
                                          ("bytes_per_delivery", "bytes sent per delivery")],
                                    out / "overhead.png"),
        "latency_cdf": latency_cdf(doc, out / "latency_cdf.png"),
        "load_map": load_map(doc, out / "load_map.png"),
        "protocols": protocol_comparison(doc, out / "protocols.png"),
        "timeline": timeline(doc, out / "timeline.png"),
        "state_size": state_size(doc, out / "state_size.png"),
    }
    return {name: p for name, p in plots.items() if p is not None}
