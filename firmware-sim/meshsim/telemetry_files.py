"""Telemetry files of one run: RUNDIR/node-<id>.jsonl per node plus RUNDIR/manifest.json.

Records follow ``meshsub.core.telemetry`` (the driver adds run, node, protocol,
ts_ns, rec and epoch). Files are written under a ``.tmp`` name and renamed when
the run closes, so a reader (Spark's file source, a copy job) never sees half a
file. Lines are buffered in memory and appended in batches, so a 1000-node run
does not need 1000 open file descriptors.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from meshsub import __version__
from meshsub.core.api import TelemetryValue

MANIFEST = "manifest.json"
FLUSH_LINES = 200_000
"""Lines held before they are appended to their files. Each flush opens, appends to and
closes every node file with pending lines, so the batch sets how many opens a run costs:
at 50,000 a 1000-node flood opened 13,000 files and an 8000-node run opened each file
for a handful of lines (docs/benchmarks.md, "Fourth round"). 200,000 lines of about 200
characters are some 50 MB, and the same batch as ``telemetry_parquet.PARQUET_FLUSH_ROWS``."""

_JSON = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
_encode = _JSON.encode
"""``meshsub.core.telemetry.dump_line`` without building an encoder per line (tested equal)."""
_encode_str: Any = getattr(json.encoder, "c_encode_basestring", None) or \
    json.encoder.py_encode_basestring
"""A JSON string as ``_encode`` writes it (``ensure_ascii=False``)."""
_c_make_encoder: Any = getattr(json.encoder, "c_make_encoder", None)
_encode_flat: Callable[[Mapping[str, TelemetryValue]], str] = _encode
"""``_encode`` of a record's attributes (scalars), with the C encoder made once: ``encode``
makes one per call, which cost more than encoding six attributes. The same encoder
settings, so the same text and the same refusals (a non-finite float: ``ValueError``);
no check for circular containers, which a mapping of scalars cannot hold."""
if _c_make_encoder is not None:
    _flat = _c_make_encoder(None, _JSON.default, _encode_str, None, ":", ",", False, False,
                            False)

    def _encode_flat(attrs: Mapping[str, TelemetryValue]) -> str:
        return "".join(_flat(attrs, 0))
_NEW = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
_APPEND = os.O_WRONLY | os.O_CREAT | os.O_APPEND


WRITER_FIELDS = frozenset({"run", "node", "protocol", "ts_ns", "event", "rec", "epoch"})
"""Fields the writer sets itself, in this order, before a record's attributes."""


class RunDirError(OSError):
    """The run directory cannot be used (exists and not empty, not writable, ...)."""


def node_file(node: int) -> str:
    return f"node-{node}.jsonl"


def node_files_digest(run_dir: Path) -> tuple[int, str]:
    """Lines and SHA-256 of every node file of a run, in node order (names included):
    equal for two runs exactly when they wrote the same records, which is how the
    simulator's determinism tests and benchmarks compare runs."""
    digest, lines = hashlib.sha256(), 0
    for f in sorted(run_dir.glob("node-*.jsonl"), key=lambda p: int(p.stem[5:])):
        data = f.read_bytes()
        lines += data.count(b"\n")
        digest.update(f.name.encode() + b"\0" + data)
    return lines, digest.hexdigest()


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
        self._dir = os.fspath(self.run_dir)
        self.run = run
        self.protocol = protocol
        self.epoch = epoch
        self.flush_lines = flush_lines
        self.records = 0
        self._rec: dict[int, int] = {}
        self._pending: dict[int, list[str]] = {}
        self._pending_count = 0
        self._started: set[int] = set()
        self._head = '{"run":' + _encode(run) + ',"node":'
        self._protocol = _encode(protocol)
        self._events: dict[str, str] = {}
        self.closed = False

    def record(self, node: int, ts_ns: int, event: str,
               attrs: Mapping[str, TelemetryValue]) -> None:
        """Add one record for ``node`` (``rec`` and ``epoch`` are added here)."""
        self.record_many((node,), ts_ns, event, attrs)

    def record_many(self, nodes: Iterable[int], ts_ns: int, event: str,
                    attrs: Mapping[str, TelemetryValue]) -> None:
        """The same record for each of ``nodes`` (the receivers of one frame), in order.

        The line is built from text pieces encoded once per call: the run's head, the
        event's name and the attributes' tail; each node adds only its id and ``rec``.
        The result is byte for byte ``core.telemetry.make_record`` + ``dump_line`` with
        ``rec`` and ``epoch`` after ``event`` (tested equal).
        """
        tail = self._tail(attrs)
        if tail is None:  # an attribute named like a resource field: the general path
            for node in nodes:
                self._slow_record(node, ts_ns, event, attrs)
            return
        name = self._events.get(event)
        if name is None:
            name = self._events[event] = _encode(event)
        middle = f',"protocol":{self._protocol},"ts_ns":{ts_ns},"event":{name},"rec":'
        end = f',"epoch":{self.epoch}{tail}\n'
        head, recs, pending = self._head, self._rec, self._pending
        count = 0
        for node in nodes:
            rec = recs.get(node, 0)
            recs[node] = rec + 1
            lines = pending.get(node)
            if lines is None:
                lines = pending[node] = []
            lines.append(f"{head}{node}{middle}{rec}{end}")
            count += 1
        self.records += count
        self._pending_count += count
        if self._pending_count >= self.flush_lines:
            self.flush()

    @staticmethod
    def _tail(attrs: Mapping[str, TelemetryValue]) -> str | None:
        """The attributes as the end of a JSON object (``}`` when none is set), or None
        if one of them would replace a field the writer adds itself.

        ``"," + _encode(set attributes)[1:]``: unset (None) attributes left out, the
        rest through the C encoder as ``_encode`` would (tested equal, refusals
        included)."""
        if None in attrs.values():
            attrs = {key: value for key, value in attrs.items() if value is not None}
        if not attrs:
            return "}"
        if not WRITER_FIELDS.isdisjoint(attrs):
            return None
        return "," + _encode_flat(attrs)[1:]

    def _slow_record(self, node: int, ts_ns: int, event: str,
                     attrs: Mapping[str, TelemetryValue]) -> None:
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
        self._pending.setdefault(node, []).append(_encode(record) + "\n")
        self.records += 1
        self._pending_count += 1
        if self._pending_count >= self.flush_lines:
            self.flush()

    def _tmp(self, node: int) -> str:
        """The node file's name while the run is open (a string: a ``Path`` per file and
        flush cost more than the open)."""
        return os.path.join(self._dir, node_file(node) + ".tmp")

    def flush(self) -> None:
        """Append every node's pending lines to its file (one open, write, close each:
        plain descriptor calls, as building a text file object per node cost more than
        the writing)."""
        started = self._started
        for node, lines in self._pending.items():
            if not lines:
                continue
            data = memoryview("".join(lines).encode("utf-8"))  # each line ends with \n
            fd = os.open(self._tmp(node), _APPEND if node in started else _NEW, 0o666)
            try:
                while data:
                    data = data[os.write(fd, data):]
            finally:
                os.close(fd)
            started.add(node)
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
