"""A run's topology from its run directory: who could hear whom, when.

The simulator and the virtual mesh both leave in a RUNDIR the resolved scenario in
``manifest.json`` (radio model, per-pair link overrides, a contact trace if any) and
every node's track in ``mobility.log`` (``t node x y``; a track is piecewise linear and
holds its last point). From these the connectivity graph at any instant follows with
the radio model of ``meshsim.radio`` (the one both drivers use): a link exists
where the model gives a loss below 1, and overrides win. A run with a contact trace
has links only while a contact is up; its optimum is taken over the contact history
(``mesheval.optimum.journeys``) instead of one instant.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

from mesheval.optimum.graph import Graph, from_index_pairs

CHUNK = 1024
"""Rows of the pairwise distance matrix computed at once (memory: CHUNK * n doubles)."""


class TopologyError(ValueError):
    """The run directory does not say enough to rebuild its topology."""


@dataclass(frozen=True)
class Contacts:
    """Contact intervals: link a-b up during [start, end] (node ids), sorted by start."""

    start: NDArray[np.float64]
    end: NDArray[np.float64]
    a: NDArray[np.int64]
    b: NDArray[np.int64]


@dataclass
class Topology:
    ids: tuple[int, ...]
    tracks: dict[int, tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]]
    radio: Mapping[str, Any]
    contacts: Contacts | None
    end_s: float
    _static: Graph | None = field(default=None, repr=False)

    @property
    def static(self) -> bool:
        return all(len(t[0]) == 1 for t in self.tracks.values())

    @property
    def range_m(self) -> float:
        return float(self.radio.get("range_m") or 0.0)

    def positions(self, t: float) -> NDArray[np.float64]:
        """(n, 2) positions at time ``t`` in ``ids`` order (linear between track points)."""
        out = np.empty((len(self.ids), 2))
        for i, node in enumerate(self.ids):
            times, xs, ys = self.tracks[node]
            out[i, 0] = np.interp(t, times, xs)
            out[i, 1] = np.interp(t, times, ys)
        return out

    def graph_at(self, t: float) -> Graph:
        """The connectivity graph at scenario time ``t`` (cached for static runs)."""
        if self.static and self._static is not None:
            return self._static
        graph = link_graph(self.ids, self.positions(t), self.radio)
        if self.static:
            self._static = graph
        return graph


def link_graph(ids: tuple[int, ...], pos: NDArray[np.float64], radio: Mapping[str, Any]) -> Graph:
    """Links of the radio model at these positions, the scenario's overrides applied."""
    model = _model(radio)
    reach = float(model.range_m)
    index = {node: i for i, node in enumerate(ids)}
    kind = str(radio.get("model", "unit_disk"))
    base_loss = float(radio.get("loss") or 0.0)
    parts = []
    n = len(ids)
    for lo in range(0, n, CHUNK):
        hi = min(n, lo + CHUNK)
        d = np.hypot(pos[lo:hi, None, 0] - pos[None, lo:, 0],
                     pos[lo:hi, None, 1] - pos[None, lo:, 1])
        rows, cols = np.nonzero(d <= reach)
        cols = cols + lo
        rows = rows + lo
        upper = cols > rows
        rows, cols, dist = rows[upper], cols[upper], d[rows[upper] - lo, cols[upper] - lo]
        if kind == "unit_disk":
            keep = np.full(len(rows), base_loss < 1.0)
        elif kind == "linear_ramp":
            keep = (dist < reach) & (base_loss < 1.0)
        else:  # any other model: ask it, pair by pair (only pairs within its range)
            keep = np.array([(loss := model.loss_at(float(x))) is not None and loss < 1.0
                             for x in dist], dtype=bool)
        parts.append(np.stack([rows[keep], cols[keep]], axis=1))
    found = np.concatenate(parts) if parts else np.zeros((0, 2), dtype=np.int64)
    overrides = [o for o in radio.get("links") or ()
                 if o.get("a") in index and o.get("b") in index]
    if overrides:
        pairs = {(int(a), int(b)) for a, b in found}
        for o in overrides:
            a, b = sorted((index[o["a"]], index[o["b"]]))
            loss = o.get("loss")
            if o.get("connected") is False or (loss is not None and loss >= 1.0):
                pairs.discard((a, b))
            elif o.get("connected") is True:
                pairs.add((a, b))
        found = np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)
    both = np.concatenate([found, found[:, ::-1]]).astype(np.int64)
    return from_index_pairs(ids, both)


