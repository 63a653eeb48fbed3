"""Telemetry files of one run: RUNDIR/node-<id>.jsonl per node plus RUNDIR/manifest.json.

Records follow ``meshsub.core.telemetry`` (the driver adds run, node, protocol,
ts_ns, rec and epoch). Files are written under a ``.tmp`` name and renamed when
the run closes, so a reader (Spark's file source, a copy job) never sees half a
file. Lines are buffered in memory and appended in batches, so a 1000-node run
does not need 1000 open file descriptors.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from meshsub import __version__
from meshsub.core.api import TelemetryValue

MANIFEST = "manifest.json"
FLUSH_LINES = 50_000

_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode
"""``meshsub.core.telemetry.dump_line`` without building an encoder per line (tested equal)."""


class RunDirError(OSError):
    """The run directory cannot be used (exists and not empty, not writable, ...)."""


def node_file(node: int) -> str:
    return f"node-{node}.jsonl"


def prepare_run_dir(path: Path) -> Path:
    """Create ``path``; refuse a non-empty one so runs never mix."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        if any(path.iterdir()):
            raise RunDirError(f"run directory {str(path)!r} exists and is not empty")
    except RunDirError:
        raise
    except OSError as exc:
        raise RunDirError(f"cannot use run directory {str(path)!r}: {exc.strerror}") from None
    return path


def atomic_write_text(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class RunWriter:
    """Collects records for every node of a run and writes them atomically."""

    def __init__(self, run_dir: Path, run: str, protocol: str, *, epoch: int = 1,
                 flush_lines: int = FLUSH_LINES) -> None:
        self.run_dir = prepare_run_dir(Path(run_dir))
        self.run = run
        self.protocol = protocol
        self.epoch = epoch
        self.flush_lines = flush_lines
        self.records = 0
        self._rec: dict[int, int] = {}
        self._pending: dict[int, list[str]] = {}
        self._pending_count = 0
        self._started: set[int] = set()
        self.closed = False

    def record(self, node: int, ts_ns: int, event: str,
               attrs: Mapping[str, TelemetryValue]) -> None:
        """Add one record for ``node`` (``rec`` and ``epoch`` are added here)."""
        rec = self._rec.get(node, 0)
        self._rec[node] = rec + 1
        # Same fields, order and omissions as core.telemetry.make_record + dump_line.
        record: dict[str, TelemetryValue] = {
            "run": self.run, "node": node, "protocol": self.protocol, "ts_ns": ts_ns,
            "event": event, "rec": rec, "epoch": self.epoch,
        }
        for key, value in attrs.items():
            if value is not None:
                record[key] = value
        line = _encode(record)
        self._pending.setdefault(node, []).append(line)
        self.records += 1
        self._pending_count += 1
        if self._pending_count >= self.flush_lines:
            self.flush()

    def _tmp(self, node: int) -> Path:
        return self.run_dir / (node_file(node) + ".tmp")

    def flush(self) -> None:
        for node, lines in self._pending.items():
            if not lines:
                continue
            mode = "a" if node in self._started else "w"
            with self._tmp(node).open(mode, encoding="utf-8") as fh:
                fh.write("\n".join(lines))
                fh.write("\n")
            self._started.add(node)
        self._pending = {}
        self._pending_count = 0

    def close(self, manifest: Mapping[str, Any]) -> None:
        """Flush, rename every node file into place, then write the manifest last."""
        if self.closed:
            return
        self.flush()
        for node in sorted(self._started):
            os.replace(self._tmp(node), self.run_dir / node_file(node))
        data = dict(manifest)
        data["files"] = [node_file(n) for n in sorted(self._started)]
        data["records"] = self.records
        atomic_write_text(self.run_dir / MANIFEST,
                          json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n")
        self.closed = True


def base_manifest(*, run: str, scenario_name: str, seed: int, protocol: str,
                  params: Mapping[str, Any], warmup_s: float, nodes: int,
                  scenario: Mapping[str, Any], document: Mapping[str, Any] | None = None,
                  overrides: list[str] | None = None, tier: str = "simulation"
                  ) -> dict[str, Any]:
    """The manifest fields every tier writes (see docs/telemetry.md).

    ``scenario`` is the resolved scenario (every section, defaults filled in);
    ``document`` the scenario file's TOML document after the ``overrides``.
    """
    return {
        "run": run,
        "scenario_name": scenario_name,
        "seed": seed,
        "protocol": protocol,
        "params": dict(params),
        "warmup_s": warmup_s,
        "nodes": nodes,
        "tier": tier,
        "meshsub_version": __version__,
        "started": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "overrides": list(overrides or []),
        "scenario": dict(scenario),
        "scenario_document": dict(document or {}),
    }