def _model(radio: Mapping[str, Any]) -> Any:
    """``meshsim.radio``'s model for the manifest's ``scenario.radio``."""
    from meshsim.radio import make_model
    from meshsim.scenario.model import LinkOverride, Radio

    names = {f.name for f in dataclasses.fields(Radio)}
    values = {k: v for k, v in radio.items() if k in names and k != "links"}
    links = tuple(LinkOverride(**o) for o in radio.get("links") or ())
    try:
        return make_model(Radio(**values, links=links))
    except (TypeError, ValueError) as exc:
        raise TopologyError(f"cannot rebuild the radio model: {exc}") from None


def read_tracks(path: Path) -> dict[int, tuple[NDArray[np.float64], NDArray[np.float64],
                                               NDArray[np.float64]]]:
    """``mobility.log`` -> node -> (times, xs, ys)."""
    points: dict[int, list[tuple[float, float, float]]] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise TopologyError(f"{path}: {exc.strerror}") from None
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        try:
            t, node, x, y = float(parts[0]), int(parts[1]), float(parts[2]), float(parts[3])
        except (IndexError, ValueError):
            raise TopologyError(f"{path}: bad line {line[:60]!r}") from None
        points.setdefault(node, []).append((t, x, y))
    out = {}
    for node, pts in points.items():
        arr = np.array(sorted(pts))
        out[node] = (arr[:, 0], arr[:, 1], arr[:, 2])
    return out


def contact_intervals(events: Any, end_s: float) -> Contacts:
    """Contact events ({t, a, b, up}) -> intervals; an interval still up ends at ``end_s``."""
    open_at: dict[tuple[int, int], float] = {}
    spans: list[tuple[float, float, int, int]] = []
    for e in sorted(events, key=lambda e: float(e["t"])):
        key = (min(int(e["a"]), int(e["b"])), max(int(e["a"]), int(e["b"])))
        if e["up"]:
            open_at.setdefault(key, float(e["t"]))
        elif key in open_at:
            spans.append((open_at.pop(key), float(e["t"]), *key))
    spans += [(t, end_s, *key) for key, t in open_at.items()]
    spans.sort()
    arr = np.array(spans, dtype=np.float64).reshape(-1, 4)
    return Contacts(arr[:, 0], arr[:, 1], arr[:, 2].astype(np.int64), arr[:, 3].astype(np.int64))


def load_topology(rundir: Path, manifest: Mapping[str, Any]) -> Topology:
    """The topology of one run; ``TopologyError`` if the run directory lacks it."""
    scenario = manifest.get("scenario")
    if not isinstance(scenario, Mapping) or not isinstance(scenario.get("radio"), Mapping):
        raise TopologyError("the manifest has no resolved scenario (scenario.radio)")
    log = manifest.get("mobility_log")
    name = log.get("file") if isinstance(log, Mapping) else None
    tracks = read_tracks(rundir / str(name or "mobility.log"))
    meta = scenario.get("meta") or {}
    end_s = float(meta.get("duration_s") or manifest.get("duration_s") or 0.0) + float(
        meta.get("drain_s") or manifest.get("drain_s") or 0.0)
    raw = scenario.get("contacts")
    contacts = contact_intervals(raw, end_s) if raw is not None else None
    ids = tuple(sorted(tracks))
    return Topology(ids, tracks, scenario["radio"], contacts, end_s)
